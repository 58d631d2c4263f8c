"""`ppm demo`: run the demo job (`dap.demo`) and print its result, as text with a
progress bar on a terminal, or as one JSON object with `--json`."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from typing import Any, TextIO

from ppm_reference.dap import demo
from ppm_reference.dap.cli.args import (
    batch_mode_arg,
    policy_name_arg,
    positive_float,
    positive_int,
    vdaf_name_arg,
)
from ppm_reference.dap.cli.errors import run_command, usage_error, usage_errors
from ppm_reference.dap.cli.output import emit_json, format_duration
from ppm_reference.dap.dp import DEFAULT_DELTA, DEFAULT_FP, describe_spec

# ---------------------------------------------------------------------------------------
# Progress and status on stderr
# ---------------------------------------------------------------------------------------


class Progress:
    """A plain-text progress bar on a terminal (`\\r` redraws); silent otherwise."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, width: int = 30) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr  # looked up now, not at import (test capture)
        self.width = width
        self._shown = False

    def update(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        frac = done / total if total else 1.0
        filled = int(self.width * frac)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{label} [{bar}] {done}/{total} {int(100 * frac):3d}%")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


class Status:
    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(message, file=self.stream, flush=True)


# ---------------------------------------------------------------------------------------
# Text output
# ---------------------------------------------------------------------------------------


def _num(value: Any, sign: bool = False) -> str:
    if isinstance(value, float):
        return f"{value:+.1f}" if sign else f"{value:.1f}"
    return f"{value:+d}" if sign else str(value)


def describe_guarantee(g: dict[str, Any]) -> str:
    if not g.get("protected"):
        return "no protection"
    eps, delta = g["epsilon"], g["delta"]
    # The neighbouring relation: every policy reports replacement-model figures.
    relation = g.get("neighbouring", "replacement")
    if delta == 0:
        return f"{eps:.4g}-DP (pure, {relation})"
    return f"({eps:.4g}, {delta:.2g})-DP ({relation})"


def render(result: dict[str, Any]) -> str:
    lines = [f"DAP demo: {result['report_count']} reports, {result['vdaf_description']}, "
             f"{result['batch_mode']} batch",
             f"DP policy: {describe_spec(result['dp_policy'])}"]
    iv = result["interval"]
    lines.append(f"batch interval: {iv['start_utc']} + {format_duration(iv['duration'])}")
    lines.append("")
    true, private = result["true"], result["private"]
    per = result["error"]["per_bucket"]
    if isinstance(true, list):
        # Bars fit the terminal: scaled to the largest value shown (a private value can
        # exceed every true one), and at most the width left beside the columns.
        scale = max([abs(float(v)) for v in [*true, *private]] + [1.0])
        bar_width = max(0, min(24, shutil.get_terminal_size((80, 24)).columns - 36))
        label = "coord" if result["vdaf"] == "Prio3SumVec" else "bucket"
        lines.append(f"{label:>6} {'true':>8} {'private':>9} {'error':>7}")
        for i, (t, p, e) in enumerate(zip(true, private, per, strict=True)):
            bar = "#" * max(0, round(bar_width * float(p) / scale))
            lines.append(f"{i:>6} {t:>8} {_num(p):>9} {_num(e, True):>7}  {bar}")
        lines.append(f"{'total':>6} {sum(true):>8} {_num(sum(private)):>9}")
    else:
        lines.append(f"{'':>6} {'true':>8} {'private':>9} {'error':>7}")
        lines.append(f"{'value':>6} {true:>8} {_num(private):>9} {_num(per[0], True):>7}")
    err = result["error"]
    line = f"error: max |private - true| = {_num(err['max_abs'])}, RMSE {err['rmse']:.2f}"
    if err.get("expected_std"):
        line += f" (expected noise std {err['expected_std']:.2f} per value)"
    lines += ["", line]
    g = result["guarantee"]
    if g.get("trust_model") is None:
        lines.append("privacy: none -- " + g["note"])
    else:
        model = g["trust_model"]
        lines.append(f"privacy: {describe_guarantee(g)} in trust model {model} "
                     f"({demo.TRUST_MODELS.get(model, '')})")
        lines.append(f"         {g['method']}; {g['note']}")
        others = [f"{m} {describe_guarantee(o)}" for m, o in result["guarantees"].items()
                  if m != model]
        if others:
            lines.append("         other trust models: " + "; ".join(others))
    if "participation" in result:
        lines += render_sampling(result)
    t = result["timings"]
    lines.append(f"time: {t['total']:.1f} s (setup {t['setup']:.1f} s, upload "
                 f"{t['upload']:.1f} s, collect {t['collect']:.1f} s)")
    return "\n".join(lines)


def render_sampling(result: dict[str, Any]) -> list[str]:
    """Who took part, and the guarantee composed from sampling, aggregation and noise."""
    p = result["participation"]
    lines = [f"participation: {p['contributing']} of {p['population']} Clients contributed,"
             f" {p['sampled_out']} sampled themselves out (and sent nothing but "
             f"{p['dummies']} dummy reports)"]
    if p["checkin_window"]:
        lo, hi = p["checkin_window"]
        lines.append(f"               random check-ins over {hi - lo + 1} slots, "
                     f"{p['checkin_abstained']} abstained")
    g = result["composed_guarantee"]
    if "sampled" in g:
        s = g["sampled"]
        lines.append(f"composed: aggregation and noise {describe_guarantee(g['aggregate'])}"
                     f" at {result['report_count']} reports, sampled at q = {s['q']:g}: "
                     f"({s['epsilon']:.4g}, {s['delta']:.2g})-DP  [{s['method']}]")
    if "checkins" in g:
        c = g["checkins"]
        text = (f"no amplification (the bound {c['epsilon']:.3g} exceeds the local eps0 = "
                f"{c['eps0']:g}; it needs a small eps0 and many slots)" if c["vacuous"] else
                f"({c['epsilon']:.4g}, {c['delta']:.2g})-DP")
        lines.append(f"          random check-ins (m = {c['m']}, p0 = {c['p0']:g}): "
                     f"{text}  [{c['method']}]")
    return lines


# ---------------------------------------------------------------------------------------
# ppm demo
# ---------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    settings = demo.DemoSettings(
        vdaf=args.vdaf, policy=args.policy, reports=args.reports, epsilon=args.epsilon,
        delta=args.delta, eps0=args.eps0, fp=args.fp, length=args.length,
        batch_mode=args.batch_mode, seed=args.seed, timeout=args.timeout,
        sample_rate=args.sample_rate, dummy_rate=args.dummy_rate,
        min_batch_bound=args.min_batch_bound, checkin_window=args.checkin_window,
        checkin_prob=args.checkin_prob, relay=args.relay)
    with usage_errors():
        resolved = demo.resolve(settings)
    interactive = not args.json
    status = Status(interactive)
    progress = Progress(interactive and sys.stderr.isatty())
    try:
        result = asyncio.run(demo.run_demo(settings, status, progress, resolved))
    finally:
        progress.done()
    if args.plot is not None:
        plot_demo(args.plot, result)
    if args.json:
        emit_json(result)
    else:
        print(render(result))
        if args.plot is not None:
            print(f"plot written to {args.plot}")
    return 0


