"""The example vectors are a run of the protocol core (dap/profiles/example_run.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ppm_reference.vdaf.prio3")

from ppm_reference.dap.core import helper, leader  # noqa: E402
from ppm_reference.dap.core.rand import Rng  # noqa: E402
from ppm_reference.dap.profiles.dap09 import DAP_09  # noqa: E402
from ppm_reference.dap.profiles.dap18 import DAP_18  # noqa: E402
from ppm_reference.dap.profiles.example_run import RecordedRng  # noqa: E402
from ppm_reference.dap.vectors import VectorError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "test_vectors"


def test_recorded_rng_hands_out_the_recorded_values_only() -> None:
    rng = RecordedRng("Leader", [b"\x01" * 16, b"\x02" * 32])
    assert isinstance(rng, Rng)
    assert rng.token_bytes(16) == b"\x01" * 16
    with pytest.raises(VectorError, match="next recorded value has 32"):
        rng.token_bytes(16)
    with pytest.raises(VectorError, match="does not record"):
        rng.token_bytes(16)
    rng.check_exhausted()
    for draw in (lambda: rng.randbelow(3), lambda: rng.getrandbits(8),
                 lambda: rng.choice([1, 2])):
        with pytest.raises(VectorError):
            draw()
    with pytest.raises(VectorError, match="1 recorded values unused"):
        RecordedRng("Helper", [b"x"]).check_exhausted()


@pytest.mark.parametrize("profile", [DAP_18, DAP_09], ids=lambda p: p.name)
def test_example_messages_are_what_the_core_sent(profile: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """build_example takes the Aggregators' messages from the core: the messages the
    core's functions returned are the ones in the committed file, and the aggregate
    shares were sealed with the recorded ephemeral IKMs through the test-only seam."""
    seen: dict[str, Any] = {}
    finish_collection = leader.finish_collection
    create_aggregate_share = helper.create_aggregate_share

    def spy_finish(*args: Any, **kwargs: Any) -> None:
        seen["leader_ikm"] = kwargs.get("ephemeral_ikm")
        finish_collection(*args, **kwargs)
        seen["collection"] = args[2].response

    def spy_share(*args: Any, **kwargs: Any) -> Any:
        seen["helper_ikm"] = kwargs.get("ephemeral_ikm")
        result = create_aggregate_share(*args, **kwargs)
        seen["aggregate_share"] = result.response
        return result

    monkeypatch.setattr(leader, "finish_collection", spy_finish)
    monkeypatch.setattr(helper, "create_aggregate_share", spy_share)
    doc = json.loads((ROOT / profile.name / "examples" / "Prio3Count.json").read_text())
    out = profile.vectors.build_example(doc["inputs"], doc["description"], profile)
    assert seen["leader_ikm"].hex() == doc["inputs"]["leader_agg_share_ephemeral_ikm"]
    assert seen["helper_ikm"].hex() == doc["inputs"]["helper_agg_share_ephemeral_ikm"]
    final = "collection_job_resp" if "collection_job_resp" in out["collection"] \
        else "collection"
    assert out["collection"][final]["encoding"] == seen["collection"].hex()
    assert out["collection"]["aggregate_share"]["encoding"] == seen["aggregate_share"].hex()
    assert out == doc


def test_without_the_seam_aggregate_shares_are_sealed_with_fresh_keys() -> None:
    """The servers never pass ephemeral_ikm: two encryptions of the same share differ."""
    from ppm_reference.dap.common import Role
    from ppm_reference.dap.core.wire import CollReq
    from ppm_reference.dap.profiles.vector_cases import hpke_keypair

    doc = json.loads((ROOT / "dap-18" / "examples" / "Prio3Count.json").read_text())
    inputs = doc["inputs"]
    collector = hpke_keypair(inputs["hpke"]["collector"])
    task = DAP_18.task_from_config_bytes(
        bytes.fromhex(inputs["task"]["task_id"]),
        bytes.fromhex(doc["task"]["task_configuration"]["encoding"]))
    cjr = DAP_18.messages.CollectionJobReq.decode(
        bytes.fromhex(doc["collection"]["collection_job_req"]["encoding"]))

    class _Aggregator:  # what the wire reads of an AggregatorTask
        def __init__(self) -> None:
            self.task = task
            self.collector_hpke_config = collector.config

    coll = CollReq(b"", cjr.query.batch_mode, None, None, cjr)
    sealed = [DAP_18.wire.encrypt_agg_share(_Aggregator(), Role.HELPER, coll, None, None,
                                            bytes(8)) for _ in range(2)]
    assert sealed[0].enc != sealed[1].enc
