"""On-device participation (dap/sampling.py): frequencies of Poisson sampling, random
check-in slots and dummy reports; the zero measurements; the minimum batch size
extension's codec; the extension checks of the protocol core.

Frequency tests draw from a fixed seed (`SeededRng`), so each run is the same; each
states the probability that it would fail for an arbitrary seed if the sampler were
right: counts are compared with their expectation within 5.5 standard deviations of
the binomial, a two-sided normal tail of 3.8e-8 per count (the union bound over the
counts of a test is given with it).
"""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppm_reference.dap import sampling
from ppm_reference.dap.common import (
    MIN_BATCH_SIZE_EXTENSION,
    decode_min_batch_size,
    encode_min_batch_size,
)
from ppm_reference.dap.core.rand import SeededRng
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.storage.sqlite import SqliteDatastore
from ppm_reference.vdaf.vdaf import run_vdaf

Z = 5.5


def _close(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= Z * math.sqrt(n * p * (1 - p)) + 1e-9


def test_poisson_sampling_frequency() -> None:
    # One count: false-failure probability 3.8e-8.
    rng = SeededRng(b"poisson")
    n, q = 20000, 0.3
    assert _close(sum(sampling.poisson_participates(q, rng) for _ in range(n)), n, q)
    assert not any(sampling.poisson_participates(0, rng) for _ in range(100))
    assert all(sampling.poisson_participates(1, rng) for _ in range(100))


def test_fixed_window_checkin_slots() -> None:
    # 11 counts (10 slots, abstentions): false-failure probability < 11 * 3.8e-8.
    rng = SeededRng(b"fixed window")
    n, m, p = 20000, 10, 0.5
    window = sampling.fixed_window(m, start=100)
    draws = [sampling.random_checkin(window, p, rng) for _ in range(n)]
    assert _close(draws.count(None), n, 1 - p)
    for slot in window:
        assert _close(draws.count(slot), n, p / m)
    assert set(draws) <= {None, *window}


def test_sliding_window_checkin_slots() -> None:
    # Client j's slot is j + U with U uniform on {0..m-1}: 8 counts of U, false-failure
    # probability < 8 * 3.8e-8.
    rng = SeededRng(b"sliding window")
    n, m = 16000, 8
    offsets = []
    for j in range(n):
        slot = sampling.random_checkin(sampling.sliding_window(j, m), 1, rng)
        assert slot is not None and j <= slot < j + m
        offsets.append(slot - j)
    for u in range(m):
        assert _close(offsets.count(u), n, 1 / m)


def test_participation_and_dummy_rates() -> None:
    # P(contribute) = q, P(dummy) = (1 - q) r, P(nothing) = (1 - q)(1 - r): 3 counts,
    # false-failure probability < 3 * 3.8e-8.
    rng = SeededRng(b"dummies")
    n, q, r = 20000, 0.2, 0.25
    plan = sampling.ParticipationPlan(q=q, dummy_rate=r)
    decisions = [plan.decide(rng) for _ in range(n)]
    assert _close(decisions.count(sampling.Decision.CONTRIBUTE), n, q)
    assert _close(decisions.count(sampling.Decision.DUMMY), n, (1 - q) * r)
    assert _close(decisions.count(sampling.Decision.NOTHING), n, (1 - q) * (1 - r))
    assert all(sampling.ParticipationPlan(q=0.5).decide(rng) != sampling.Decision.DUMMY
               for _ in range(200))


def test_plan_validation_and_extensions() -> None:
    with pytest.raises(ValueError):
        sampling.ParticipationPlan(q=1.5)
    with pytest.raises(ValueError):
        sampling.ParticipationPlan(min_batch_size=0)
    assert sampling.ParticipationPlan().extensions() == ()
    assert sampling.ParticipationPlan(min_batch_size=300).extensions() == (
        (MIN_BATCH_SIZE_EXTENSION, (300).to_bytes(4, "big")),)
    with pytest.raises(ValueError):
        sampling.random_checkin([], 1)


@pytest.mark.parametrize("name,params", [
    ("Prio3Count", {}), ("Prio3Sum", {"max_measurement": 9}),
    ("Prio3SumVec", {"length": 3, "max_measurement": 5, "chunk_length": 2}),
    ("Prio3MultihotCountVec", {"length": 4, "max_weight": 2, "chunk_length": 2}),
])
def test_zero_measurements_are_valid_and_zero(name: str, params: dict[str, int]) -> None:
    # Sharded and verified by the VDAF (an invalid measurement would fail verification),
    # and it adds nothing: the aggregate of [m, zero] is that of [m].
    vdaf = get_profile("dap-18").build_vdaf(name, params)
    zero = sampling.zero_measurement(name, params)
    assert run_vdaf(vdaf, os.urandom(vdaf.VERIFY_KEY_SIZE), None, b"ctx", [zero, zero]) \
        == run_vdaf(vdaf, os.urandom(vdaf.VERIFY_KEY_SIZE), None, b"ctx", [zero]) \
        == (0 if name in ("Prio3Count", "Prio3Sum") else [0] * params["length"])


def test_histogram_has_no_dummy() -> None:
    with pytest.raises(ValueError, match="exactly one bucket"):
        sampling.zero_measurement("Prio3Histogram", {"length": 4})


@given(st.integers(1, 0xFFFFFFFF))
def test_min_batch_size_codec(bound: int) -> None:
    assert decode_min_batch_size(encode_min_batch_size(bound)) == bound


def test_min_batch_size_codec_is_strict() -> None:
    for bad in (b"", b"\x00\x00\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x01\x00"):
        with pytest.raises(ValueError):
            decode_min_batch_size(bad)
    with pytest.raises(ValueError):
        encode_min_batch_size(0)


def test_datastore_of_schema_1_gains_the_bound_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    SqliteDatastore(path).close()
    conn = sqlite3.connect(path)
    # Recreate the two tables as schema version 1 had them (without min_batch_bound).
    conn.executescript("""
        DROP TABLE report_aggregations; DROP TABLE batch_buckets;
        CREATE TABLE report_aggregations (task_id BLOB NOT NULL, job_id BLOB NOT NULL,
          ord INTEGER NOT NULL, report_id BLOB NOT NULL, time INTEGER NOT NULL,
          state TEXT NOT NULL, verify_state BLOB, error INTEGER,
          PRIMARY KEY (task_id, job_id, ord));
        CREATE TABLE batch_buckets (task_id BLOB NOT NULL, bucket BLOB NOT NULL,
          agg_param BLOB NOT NULL, agg_share BLOB, report_count INTEGER NOT NULL,
          checksum BLOB NOT NULL, min_time INTEGER, max_time INTEGER,
          PRIMARY KEY (task_id, bucket, agg_param));
        INSERT INTO batch_buckets VALUES (x'01', x'02', x'', NULL, 3, zeroblob(32), 1, 2);
    """)
    conn.close()
    ds = SqliteDatastore(path)
    with ds.transaction() as tx:
        (bucket,) = tx.list_buckets(b"\x01")
    ds.close()
    assert bucket.report_count == 3 and bucket.min_batch_bound == 0
