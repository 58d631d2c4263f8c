"""The true and the private heatmap side by side, with the tree's leaves overlaid
(matplotlib, the optional `plot` extra: `pip install 'ppm-reference[plot]'`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppm_reference.analytics.heatmap.tree import PrefixTree, block


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("drawing needs matplotlib: pip install "
                              "'ppm-reference[plot]'") from None
    return plt


def draw(path: str | Path, true_map: list[list[float]], private_map: list[list[float]],
         tree: PrefixTree, title: str = "", dpi: int = 100) -> Path:
    """Write a PNG: the true density (left) and the private one (right), both on the
    same colour scale, the tree's leaves drawn as squares over the private map."""
    plt = _pyplot()
    from matplotlib.colors import PowerNorm
    from matplotlib.patches import Rectangle

    vmax = max(max(max(r) for r in true_map), max(max(r) for r in private_map)) or 1.0
    fig, axes = plt.subplots(1, 2, figsize=(9.2, 4.6), dpi=dpi)
    size = len(true_map)
    for ax, grid, name in ((axes[0], true_map, "true density"),
                           (axes[1], private_map, "private (DP) density")):
        # A square-root colour scale, shared: sparse areas stay visible.
        ax.imshow(grid, cmap="magma", norm=PowerNorm(0.5, vmin=0.0, vmax=vmax),
                  origin="upper", interpolation="nearest", extent=(0, size, size, 0))
        ax.set_title(name, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    for node in tree.leaves():
        x0, y0, side = block(node, tree.depth)
        axes[1].add_patch(Rectangle((x0, y0), side, side, fill=False, linewidth=0.3,
                                    edgecolor="#7fd3ff", alpha=0.6))
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
