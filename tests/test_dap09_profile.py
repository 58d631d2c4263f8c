"""The dap-09 profile beside dap-18: media types, URLs, methods, problem types, auth, VDAFs."""

from __future__ import annotations

import pytest

from ppm_reference.dap.profiles import PROFILES, ProfileError, get_profile
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09 import messages as messages09
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.messages import HpkeConfigList as HpkeConfigList18
from ppm_reference.dap.profiles.dap18.messages import UploadRequest


def test_registry() -> None:
    assert get_profile("dap-09") is DAP_09
    assert get_profile("dap-18") is DAP_18
    assert set(PROFILES) == {"dap-09", "dap-18", "dap-19"}
    assert DAP_09.draft == "draft-ietf-ppm-dap-09"
    assert DAP_09.vdaf_draft == "draft-irtf-cfrg-vdaf-08"


def test_media_types_dap09() -> None:
    expected = {
        "HpkeConfigList": "application/dap-hpke-config-list",
        "Report": "application/dap-report",
        "AggregationJobInitReq": "application/dap-aggregation-job-init-req",
        "AggregationJobResp": "application/dap-aggregation-job-resp",
        "AggregationJobContinueReq": "application/dap-aggregation-job-continue-req",
        "AggregateShareReq": "application/dap-aggregate-share-req",
        "AggregateShare": "application/dap-aggregate-share",
        "CollectionReq": "application/dap-collect-req",
        "Collection": "application/dap-collection",
    }
    assert {cls.__name__ for cls in messages09.HTTP_MESSAGES} == set(expected)
    for name, media_type in expected.items():
        cls = getattr(messages09, name)
        assert DAP_09.media_type_for(cls) == media_type
        assert DAP_09.media_type_for(name) == media_type
        assert DAP_09.message_for_media_type(media_type) == name
        assert DAP_09.message_for_media_type(media_type.upper() + "; charset=x") == name
    with pytest.raises(ProfileError):
        DAP_09.message_for_media_type("application/ppm-dap;message=upload-req")
    with pytest.raises(ProfileError):
        DAP_09.message_for_media_type("application/dap-upload-req")
    with pytest.raises(ProfileError):
        DAP_09.media_type_for(messages09.PrepareInit)  # not an HTTP message body


def test_media_types_dap18_unchanged() -> None:
    assert DAP_18.media_type_for(UploadRequest) == "application/ppm-dap;message=upload-req"
    assert DAP_18.media_type_for(HpkeConfigList18) == (
        "application/ppm-dap;message=hpke-config-list")
    assert DAP_18.message_for_media_type(
        'Application/PPM-DAP; message="upload-req"; version=18') == "UploadRequest"
    for bad in ("application/ppm-dap", "application/dap-report",
                "application/ppm-dap;message=report", "application/ppm-dap;message"):
        with pytest.raises(ProfileError):
            DAP_18.message_for_media_type(bad)


def test_urls_and_methods() -> None:
    task_id = bytes(range(32))
    job_id = bytes(range(16))
    tid = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
    jid = "AAECAwQFBgcICQoLDA0ODw"
    assert DAP_09.resource_url("reports", "https://l.example/", task_id=task_id) == (
        f"https://l.example/tasks/{tid}/reports")
    assert DAP_09.resource_url("hpke_config_for_task", "https://h.example",
                               task_id=task_id) == f"https://h.example/hpke_config?task_id={tid}"
    assert DAP_09.resource_url("aggregation_job", "https://h.example", task_id=task_id,
                               aggregation_job_id=job_id) == (
        f"https://h.example/tasks/{tid}/aggregation_jobs/{jid}")
    assert DAP_09.resource_url("collection_job", "https://l.example", task_id=task_id,
                               collection_job_id=job_id) == (
        f"https://l.example/tasks/{tid}/collection_jobs/{jid}")
    assert DAP_09.resource_url("aggregate_shares", "https://h.example", task_id=task_id) == (
        f"https://h.example/tasks/{tid}/aggregate_shares")
    assert DAP_09.request("upload") == ("PUT", "reports")
    assert DAP_09.request("aggregation_job_init") == ("PUT", "aggregation_job")
    assert DAP_09.request("aggregation_job_continue") == ("POST", "aggregation_job")
    assert DAP_09.request("collection_job_create") == ("PUT", "collection_job")
    assert DAP_09.request("collection_job_poll") == ("POST", "collection_job")
    assert DAP_09.request("aggregate_share_create") == ("POST", "aggregate_shares")
    assert DAP_18.request("upload") == ("POST", "reports")
    assert DAP_18.request("collection_job_poll") == ("GET", "collection_job")
    for profile in (DAP_09, DAP_18):
        for method, resource in profile.requests.values():
            assert resource in profile.resources
            assert method in {"GET", "PUT", "POST", "DELETE"}
    with pytest.raises(ProfileError):
        DAP_09.resource_url("aggregate_share", "https://h", task_id=task_id)


def test_problem_types() -> None:
    prefix = "urn:ietf:params:ppm:dap:error:"
    assert DAP_09.problem_type_uri("missingTaskID") == prefix + "missingTaskID"
    assert DAP_09.problem_type_uri("batchQueriedTooManyTimes").startswith(prefix)
    assert len(DAP_09.problem_types) == 14
    with pytest.raises(ProfileError):
        DAP_09.problem_type_uri("unsupportedExtension")  # DAP-18 only
    with pytest.raises(ProfileError):
        DAP_18.problem_type_uri("missingTaskID")  # DAP-09 only


def test_auth_header() -> None:
    assert DAP_09.auth_header_for("tok") == ("DAP-Auth-Token", "tok")
    assert DAP_18.auth_header_for("tok") == ("Authorization", "Bearer tok")
    assert DAP_09.token_from_header("tok") == "tok"
    assert DAP_18.token_from_header("Bearer tok") == "tok"
    assert DAP_18.token_from_header("tok") is None
    assert DAP_09.token_from_header("") is None
    assert DAP_09.token_from_header(None) is None


def test_vdaf_tables() -> None:
    from ppm_reference.vdaf import prio3, registry

    assert DAP_09.vdaf_ctx(b"\x00" * 32) == b""
    assert DAP_18.vdaf_ctx(b"\x00" * 32) == b"dap-18" + b"\x00" * 32
    assert DAP_09.vdaf_class("Prio3Count") is prio3.Prio3CountV08
    assert DAP_09.vdaf_class("Prio3Histogram") is prio3.Prio3HistogramV08
    assert DAP_18.vdaf_class("Prio3Histogram") is prio3.Prio3Histogram
    for profile in (DAP_09, DAP_18):
        for name in registry.names(profile.vdaf_version):
            cls = profile.vdaf_class(name)
            assert cls.NAME == name
            if name in profile.vdaf_types:
                assert cls.ID == profile.vdaf_types[name]
    assert DAP_09.vdaf_types["Prio3Count"] == 0
    with pytest.raises(ProfileError):
        DAP_09.vdaf_class("Prio3MultihotCountVec")
