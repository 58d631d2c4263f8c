"""The randomness the protocol core consumes, passed in by the caller.

The core draws random values only for identifiers and choices: aggregation job IDs,
leader-selected batch IDs, aggregate share job IDs, collection job IDs (DAP-18), HPKE
config IDs and the input keying material of new HPKE key pairs. Every core function that
needs one takes an `rng` argument; the servers hold one `Rng` per application
(`AppState.rng`) and pass it down, so that a whole run can be replayed from a seed.

* `OsRng` (the instance `OS_RNG`) is the default at the boundary (`build_app`,
  `AppState`): the operating-system CSPRNG through `secrets`.
* `SeededRng` is a deterministic stream derived from a seed with SHA-256 in counter mode.
  It is FOR TESTS ONLY: anyone who knows the seed knows every value it produces. The
  simulation test uses it to replay a run.

An `Rng` also has `getrandbits`, so that it satisfies `dp_policy.mechanisms.Rng` as
well (`randbelow` + `getrandbits`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class Rng(Protocol):
    """Uniform random bytes and integers."""

    def token_bytes(self, n: int) -> bytes:
        """`n` uniform random bytes, n >= 0."""
        ...

    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), n >= 1."""
        ...

    def getrandbits(self, k: int) -> int:
        """A uniform integer in [0, 2**k), k >= 0."""
        ...

    def choice(self, seq: Sequence[T]) -> T:
        """A uniform element of a non-empty sequence (IndexError if it is empty)."""
        ...


class OsRng:
    """The operating-system CSPRNG (`secrets`): the default everywhere outside tests."""

    def token_bytes(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("n must be non-negative")
        return secrets.token_bytes(n)

    def randbelow(self, n: int) -> int:
        if n < 1:
            raise ValueError("randbelow(n) needs n >= 1")
        return secrets.randbelow(n)

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        return secrets.randbits(k)

    def choice(self, seq: Sequence[T]) -> T:
        if not seq:
            raise IndexError("cannot choose from an empty sequence")
        return seq[secrets.randbelow(len(seq))]

    def __repr__(self) -> str:
        return "OsRng()"


OS_RNG = OsRng()

_DOMAIN = b"ppm ppm_reference.dap.core.rand SeededRng v1"


class SeededRng:
    """A deterministic stream of random values from a seed. TEST-ONLY: never use it for
    an Aggregator that handles real data (the seed determines every ID and key).

    Block i of the stream is SHA-256(domain || len(seed) || seed || i) (lengths and
    counter as 8-byte big-endian). Integers are drawn by rejection sampling on whole
    bytes of the stream, so each value is exactly uniform. `child(label)` derives an
    independent stream (e.g. one per Aggregator of a simulated run)."""

    def __init__(self, seed: bytes | int) -> None:
        if isinstance(seed, int):
            if seed < 0:
                raise ValueError("seed must be non-negative")
            seed = seed.to_bytes(max(1, (seed.bit_length() + 7) // 8), "big")
        self.seed = bytes(seed)
        self._prefix = _DOMAIN + len(self.seed).to_bytes(8, "big") + self.seed
        self._counter = 0
        self._buffer = b""

    def child(self, label: bytes | str) -> SeededRng:
        """An independent stream for `label`, not affected by draws from this one."""
        raw = label.encode() if isinstance(label, str) else bytes(label)
        return SeededRng(hashlib.sha256(b"child" + self._prefix + b"/" + raw).digest())

    def token_bytes(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("n must be non-negative")
        while len(self._buffer) < n:
            block = hashlib.sha256(self._prefix + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._buffer += block
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        nbytes = (k + 7) // 8
        return int.from_bytes(self.token_bytes(nbytes), "big") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        if n < 1:
            raise ValueError("randbelow(n) needs n >= 1")
        k = (n - 1).bit_length()
        while True:
            r = self.getrandbits(k)
            if r < n:
                return r

    def choice(self, seq: Sequence[T]) -> T:
        if not seq:
            raise IndexError("cannot choose from an empty sequence")
        return seq[self.randbelow(len(seq))]

    def __repr__(self) -> str:
        return f"SeededRng({self.seed.hex()!r})"


__all__ = ["Rng", "OsRng", "OS_RNG", "SeededRng"]
