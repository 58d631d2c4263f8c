"""Systems of the seed papers built on the DAP stack (`dap`, `vdaf`, `dp_policy`).

Each system is a sub-package or module of its own and contributes its `ppm analytics`
sub-commands through `analytics.cli`:

    analytics.federated   seed 004: recipes, on-device budget, multi-round n-gram discovery
    analytics.heatmap     seed 003: adaptive location heatmaps
    analytics.heavy_hitters  Poplar1 heavy hitters over DAP

`analytics` sits above `dap` in the layers (see pyproject's import-linter contracts):
it uses the DAP client, collector and provisioning layers and is used only by `ppm`.
"""
