"""Seed 003: adaptive location heatmaps under distributed differential privacy
(Bagdasaryan, Kairouz, Mellem, Gascón, Bonawitz, Estrin, Gruteser), over DAP.

    tree.py     the quaternary prefix tree (Sections 5.2, 5.3, 5.6), communication counts
    budget.py   the per-round budget (Section 5.4, Equations 5 to 9)
    metrics.py  MSE, L1, MAPE, sMAPE, MAAPE over the spread map (Section 6.1, Appendix A.1)
    data.py     populations (synthetic city, coordinate files), Section 5.7's encoding
    run.py      Algorithm 2 with one DAP task per round and shard; the Section 5.1 baselines
    plot.py     the true and private maps side by side (matplotlib, the `plot` extra)
    cli.py      `ppm analytics heatmap`

The distributed discrete Laplace noise of Section 4 is `dp_policy.distributed`.
"""
