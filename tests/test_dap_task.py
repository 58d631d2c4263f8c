"""Task configuration, VDAF configuration encodings, the DAP-18 profile and problem
documents."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from ppm_reference.dap.common import (
    AggregationJobID,
    BatchMode,
    HpkeConfigList,
    Interval,
    Role,
    TaskID,
)
from ppm_reference.dap.problems import ProblemDocument, ProblemDocumentError, ProblemType
from ppm_reference.dap.profiles import ProfileError, get_profile
from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.profiles.dap18.messages import (
    AggregationJobInitReq,
    CollectionJobResp,
    TaskConfiguration,
    TaskExtension,
    UploadRequest,
)
from ppm_reference.dap.profiles.dap18.task import (
    Prio3MultihotCountVecConfig,
    Task,
    TaskError,
    build_task_configuration,
    decode_vdaf_configuration,
    derive_vdaf_verify_key,
    vdaf_configuration,
    vdaf_from_configuration,
)

prio3 = pytest.importorskip("ppm_reference.vdaf.prio3")

TASK_ID = bytes(range(32))


def _task(vdaf: object, **overrides: object) -> Task:
    params: dict[str, object] = dict(
        task_id=TASK_ID,
        task_info=b"info",
        leader_aggregator_endpoint="https://leader.example/api/",
        helper_aggregator_endpoint="https://helper.example/",
        time_precision=300,
        min_batch_size=10,
        batch_mode=BatchMode.TIME_INTERVAL,
    )
    params.setdefault("profile", DAP_18)
    params.update(overrides)
    return Task.for_vdaf(vdaf, **params)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# VDAF configuration encodings (Appendix B), by hand
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "vdaf_type", "expected"),
    [
        (lambda: prio3.Prio3Count(2), 1, ""),  # B.1: Empty
        (lambda: prio3.Prio3Sum(2, 255), 2, "00000000000000ff"),  # B.2: uint64 max_measurement
        # B.3: uint32 length, uint64 max_measurement, uint32 chunk_length
        (lambda: prio3.Prio3SumVec(2, 10, 3, 4), 3, "0000000a" "0000000000000003" "00000004"),
        # B.4: uint32 length, uint32 chunk_length
        (lambda: prio3.Prio3Histogram(2, 4, 2), 4, "00000004" "00000002"),
        # B.5: uint32 length, uint32 chunk_length, uint64 max_weight (not constructor order)
        (lambda: prio3.Prio3MultihotCountVec(2, 10, 3, 4), 5,
         "0000000a" "00000004" "0000000000000003"),
    ],
    ids=["Count", "Sum", "SumVec", "Histogram", "MultihotCountVec"],
)
def test_vdaf_configuration_encodings(make: object, vdaf_type: int, expected: str) -> None:
    vdaf = make()  # type: ignore[operator]
    assert vdaf_configuration(vdaf, profile=DAP_18) == (vdaf_type, bytes.fromhex(expected))
    again = vdaf_from_configuration(vdaf_type, bytes.fromhex(expected), profile=DAP_18)
    assert type(again) is type(vdaf)
    assert vdaf_configuration(again, profile=DAP_18) == (vdaf_type, bytes.fromhex(expected))


def test_multihot_field_order() -> None:
    encoded = bytes.fromhex("0000000a" "00000004" "0000000000000003")
    name, config = decode_vdaf_configuration(5, encoded, profile=DAP_18)
    assert name == "Prio3MultihotCountVec"
    assert config == Prio3MultihotCountVecConfig(length=10, chunk_length=4, max_weight=3)


def test_poplar1_configuration_decodes_and_builds() -> None:
    name, config = decode_vdaf_configuration(6, bytes.fromhex("0100"), profile=DAP_18)
    assert name == "Poplar1" and config.bits == 256  # type: ignore[attr-defined]
    vdaf = vdaf_from_configuration(6, bytes.fromhex("0100"), profile=DAP_18)
    assert type(vdaf).__name__ == "Poplar1" and vdaf.bits == 256
    assert vdaf_configuration(vdaf, profile=DAP_18) == (6, bytes.fromhex("0100"))
    with pytest.raises(TaskError, match="invalid Poplar1 parameters"):
        vdaf_from_configuration(6, bytes.fromhex("0000"), profile=DAP_18)


def test_unusable_vdafs() -> None:
    with pytest.raises(TaskError, match="no VDAF type code"):
        vdaf_configuration(prio3.Prio3HigherDegree(2), profile=DAP_18)
    with pytest.raises(TaskError, match="needs 2 shares"):
        vdaf_configuration(prio3.Prio3Count(3), profile=DAP_18)
    with pytest.raises(TaskError, match="unknown VDAF type"):
        vdaf_from_configuration(0x12345678, b"", profile=DAP_18)
    from ppm_reference.dap.codec import DecodeError

    with pytest.raises(DecodeError, match="Prio3HistogramConfig"):
        vdaf_from_configuration(4, b"\x00\x00\x00\x04", profile=DAP_18)  # truncated
    with pytest.raises(DecodeError, match="trailing"):
        vdaf_from_configuration(1, b"\x00", profile=DAP_18)  # Prio3Count's Empty has no bytes


# ---------------------------------------------------------------------------------------
# Task configuration
# ---------------------------------------------------------------------------------------


def test_task_configuration_is_canonical_and_round_trips() -> None:
    vdaf = prio3.Prio3Histogram(2, 4, 2)
    task = _task(vdaf, task_interval=Interval(100, 50))
    config = task.configuration()
    assert config is task.configuration()  # built once
    assert config.vdaf_type == 4 and config.vdaf_configuration == bytes.fromhex("0000000400000002")
    assert config.batch_config == b""
    assert config.extensions == (TaskExtension.task_interval(Interval(100, 50)),)
    assert config.leader_aggregator_endpoint == b"https://leader.example/api/"  # not altered
    decoded = TaskConfiguration.decode(config.encode())
    again = Task.from_configuration(TASK_ID, decoded, profile=DAP_18)
    assert again == task
    assert again.configuration().encode() == config.encode()
    assert type(again.vdaf()) is prio3.Prio3Histogram
    assert task.vdaf_ctx() == b"dap-18" + TASK_ID


def test_task_configuration_fields_change_the_bytes() -> None:
    base = _task(prio3.Prio3Count(2)).configuration().encode()
    for change in (
        {"min_batch_size": 11},
        {"time_precision": 301},
        {"task_info": b"infO"},
        {"batch_mode": BatchMode.LEADER_SELECTED},
        {"helper_aggregator_endpoint": "https://helper.example"},
        {"task_interval": Interval(0, 1)},
    ):
        assert _task(prio3.Prio3Count(2), **change).configuration().encode() != base
    assert _task(prio3.Prio3Sum(2, 7)).configuration().encode() != base


def test_task_rejections() -> None:
    with pytest.raises(TaskError, match="time_precision"):
        _task(prio3.Prio3Count(2), time_precision=0)
    with pytest.raises(TaskError, match="min_batch_size"):
        _task(prio3.Prio3Count(2), min_batch_size=0)
    with pytest.raises(TaskError, match="ASCII"):
        _task(prio3.Prio3Count(2), leader_aggregator_endpoint="https://lé.example")
    with pytest.raises(TaskError, match="task_info"):
        _task(prio3.Prio3Count(2), task_info=b"")
    with pytest.raises(ValueError):
        _task(prio3.Prio3Count(2), task_id=b"short")
    config = _task(prio3.Prio3Count(2)).configuration()
    unknown = TaskConfiguration(**{**config.__dict__, "extensions": [TaskExtension(9, b"")]})
    with pytest.raises(TaskError, match=r"unrecognized task extensions \[9\]"):
        Task.from_configuration(TASK_ID, unknown, profile=DAP_18)


def test_build_task_configuration_golden() -> None:
    config = build_task_configuration(
        task_info=b"x",
        leader_aggregator_endpoint="https://l",
        helper_aggregator_endpoint=b"https://h",
        time_precision=1,
        min_batch_size=2,
        batch_mode=BatchMode.TIME_INTERVAL,
        vdaf_type=1,
        vdaf_configuration=b"",
    )
    assert config.encode().hex() == (
        "01" "78" "0009" + b"https://l".hex() + "0009" + b"https://h".hex()
        + "0000000000000001" "0000000000000002" "01" "0000" "00000001" "0000" "0000"
    )


def test_derive_vdaf_verify_key_matches_rfc5869_by_hand() -> None:
    seed, task_id = b"\x11" * 32, TaskID(TASK_ID)
    prk = hmac.new(b"verify_key", seed, hashlib.sha256).digest()  # HKDF-Extract(salt, IKM)
    t1 = hmac.new(prk, bytes(task_id) + b"\x01", hashlib.sha256).digest()
    t2 = hmac.new(prk, t1 + bytes(task_id) + b"\x02", hashlib.sha256).digest()
    assert derive_vdaf_verify_key(seed, task_id, 16) == t1[:16]
    assert derive_vdaf_verify_key(seed, task_id, 48) == (t1 + t2)[:48]


# ---------------------------------------------------------------------------------------
# Profile
# ---------------------------------------------------------------------------------------


def test_media_types() -> None:
    assert DAP_18.media_type_for(UploadRequest) == "application/ppm-dap;message=upload-req"
    assert DAP_18.media_type_for(HpkeConfigList) == (
        "application/ppm-dap;message=hpke-config-list"
    )
    assert DAP_18.media_type_for(AggregationJobInitReq(0, b"", [], [])) == (
        "application/ppm-dap;message=aggregation-job-init-req"
    )
    assert DAP_18.media_type_for("CollectionJobResp") == (
        "application/ppm-dap;message=collection-job-resp"
    )
    assert len(DAP_18.message_types) == 10
    assert DAP_18.message_for_media_type(
        "Application/PPM-DAP; message=collection-job-resp; version=18"
    ) == CollectionJobResp.__name__
    for bad in ("application/json", "application/ppm-dap;message=nope", "application/ppm-dap;x"):
        with pytest.raises(ProfileError):
            DAP_18.message_for_media_type(bad)
    with pytest.raises(ProfileError):
        DAP_18.media_type_for("Report")  # not an HTTP message


def test_resource_urls_from_the_draft() -> None:
    # Section 3's example.
    task_id = bytes.fromhex("f0163447364ccf1bc0e3affcca6873c9c381f64acdf9020662f83f46c07219e7")
    job_id = AggregationJobID(bytes.fromhex("95ceda51e1a9752368b0d961f9466128"))
    url = DAP_18.resource_url(
        "aggregation_job", "https://example.com/api/dap", task_id=task_id,
        aggregation_job_id=job_id,
    )
    assert url == (
        "https://example.com/api/dap/tasks/8BY0RzZMzxvA46_8ymhzycOB9krN-QIGYvg_RsByGec/"
        "aggregation_jobs/lc7aUeGpdSNosNlh-UZhKA"
    )
    assert DAP_18.resource_url("hpke_config", "https://a.example/") == (
        "https://a.example/hpke_config"
    )
    with pytest.raises(ProfileError, match="missing URL variables"):
        DAP_18.resource_url("reports", "https://a")
    with pytest.raises(ProfileError, match="has no"):
        DAP_18.resource_url("reports", "https://a", task_id=task_id, collection_job_id=job_id)


def test_profile_lookup_and_constants() -> None:
    assert get_profile("dap-18") is DAP_18
    with pytest.raises(ProfileError):
        get_profile("dap-99")
    assert DAP_18.vdaf_ctx(TASK_ID) == b"dap-18" + TASK_ID
    assert DAP_18.input_share_info(Role.HELPER) == b"dap-18 input share\x01\x03"
    assert DAP_18.vdaf_types["Prio3Histogram"] == prio3.Prio3Histogram.ID


# ---------------------------------------------------------------------------------------
# Problem documents (Section 3.6)
# ---------------------------------------------------------------------------------------


def test_problem_document() -> None:
    doc = ProblemDocument.for_error(
        ProblemType.UNSUPPORTED_EXTENSION, task_id=TASK_ID, detail="nope",
        unsupported_extensions=(23, 42),
    )
    obj = json.loads(doc.to_json())
    assert obj == {
        "type": "urn:ietf:params:ppm:dap:error:unsupportedExtension",
        "status": 400,
        "title": "unsupportedExtension",
        "detail": "nope",
        "taskid": TaskID(TASK_ID).to_base64url(),
        "unsupported_extensions": [23, 42],
    }
    assert ProblemDocument.from_json(doc.to_json()) == doc
    assert doc.dap_problem() is ProblemType.UNSUPPORTED_EXTENSION
    assert len(ProblemType) == 11 and {p.value for p in ProblemType} == DAP_18.problem_types
    other = ProblemDocument.from_json(b'{"type": "https://example.com/x", "status": 503}')
    assert other.dap_problem() is None
    with pytest.raises(ProfileError):
        ProblemDocument.for_error("notADapError")
    for bad in (b"[]", b"{", b'{"status": 200}', b'{"status": "400"}',
                b'{"status": 400, "unsupported_extensions": [70000]}'):
        with pytest.raises(ProblemDocumentError):
            ProblemDocument.from_json(bad)


@pytest.mark.parametrize("profile_name", ["dap-09", "dap-18", "dap-19"])
def test_tasks_of_one_vdaf_share_its_object(profile_name: str) -> None:
    """Tasks naming the same VDAF and parameters get one VDAF object (VDAFS); another
    VDAF or other parameters get their own, which compute the same as a fresh one."""
    from ppm_reference.dap.provision import new_task

    profile = get_profile(profile_name)
    Prio3Count = profile.vdaf_class("Prio3Count")  # noqa: N806 - the profile's classes
    Prio3Histogram = profile.vdaf_class("Prio3Histogram")  # noqa: N806

    def task_of(vdaf: object) -> object:
        return new_task(vdaf, "https://l.example/", "https://h.example/",
                        profile=profile).task

    a, b = task_of(Prio3Count(2)), task_of(Prio3Count(2))
    assert a.task_id != b.task_id  # type: ignore[attr-defined]
    assert a.vdaf() is b.vdaf()  # type: ignore[attr-defined]
    h10 = task_of(Prio3Histogram(2, 10, 3)).vdaf()  # type: ignore[attr-defined]
    h12 = task_of(Prio3Histogram(2, 12, 3)).vdaf()  # type: ignore[attr-defined]
    assert h10 is not h12 and h10 is not a.vdaf()  # type: ignore[attr-defined]
    assert (h10.flp.MEAS_LEN, h12.flp.MEAS_LEN) == (10, 12)
    assert h10 is task_of(Prio3Histogram(2, 10, 3)).vdaf()  # type: ignore[attr-defined]


def test_vdaf_cache_is_bounded_and_keeps_no_failure() -> None:
    from ppm_reference.dap.profiles.base import VdafCache

    cache = VdafCache(size=2)
    built: list[str] = []

    def build(name: str) -> object:
        built.append(name)
        return object()

    x = cache.get("x", lambda: build("x"))
    cache.get("y", lambda: build("y"))
    assert cache.get("x", lambda: build("x")) is x  # used: "y" is now the oldest
    cache.get("z", lambda: build("z"))  # evicts "y"
    assert len(cache) == 2
    cache.get("y", lambda: build("y"))
    assert built == ["x", "y", "z", "y"]

    # Another owner (a profile object of the same name) gets its own, which then stays.
    other = object()
    x2 = cache.get("x", lambda: build("x"), owner=other)
    assert x2 is not x and cache.get("x", lambda: build("x"), owner=other) is x2
    assert built == ["x", "y", "z", "y", "x"]

    def refuse() -> object:
        raise ValueError("bad parameters")

    for _ in range(2):
        with pytest.raises(ValueError):
            cache.get("bad", refuse)
    assert len(cache) == 2
