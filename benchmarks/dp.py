"""Speed of the DP samplers (draft-wang-ppm-differential-privacy mechanisms).

    .venv/bin/python benchmarks/dp.py [--quick]

Prints samples per second of each exact sampler at sigma (or scale) 23.39 and 1000, of
symmetric RAPPOR at length 1000, and the time one Aggregator needs to noise a
1000-bucket histogram. All draws come from the OS CSPRNG (`SystemRng`), as in
production. Target: a discrete Gaussian sample at sigma 23.39 in under 20 us.
No assertions: this is a report, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ppm_reference.dp_policy.mechanisms import (  # noqa: E402
    DiscreteGaussian,
    DiscreteLaplace,
    SymmetricRappor,
    SystemRng,
    sample_bernoulli_exp,
)


def bench(fn: Callable[[], object], count: int, repeat: int = 3) -> float:
    """Best time per call, in seconds, over `repeat` runs of `count` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        best = min(best, (time.perf_counter() - t0) / count)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args(argv)
    n = 5000 if args.quick else 50000
    rng = SystemRng()
    rows: list[tuple[str, str, float]] = []

    third, five_halves = Fraction(1, 3), Fraction(5, 2)
    rows.append(("Bernoulli(exp(-gamma))", "gamma = 1/3",
                 bench(lambda: sample_bernoulli_exp(third, rng), n)))
    rows.append(("Bernoulli(exp(-gamma))", "gamma = 5/2",
                 bench(lambda: sample_bernoulli_exp(five_halves, rng), n)))
    for scale in ("23.39", "1000"):
        lap = DiscreteLaplace(scale, rng)
        rows.append(("discrete Laplace", f"scale = {scale}", bench(lap.sample, n)))
    for sigma in ("23.39", "1000"):
        g = DiscreteGaussian(sigma, rng)
        rows.append(("discrete Gaussian", f"sigma = {sigma}", bench(g.sample, n)))
    g_float = DiscreteGaussian(23.39, rng)  # exact binary value of the float: 2^-48 denominators
    rows.append(("discrete Gaussian", "sigma = float(23.39)", bench(g_float.sample, n)))

    per_sample = [r for r in rows if r[1] == "sigma = 23.39"][0][2]

    g = DiscreteGaussian("23.39", rng)
    hist = bench(lambda: g.sample_noise(1000), max(5, n // 1000))
    for eps0 in ("5", "6.5", "7"):
        mech = SymmetricRappor(eps0, rng)

        def noise(m: SymmetricRappor = mech) -> object:
            return m.sample_noise(1000)

        rows.append(("symmetric RAPPOR, length 1000 (vectors/s)", f"eps0 = {eps0}",
                     bench(noise, max(200, n // 25))))
    rap = SymmetricRappor("5", rng)
    rows.append(("RAPPOR per-coordinate (reference)", "eps0 = 5, length 1000",
                 bench(lambda: rap.add_noise_per_coordinate([0] * 1000), max(5, n // 2500))))

    print(f"{'sampler':<44} {'parameter':<22} {'samples/s':>12} {'us/sample':>10}")
    print("-" * 91)
    for name, param, sec in rows:
        print(f"{name:<44} {param:<22} {1 / sec:>12,.0f} {sec * 1e6:>10.2f}")
    print()
    print(f"one Aggregator noising a 1000-bucket histogram (sigma 23.39): {hist * 1e3:.2f} ms")
    verdict = "meets" if per_sample < 20e-6 else "misses"
    print(f"discrete Gaussian at sigma 23.39: {per_sample * 1e6:.2f} us/sample "
          f"({verdict} the 20 us target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
