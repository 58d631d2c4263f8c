"""`ppm dp ...`: calibration and accounting from the command line.

    ppm dp calibrate  --epsilon E --delta D --sensitivity S [--vector 1,-1]
    ppm dp rappor     --eps0 E0 --n N --delta D [--orders integer|continuous] [--fp P]
    ppm dp shuffle    --eps0 E0 --n N --delta D [--variant fmt20|fmt22]
    ppm dp max-weight --length L --eps0 E0 --fp P
    ppm dp batch-size --eps0 E0 --epsilon E --delta D [--method rappor|shuffle]
                      [--variant fmt20|fmt22]
    ppm dp tables
    ppm dp distributed-laplace --epsilon E --clients S [--sensitivity D] [--dropout F]

Every leaf takes `--json` and then prints exactly one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from ppm_reference.dp_policy import accounting, amplification, calibration

VARIANT_HELP = ("fmt20 (default): FMT20, valid for any eps0-DP local randomizer; fmt22: "
                "the stronger FMT22 bound, which by the paper's erratum holds only for a "
                "restricted class of local randomizers")

# The draft's Tables 1 and 2 (Section 6.1.1 and 6.2, "Utility"), as printed.
TABLE1 = (  # (epsilon, delta, std, n, eps0)
    (0.317, 1e-9, 26.1337, 100000, 5.0),
    (0.906, 1e-9, 12.2800, 100000, 6.5),
    (1.528, 1e-9, 9.5580, 100000, 7.0),
)
TABLE2 = (  # (epsilon, delta, std with c = 2 honest aggregators, std OAOC)
    (0.317, 1e-9, 33.0788, 23.3903),
    (0.906, 1e-9, 12.0777, 8.5402),
    (1.528, 1e-9, 7.3403, 5.1904),
)


def _emit(args: argparse.Namespace, obj: dict[str, Any], lines: list[str]) -> int:
    if args.json:
        print(json.dumps(obj, sort_keys=True))
    else:
        print("\n".join(lines))
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    eps, delta, sens = args.epsilon, args.delta, args.sensitivity
    sigma = calibration.analytic_gaussian_sigma(eps, delta, sens)
    sigma_ref = calibration.analytic_gaussian_sigma_abs_tol(eps, delta, sens)
    obj: dict[str, Any] = {
        "epsilon": eps, "delta": delta, "sensitivity": sens,
        "sigma": sigma,
        "achieved_delta": calibration.analytic_gaussian_delta(sigma, eps, sens),
        "sigma_reference_abs_tol_1e-12": sigma_ref,
        "method": "analytic-gaussian (BW18 Algorithm 1, relative tolerance 1e-12)",
    }
    lines = [f"sigma = {sigma:.10g}   (continuous analytic Gaussian, BW18 Algorithm 1)",
             f"        achieved delta = {obj['achieved_delta']:.6g}",
             f"        reference code (absolute tolerance 1e-12): {sigma_ref:.10g}"]
    if args.vector:
        vec = [int(v) for v in args.vector.split(",")]
        l2 = math.sqrt(sum(v * v for v in vec))
        if abs(l2 - sens) > 1e-9 * max(1.0, sens):
            lines.append(f"note: |vector|_2 = {l2:.6g} differs from --sensitivity")
        dsig = calibration.discrete_gaussian_sigma(eps, delta, vec)
        res = calibration.discrete_gaussian_delta(dsig, eps, vec)
        obj.update({"discrete_sigma": dsig, "discrete_delta": res.delta,
                    "discrete_method": res.method, "vector": vec})
        lines.append(f"discrete Gaussian sigma = {dsig:.10g} (exact delta "
                     f"{res.delta:.6g}, {res.method}, CKS20 Theorem 7)")
    return _emit(args, obj, lines)


def _cmd_rappor(args: argparse.Namespace) -> int:
    res = accounting.rappor_amplification(args.eps0, args.n, args.delta, orders=args.orders)
    obj: dict[str, Any] = {
        "epsilon": res.epsilon, "delta": res.delta, "std": res.std, "n": res.n,
        "eps0": res.eps0, "order": res.order, "rdp": res.rdp, "method": res.method,
        "neighbouring": "replacement",
        "local_epsilon_deletion": args.eps0, "local_epsilon_replacement": 2 * args.eps0}
    how = (f"[Renyi order {res.order:g}, RDP {res.rdp:.6g}; MJTB+22 Theorem C.3, CKS20 "
           "Prop. 12]" if res.order is not None and res.rdp is not None else
           "[too few Clients to amplify: the local bound 2 eps0; `ppm dp batch-size` "
           "gives the n a target epsilon needs]")
    lines = [f"aggregate of n = {args.n} symmetric-RAPPOR reports (eps0 = {args.eps0}):",
             f"  ({res.epsilon:.6f}, {res.delta:g})-DP (replacement)  {how}",
             f"  noise standard deviation per debiased coordinate: {res.std:.6f}",
             f"  local guarantee (OC): eps0 = {args.eps0} (deletion), {2 * args.eps0} "
             "(replacement)"]
    if args.fp is not None:
        # Honest reports over max_weight are dropped: that event adds to delta.
        drop = accounting.rappor_drop_delta(args.n, args.fp, res.epsilon)
        obj.update({"fp": args.fp, "drop_delta": drop, "total_delta": res.delta + drop})
        lines.append(f"  with fp = {args.fp:g} (dropped honest reports): "
                     f"({res.epsilon:.6f}, {res.delta + drop:.3g})-DP (replacement); "
                     f"fp <= {accounting.rappor_fp_for(args.delta, args.n):.3g} keeps "
                     "the drops within 1% of delta")
    return _emit(args, obj, lines)


def _cmd_shuffle(args: argparse.Namespace) -> int:
    eps = accounting.shuffle_epsilon(args.eps0, args.n, args.delta, args.variant)
    closed = accounting.shuffle_closed_form(args.eps0, args.n, args.delta, args.variant)
    validity = accounting.SHUFFLE_VARIANTS[args.variant]
    obj = {"epsilon": eps, "delta": args.delta, "n": args.n, "eps0": args.eps0,
           "variant": args.variant, "closed_form_epsilon": closed, "validity": validity,
           "neighbouring": "replacement"}
    condition = ("eps0 > ln(n / (16 ln(2/delta)))" if args.variant == "fmt20"
                 else "eps0 > ln(n / (8 ln(2/delta)) - 1)")
    lines = [f"shuffling n = {args.n} reports of an eps0 = {args.eps0} local randomizer "
             "(eps0 between any two inputs: replacement model; symmetric RAPPOR(e) is "
             "2e here):",
             f"  numerical bound ({args.variant}): ({eps:.6f}, {args.delta:g})-DP "
             "(replacement)",
             f"  closed form ({args.variant}): " + (f"{closed:.6f}" if closed is not None
                                                    else f"not valid ({condition})"),
             f"  valid for: {validity}"]
    return _emit(args, obj, lines)


def _cmd_max_weight(args: argparse.Namespace) -> int:
    m = accounting.rappor_max_weight(args.length, args.eps0, args.fp)
    obj = {"max_weight": m, "length": args.length, "eps0": args.eps0, "fp": args.fp}
    return _emit(args, obj, [f"max_weight = {m}"])


def _cmd_batch_size(args: argparse.Namespace) -> int:
    progress = _Progress("searching")
    try:
        if args.method == "rappor":
            n = accounting.rappor_min_batch_size(args.eps0, args.epsilon, args.delta,
                                                 n_max=args.n_max, progress=progress)
        else:
            n = accounting.shuffle_min_batch_size(args.eps0, args.epsilon, args.delta,
                                                  args.variant, n_max=args.n_max,
                                                  progress=progress)
    finally:
        progress.done()
    obj = {"batch_size": n, "eps0": args.eps0, "epsilon": args.epsilon,
           "delta": args.delta, "method": args.method}
    if args.method == "shuffle":
        obj["variant"] = args.variant
    text = (f"smallest batch size = {n}" if n is not None else
            f"not reached by n = {args.n_max} (raise --n-max, or the target epsilon)")
    return _emit(args, obj, [text])


class _Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.shown = False

    def __call__(self, lo: int, hi: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{self.what}: n in [{lo}, {hi}] ...\033[K")
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def tables() -> dict[str, Any]:
    """The draft's Tables 1 and 2 recomputed next to the printed values."""
    t1 = []
    for eps, delta, std, n, eps0 in TABLE1:
        res = accounting.rappor_amplification(eps0, n, delta)
        t1.append({"eps0": eps0, "n": n, "delta": delta,
                   "printed_epsilon": eps, "epsilon": res.epsilon, "order": res.order,
                   "printed_std": std, "std": res.std,
                   "std_rounded_up": calibration.round_up(res.std or 0.0)})
    t2 = []
    sqrt2 = math.sqrt(2.0)
    for eps, delta, std2, std1 in TABLE2:
        exact = calibration.analytic_gaussian_sigma(eps, delta, sqrt2)
        coarse = calibration.analytic_gaussian_sigma_abs_tol(eps, delta, sqrt2)
        disc = calibration.discrete_gaussian_sigma(eps, delta, [1, -1])
        t2.append({"epsilon": eps, "delta": delta,
                   "printed_sigma": std1, "printed_std_two_aggregators": std2,
                   "sigma_abs_tol_1e-12": coarse,
                   "sigma_abs_tol_rounded_up": calibration.round_up(coarse),
                   "std_two_aggregators_abs_tol_rounded_up": calibration.round_up(
                       coarse * sqrt2),
                   "sigma_exact": exact, "std_two_aggregators_exact": exact * sqrt2,
                   "delta_at_exact_sigma": calibration.analytic_gaussian_delta(
                       exact, eps, sqrt2),
                   "discrete_sigma": disc,
                   "discrete_delta_at_continuous_sigma": calibration.discrete_gaussian_delta(
                       exact, eps, [1, -1]).delta})
    return {"table1": t1, "table2": t2}


