"""DAP-18 test vectors (dap/vectors.py) and the ``ppm dap vectors`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppm_reference.cli import main

pytest.importorskip("ppm_reference.vdaf.prio3")

from ppm_reference.dap.profiles.dap18 import DAP_18
from ppm_reference.dap.vectors import check, generate  # noqa: E402

COMMITTED = Path(__file__).resolve().parent.parent / "test_vectors" / "dap-18"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dap-vectors")
    generate(out, profile=DAP_18)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json"))}


def test_committed_vectors_check() -> None:
    report = check(COMMITTED)
    assert report.errors == []
    assert report.ok and report.files >= 51 and report.checks > 200


def test_generation_is_deterministic_and_matches_the_committed_vectors(generated: Path) -> None:
    assert _files(generated) == _files(COMMITTED)


def test_every_message_type_and_both_examples_present(generated: Path) -> None:
    from ppm_reference.dap.profiles.dap18.messages import ALL_SCALARS, ALL_STRUCTS
    from ppm_reference.dap.profiles.dap18.task import VDAF_CONFIGS

    names = {p.stem for p in (generated / "messages").glob("*.json")}
    assert names == {c.__name__ for c in (*ALL_STRUCTS, *ALL_SCALARS, *VDAF_CONFIGS.values())}
    assert {p.stem for p in (generated / "examples").glob("*.json")} == {
        "Prio3Count", "Prio3Histogram"
    }


def test_examples_content(generated: Path) -> None:
    count = json.loads((generated / "examples" / "Prio3Count.json").read_text())
    assert count["collection"]["aggregate_result"] == 2
    assert count["task"]["task_configuration"]["fields"]["batch_mode"] == 1
    assert count["hpke"]["leader"]["config"]["fields"]["kem_id"] == 0x0020
    hist = json.loads((generated / "examples" / "Prio3Histogram.json").read_text())
    assert hist["collection"]["aggregate_result"] == [1, 1, 0, 2]
    init = hist["aggregation"]["aggregation_job_init_req"]["fields"]
    assert init["extensions"][0]["extension_type"] == 1  # leader_selected_batch_id
    assert hist["collection"]["collection_job_req"]["fields"]["query"] == {
        "batch_mode": 2, "config": ""
    }
    assert hist["hpke"]["helper"]["config"]["fields"]["kem_id"] == 0x0010


def _rewrite(path: Path, edit: object) -> None:
    doc = json.loads(path.read_text())
    edit(doc)  # type: ignore[operator]
    path.write_text(json.dumps(doc))


def _copy(src: Path, dst: Path) -> Path:
    for name, data in _files(src).items():
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        (dst / name).write_bytes(data)
    return dst


def _flip(hex_str: str, at: int = -1) -> str:
    digits = list(hex_str)
    digits[at] = "0" if digits[at] != "0" else "1"
    return "".join(digits)


@pytest.mark.parametrize(
    ("file", "edit", "needle"),
    [
        # A ciphertext byte: the re-derivation and the decryption both fail.
        ("examples/Prio3Count.json",
         lambda d: d["upload"]["reports"][0]["report"].update(
             encoding=_flip(d["upload"]["reports"][0]["report"]["encoding"])),
         "upload.reports[0].report.encoding"),
        # An input: everything downstream changes.
        ("examples/Prio3Histogram.json",
         lambda d: d["inputs"]["reports"][1].update(measurement=2),
         "aggregate_result"),
        ("examples/Prio3Histogram.json",
         lambda d: d["hpke"]["collector"].update(private_key=_flip(
             d["hpke"]["collector"]["private_key"], 0)),
         "collector.private_key"),
        ("messages/Report.json",
         lambda d: d["valid"][0]["fields"]["report_metadata"].update(time=1),
         "valid[0]"),
        ("messages/VerifyResp.json",
         lambda d: d["invalid"][0].update(encoding=d["valid"][1]["encoding"]),
         "must be rejected"),
        ("messages/CollectionJobReq.json",
         lambda d: d["invalid"][0].update(problem_type="invalidMessage"),
         "problem type"),
        ("messages/Time.json", lambda d: d.update(format_version=99), "format_version"),
    ],
)
def test_check_detects_tampering(
    generated: Path, tmp_path: Path, file: str, edit: object, needle: str
) -> None:
    root = _copy(generated, tmp_path)
    _rewrite(root / file, edit)
    report = check(root)
    assert not report.ok
    assert any(needle in e for e in report.errors), report.errors
    assert all(e.startswith(file) for e in report.errors), report.errors


def test_check_reports_decryption_failure_with_wrong_key(generated: Path, tmp_path: Path) -> None:
    root = _copy(generated, tmp_path)
    from ppm_reference.dap.hpke import generate_keypair

    other = generate_keypair(1)

    def edit(d: dict) -> None:  # type: ignore[type-arg]
        d["hpke"]["leader"]["private_key"] = other.private_key.hex()

    _rewrite(root / "examples" / "Prio3Count.json", edit)
    errors = check(root).errors
    assert any("decryption check failed" in e or "HPKE open failed" in e for e in errors), errors


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v"
    assert main(["dap", "vectors", "generate", "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["ok"] and len(written["files"]) == 52
    assert main(["dap", "vectors", "check", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] and result["errors"] == [] and result["files"] == 52
    assert main(["dap", "vectors", "check", str(out)]) == 0
    assert capsys.readouterr().out.startswith("ok: 52 files")
    (out / "messages" / "Time.json").write_text("{}")
    assert main(["dap", "vectors", "check", str(out)]) == 1
    assert "FAIL messages/Time.json" in capsys.readouterr().out
    assert main(["dap", "vectors", "check", str(tmp_path / "missing"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False
    assert main(["dap", "vectors"]) == 2
