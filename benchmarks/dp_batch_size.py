"""Time `ppm dp rappor` and `ppm dp batch-size` (issue 16: minutes, silently).

    .venv/bin/python benchmarks/dp_batch_size.py

Prints one row per setting: the amplification bound at one n (the integer Renyi order
found by `accounting.best_integer_order`), and the smallest batch size for a target
epsilon (`accounting._min_n`'s interpolated search), with the number of bound
evaluations each search made.
"""

from __future__ import annotations

import time

from ppm_reference.dp_policy import accounting


def main() -> None:
    print(f"{'eps0':>5} {'n':>9} {'epsilon':>9} {'order':>6} {'seconds':>8}")
    for eps0, n in ((3.0, 100_000), (1.0, 100_000), (3.0, 1_000_000), (1.0, 1_000_000)):
        t = time.perf_counter()
        res = accounting.rappor_amplification(eps0, n, 1e-9)
        print(f"{eps0:>5} {n:>9} {res.epsilon:>9.5f} {res.order or 0:>6.0f} "
              f"{time.perf_counter() - t:>8.2f}")
    print()
    print(f"{'method':>7} {'eps0':>5} {'target':>7} {'batch size':>11} {'steps':>6} "
          f"{'seconds':>8}")
    for method, eps0, target in (("rappor", 3.0, 1.0), ("rappor", 1.0, 0.1),
                                 ("rappor", 1.0, 0.01), ("shuffle", 4.0, 0.61)):
        steps: list[tuple[int, int]] = []

        def step(lo: int, hi: int, steps: list[tuple[int, int]] = steps) -> None:
            steps.append((lo, hi))

        t = time.perf_counter()
        if method == "rappor":
            n = accounting.rappor_min_batch_size(eps0, target, 1e-9, progress=step)
        else:
            n = accounting.shuffle_min_batch_size(eps0, target, 1e-10, progress=step)
        print(f"{method:>7} {eps0:>5} {target:>7} {n!s:>11} {len(steps):>6} "
              f"{time.perf_counter() - t:>8.2f}")


if __name__ == "__main__":
    main()
