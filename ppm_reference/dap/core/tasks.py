"""An Aggregator's tasks and HPKE keys, as the protocol core uses them."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ppm_reference.dap.codec import DecodeError
from ppm_reference.dap.common import BatchMode, HpkeConfig, HpkeConfigList, Role
from ppm_reference.dap.core.errors import DapProblem
from ppm_reference.dap.core.rand import Rng
from ppm_reference.dap.core.store import HpkeKeyRecord, HpkeKeyState, TaskRecord, Transaction
from ppm_reference.dap.core.wire import Wire
from ppm_reference.dap.hpke import HpkeKeypair, generate_keypair
from ppm_reference.dap.task import DapTask, TaskError

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

#: How the core finds a stored task's profile by name (``dap.profiles.get_profile``): the
#: core takes it as a parameter, so that it imports no profile (nor the registry).
ProfileLookup = Callable[[str], "Profile"]


@dataclass(frozen=True)
class TaskOptions:
    """Per-task options that are not part of the TaskConfiguration.

    `max_batch_size`: leader-selected batch mode, the size the Leader fills a batch to
    (default: min_batch_size). The DP policy is not an option: it is part of the
    TaskConfiguration (see `dap.dp`).

    `verify_keys`: VDAF verification keys besides the record's (which has key ID 0), by
    key ID, hex-encoded: several keys for a rotation (DAP-18 Section 4.5.2.1: the Leader
    names its key in `verification_key_id`). The Leader uses the highest ID not in
    `helper_unknown_key_ids`, the IDs a DAP-19 Helper answered with
    `unknown_verification_key_id` (the Leader records them and retries the reports under
    another key, DAP-19 #784)."""

    max_batch_size: int | None = None
    verify_keys: tuple[tuple[int, str], ...] = ()
    helper_unknown_key_ids: tuple[int, ...] = ()
    # The rate guard (paper 000 Section 4.8; `dap.core.buckets.rate_exceeded`): reports
    # per second this Aggregator expects; a batch arriving faster than twice this is held.
    expected_report_rate: float | None = None
    # The header that carries the Leader's token to the Helper when it is not the
    # profile's own: "DAP-Auth-Token" for a Helper that accepts only that one (Janus's
    # interop aggregator authenticates DAP-18 peers with it; see interop/__init__.py).
    auth_header: str | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {}
        if self.auth_header is not None:
            data["auth_header"] = self.auth_header
        if self.max_batch_size is not None:
            data["max_batch_size"] = self.max_batch_size
        if self.expected_report_rate is not None:
            data["expected_report_rate"] = self.expected_report_rate
        if self.verify_keys:
            data["verify_keys"] = {str(k): v for k, v in self.verify_keys}
        if self.helper_unknown_key_ids:
            data["helper_unknown_key_ids"] = sorted(self.helper_unknown_key_ids)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TaskOptions:
        """The options of their JSON object, checked: types and ranges (a ValueError
        naming the option otherwise). Unknown options are refused."""
        try:
            data = json.loads(text or "{}")
        except ValueError:
            raise ValueError("task options are not JSON") from None
        if not isinstance(data, dict):
            raise ValueError("task options must be a JSON object")
        unknown = sorted(set(data) - _OPTION_NAMES)
        if unknown:
            raise ValueError(f"unknown task options {unknown}; known: {sorted(_OPTION_NAMES)}")
        max_batch_size = data.get("max_batch_size")
        if max_batch_size is not None:
            max_batch_size = _int_option("max_batch_size", max_batch_size, 1, MAX_BATCH_SIZE)
        keys = data.get("verify_keys") or {}
        if not isinstance(keys, dict):
            raise ValueError("task option verify_keys must be an object {key ID: hex key}")
        verify_keys = []
        for k, v in keys.items():
            key_id = _int_option("verify_keys key ID", _decimal(k), 1, 255)
            if not isinstance(v, str):
                raise ValueError(f"task option verify_keys[{k}] must be a hex string")
            try:
                bytes.fromhex(v)
            except ValueError:
                raise ValueError(f"task option verify_keys[{k}] is not hex") from None
            verify_keys.append((key_id, v))
        unknown_ids = data.get("helper_unknown_key_ids") or []
        if not isinstance(unknown_ids, list):
            raise ValueError("task option helper_unknown_key_ids must be a list")
        rate = data.get("expected_report_rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                                 or not rate > 0):
            raise ValueError("task option expected_report_rate must be a positive number")
        auth_header = data.get("auth_header")
        if auth_header is not None and auth_header not in AUTH_HEADERS:
            raise ValueError(f"task option auth_header must be one of {list(AUTH_HEADERS)}")
        return cls(max_batch_size=max_batch_size, auth_header=auth_header,
                   expected_report_rate=None if rate is None else float(rate),
                   verify_keys=tuple(sorted(verify_keys)),
                   helper_unknown_key_ids=tuple(sorted(
                       _int_option("helper_unknown_key_ids", k, 0, 255) for k in unknown_ids)))


_OPTION_NAMES = {"max_batch_size", "expected_report_rate", "verify_keys",
                 "helper_unknown_key_ids", "auth_header"}
#: The headers a token can travel in: ``Authorization: Bearer <token>`` (DAP-18 Section
#: 3.5) or ``DAP-Auth-Token: <token>`` (DAP-09, the interop test design, Janus).
AUTH_HEADERS = ("Authorization", "DAP-Auth-Token")


def auth_header_for(name: str, token: str) -> tuple[str, str]:
    """``(header, value)`` carrying ``token`` in the header ``name`` (of AUTH_HEADERS)."""
    return (name, f"Bearer {token}") if name == "Authorization" else (name, token)


def _decimal(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.isdecimal() else value


def _int_option(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"task option {name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"task option {name} must be in [{low}, {high}], got {value}")
    return value


# -- provisioning limits ------------------------------------------------------------------

#: The smallest min_batch_size an Aggregator takes part in by default (DAP-18 Section
#: 8.6.3 "Batch Parameters": implementations SHOULD opt out of tasks whose minimum batch
#: size is too small). 1 would release a single Client's measurement to the Collector,
#: with nothing aggregated; any larger value is the application's choice (and its DP
#: policy's). A server's `min_batch_size_floor` raises it, or sets it to 1 for tests and
#: development only.
MIN_BATCH_SIZE_FLOOR = 2

#: The largest batch size a task may ask for (min_batch_size / max_batch_size): a uint32,
#: as DAP-18's TaskConfiguration encodes min_batch_size.
MAX_BATCH_SIZE = 2**32 - 1

#: The largest VDAF an Aggregator runs, in field elements of an encoded measurement, of
#: an output share (an aggregate share has as many) and of a proof: 2^16. With Field128
#: that is 1 MiB per report share or aggregate share; a Prio3Histogram of length 2^30
#: would need 16 GiB for its aggregate share alone (a MemoryError on every pass).
MAX_VDAF_ELEMENTS = 2**16


def vdaf_elements(vdaf: Any) -> int:
    """The size of a VDAF that bounds an Aggregator's memory and storage: the largest of
    its FLP's measurement, output and proof lengths (0 for a VDAF without an FLP; a
    VDAF of another kind states its own bound here)."""
    flp = getattr(vdaf, "flp", None)
    if flp is None:
        return 0
    return max(int(getattr(flp, name, 0)) for name in ("MEAS_LEN", "OUTPUT_LEN",
                                                        "PROOF_LEN"))


def check_task_limits(task: AggregatorTask, min_batch_size_floor: int = MIN_BATCH_SIZE_FLOOR
                      ) -> None:
    """The checks an Aggregator makes before taking part in a task (at provisioning:
    the admin API, `ppm task create`, the interop API), beyond what the task's profile
    checks when it decodes the task: batch sizes and the VDAF's size. Raises ValueError
    with a one-line reason."""
    t = task.task
    if t.min_batch_size < min_batch_size_floor:
        raise ValueError(f"min_batch_size {t.min_batch_size} is below this Aggregator's "
                         f"floor of {min_batch_size_floor} (a batch of one report releases "
                         "it to the Collector)")
    if t.min_batch_size > MAX_BATCH_SIZE:
        raise ValueError(f"min_batch_size {t.min_batch_size} is above {MAX_BATCH_SIZE}")
    for name, value in (("max_batch_size", task.options.max_batch_size),
                        ("max_batch_size", getattr(t, "max_batch_size", None))):
        if value is not None and value < t.min_batch_size:
            raise ValueError(f"{name} {value} is below min_batch_size {t.min_batch_size}")
    if task.options.max_batch_size is not None and task.batch_mode != BatchMode.LEADER_SELECTED:
        raise ValueError("task option max_batch_size applies to the leader-selected batch "
                         "mode only")
    check_vdaf_size(task)
    size = task.vdaf.VERIFY_KEY_SIZE
    for key_id, key in task.verify_keys.items():
        if len(key) != size:
            raise ValueError(f"verification key {key_id} is {len(key)} bytes, the VDAF needs "
                             f"{size}")
    _ = task.dp_policy  # an Aggregator refuses a policy it cannot apply (ValueError)


def check_vdaf_size(task: AggregatorTask) -> None:
    """Refuse a task whose VDAF is larger than `MAX_VDAF_ELEMENTS` (ValueError)."""
    elements = vdaf_elements(task.vdaf)
    if elements > MAX_VDAF_ELEMENTS:
        raise ValueError(f"the VDAF has {elements} field elements per measurement, output "
                         f"or proof; this Aggregator runs at most {MAX_VDAF_ELEMENTS}")


def validate_task(record: TaskRecord, profiles: ProfileLookup,
                  min_batch_size_floor: int = MIN_BATCH_SIZE_FLOOR) -> AggregatorTask:
    """The task of a record an Aggregator is asked to take part in, fully checked
    (`AggregatorTask.from_record` and `check_task_limits`); ValueError otherwise."""
    TaskOptions.from_json(record.options)  # its own message, without the stored task's
    task = AggregatorTask.from_record(record, profiles)
    check_task_limits(task, min_batch_size_floor)
    return task


@dataclass
class AggregatorTask:
    """A task as one Aggregator holds it: the agreed configuration and its secrets."""

    record: TaskRecord
    task: DapTask                   # the task of its profile (dap.task.DapTask)
    role: Role
    options: TaskOptions
    collector_hpke_config: HpkeConfig
    verify_keys: dict[int, bytes] = field(default_factory=dict)
    # Key IDs the Helper said it does not know (Leader; see TaskOptions).
    helper_unknown_key_ids: set[int] = field(default_factory=set)

    def leader_key_id(self) -> int | None:
        """The verification key ID of the Leader's next aggregation job: the highest one
        the Helper has not refused, or None if it refused every one."""
        usable = [k for k in self.verify_keys if k not in self.helper_unknown_key_ids]
        return max(usable) if usable else None

    def record_helper_unknown_key(self, tx: Transaction, key_id: int) -> None:
        """Remember, in the datastore, that the Helper does not know ``key_id``."""
        self.helper_unknown_key_ids.add(key_id)
        stored = tx.get_task(self.task_id)
        if stored is None:
            return
        opts = TaskOptions.from_json(stored.options)
        opts = dataclasses.replace(opts, helper_unknown_key_ids=tuple(sorted(
            set(opts.helper_unknown_key_ids) | {key_id})))
        tx.put_task(dataclasses.replace(stored, options=opts.to_json()))

    @classmethod
    def from_record(cls, record: TaskRecord, profiles: ProfileLookup) -> AggregatorTask:
        try:
            profile = profiles(record.profile)
            task = profile.task_from_config_bytes(record.task_id, record.config)
            collector = HpkeConfig.decode(record.collector_hpke_config)
        except (DecodeError, TaskError, ValueError) as exc:
            raise ValueError(f"stored task {record.task_id.hex()} is invalid: {exc}") from exc
        role = Role.LEADER if record.role == "leader" else Role.HELPER
        try:
            options = TaskOptions.from_json(record.options)
        except ValueError as exc:
            raise ValueError(f"stored task {record.task_id.hex()}: {exc}") from None
        verify_keys = {0: record.vdaf_verify_key}
        for key_id, key in options.verify_keys:
            if not 0 <= key_id <= 255:  # uint8 verification_key_id
                raise ValueError(f"stored task {record.task_id.hex()}: verification key ID "
                                 f"{key_id} is not a uint8")
            verify_keys[key_id] = bytes.fromhex(key)
        if not isinstance(task.min_batch_size, int) or task.min_batch_size < 1:
            raise ValueError(f"stored task {record.task_id.hex()}: min_batch_size must be a "
                             "positive integer")
        return cls(record=record, task=task, role=role, options=options,
                   collector_hpke_config=collector, verify_keys=verify_keys,
                   helper_unknown_key_ids=set(options.helper_unknown_key_ids))

    @property
    def task_id(self) -> bytes:
        return bytes(self.task.task_id)

    @property
    def profile(self) -> Profile:
        profile: Profile = self.task.profile
        return profile

    @cached_property
    def vdaf(self) -> Any:
        return self.task.vdaf()

    @property
    def wire(self) -> Wire:
        """The profile's messages, as the protocol core uses them."""
        wire: Wire = self.task.profile.wire
        return wire

    @property
    def batch_mode(self) -> BatchMode:
        mode: BatchMode = self.task.batch_mode
        return mode

    @property
    def max_batch_size(self) -> int:
        """Leader-selected (fixed_size): the size the Leader fills a batch to."""
        return (getattr(self.task, "max_batch_size", None) or self.options.max_batch_size
                or self.task.min_batch_size)

    @property
    def batch_size_limit(self) -> int | None:
        """An upper bound on a batch's size that the Aggregators enforce (DAP-09
        fixed_size ``max_batch_size``, Section 4.6.5.2.2); DAP-18 has none."""
        return getattr(self.task, "max_batch_size", None)

    @cached_property
    def dp_policy(self) -> Any:
        """The DP policy bound into the task configuration, or None."""
        if self.task.dp_policy is None:
            return None
        from ppm_reference.dap.dp import decode_spec, policy_from_spec

        return policy_from_spec(decode_spec(self.task.dp_policy), self.vdaf)

    def now_time(self, now: float) -> int:
        """The current time in the task's units (DAP-18 Section 4.1.1)."""
        return int(now) // int(self.task.time_precision)

    def check_auth_token(self, token: str | None, collector: bool = False) -> bool:
        import hmac

        expected = self.record.collector_auth_token if collector \
            else self.record.aggregator_auth_token
        if not expected or token is None:
            return False
        return hmac.compare_digest(token.encode(), expected.encode())


class TaskCache:
    """Decoded tasks by ID, loaded from the datastore on first use."""

    def __init__(self, profiles: ProfileLookup) -> None:
        self._tasks: dict[bytes, AggregatorTask] = {}
        self._profiles = profiles

    def get(self, tx: Transaction, task_id: bytes, role: Role) -> AggregatorTask:
        key = bytes(task_id)
        task = self._tasks.get(key)
        if task is None:
            record = tx.get_task(key)
            if record is None:
                raise DapProblem("unrecognizedTask", "unknown task", 404, task_id=key)
            try:
                task = AggregatorTask.from_record(record, self._profiles)
                check_vdaf_size(task)   # a task stored before the limit existed
                _ = task.dp_policy  # an Aggregator refuses a task it cannot apply
            except ValueError as exc:
                raise DapProblem("unrecognizedTask", f"task refused: {exc}", 404,
                                 task_id=key) from None
            self._tasks[key] = task
        if task.role != role:
            raise DapProblem("unrecognizedTask", f"this aggregator is not the task's {role.name}",
                             404, task_id=key)
        return task

    def peek(self, task_id: bytes) -> AggregatorTask | None:
        """A loaded task, without touching the datastore."""
        return self._tasks.get(bytes(task_id))

    def invalidate(self, task_id: bytes | None = None) -> None:
        if task_id is None:
            self._tasks.clear()
        else:
            self._tasks.pop(bytes(task_id), None)


# -- HPKE keys: add (pending), make active, retire (expired), delete -----------------------

HPKE_STATES = tuple(state.value for state in HpkeKeyState)  # for messages and validation


class Keyring:
    """The Aggregator's HPKE keys. `pending` keys decrypt but are not advertised (so that
    every replica has them before clients do); `active` keys are advertised, newest first;
    `expired` keys are no longer advertised but still decrypt reports from clients with a
    cached configuration, until they are deleted."""

    def __init__(self, records: list[HpkeKeyRecord]) -> None:
        self.records = records
        self.keypairs = {r.config_id: HpkeKeypair(HpkeConfig.decode(r.config), r.private_key)
                         for r in records}

    @classmethod
    def load(cls, tx: Transaction) -> Keyring:
        return cls(tx.list_hpke_keys())

    def config_list(self) -> HpkeConfigList:
        active = [r for r in self.records if r.state == HpkeKeyState.ACTIVE]
        active.sort(key=lambda r: -r.created_at)
        if not active:
            raise DapProblem("serviceUnavailable", "no active HPKE configuration", 503,
                             dap_type=False)
        return HpkeConfigList(tuple(HpkeConfig.decode(r.config) for r in active))

    def get(self, config_id: int) -> HpkeKeypair | None:
        return self.keypairs.get(config_id)


def add_hpke_key(tx: Transaction, state: str = HpkeKeyState.ACTIVE,
                 config_id: int | None = None, *,
                 rng: Rng, **suite: Any) -> HpkeKeyRecord:
    """Generate a key pair and store it (rotation step 1, or a first key). A config ID
    not given is chosen among the free ones, and the key pair derived, with `rng`."""
    if state not in HPKE_STATES:
        raise ValueError(f"state must be one of {HPKE_STATES}")
    used = {r.config_id for r in tx.list_hpke_keys()}
    if config_id is None:
        free = [i for i in range(256) if i not in used]
        if not free:
            raise ValueError("all 256 HPKE config ids are in use")
        config_id = rng.choice(free)
    keypair = generate_keypair(config_id, random_bytes=rng.token_bytes, **suite)
    record = HpkeKeyRecord(config_id, keypair.config.encode(), keypair.private_key,
                           HpkeKeyState(state), time.time())
    tx.put_hpke_key(record)
    return record
