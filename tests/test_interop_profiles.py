"""The interop test API reaches each draft through ``profile.interop``: a profile built on
DAP-18 by ``dataclasses.replace`` (as DAP-19 is) reuses DAP-18's readers and gets tasks,
VDAFs and runner bodies of its own; the versions served and run are the shipped profiles
that have readers."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from ppm_reference.dap.fields import FieldError
from ppm_reference.dap.profiles import PROFILES, SHIPPED, get_profile
from ppm_reference.dap.profiles.interop_base import InteropFields
from ppm_reference.interop import fields, runner, server

TASK_ID = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()
BODY = {"task_id": TASK_ID, "leader": "http://leader/", "helper": "http://helper/",
        "time_precision": 3600, "min_batch_size": 1, "batch_mode": 1,
        "vdaf": {"type": "Prio3Sum", "max_measurement": "255"}}


def test_versions_are_the_shipped_profiles_with_interop() -> None:
    expected = tuple(n for n in SHIPPED if n in PROFILES and PROFILES[n].interop is not None)
    assert fields.VERSION_NAMES == runner.VERSIONS == expected
    assert set(server.VERSIONS) == set(expected)
    assert {"dap-18", "dap-09"} <= set(expected)
    for name in expected:
        assert isinstance(get_profile(name).interop, InteropFields)
        assert server.VERSIONS[name].fields is get_profile(name).interop


def test_a_profile_built_on_dap18_reuses_its_readers() -> None:
    dap18 = get_profile("dap-18")
    clone = dataclasses.replace(dap18, name="dap-clone", version_tag=b"dap-clone")
    assert clone.interop is dap18.interop
    tf = clone.interop.task_fields(clone, BODY, "leader")
    assert tf.task.profile is clone
    theirs = dap18.interop.task_fields(dap18, BODY, "leader").task
    assert tf.task.config_bytes() == theirs.config_bytes()
    assert type(tf.vdaf) is type(theirs.vdaf())
    bodies = clone.interop.task_bodies(
        clone, task_id=TASK_ID, leader="L", helper="H", vdaf={"type": "Prio3Count"},
        batch_mode=1, min_batch_size=5, time_precision=60, task_end=600,
        collector_token="t")
    assert bodies.upload["dap_version"] == "dap-clone"


@pytest.mark.parametrize("version", ["dap-18", "dap-09"])
def test_runner_vdafs_are_readable_by_their_draft(version: str) -> None:
    profile = get_profile(version)
    for kind, desc in profile.interop.runner_vdafs.items():
        vdaf = profile.interop.vdaf_from_descriptor(profile, desc)
        assert vdaf.NAME == kind and type(vdaf) is profile.vdaf_class(kind)


def test_vdaf_refusals_name_the_profile() -> None:
    dap09 = get_profile("dap-09")
    with pytest.raises(FieldError, match="unsupported VDAF type 'Prio3MultiHotHistogram' "
                                         "for dap-09"):
        dap09.interop.vdaf_from_descriptor(dap09, {"type": "Prio3MultiHotHistogram"})
    with pytest.raises(FieldError, match=r"^invalid Prio3Sum parameters: "):
        dap09.interop.vdaf_from_descriptor(dap09, {"type": "Prio3Sum", "bits": "128"})
