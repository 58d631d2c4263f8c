"""`ppm demo` with the samplable-aggregation options (issue 17): sampling, dummies, the
minimum batch size bound, check-ins and the relay together, and the composed guarantee
printed beside the result."""

from __future__ import annotations

import json
import math

import pytest

from ppm_reference.cli import main
from ppm_reference.dp_policy import amplification


def test_demo_with_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--vdaf", "Sum", "--reports", "120", "--sample-rate", "0.5",
                 "--dummy-rate", "0.3", "--min-batch-bound", "10", "--checkin-window", "2",
                 "--relay", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    p = out["participation"]
    assert p["population"] == 120
    assert p["contributing"] + p["sampled_out"] + p["checkin_abstained"] == 120
    # Dummies are counted like any report and add nothing: the exact Sum (no DP policy
    # for Sum) is the sum of the contributing Clients' measurements alone.
    assert out["report_count"] == p["contributing"] + p["dummies"]
    assert out["private"] == out["true"]
    assert out["composed_guarantee"]["aggregate"]["protected"] is False


def test_demo_composes_sampling_with_the_aggregate_guarantee(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--vdaf", "Histogram", "--length", "4", "--reports", "200",
                 "--sample-rate", "0.25", "--min-batch-bound", "5"]) == 0
    text = capsys.readouterr().out
    assert "sampled at q = 0.25" in text and "paper 000 Theorem 4" in text
    assert main(["demo", "--vdaf", "Histogram", "--length", "4", "--reports", "200",
                 "--sample-rate", "0.25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = out["composed_guarantee"]
    eps, delta = amplification.poisson_sampling(g["aggregate"]["epsilon"],
                                                g["aggregate"]["delta"], 0.25)
    assert math.isclose(g["sampled"]["epsilon"], eps) and g["sampled"]["epsilon"] < \
        g["aggregate"]["epsilon"]


def test_demo_refuses_dummies_for_histograms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--vdaf", "Histogram", "--dummy-rate", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "zero-effect dummy" in err and err.count("\n") == 1
