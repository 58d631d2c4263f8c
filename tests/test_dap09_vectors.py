"""DAP-09 test vectors (dap/vectors09.py) and ``ppm dap vectors ... --profile dap-09``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppm_reference.cli import main
from ppm_reference.dap.profiles.dap09 import DAP_09
from ppm_reference.dap.profiles.dap09.messages import ALL_SCALARS, ALL_STRUCTS, PingPongMessage
from ppm_reference.dap.vectors import check, generate

COMMITTED = Path(__file__).resolve().parent.parent / "test_vectors" / "dap-09"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dap09-vectors")
    generate(out, DAP_09)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json"))}


def test_committed_vectors_check() -> None:
    report = check(COMMITTED)
    assert report.errors == []
    assert report.ok and report.files == 36 and report.checks > 200


def test_generation_is_deterministic_and_matches_the_committed_vectors(generated: Path) -> None:
    assert _files(generated) == _files(COMMITTED)


def test_every_message_type_and_both_examples_present(generated: Path) -> None:
    names = {p.stem for p in (generated / "messages").glob("*.json")}
    assert names == {c.__name__ for c in (*ALL_STRUCTS, *ALL_SCALARS, PingPongMessage)}
    assert {p.stem for p in (generated / "examples").glob("*.json")} == {
        "Prio3Count", "Prio3Histogram"}
    for path in (generated / "messages").glob("*.json"):
        doc = json.loads(path.read_text())
        assert doc["draft"] == "draft-ietf-ppm-dap-09"
        assert doc["invalid"], path.name  # at least the trailing-byte case


def test_examples_content(generated: Path) -> None:
    count = json.loads((generated / "examples" / "Prio3Count.json").read_text())
    assert count["vdaf_draft"] == "draft-irtf-cfrg-vdaf-08"
    assert count["collection"]["aggregate_result"] == 2
    assert count["task"]["vdaf_ctx"] == ""
    assert count["upload"]["method"] == "PUT"
    assert count["upload"]["media_type"] == "application/dap-report"
    assert count["upload"]["reports"][0]["leader_hpke_info"] == (
        b"dap-09 input share\x01\x02".hex())
    assert count["collection"]["helper_hpke_info"] == b"dap-09 aggregate share\x03\x00".hex()
    # Report times are seconds, rounded down to time_precision (3600).
    times = [r["report"]["fields"]["report_metadata"]["time"] for r in count["upload"]["reports"]]
    assert times == [1_699_999_200, 1_699_999_200, 1_700_002_800]
    assert count["collection"]["collection"]["fields"]["interval"] == {
        "start": 1_699_999_200, "duration": 7200}
    hist = json.loads((generated / "examples" / "Prio3Histogram.json").read_text())
    assert hist["collection"]["aggregate_result"] == [1, 1, 0, 2]
    pbs = hist["aggregation"]["aggregation_job_init_req"]["fields"]["part_batch_selector"]
    assert pbs == {"query_type": 2, "batch_id": hist["inputs"]["batch_id"]}
    assert hist["collection"]["collection_req"]["fields"]["query"] == {
        "query_type": 2, "fixed_size_query": {"query_type": 1}}


def test_check_detects_tampering(generated: Path, tmp_path: Path) -> None:
    for rel in ("messages/Report.json", "examples/Prio3Histogram.json"):
        target = tmp_path / rel.replace("/", "_")
        doc = json.loads((generated / rel).read_text())
        if doc["kind"] == "message":
            enc = doc["valid"][0]["encoding"]
            doc["valid"][0]["encoding"] = enc[:-2] + ("00" if enc[-2:] != "00" else "01")
        else:
            doc["collection"]["aggregate_result"] = [1, 1, 0, 3]
        target.write_text(json.dumps(doc))
        report = check(tmp_path)
        assert not report.ok
        target.unlink()


def test_cli_profile_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dap", "vectors", "generate", "--profile", "dap-09", "--out", str(tmp_path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and len(out["files"]) == 36
    assert main(["dap", "vectors", "check", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    assert main(["dap", "vectors", "generate", "--profile", "dap-99", "--out",
                 str(tmp_path), "--json"]) == 2
    assert not json.loads(capsys.readouterr().out)["ok"]
