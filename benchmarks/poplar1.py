"""Per-report Poplar1 timings for 256-bit strings: shard, and verify at a level (both
Aggregators' verify_init, verifier_shares_to_message, both verify_next, the second
verifier_shares_to_message and both final verify_next) for a number of candidate
prefixes.

    .venv/bin/python benchmarks/poplar1.py [--bits 256] [--reps N] [--prefixes K...]
                                          [--levels L...] [--json]

Prints the median (and minimum) over N reports with fresh OS randomness per report, after
one warm-up report, and one run of the IDPF evaluation of both Aggregators against the
draft's per-prefix loop (`draft_eval`, which must give the same values). Verification at
level L walks the IDPF tree from the root for each
report (the draft's stateless `eval`; nodes shared by several prefixes are computed once),
so its cost grows with L and with the number of prefixes; the last level (255) uses
XofTurboShake128 and Field255.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ppm_reference.vdaf.idpf import IdpfBBCGGI21  # noqa: E402
from ppm_reference.vdaf.poplar1 import Poplar1  # noqa: E402
from ppm_reference.vdaf.vdaf import gen_rand  # noqa: E402
from ppm_reference.vdaf.xof import XofFixedKeyAes128, XofTurboShake128, format_dst  # noqa: E402

CTX = b"benchmark"


def _prefixes(alpha: tuple[bool, ...], level: int, count: int) -> tuple[tuple[bool, ...], ...]:
    """`count` distinct sorted prefixes of length level+1, alpha's among them, the others
    differing from it in the last bits (siblings and cousins: the heavy-hitters shape)."""
    want = min(count, 2 ** (level + 1))
    base = alpha[: level + 1]
    out = {base}
    k = 0
    while len(out) < want:
        k += 1
        flip = tuple(bool(b) ^ bool((k >> (level - i)) & 1) if level - i < 20 else bool(b)
                     for i, b in enumerate(base))
        out.add(flip)
    return tuple(sorted(out))


def _verify(vdaf: Poplar1, key: bytes, agg_param: Any, nonce: bytes, public_share: Any,
            shares: list[Any]) -> list[int]:
    states, round0 = [], []
    for j in range(2):
        state, share = vdaf.verify_init(key, CTX, j, agg_param, nonce, public_share, shares[j])
        states.append(state)
        round0.append(share)
    message = vdaf.verifier_shares_to_message(CTX, agg_param, round0)
    round1 = []
    for j in range(2):
        states[j], share = vdaf.verify_next(CTX, states[j], message)
        round1.append(share)
    final = vdaf.verifier_shares_to_message(CTX, agg_param, round1)
    outs = [vdaf.verify_next(CTX, states[j], final) for j in range(2)]
    return [int(a + b) % vdaf.idpf.current_field(agg_param[0]).MODULUS
            for a, b in zip(*outs, strict=True)]


def draft_eval(idpf: IdpfBBCGGI21, agg_id: int, public_share: Any, key: bytes, level: int,
               prefixes: Any, ctx: bytes, nonce: bytes) -> list[list[int]]:
    """The draft's `eval` as written (Section 8.3.3): each prefix walked from the root, a
    new XOF (key derivation and AES key schedule) per `extend` and `convert`. For the
    comparison only; `IdpfBBCGGI21.eval` gives the same values."""
    out = []
    for prefix in prefixes:
        seed, ctrl = key, bool(agg_id)
        y: list[int] = []
        for current in range(level + 1):
            seed_cw, ctrl_cw, w_cw = public_share[current]
            cls = XofFixedKeyAes128 if current < idpf.BITS - 1 else XofTurboShake128
            xof = cls(seed, format_dst(1, 0, 0) + ctx, nonce)
            s = [bytearray(xof.next(16)), bytearray(xof.next(16))]
            t = [bool(s[0][0] & 1), bool(s[1][0] & 1)]
            s[0][0] &= 0xFE
            s[1][0] &= 0xFE
            if ctrl:
                s = [bytearray(a ^ b for a, b in zip(x, seed_cw, strict=True)) for x in s]
                t = [t[0] ^ ctrl_cw[0], t[1] ^ ctrl_cw[1]]
            bit = int(prefix[current])
            ctrl = t[bit]
            field = idpf.current_field(current)
            xof = cls(bytes(s[bit]), format_dst(1, 0, 1) + ctx, nonce)
            seed = xof.next(16)
            y = xof.next_vec(field, idpf.VALUE_LEN)
            if ctrl:
                y = field.vec_add(y, w_cw)
        out.append(y if agg_id == 0 else field.vec_neg(y))
    return out


def _ms(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bits", type=int, default=256)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--levels", type=int, nargs="+")
    p.add_argument("--prefixes", type=int, nargs="+", default=[2, 32, 256])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    bits = args.bits
    levels = args.levels or sorted({0, 15, 63, 127, bits - 2, bits - 1})
    vdaf = Poplar1(bits)
    key = gen_rand(vdaf.VERIFY_KEY_SIZE)
    reports = []
    shard_times = []
    for i in range(args.reps + 1):
        alpha = tuple(b == "1" for b in format(int.from_bytes(gen_rand(bits // 8 + 1), "big")
                                                 % 2**bits, f"0{bits}b"))
        nonce, rand = gen_rand(16), gen_rand(vdaf.RAND_SIZE)
        t0 = time.perf_counter()
        public_share, shares = vdaf.shard(CTX, alpha, nonce, rand)
        if i:
            shard_times.append(time.perf_counter() - t0)
        reports.append((alpha, nonce, public_share, shares))
    rows: list[dict[str, Any]] = []
    med, low = _ms(shard_times)
    rows.append({"operation": "shard", "level": None, "prefixes": None,
                 "median_ms": med, "min_ms": low})
    for level in levels:
        for count in args.prefixes:
            if count > 2 ** (level + 1):
                continue
            times = []
            for i, (alpha, nonce, public_share, shares) in enumerate(reports):
                agg_param = (level, _prefixes(alpha, level, count))
                t0 = time.perf_counter()
                counts = _verify(vdaf, key, agg_param, nonce, public_share, shares)
                if i:
                    times.append(time.perf_counter() - t0)
                assert sum(counts) == 1, "verification gave a wrong count"
            med, low = _ms(times)
            rows.append({"operation": "verify", "level": level,
                         "prefixes": len(agg_param[1]), "median_ms": med, "min_ms": low})
    # The draft's per-prefix eval against ours, both Aggregators' IDPF evaluations only.
    for level, count in ((bits - 2, 32),):  # the draft loop takes ~1 s per 16 prefixes
        if count > 2 ** (level + 1):
            continue
        alpha, nonce, public_share, shares = reports[1]
        prefixes = _prefixes(alpha, level, count)
        timing = {}
        for label, fn in (("eval (ours)", vdaf.idpf.eval),
                          ("eval (draft loop)", lambda *a: draft_eval(vdaf.idpf, *a))):
            t0 = time.perf_counter()
            values = [fn(j, public_share, shares[j][0], level, prefixes, CTX, nonce)
                      for j in range(2)]
            timing[label] = (time.perf_counter() - t0, values)
        assert timing["eval (ours)"][1] == timing["eval (draft loop)"][1]
        for label, (seconds, _) in timing.items():
            rows.append({"operation": label, "level": level, "prefixes": len(prefixes),
                         "median_ms": seconds * 1e3, "min_ms": seconds * 1e3})
    if args.json:
        print(json.dumps({"bits": bits, "reps": args.reps, "rows": rows}, indent=2))
        return 0
    print(f"Poplar1(bits={bits}), {args.reps} reports each, both Aggregators, ms per report")
    print(f"{'operation':<18} {'level':>6} {'prefixes':>9} {'median':>10} {'min':>10}")
    for row in rows:
        level = "" if row["level"] is None else str(row["level"])
        prefixes = "" if row["prefixes"] is None else str(row["prefixes"])
        print(f"{row['operation']:<18} {level:>6} {prefixes:>9} {row['median_ms']:>10.2f} "
              f"{row['min_ms']:>10.2f}")
    print("(eval rows: one run, both Aggregators' IDPF evaluation only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