def _cmd_tables(args: argparse.Namespace) -> int:
    obj = tables()
    lines = ["Table 1 (symmetric RAPPOR, n = 100000, delta = 1e-9)",
             f"{'eps0':>5} {'eps printed':>11} {'eps (C.3)':>10} {'order':>5} "
             f"{'std printed':>11} {'std':>12} {'std ceil':>9}"]
    for r in obj["table1"]:
        lines.append(f"{r['eps0']:>5} {r['printed_epsilon']:>11} {r['epsilon']:>10.4f} "
                     f"{r['order']:>5g} {r['printed_std']:>11.4f} {r['std']:>12.6f} "
                     f"{r['std_rounded_up']:>9.4f}")
    lines += ["", "Table 2 (discrete Gaussian per aggregator, L2 sensitivity sqrt(2), "
              "delta = 1e-9)",
              f"{'eps':>5} {'printed':>8} {'abs-tol':>10} {'exact':>10} {'c=2 printed':>11} "
              f"{'c=2 exact':>10} {'discrete':>10}"]
    for r in obj["table2"]:
        lines.append(f"{r['epsilon']:>5} {r['printed_sigma']:>8.4f} "
                     f"{r['sigma_abs_tol_1e-12']:>10.5f} {r['sigma_exact']:>10.5f} "
                     f"{r['printed_std_two_aggregators']:>11.4f} "
                     f"{r['std_two_aggregators_exact']:>10.5f} {r['discrete_sigma']:>10.5f}")
    lines += ["", "printed = draft; abs-tol = BW18 Algorithm 1 stopped at |delta(s) - delta| "
              "<= 1e-12 as in the reference code (the draft rounds it up);",
              "exact = root solved to 1e-12 relative; discrete = smallest discrete-Gaussian "
              "sigma with exact delta <= 1e-9 (CKS20 Theorem 7)."]
    return _emit(args, obj, lines)