def plot_demo(path: str, result: dict[str, Any]) -> None:
    """The true and the private values side by side (bars), with the expected noise."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise usage_error("--plot needs matplotlib: pip install 'ppm-reference[plot]'") \
            from None
    true = result["true"] if isinstance(result["true"], list) else [result["true"]]
    private = result["private"] if isinstance(result["private"], list) else [result["private"]]
    private = [0.0 if v is None else float(v) for v in private]
    std = result["error"].get("expected_std") or 0.0
    xs = range(len(true))
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(true) + 2), 3.5))
    ax.bar([x - 0.2 for x in xs], true, width=0.4, label="true", color="#999999")
    ax.bar([x + 0.2 for x in xs], private, width=0.4, color="#4c72b0",
           yerr=[std] * len(private) if std else None, capsize=3,
           label="private" + (" (± 1 expected noise std)" if std else ""))
    ax.set_xticks(list(xs))
    ax.set_xlabel("coordinate" if result["vdaf"] == "Prio3SumVec" else "bucket")
    g = result["guarantee"]
    title = f"{result['report_count']} reports, {result['vdaf_description']}"
    if g.get("trust_model") is not None:
        title += f"\n{describe_guarantee(g)} ({g['trust_model']})"
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise usage_error(f"cannot write the plot {path}: {exc}") from None
    finally:
        plt.close(fig)


def register(subparsers: Any) -> None:
    """Add `demo` to the `ppm` parser."""
    p = subparsers.add_parser(
        "demo", help="run a Leader, a Helper, Clients and a Collector with DP, in one go",
        description="\n\n".join((demo.__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vdaf", type=vdaf_name_arg, default="Prio3Histogram",
                   help="Count, Sum, SumVec, Histogram (default) or MultihotCountVec")
    p.add_argument("--policy", type=policy_name_arg, default=None,
                   help="DP policy: none, or one that fits the VDAF (default: see the "
                   "table above)")
    p.add_argument("--reports", type=positive_int, default=2000, help="default 2000")
    p.add_argument("--epsilon", type=float, default=1.0, help="default 1.0")
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="default 1e-9")
    p.add_argument("--eps0", type=float, default=3.0,
                   help="local epsilon of client randomization, default 3.0")
    p.add_argument("--fp", type=float, default=DEFAULT_FP, help=argparse.SUPPRESS)
    p.add_argument("--length", type=positive_int, default=10, help="vector length, default 10")
    p.add_argument("--batch-mode", type=batch_mode_arg, default="time-interval",
                   help="time-interval (default) or leader-selected")
    p.add_argument("--seed", type=int, default=2024,
                   help="seed of the simulated measurements (not of the protocol or noise)")
    p.add_argument("--timeout", type=positive_float, default=60.0, help=argparse.SUPPRESS)
    p.add_argument("--sample-rate", type=float, default=None, metavar="Q",
                   help="Poisson sampling: --reports is the population, each Client takes "
                   "part with probability Q (paper 000)")
    p.add_argument("--dummy-rate", type=float, default=0.0, metavar="R",
                   help="a sampled-out Client sends a dummy report with probability R")
    p.add_argument("--min-batch-bound", type=positive_int, default=None, metavar="B",
                   help="bind 'release only in a batch of at least B' into every report")
    p.add_argument("--checkin-window", type=positive_int, default=None, metavar="M",
                   help="random check-ins over the last M time slots (paper 002)")
    p.add_argument("--checkin-prob", type=float, default=1.0, metavar="P",
                   help="check-in probability (default 1)")
    p.add_argument("--relay", action="store_true",
                   help="upload through an Oblivious HTTP relay to the Leader's gateway")
    p.add_argument("--plot", metavar="FILE.png", help="draw the true and the private "
                   "values side by side (needs matplotlib: the 'plot' extra)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_command(_cmd_demo))
