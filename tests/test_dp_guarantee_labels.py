"""Issue 12: what a RAPPOR policy's guarantee counts and how it is labelled.

* An honest report heavier than max_weight (probability <= fp) is dropped: the OAMC
  delta includes that event, (1 + e^epsilon) n fp (`accounting.rappor_drop_delta`).
* Every figure a policy reports is in the replacement model, and says so: RAPPOR's local
  eps0 is a deletion-model epsilon, reported as 2 eps0 (replacement) with eps0 in the
  note, wherever guarantees are printed (`ppm dp`, `ppm demo`)."""

from __future__ import annotations

import json
import math

import pytest

from ppm_reference.cli import main
from ppm_reference.dap import dp
from ppm_reference.dap.cli.demo import describe_guarantee
from ppm_reference.dap.demo import guarantee_json
from ppm_reference.dp_policy import accounting as acc
from ppm_reference.dp_policy import policies as pol


def test_drop_delta_and_the_fp_that_bounds_it() -> None:
    assert acc.rappor_drop_delta(10**5, 1e-9, 0.5) == pytest.approx(
        (1 + math.exp(0.5)) * 1e-4)
    assert acc.rappor_drop_delta(0, 1e-3, 1.0) == 0.0
    assert acc.rappor_drop_delta(10**9, 0.5, 1.0) == 1.0  # a probability
    fp = acc.rappor_fp_for(1e-9, 10**5)
    assert 10**5 * fp == pytest.approx(0.01 * 1e-9)
    assert acc.rappor_drop_delta(10**5, fp, 1.0) <= 0.04 * 1e-9
    with pytest.raises(ValueError):
        acc.rappor_fp_for(0.0, 10)
    # The default fp keeps the drops within 1% of the default delta up to 10^7 Clients.
    assert 10**7 * dp.DEFAULT_FP <= 0.01 * dp.DEFAULT_DELTA * (1 + 1e-12)


def test_oamc_delta_counts_dropped_honest_reports() -> None:
    n, delta = 10**5, 1e-9
    loose = pol.MultiHotHistogramWithClientRandomization(5.0, 20, 1e-9)
    g = loose.guarantees(batch_size=n, delta=delta)[pol.OAMC]
    # With the draft's example fp = 1e-9, the drops dominate: delta is ~2e-4, not 1e-9.
    assert g.delta == pytest.approx(delta + (1 + math.exp(g.epsilon)) * n * 1e-9)
    assert g.delta > 1e-4
    assert "dropped" in g.note
    tight = pol.MultiHotHistogramWithClientRandomization(5.0, 20, acc.rappor_fp_for(delta, n))
    t = tight.guarantees(batch_size=n, delta=delta)[pol.OAMC]
    assert t.epsilon == g.epsilon  # the same amplification ...
    assert delta < t.delta <= 1.04 * delta  # ... and a delta the drops barely touch
    assert tight.max_weight > loose.max_weight  # the price: a larger max weight
    # Fewer honest Clients: fewer honest reports to drop.
    few = tight.guarantees(batch_size=n, delta=delta, honest_clients=100)[pol.OAMC]
    assert few.delta - delta == pytest.approx(
        (1 + math.exp(few.epsilon)) * 100 * tight.fp)


def test_every_policy_reports_replacement_model_figures() -> None:
    rappor = pol.MultiHotHistogramWithClientRandomization(3.0, 8, 1e-12)
    g = rappor.guarantees(batch_size=1000, delta=1e-9)
    for model in (pol.OC, pol.OAOC):
        assert g[model].epsilon == 6.0  # 2 eps0
        assert g[model].neighbouring == pol.REPLACEMENT
        assert "eps0 = 3 in the deletion model" in g[model].note
        assert g[model].describe() == "6-DP (replacement)"
    assert g[pol.OAMC].describe().endswith("-DP (replacement)")
    others = [pol.HistogramWithAggregatorRandomization(1.0, 1e-9, 4),
              pol.HistogramWithAggregatorLaplace(1.0, 4),
              pol.SumVecWithAggregatorLaplace(1.0, 3, 2)]
    for policy in others:
        for guarantee in policy.guarantees(batch_size=100).values():
            assert guarantee.neighbouring == pol.REPLACEMENT
    assert others[0].guarantees(100)[pol.OC].describe() == "no protection"


def test_demo_output_labels_the_relation() -> None:
    rappor = pol.MultiHotHistogramWithClientRandomization(3.0, 8, 1e-12)
    g = guarantee_json(rappor.guarantees(batch_size=1000, delta=1e-9)[pol.OAOC])
    assert g["neighbouring"] == "replacement" and g["epsilon"] == 6.0
    assert describe_guarantee(g) == "6-DP (pure, replacement)"
    laplace = pol.HistogramWithAggregatorRandomization(1.0, 1e-9, 4)
    text = describe_guarantee(guarantee_json(laplace.guarantees(100)[pol.OAOC]))
    assert text.startswith("(1, ") and text.endswith("-DP (replacement)")


def test_ppm_dp_rappor_labels_and_adds_the_drops(capsys: pytest.CaptureFixture[str]
                                                 ) -> None:
    assert main(["dp", "rappor", "--eps0", "5", "--n", "100000", "--delta", "1e-9",
                 "--fp", "1e-9", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["neighbouring"] == "replacement"
    assert obj["local_epsilon_deletion"] == 5 and obj["local_epsilon_replacement"] == 10
    assert obj["total_delta"] == pytest.approx(
        1e-9 + (1 + math.exp(obj["epsilon"])) * 1e5 * 1e-9)
    assert main(["dp", "rappor", "--eps0", "5", "--n", "100000", "--delta", "1e-9",
                 "--fp", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "-DP (replacement)" in out and "(deletion)" in out
    assert "fp <= 1e-16 keeps the drops within 1% of delta" in out