# ---------------------------------------------------------------------------------------
# Samplable anonymous aggregation and random check-ins (issue 17; papers 000, 002, 004):
#   ppm dp sampling         --epsilon E --delta D --q Q
#   ppm dp sampled-gaussian --sigma S --q Q --rounds T --delta D
#   ppm dp checkins         --eps0 E0 --m M --delta D [--p0 P --window fixed|sliding --n N]
#   ppm dp min-cohort       --eps0 E0 --epsilon E --delta D [--method ...] [--deletion]
# ---------------------------------------------------------------------------------------


def _cmd_sampling(args: argparse.Namespace) -> int:
    eps, delta = amplification.poisson_sampling(args.epsilon, args.delta, args.q)
    obj = {"epsilon": eps, "delta": delta, "q": args.q, "base_epsilon": args.epsilon,
           "base_delta": args.delta, "method": "Poisson sampling (paper 000 Theorem 4)"}
    return _emit(args, obj, [
        f"({args.epsilon:g}, {args.delta:g})-DP on a Poisson sample of rate q = {args.q:g}:",
        f"  ({eps:.6g}, {delta:.6g})-DP  [paper 000 Theorem 4: log(1 + q(e^eps - 1)), "
        "q delta]"])


def _cmd_sampled_gaussian(args: argparse.Namespace) -> int:
    res = amplification.sampled_gaussian_epsilon(args.q, args.sigma, args.rounds, args.delta,
                                                 args.conversion)
    per_round = amplification.sampled_gaussian_epsilon(args.q, args.sigma, 1, args.delta,
                                                       args.conversion)
    unsampled = amplification.gaussian_composed_epsilon(args.sigma, args.rounds, args.delta)
    expected = max(1, round(args.q * args.rounds))
    participating = amplification.gaussian_composed_epsilon(args.sigma, expected, args.delta)
    obj = {"epsilon": res.epsilon, "delta": args.delta, "order": res.order,
           "q": args.q, "sigma": args.sigma, "rounds": args.rounds,
           "epsilon_one_round": per_round.epsilon,
           "unsampled_epsilon": unsampled,
           "unsampled_mu": amplification.gaussian_mu(args.sigma, args.rounds),
           "participating_rounds": expected,
           "participating_epsilon": participating,
           "method": res.method}
    lines = [f"Poisson-sampled Gaussian, q = {args.q:g}, sigma = {args.sigma:g}, "
             f"{args.rounds} rounds, delta = {args.delta:g}:",
             f"  sampled, RDP: epsilon = {res.epsilon:.6g} (order {res.order:g}); "
             f"one round {per_round.epsilon:.6g}",
             f"  unsampled, exact (GDP mu = "
             f"{amplification.gaussian_mu(args.sigma, args.rounds):.4g}): "
             f"epsilon = {unsampled:.6g}",
             f"  unsampled over the ~q T = {expected} rounds a Client takes part in: "
             f"epsilon = {participating:.6g}"]
    return _emit(args, obj, lines)


