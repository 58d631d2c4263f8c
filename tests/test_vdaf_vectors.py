"""The test-vector tool: `vdaf/vectors.py` and `ppm vdaf vectors ...`.

- every published vdaf-18 file replays (the negative ones must be rejected exactly at the
  operation marked `success: false`), Poplar1 and its IDPF included;
- `generate` reproduces the published positive Prio3 files, every Poplar1 and IDPF file
  (the negative one too) byte for byte;
- the project's own `test_vectors/vdaf-18` is up to date and passes `check`;
- the CLI's exit codes and reasons for tampered, unknown and malformed files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.cli import main
from ppm_reference.vdaf import vectors
from ppm_reference.vdaf.vectors import (
    OUT_OF_SCOPE,
    POPLAR1_BAD_CORR_INNER,
    STANDARD_SPECS,
    FileResult,
    VectorSpec,
    check_file,
    dumps,
    generate_idpf_vector,
    generate_poplar1_bad_corr_inner,
    generate_vector,
    instance_name_from_path,
    is_out_of_scope,
    standard_file_names,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ("test-vectors", "vdaf-18")
PUBLISHED_DIR = PROJECT_ROOT.parent / "shared" / Path(*PUBLISHED)
OWN_DIR = PROJECT_ROOT / "test_vectors" / "vdaf-18"
STANDARD = STANDARD_SPECS[18]


def _published_names() -> list[str]:
    if PUBLISHED_DIR.is_dir():
        return sorted(p.name for p in PUBLISHED_DIR.glob("*.json"))
    # One placeholder, so that the test shows up as skipped by the `shared_dir` fixture.
    return ["(published vectors absent)"]


def _explain(result: FileResult) -> str:
    lines = [f"{result.path}: {result.status} {result.reason}"]
    lines += [f"  {op.describe()}: {op.detail}" for op in result.failed_operations]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The published vectors.


@pytest.mark.parametrize("name", _published_names())
def test_published_vector_checks(shared_dir: Path, name: str) -> None:
    path = shared_dir.joinpath(*PUBLISHED, name)
    instance = instance_name_from_path(path)
    if is_out_of_scope(instance):
        pytest.skip(OUT_OF_SCOPE[instance])
    result = check_file(path)
    assert result.status == "pass", _explain(result)
    assert result.operations
    if "_bad_" in name:
        rejected = [op for op in result.operations if not op.expect_success]
        assert len(rejected) == 1
        assert rejected[0].ok and rejected[0].detail.startswith("rejected as expected")
        # Everything before the rejection ran and matched what the file records.
        assert all(op.ok for op in result.operations)


def test_all_published_prio3_files_are_covered(shared_dir: Path) -> None:
    names = sorted(p.name for p in shared_dir.joinpath(*PUBLISHED).glob("Prio3*.json"))
    assert len(names) == 25
    results = [check_file(shared_dir.joinpath(*PUBLISHED, n)) for n in names]
    assert [r.path for r in results if r.status != "pass"] == []
    assert sum(r.negative for r in results) == 8


def test_all_published_poplar1_and_idpf_files_pass(shared_dir: Path) -> None:
    names = sorted(p.name for p in shared_dir.joinpath(*PUBLISHED).glob("*.json")
                   if p.name.startswith(("Poplar1", "Idpf")))
    assert len(names) == 8
    results = {n: check_file(shared_dir.joinpath(*PUBLISHED, n)) for n in names}
    assert {n: r.status for n, r in results.items() if r.status != "pass"} == {}
    # The IDPF vector: gen, decoding, and evaluation along the path.
    assert [op.operation for op in results["IdpfBBCGGI21_0.json"].operations] == [
        "gen", "decode_public_share", "eval"]
    # The negative one is rejected at the second sketch exchange, after five matching
    # operations.
    bad = results[POPLAR1_BAD_CORR_INNER].operations
    assert [op.expect_success for op in bad] == [True] * 5 + [False]
    assert bad[-1].operation == "verifier_shares_to_message" and bad[-1].round == 1
    assert "sketch verification failed" in bad[-1].detail


def test_poplar1_vector_with_a_changed_byte_fails(shared_dir: Path, tmp_path: Path) -> None:
    doc = json.loads(shared_dir.joinpath(*PUBLISHED, "Poplar1_3.json").read_text())
    out = doc["reports"][0]["out_shares"][1]
    doc["reports"][0]["out_shares"][1] = ("00" if out[:2] != "00" else "01") + out[2:]
    result = check_file(_write(tmp_path / "Poplar1_3.json", doc))
    assert result.status == "fail"
    assert [op.operation for op in result.failed_operations] == ["verify_next"]
    doc = json.loads(shared_dir.joinpath(*PUBLISHED, "IdpfBBCGGI21_0.json").read_text())
    doc["beta_leaf"] = ["9", "8"]
    result = check_file(_write(tmp_path / "IdpfBBCGGI21_0.json", doc))
    assert result.status == "fail"
    assert "public_share mismatch" in result.failed_operations[0].detail


@pytest.mark.parametrize("name", ["IdpfBBCGGI21_0.json", POPLAR1_BAD_CORR_INNER])
def test_generate_idpf_and_negative_poplar1_are_byte_identical(shared_dir: Path,
                                                               name: str) -> None:
    doc = generate_idpf_vector() if name.startswith("Idpf") else \
        generate_poplar1_bad_corr_inner()
    assert dumps(doc).encode() == shared_dir.joinpath(*PUBLISHED, name).read_bytes()


# ---------------------------------------------------------------------------------------
# Generation.


@pytest.mark.parametrize("spec", STANDARD, ids=[s.file_name() for s in STANDARD])
def test_generate_is_byte_identical_to_published(shared_dir: Path, spec: VectorSpec) -> None:
    published = shared_dir.joinpath(*PUBLISHED, spec.file_name()).read_bytes()
    ours = dumps(generate_vector(spec)).encode()
    if ours != published:
        # Name the first differing value rather than dumping two large files.
        a, b = json.loads(ours), json.loads(published)
        assert _first_difference(a, b) == "", "generated vector differs from the published one"
    assert ours == published


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if type(a) is not type(b):
        return f"{where}: type {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}: present on one side only"
            diff = _first_difference(a[key], b[key], f"{where}.{key}")
            if diff:
                return diff
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff = _first_difference(x, y, f"{where}[{i}]")
            if diff:
                return diff
        return ""
    return "" if a == b else f"{where}: {a!r} vs {b!r}"


def test_standard_set_is_exactly_the_published_positive_set(shared_dir: Path) -> None:
    published = {
        p.name for p in shared_dir.joinpath(*PUBLISHED).glob("*.json")
        if "_bad_" not in p.name and not p.name.startswith(("Xof", "Idpf"))
    }
    assert {s.file_name() for s in STANDARD} == published


def test_generate_command_writes_the_standard_set(tmp_path: Path) -> None:
    assert main(["vdaf", "vectors", "generate", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(standard_file_names(18))
    # Same bytes as the committed set.
    for path in tmp_path.iterdir():
        assert path.read_bytes() == (OWN_DIR / path.name).read_bytes(), path.name


# ---------------------------------------------------------------------------------------
# The project's own vectors.


def test_committed_vectors_are_the_standard_set() -> None:
    committed = sorted(p.name for p in OWN_DIR.glob("*.json"))
    assert committed == sorted(standard_file_names(18))


@pytest.mark.parametrize("spec", STANDARD, ids=[s.file_name() for s in STANDARD])
def test_committed_vector_checks(spec: VectorSpec) -> None:
    result = check_file(OWN_DIR / spec.file_name())
    assert result.status == "pass", _explain(result)


def test_check_command_on_committed_vectors(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in OWN_DIR.glob("*.json"))
    assert main(["vdaf", "vectors", "check", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("PASS ") for line in out) == len(files)
    assert out[-1] == f"{len(files)} passed, 0 failed, 0 skipped"


# ---------------------------------------------------------------------------------------
# The CLI on tampered, renamed and malformed files.


def _own(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((OWN_DIR / name).read_text())
    return doc


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(dumps(doc))
    return path


def _flip_hex(value: str, pos: int = 0) -> str:
    digit = "1" if value[pos] != "1" else "2"
    return value[:pos] + digit + value[pos + 1:]


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["vdaf", "vectors", "check", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_tampered_verifier_share_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _own("Prio3Count_0.json")
    share = doc["reports"][0]["verifier_shares"][0][0]
    doc["reports"][0]["verifier_shares"][0][0] = _flip_hex(share, len(share) - 1)
    path = _write(tmp_path / "Prio3Count_0.json", doc)
    code, out = _check(capsys, str(path))
    assert code == 1
    assert f"FAIL {path}" in out
    assert "op 1 verify_init report 0 aggregator 0" in out
    assert "reports[0].verifier_shares[0][0] mismatch" in out


def test_tampered_agg_result_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _own("Prio3Histogram_0.json")
    doc["agg_result"] = [0, 1, 0, 0]
    path = _write(tmp_path / "Prio3Histogram_0.json", doc)
    code, out = _check(capsys, str(path))
    assert code == 1
    assert "agg_result mismatch" in out


def test_tampered_input_share_changes_everything_downstream(tmp_path: Path) -> None:
    doc = _own("Prio3Sum_0.json")
    share = doc["reports"][0]["input_shares"][1]
    doc["reports"][0]["input_shares"][1] = _flip_hex(share, 0)
    result = check_file(_write(tmp_path / "Prio3Sum_0.json", doc))
    assert result.status == "fail"
    failed = {op.operation for op in result.failed_operations}
    # shard disagrees with the recorded input share; verify_init of aggregator 1 then
    # yields a verifier share different from the recorded one.
    assert {"shard", "verify_init"} <= failed


def test_unknown_instance_name_fails_with_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "Prio3Bogus_0.json", _own("Prio3Count_0.json"))
    code, out = _check(capsys, str(path))
    assert code == 1
    assert "unknown VDAF instance 'Prio3Bogus'" in out


def test_vdaf_option_overrides_the_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "renamed.json", _own("Prio3Count_1.json"))
    code, out = _check(capsys, str(path))
    assert code == 1 and "unknown VDAF instance 'renamed'" in out
    code, out = _check(capsys, "--vdaf", "Prio3Count", str(path))
    assert code == 0 and f"PASS {path}" in out
    # The wrong instance for the file fails instead of passing by accident.
    code, out = _check(capsys, "--vdaf", "Prio3Sum", str(path))
    assert code == 1 and "missing parameter 'max_measurement'" in out


def test_unsupported_version_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check(capsys, "--vdaf-version", "7", str(OWN_DIR / "Prio3Count_0.json"))
    assert code == 2
    assert "unsupported VDAF version 7" in out


def test_malformed_files_fail_with_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_json = tmp_path / "Prio3Count_0.json"
    bad_json.write_text("{not json")
    missing = tmp_path / "Prio3Histogram_9.json"
    doc = _own("Prio3Histogram_0.json")
    del doc["length"]
    _write(missing, doc)
    bad_hex = tmp_path / "Prio3Sum_9.json"
    doc = _own("Prio3Sum_0.json")
    doc["reports"][0]["nonce"] = "xyz"
    _write(bad_hex, doc)
    no_ops = tmp_path / "Prio3Count_9.json"
    doc = _own("Prio3Count_0.json")
    doc["operations"] = []
    _write(no_ops, doc)
    absent = tmp_path / "Prio3Count_absent.json"
    code, out = _check(capsys, *(str(p) for p in (bad_json, missing, bad_hex, no_ops, absent)))
    assert code == 1
    assert f"FAIL {bad_json}: not valid JSON" in out
    assert f"FAIL {missing}: missing parameter 'length' for Prio3Histogram" in out
    assert f"FAIL {bad_hex}: reports[0].nonce: not a hex string" in out
    assert f"FAIL {no_ops}: 'operations' is empty" in out
    assert f"FAIL {absent}: cannot read" in out
    assert out.splitlines()[-1] == "0 passed, 5 failed, 0 skipped"


def test_negative_vector_must_be_rejected_at_the_marked_operation(
    shared_dir: Path, tmp_path: Path
) -> None:
    source = shared_dir.joinpath(*PUBLISHED, "Prio3Count_bad_meas_share.json")
    doc = json.loads(source.read_text())
    # Claiming that the bad report verifies must fail the check.
    doc["operations"][-1]["success"] = True
    result = check_file(_write(tmp_path / "Prio3Count_bad_meas_share.json", doc))
    assert result.status == "fail"
    op = result.failed_operations[0]
    assert op.operation == "verifier_shares_to_message"
    assert op.detail.startswith("rejected unexpectedly")
    # A `_bad_` file that marks nothing as failing cannot be interpreted.
    result = check_file(_write(tmp_path / "Prio3Count_bad_x.json", doc))
    assert result.status == "fail"


def test_positive_operation_marked_failing_fails(tmp_path: Path) -> None:
    doc = _own("Prio3Count_0.json")
    [op] = [o for o in doc["operations"] if o["operation"] == "verifier_shares_to_message"]
    op["success"] = False
    result = check_file(_write(tmp_path / "Prio3Count_0.json", doc))
    assert result.status == "fail"
    [failed] = result.failed_operations
    assert failed.detail == "succeeded, but the vector says it must fail"


def test_corrupted_leader_share_is_rejected(tmp_path: Path) -> None:
    """A negative vector built from one of ours: a corrupted leader measurement share."""
    doc = _own("Prio3Histogram_0.json")
    vdaf = vectors.lookup_instance("Prio3Histogram").build(doc)
    report = doc["reports"][0]
    report["input_shares"][0] = _flip_hex(report["input_shares"][0], 1)
    nonce, ctx = bytes.fromhex(report["nonce"]), bytes.fromhex(doc["ctx"])
    public_share = vdaf.decode_public_share(bytes.fromhex(report["public_share"]))
    shares = []
    for j in range(2):
        input_share = vdaf.decode_input_share(j, bytes.fromhex(report["input_shares"][j]))
        (_state, share) = vdaf.verify_init(
            bytes.fromhex(doc["verify_key"]), ctx, j, None, nonce, public_share, input_share
        )
        shares.append(vdaf.encode_verifier_share(share).hex())
    report.update(measurement=None, verifier_messages=[], out_shares=[], verifier_shares=[shares])
    doc["agg_shares"], doc["agg_result"] = [], None
    doc["operations"] = [
        {"aggregator_id": 0, "operation": "verify_init", "report_index": 0, "success": True},
        {"aggregator_id": 1, "operation": "verify_init", "report_index": 0, "success": True},
        {"operation": "verifier_shares_to_message", "report_index": 0, "round": 0,
         "success": False},
    ]
    path = _write(tmp_path / "Prio3Histogram_bad_leader_meas.json", doc)
    result = check_file(path)
    assert result.status == "pass", _explain(result)
    assert result.operations[-1].detail.startswith("rejected as expected: ")
    # Without the recorded verifier shares the message step cannot run.
    report["verifier_shares"] = [[]]
    result = check_file(_write(path, doc))
    assert result.status == "fail"
    assert "verifier_shares[0][0] is not in the file" in result.failed_operations[0].detail


def test_positive_vector_must_compare_every_recorded_value(tmp_path: Path) -> None:
    doc = _own("Prio3Sum_2.json")
    # Without the aggregate operation of aggregator 1 its recorded share is never compared.
    doc["operations"] = [
        op for op in doc["operations"]
        if not (op["operation"] == "aggregate" and op["aggregator_id"] == 1)
    ]
    result = check_file(_write(tmp_path / "Prio3Sum_2.json", doc))
    assert result.status == "fail"
    [failed] = result.failed_operations
    assert failed.operation == "(coverage)"
    assert failed.detail == "recorded but compared by no operation: agg_shares[1]"


def test_structural_problems_fail_with_reason(tmp_path: Path) -> None:
    doc = _own("Prio3Count_0.json")
    del doc["operations"][3]["round"]
    result = check_file(_write(tmp_path / "Prio3Count_0.json", doc))
    assert (result.status, result.reason) == ("fail", "a verification operation needs a 'round'")

    doc = _own("Prio3Histogram_1.json")
    doc["reports"][0]["verifier_shares"] = "00"
    result = check_file(_write(tmp_path / "Prio3Histogram_1.json", doc))
    assert result.status == "fail"
    assert result.reason.startswith("reports[0].verifier_shares[0][0]: expected a list")

    doc = _own("Prio3Count_0.json")
    doc["operations"][0]["operation"] = "prepare"
    result = check_file(_write(tmp_path / "Prio3Count_0.json", doc))
    assert result.reason == "operations[0]: unknown operation 'prepare'"

    doc = _own("Prio3Count_0.json")
    doc["shares"] = 3
    result = check_file(_write(tmp_path / "Prio3Count_0.json", doc))
    assert result.status == "fail"
    assert result.reason == "reports[0].rand is 64 bytes, the VDAF wants 96"

    doc = _own("Prio3Count_0.json")
    doc["reports"][0]["measurement"] = [1]
    result = check_file(_write(tmp_path / "Prio3Count_0.json", doc))
    assert result.reason == "a Prio3Count measurement is an integer, got [1]"


def test_check_accepts_directories(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check(capsys, str(OWN_DIR))
    assert code == 0
    assert out.splitlines()[-1] == \
        f"{len(standard_file_names(18))} passed, 0 failed, 0 skipped"


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = OWN_DIR / "Prio3Count_0.json"
    bogus = _write(tmp_path / "Bogus_0.json", _own("Prio3Count_0.json"))
    code, out = _check(capsys, "--json", str(good), str(bogus))
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["summary"] == {"pass": 1, "fail": 1, "skip": 0}
    assert [f["status"] for f in report["files"]] == ["pass", "fail"]
    assert "unknown VDAF instance 'Bogus'" in report["files"][1]["reason"]


# ---------------------------------------------------------------------------------------
# Generating for chosen parameters.


def _generate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["vdaf", "vectors", "generate", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_generate_for_chosen_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _generate(
        capsys, "--out", str(tmp_path), "--vdaf", "Prio3Histogram", "--length", "40",
        "--chunk-length", "7", "--shares", "3", "--measurements", "0", "39", "39",
        "--ctx", b"other".hex(),
    )
    assert code == 0, out
    path = tmp_path / "Prio3Histogram_custom.json"
    doc = json.loads(path.read_text())
    assert (doc["shares"], doc["length"], doc["chunk_length"]) == (3, 40, 7)
    assert doc["ctx"] == b"other".hex()
    assert doc["agg_result"] == [1] + [0] * 38 + [2]
    assert len(doc["reports"]) == 3 and len(doc["agg_shares"]) == 3
    assert path.read_text() == dumps(doc)
    assert check_file(path).status == "pass"


def test_generate_multiproof_records_non_default_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _generate(
        capsys, "--out", str(tmp_path), "--vdaf", "Prio3SumVecWithMultiproof",
        "--length", "3", "--max-measurement", "7", "--chunk-length", "2",
        "--num-proofs", "2", "--field", "Field128", "--measurements", "[1,2,7]",
        "--name", "Prio3SumVecWithMultiproof_p2.json",
    )
    assert code == 0, out
    path = tmp_path / "Prio3SumVecWithMultiproof_p2.json"
    doc = json.loads(path.read_text())
    assert (doc["num_proofs"], doc["field"]) == (2, "Field128")
    assert doc["agg_result"] == [1, 2, 7]
    assert check_file(path).status == "pass"


def test_generate_default_measurements_and_bool_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _generate(
        capsys, "--out", str(tmp_path), "--vdaf", "Prio3MultihotCountVec", "--length", "5",
        "--max-weight", "2", "--chunk-length", "2", "--measurements", "[1,0,0,0,1]",
        "[false,false,true,false,false]",
    )
    assert code == 0, out
    doc = json.loads((tmp_path / "Prio3MultihotCountVec_custom.json").read_text())
    assert doc["reports"][0]["measurement"] == [True, False, False, False, True]
    assert doc["agg_result"] == [1, 0, 1, 0, 1]
    code, out = _generate(
        capsys, "--out", str(tmp_path), "--vdaf", "Prio3Sum", "--max-measurement", "9",
    )
    assert code == 0, out
    doc = json.loads((tmp_path / "Prio3Sum_custom.json").read_text())
    assert doc["agg_result"] == 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vdaf", "Prio3Count", "--length", "3"], "Prio3Count takes no length"),
        (["--vdaf", "Prio3Histogram", "--length", "3"], "needs --chunk-length"),
        (["--vdaf", "Prio3Nope"], "unknown VDAF instance 'Prio3Nope'"),
        (["--vdaf", "Prio3Count", "--measurements", "5"], "cannot generate Prio3Count"),
        (["--vdaf", "Prio3Count", "--measurements", "[1"], "is not a JSON value"),
        (["--vdaf", "Prio3Count", "--ctx", "zz"], "--ctx must be hex"),
        (["--vdaf-version", "7"], "no standard vectors for VDAF version 7"),
    ],
)
def test_generate_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out = _generate(capsys, "--out", str(tmp_path), *argv)
    assert code == 2
    assert message in out


def test_version_table_has_one_entry_per_version() -> None:
    assert vectors.DEFAULT_VERSION in vectors.VERSIONS
    names = set(vectors.instances(18))
    extra = {s.instance for version, specs in vectors.EXTRA_SETS.values() if version == 18
             for s in specs}
    assert {s.instance for s in STANDARD} | extra == names
    assert extra == {"Prio3L1BoundSum"}


def test_generate_poplar1_for_chosen_parameters(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vdaf", "vectors", "generate", "--out", str(tmp_path), "--vdaf", "Poplar1",
                 "--bits", "6", "--level", "2", "--prefixes", "101", "001",
                 "--measurements", "[true,false,true,true,true,true]",
                 "[false,false,true,false,false,false]", "[true,false,true,false,false,true]"]) == 0
    doc = json.loads((tmp_path / "Poplar1_custom.json").read_text())
    assert doc["agg_result"] == [1, 2]  # prefixes sorted: 001, 101
    assert check_file(tmp_path / "Poplar1_custom.json").status == "pass"
    capsys.readouterr()
    assert main(["vdaf", "vectors", "generate", "--out", str(tmp_path), "--vdaf", "Poplar1",
                 "--bits", "6", "--prefixes", "01"]) == 2
    assert "prefix '01' is not 1 characters 0/1" in capsys.readouterr().err
    assert main(["vdaf", "vectors", "generate", "--out", str(tmp_path), "--vdaf",
                 "Prio3Count", "--level", "1"]) == 2
    assert "Prio3Count has no aggregation parameter" in capsys.readouterr().err
