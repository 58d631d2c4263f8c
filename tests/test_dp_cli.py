"""`ppm dp ...`: the console script end to end (`--json` prints one JSON object)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.cli import main

PPM = Path(sys.executable).parent / "ppm"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["dp", *args, "--json"]) == 0
    out = capsys.readouterr().out.strip()
    assert "\n" not in out  # exactly one JSON object
    obj = json.loads(out)
    assert isinstance(obj, dict)
    return obj


@pytest.mark.skipif(not PPM.exists() and shutil.which("ppm") is None,
                    reason="ppm console script not installed")
def test_console_script_rappor() -> None:
    exe = str(PPM) if PPM.exists() else "ppm"
    proc = subprocess.run([exe, "dp", "rappor", "--eps0", "5", "--n", "100000",
                           "--delta", "1e-9", "--json"], capture_output=True, text=True,
                          check=True, timeout=120)
    obj = json.loads(proc.stdout)
    assert abs(obj["epsilon"] - 0.317) <= 0.002
    assert obj["delta"] == 1e-9
    assert math.ceil(obj["std"] * 1e4) / 1e4 == 26.1337


def test_calibrate(capsys: pytest.CaptureFixture[str]) -> None:
    obj = run_json(capsys, "calibrate", "--epsilon", "0.317", "--delta", "1e-9",
                   "--sensitivity", str(math.sqrt(2)), "--vector", "1,-1")
    assert round(obj["sigma"], 4) == 23.3907
    assert round(obj["sigma_reference_abs_tol_1e-12"], 4) == 23.3902
    assert obj["discrete_delta"] <= 1e-9
    assert obj["discrete_sigma"] > obj["sigma"]


def test_shuffle_and_max_weight(capsys: pytest.CaptureFixture[str]) -> None:
    obj = run_json(capsys, "shuffle", "--eps0", "4", "--n", "10000", "--delta", "1e-10",
                   "--variant", "fmt22")
    assert abs(obj["epsilon"] - 0.61) < 0.006
    assert obj["closed_form_epsilon"] is None
    assert "erratum" in obj["validity"]
    obj = run_json(capsys, "shuffle", "--eps0", "4", "--n", "100000", "--delta", "1e-10")
    assert obj["variant"] == "fmt20" and "any eps0-DP" in obj["validity"]
    assert obj["neighbouring"] == "replacement"
    assert obj["closed_form_epsilon"] > obj["epsilon"]
    obj = run_json(capsys, "max-weight", "--length", "1000", "--eps0", "5", "--fp", "1e-9")
    assert obj["max_weight"] == 28


def test_batch_size(capsys: pytest.CaptureFixture[str]) -> None:
    obj = run_json(capsys, "batch-size", "--eps0", "4", "--epsilon", "0.61", "--delta",
                   "1e-10", "--method", "shuffle", "--variant", "fmt22")
    assert 9000 < obj["batch_size"] <= 10000
    obj = run_json(capsys, "batch-size", "--eps0", "4", "--epsilon", "0.61", "--delta",
                   "1e-10", "--method", "shuffle")
    assert obj["variant"] == "fmt20" and obj["batch_size"] > 10000


def test_shuffle_text_says_which_bound_holds(capsys: pytest.CaptureFixture[str]) -> None:
    for variant, says in (("fmt20", "any eps0-DP local randomizer"),
                          ("fmt22", "erratum only for a restricted class")):
        assert main(["dp", "shuffle", "--eps0", "2", "--n", "100000", "--delta", "1e-9",
                     "--variant", variant]) == 0
        out = capsys.readouterr().out
        assert f"numerical bound ({variant})" in out and says in out
        assert "replacement" in out


def test_tables(capsys: pytest.CaptureFixture[str]) -> None:
    obj = run_json(capsys, "tables")
    t1, t2 = obj["table1"], obj["table2"]
    assert isinstance(t1, list) and isinstance(t2, list)
    for row in t1:
        assert abs(row["epsilon"] - row["printed_epsilon"]) <= 0.002
        assert row["std_rounded_up"] == row["printed_std"]
    for row in t2:
        assert row["sigma_abs_tol_rounded_up"] == row["printed_sigma"]
        assert row["std_two_aggregators_abs_tol_rounded_up"] == \
            row["printed_std_two_aggregators"]
        assert abs(row["sigma_exact"] - row["printed_sigma"]) > 5e-5
    assert [round(r["sigma_exact"], 4) for r in t2] == [23.3907, 8.5401, 5.1903]
    # Human-readable form too.
    assert main(["dp", "tables"]) == 0
    text = capsys.readouterr().out
    assert "Table 1" in text and "23.3903" in text and "23.39073" in text


def test_dp_without_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dp"]) == 2
    assert "calibrate" in capsys.readouterr().out