def _cmd_checkins(args: argparse.Namespace) -> int:
    if args.window == "fixed":
        res = amplification.checkins_fixed_epsilon(args.eps0, args.m, args.p0, args.delta,
                                                   args.delta0, args.delta1)
    else:
        res = amplification.checkins_sliding_epsilon(args.eps0, args.m, args.delta,
                                                     args.delta0, args.delta1)
    obj: dict[str, Any] = {"epsilon": res.epsilon, "delta": res.delta, "eps0": args.eps0,
                           "m": args.m, "window": args.window, "theorem": res.theorem}
    if args.window == "fixed":
        obj["p0"] = args.p0
    lines = [f"random check-ins ({args.window} window, m = {args.m}, eps0 = {args.eps0:g}): "
             f"({res.epsilon:.6g}, {res.delta:.6g})-DP  [{res.theorem}]"]
    if args.n is not None:
        dummies = (amplification.expected_dummies_fixed(args.m, args.n, args.p0)
                   if args.window == "fixed"
                   else amplification.expected_dummies_sliding(args.m, args.n))
        shuffle = amplification.shuffling_epsilon_bkmtt(args.eps0, args.n, args.delta)
        obj.update({"n": args.n, "expected_dummies": dummies.expected,
                    "expected_dummies_bound": dummies.bound,
                    "dummies_proposition": dummies.proposition,
                    "shuffling_epsilon": shuffle})
        lines.append(f"  expected dummy updates with n = {args.n}: {dummies.expected:.6g} "
                     f"(bound {dummies.bound:.6g}, {dummies.proposition})")
        lines.append(f"  shuffling n reports instead: epsilon = {shuffle:.6g} "
                     "[002 Theorem 5.1]")
    return _emit(args, obj, lines)


