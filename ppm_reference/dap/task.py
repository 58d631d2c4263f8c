"""The task interface every profile's task class satisfies (DAP-18 Section 4.2, DAP-09
Section 4.2), and what is common to all of them.

Engine code types a task as :class:`DapTask` and asks it, or its ``profile``, for
everything; the classes live with their drafts (``dap/profiles/<draft>/task.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ppm_reference.dap.common import BatchMode

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile


class TaskError(ValueError):
    """Task parameters that DAP or this implementation cannot use."""


@runtime_checkable
class DapTask(Protocol):
    """The parameters of one task as Clients, Collectors and Aggregators agree on them.

    ``time_precision`` is in seconds; ``batch_mode`` is the core's batch mode (a DAP-09
    fixed_size task behaves as leader_selected). ``max_batch_size`` is an upper bound the
    Aggregators enforce (DAP-09 fixed_size), or None. ``config_bytes`` is how the task is
    stored and handed to Clients (DAP-18: the encoded TaskConfiguration) and
    ``from_config_bytes`` its inverse."""

    @property
    def task_id(self) -> bytes: ...
    @property
    def profile(self) -> Profile: ...
    @property
    def leader_aggregator_endpoint(self) -> str: ...
    @property
    def helper_aggregator_endpoint(self) -> str: ...
    @property
    def time_precision(self) -> int: ...
    @property
    def min_batch_size(self) -> int: ...
    @property
    def batch_mode(self) -> BatchMode: ...
    @property
    def max_batch_size(self) -> int | None: ...
    @property
    def dp_policy(self) -> bytes | None: ...

    def vdaf(self) -> Any: ...
    def vdaf_ctx(self) -> bytes: ...
    def config_bytes(self) -> bytes: ...


def derive_vdaf_verify_key(verify_key_seed: bytes, task_id: bytes, verify_key_size: int) -> bytes:
    """DAP-18 Section 8.6.2: ``HKDF-Expand(HKDF-Extract("verify_key", seed), task_id,
    size)`` with SHA-256 (the draft names HKDF without a hash function; SHA-256 is our
    choice)."""
    hkdf = HKDF(
        algorithm=hashes.SHA256(), length=verify_key_size, salt=b"verify_key", info=bytes(task_id)
    )
    return hkdf.derive(verify_key_seed)