def _cmd_min_cohort(args: argparse.Namespace) -> int:
    m = amplification.min_cohort(args.eps0, args.epsilon, args.delta, args.method,
                                 args.deletion, variant=args.variant)
    obj = {"min_cohort": m, "epsilon": args.epsilon, "delta": args.delta, "eps0": args.eps0,
           "method": args.method, "deletion": args.deletion, "variant": args.variant}
    text = "not reached" if m is None else str(m)
    return _emit(args, obj, [f"smallest cohort for ({args.epsilon:g}, {args.delta:g})-DP "
                             f"from {args.eps0:g}-DP reports ({args.method}, "
                             f"{args.variant}): {text}"])


def _one_line_errors(name: str, cmd: Any) -> Any:
    """Bad parameters are one clear line on stderr (exit 2), not a traceback; with
    --json also `{"ok": false, "error": ...}` on stdout."""
    def run(args: argparse.Namespace) -> int:
        try:
            return int(cmd(args))
        except (ValueError, ZeroDivisionError, OverflowError) as exc:
            message = str(exc) or type(exc).__name__
            if isinstance(exc, ZeroDivisionError | OverflowError):
                message = f"the parameters are out of range ({message})"
            print(f"ppm dp {name}: error: {message}", file=sys.stderr)
            if getattr(args, "json", False):
                print(json.dumps({"ok": False, "error": message}, sort_keys=True))
            return 2
    run.one_line_errors = True  # type: ignore[attr-defined]
    return run


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def _probability(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def _positive(text: str) -> float:
    """argparse type: a finite number > 0 (epsilon, eps0, sigma, sensitivity)."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _delta(text: str) -> float:
    """argparse type: a delta in (0, 1)."""
    value = _number(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), e.g. 1e-9; got {text}")
    return value


def _count(text: str) -> int:
    """argparse type: an integer >= 1 (n, m, length, rounds, clients)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _register_sampling(leaf: Any) -> None:
    p = leaf("sampling", "amplification by Poisson sampling (paper 000 Theorem 4)")
    p.add_argument("--epsilon", type=_positive, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--q", type=_probability, required=True, help="sampling rate")
    p.set_defaults(func=_one_line_errors("sampling", _cmd_sampling))

    p = leaf("sampled-gaussian", "Poisson-sampled Gaussian over T rounds (RDP) and the "
             "unsampled Gaussian composed exactly (GDP)")
    p.add_argument("--sigma", type=_positive, required=True, help="noise multiplier")
    p.add_argument("--q", type=_probability, required=True)
    p.add_argument("--rounds", type=_count, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--conversion", choices=("cks20", "mironov"), default="cks20")
    p.set_defaults(func=_one_line_errors("sampled-gaussian", _cmd_sampled_gaussian))

    p = leaf("checkins", "random check-ins (paper 002 Theorems 3.2, 4.3; Propositions 3.4, "
             "4.4 with --n)")
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--m", type=_count, required=True, help="window length in slots")
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--p0", type=_probability, default=1.0, help="check-in probability")
    p.add_argument("--window", choices=("fixed", "sliding"), default="fixed")
    p.add_argument("--n", type=_count, help="number of clients (expected dummies)")
    p.add_argument("--delta0", type=_probability, default=0.0,
                   help="delta of an (eps0, delta0)-DP randomizer")
    p.add_argument("--delta1", type=_delta, help="failure probability for --delta0")
    p.set_defaults(func=_one_line_errors("checkins", _cmd_checkins))

    p = leaf("min-cohort", "smallest cohort for (epsilon, delta) from eps0-DP reports "
             "(paper 004 Section 3.1, Check 3)")
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--epsilon", type=_positive, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--method", choices=amplification.MIN_COHORT_METHODS,
                   default="numerical")
    p.add_argument("--deletion", action="store_true",
                   help="eps0 is a deletion-model guarantee (use 2 eps0)")
    p.add_argument("--variant", choices=sorted(accounting.SHUFFLE_VARIANTS),
                   default=accounting.DEFAULT_SHUFFLE_VARIANT,
                   help="shuffle bound: fmt20 holds for any eps0-DP randomizer (default); "
                        "fmt22 is paper 004's, restricted by its erratum")
    p.set_defaults(func=_one_line_errors("min-cohort", _cmd_min_cohort))


def register(subparsers: Any) -> None:
    """Add `dp` and its sub-commands to the `ppm` parser."""
    dp = subparsers.add_parser("dp", help="differential privacy: calibration and accounting")
    sub = dp.add_subparsers(dest="dp_command", metavar="DP_COMMAND")
    dp.set_defaults(func=lambda args: (dp.print_help(), 2)[1])

    def leaf(name: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        return p

    p = leaf("calibrate", "sigma of the Gaussian mechanism for (epsilon, delta)")
    p.add_argument("--epsilon", type=_positive, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--sensitivity", type=_positive, required=True, help="L2 sensitivity")
    p.add_argument("--vector", help="integer sensitivity vector for the exact discrete "
                   "Gaussian calibration, e.g. 1,-1 for a histogram")
    p.set_defaults(func=_cmd_calibrate)

    p = leaf("rappor", "(epsilon, delta) of n aggregated symmetric-RAPPOR reports")
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--n", type=_count, required=True, help="number of honest Clients")
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--orders", choices=("integer", "continuous"), default="integer")
    p.add_argument("--fp", type=_delta, help="the task's false-positive bound: add the "
                   "chance of dropping an honest report over max_weight to delta")
    p.set_defaults(func=_cmd_rappor)

    p = leaf("shuffle", "numerical amplification-by-shuffling bound")
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--n", type=_count, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--variant", choices=tuple(accounting.SHUFFLE_VARIANTS),
                   default=accounting.DEFAULT_SHUFFLE_VARIANT, help=VARIANT_HELP)
    p.set_defaults(func=_cmd_shuffle)

    p = leaf("max-weight", "RAPPOR false-positive bound (draft Section 6.1.1)")
    p.add_argument("--length", type=_count, required=True)
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--fp", type=_delta, required=True)
    p.set_defaults(func=_cmd_max_weight)

    p = leaf("batch-size", "smallest batch size reaching a target epsilon")
    p.add_argument("--eps0", type=_positive, required=True)
    p.add_argument("--epsilon", type=_positive, required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--method", choices=("rappor", "shuffle"), default="rappor")
    p.add_argument("--variant", choices=tuple(accounting.SHUFFLE_VARIANTS),
                   default=accounting.DEFAULT_SHUFFLE_VARIANT,
                   help="with --method shuffle: " + VARIANT_HELP)
    p.set_defaults(func=_cmd_batch_size)

    p = leaf("tables", "the draft's Tables 1 and 2 recomputed")
    p.set_defaults(func=_cmd_tables)

    p = sub.choices["batch-size"]
    p.add_argument("--n-max", type=_count, default=10**9, metavar="N",
                   help="give up beyond this batch size (default 10^9)")

    _register_sampling(leaf)
    _register_distributed_laplace(leaf)
    for name, p in sub.choices.items():  # every leaf: one line on bad parameters
        func = p.get_default("func")
        if func is not None and not getattr(func, "one_line_errors", False):
            p.set_defaults(func=_one_line_errors(name, func))


# ---------------------------------------------------------------------------------------
# ppm dp distributed-laplace (seed 003, Section 4: Pólya shares summing to discrete Laplace)
# ---------------------------------------------------------------------------------------


def distributed_laplace(epsilon: str, clients: int, sensitivity: int = 1,
                        dropout: str = "0", survivors: int | None = None) -> dict[str, Any]:
    """The summed noise of the distributed discrete Laplace mechanism for a shard of
    `clients` Clients (`dp_policy.distributed`). Raises ValueError for bad parameters."""
    from fractions import Fraction

    from ppm_reference.dp_policy.distributed import DistributedDiscreteLaplace

    for name, text in (("--epsilon", epsilon), ("--dropout", dropout)):
        try:
            Fraction(text)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {text!r}") from None
    mech = DistributedDiscreteLaplace(epsilon, clients, sensitivity, dropout)
    if survivors is not None and not 0 <= survivors <= clients:
        raise ValueError(f"--survivors must be in [0, {clients}]")
    summed = mech.summed(survivors)
    share = mech.summed(1)
    floor = mech.summed(mech.dp_clients)
    return {
        "epsilon": mech.epsilon, "clients": clients, "sensitivity": sensitivity,
        "dropout": float(mech.dropout), "dp_clients": mech.dp_clients,
        "alpha": str(mech.alpha), "beta": mech.beta,
        "survivors": summed.survivors, "std": summed.std, "variance": summed.variance,
        "achieved_epsilon": summed.epsilon if math.isfinite(summed.epsilon) else None,
        "share_std": share.std, "laplace_std": floor.std,
        "method": "X - Y, X, Y ~ Polya(1/S_dp, exp(-epsilon/sensitivity)) per Client "
                  "(Bagdasaryan et al., Theorem 4.2)",
    }


def _cmd_distributed_laplace(args: argparse.Namespace) -> int:
    import sys

    try:
        obj = distributed_laplace(args.epsilon, args.clients, args.sensitivity,
                                  args.dropout, args.survivors)
    except (ValueError, ZeroDivisionError) as exc:
        message = str(exc)
        for word in ("epsilon", "sensitivity", "dropout", "clients"):
            message = message.replace(f"the {word} must", f"--{word} must").replace(
                f"{word} must", f"--{word} must").replace("----", "--")
        print(f"ppm: error: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"ok": False, "error": message}, sort_keys=True))
        return 2
    eps = obj["achieved_epsilon"]
    lines = [
        f"{obj['clients']} Clients, each adding X - Y with X, Y ~ Polya({obj['alpha']}, "
        f"{obj['beta']:.6g}) per coordinate (S_dp = {obj['dp_clients']}):",
        f"  summed noise over {obj['survivors']} Clients: std {obj['std']:.6g}, "
        f"variance {obj['variance']:.6g}",
        "  guarantee: " + (f"{eps:g}-DP (pure)" if eps is not None else
                            "none (fewer than S_dp shares)")
        + f" for vectors of L1 norm <= {obj['sensitivity']}",
        f"  one Client's share: std {obj['share_std']:.6g}; discrete Laplace at S_dp: "
        f"std {obj['laplace_std']:.6g}",
    ]
    return _emit(args, obj, lines)


def _register_distributed_laplace(leaf: Any) -> None:
    p = leaf("distributed-laplace",
             "noise of the distributed discrete Laplace mechanism (Polya shares)")
    p.add_argument("--epsilon", required=True,
                   help="epsilon (a decimal, taken exactly: 0.1 is 1/10)")
    p.add_argument("--clients", type=_count, required=True,
                   help="S, the Clients whose shares are summed (the shard or batch)")
    p.add_argument("--sensitivity", type=int, default=1,
                   help="L1 norm bound of one Client's vector (default 1)")
    p.add_argument("--dropout", default="0",
                   help="fraction of the Clients that may drop out (default 0)")
    p.add_argument("--survivors", type=int,
                   help="the Clients whose shares are summed (default: all)")
    p.set_defaults(func=_cmd_distributed_laplace)
