"""In-band task provisioning for dap-19 tasks: draft-ietf-ppm-dap-taskprov (editors' copy
of 2026-07-07, written against draft-ietf-ppm-dap-19 and draft-irtf-cfrg-vdaf-20).

What the draft defines, and nothing of how an Aggregator stores or serves it (that is
``dap.server.taskprov``):

* the ``DAP-Taskprov`` header (Section 3.2, "DAP-Taskprov Structured Header"): an RFC 9651
  Item whose value is a Byte Sequence holding the encoded ``TaskConfiguration``
  (:func:`header_value`, :func:`parse_header`);
* the task ID, ``SHA-256(SHA-256("dap-taskprov task id") || task_config)`` (Section 3.3,
  :func:`derive_task_id`);
* the VDAF verification key, HKDF-SHA256 with salt ``SHA-256("dap-taskprov")``, IKM the
  peers' 32-byte ``verify_key_init``, info the task ID (Section 3.4,
  :func:`derive_verify_key`);
* the opt-out rules every participant MUST apply (Section 3.5, "Opting into a Task"): an
  ended task, a batch mode or VDAF we do not implement; and DAP-19 Section 4.2.2's rule
  that a participant does not take part in a task with an unrecognized task extension
  (:func:`opt_in`, which raises :class:`OptOut`; the server answers ``invalidTask``).

The object :data:`TASKPROV` gathers these for ``Profile.taskprov``: code outside
``dap/profiles`` reaches them as ``get_profile("dap-19").taskprov``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ppm_reference.dap.codec import (
    U8,
    U16,
    U32,
    U64,
    DecodeError,
    Opaque,
    Struct,
    StructCodec,
    Vector,
    wire,
)
from ppm_reference.dap.common import URL, BatchMode
from ppm_reference.dap.profiles.dap18.messages import TaskExtensionType
from ppm_reference.dap.task import TaskError
from ppm_reference.vdaf import registry

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

#: The header's name (Section 3.2; registered in Section 6.2, IANA Considerations).
HEADER = "DAP-Taskprov"
#: Section 3.3: the label hashed into the task ID.
TASK_ID_LABEL = b"dap-taskprov task id"
#: Section 3.4: the label whose hash is the HKDF salt.
VERIFY_KEY_LABEL = b"dap-taskprov"
#: Section 3.4: "The length of this secret MUST be 32 bytes."
VERIFY_KEY_INIT_SIZE = 32
#: Section 2: the error type an Aggregator answers when it opts out.
INVALID_TASK = "invalidTask"


class OptOut(Exception):
    """A participant opts out of an advertised task (Section 3.5); the message says
    why. An Aggregator answers it with the ``invalidTask`` problem type (Section 2)."""


# ---------------------------------------------------------------------------------------
# Section 3.2: the DAP-Taskprov header, an RFC 9651 Item with a Byte Sequence value
# ---------------------------------------------------------------------------------------


def header_value(config: bytes) -> str:
    """The header value advertising an encoded ``TaskConfiguration``: an RFC 9651 Byte
    Sequence, ``:`` base64 (RFC 4648 Section 4, padded) ``:`` (RFC 9651 Section 4.1.8)."""
    return ":" + base64.b64encode(bytes(config)).decode("ascii") + ":"


# RFC 9651 Section 3.1.2 (parameters) and 3.3 (bare items), for skipping parameters.
_KEY = r"[a-z*][a-z0-9_\-.*]*"
_BARE_ITEM = (r'(?:-?[0-9]{1,15}(?:\.[0-9]{1,3})?'       # integer or decimal
              r'|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"'  # string
              r"|[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*"   # token
              r"|:[A-Za-z0-9+/=]*:"                       # byte sequence
              r"|\?[01]"                                  # boolean
              r"|@-?[0-9]{1,15})")                        # date
_PARAMETERS = re.compile(rf"(?:;[ ]*{_KEY}(?:={_BARE_ITEM})?)*")
_BYTE_SEQUENCE = re.compile(r":([A-Za-z0-9+/=]*):")


def parse_header(values: Sequence[str]) -> bytes | None:
    """The bytes a ``DAP-Taskprov`` field carries, or None when the field must be ignored
    (Section 3.2: "Values of other types MUST be ignored"; parameters are ignored).

    RFC 9651 Section 4.2: several field lines are combined with commas, which is no
    longer an Item, so a repeated header is ignored; leading and trailing spaces are
    dropped; a value that does not parse is ignored as a whole. Base64 without its ``=``
    padding is accepted (RFC 9651 Section 4.2.7: parsers SHOULD NOT fail on it)."""
    if len(values) != 1:
        return None
    text = values[0].strip(" \t")
    match = _BYTE_SEQUENCE.match(text)
    if match is None or not _PARAMETERS.fullmatch(text, match.end()):
        return None
    content = match.group(1)
    stripped = content.rstrip("=")
    if "=" in stripped or len(stripped) % 4 == 1 or len(content) - len(stripped) > 2:
        return None
    try:
        return base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# Sections 3.3 and 3.4: the task ID and the VDAF verification key
# ---------------------------------------------------------------------------------------


def derive_task_id(config: bytes) -> bytes:
    """``task_id = SHA-256(SHA-256("dap-taskprov task id") || task_config)`` (Section 3.3),
    with ``task_config`` the encoded ``TaskConfiguration`` exactly as the header carries
    it."""
    return hashlib.sha256(hashlib.sha256(TASK_ID_LABEL).digest() + bytes(config)).digest()


def derive_verify_key(verify_key_init: bytes, task_id: bytes, length: int) -> bytes:
    """``HKDF-Expand(HKDF-Extract(SHA-256("dap-taskprov"), verify_key_init), task_id,
    VERIFY_KEY_SIZE)`` with HKDF-SHA256 (Section 3.4; RFC 5869 Section 2)."""
    if len(verify_key_init) != VERIFY_KEY_INIT_SIZE:
        raise ValueError(f"verify_key_init must be {VERIFY_KEY_INIT_SIZE} bytes, got "
                         f"{len(verify_key_init)}")
    if not 0 < length <= 255 * 32:
        raise ValueError(f"cannot expand HKDF-SHA256 to {length} bytes")
    salt = hashlib.sha256(VERIFY_KEY_LABEL).digest()
    prk = hmac.new(salt, bytes(verify_key_init), hashlib.sha256).digest()  # HKDF-Extract
    out, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):                        # HKDF-Expand
        block = hmac.new(prk, block + bytes(task_id) + bytes([counter]), hashlib.sha256).digest()
        out += block
    return out[:length]


# ---------------------------------------------------------------------------------------
# Section 3.5: opting in
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AnyExtension(Struct):
    extension_type: int = wire(U16)
    extension_data: bytes = wire(Opaque(2))


@dataclass(frozen=True)
class AdvertisedConfiguration(Struct):
    """DAP-19's ``TaskConfiguration`` (Section 4.2) read without judging its contents:
    any batch mode, any extension types in any order. The header must carry "a valid
    TaskConfiguration" or be ignored (Section 3.2), while a configuration that is valid
    but names a batch mode, VDAF or extension we do not implement is opted out of
    (Section 3.5): this structure tells the two apart."""

    task_info: bytes = wire(Opaque(1))
    leader_aggregator_endpoint: bytes = wire(URL)
    helper_aggregator_endpoint: bytes = wire(URL)
    time_precision: int = wire(U64)
    min_batch_size: int = wire(U64)
    batch_mode: int = wire(U8)
    batch_config: bytes = wire(Opaque(2))
    vdaf_type: int = wire(U32)
    vdaf_configuration: bytes = wire(Opaque(2))
    extensions: Sequence[_AnyExtension] = wire(Vector(StructCodec(_AnyExtension), 2))


def read_configuration(config: bytes) -> AdvertisedConfiguration | None:
    """The advertised configuration's fields, or None if the bytes are not a
    ``TaskConfiguration`` at all (then the header is ignored, Section 3.2)."""
    try:
        return AdvertisedConfiguration.decode(bytes(config))
    except DecodeError:
        return None


def opt_in(config: bytes, profile: Profile, now: float) -> Any:
    """The task of ``profile`` an advertised ``TaskConfiguration`` describes, if a
    participant can take part in it; raises :class:`OptOut` with the reason otherwise.

    The MUST opt-outs of Section 3.5: "The task has ended" (``task_interval``, DAP-19
    Section 4.2.3: its end is at or before ``now``), "The DAP batch mode or VDAF is not
    implemented"; and DAP-19 Section 4.2.2: "participants MUST NOT participate in a task
    with an unrecognized extension" (a repeated extension is an error since
    taskprov-03). A configuration our strict decoder refuses for another reason (an
    unsorted extension list, a non-empty ``batch_config``, invalid VDAF parameters) is
    opted out of as well: we cannot configure it. The MAY opt-outs (privacy parameters,
    lifetime, an existing task with another configuration) are the caller's policy."""
    raw = read_configuration(config)
    if raw is None:
        raise OptOut("the advertised value is not a TaskConfiguration")
    try:
        mode = BatchMode(raw.batch_mode)
    except ValueError:
        raise OptOut(f"batch mode {raw.batch_mode} is not implemented") from None
    types = [e.extension_type for e in raw.extensions]
    known = {int(t) for t in TaskExtensionType}
    unknown = sorted({t for t in types if t not in known})
    if unknown:
        raise OptOut(f"unrecognized task extension type(s) {unknown} (DAP Section 4.2.2)")
    if len(set(types)) != len(types):
        raise OptOut("a task extension is repeated")
    names = {code: name for name, code in profile.vdaf_types.items()}
    if raw.vdaf_type not in names:
        raise OptOut(f"VDAF type 0x{raw.vdaf_type:08x} is not implemented")
    if mode == BatchMode.LEADER_SELECTED and registry.takes_agg_param(names[raw.vdaf_type]):
        # A leader-selected query cannot name a batch again, so a VDAF with an aggregation
        # parameter (Poplar1) runs in time-interval tasks only (dap.core.agg_params).
        raise OptOut(f"{names[raw.vdaf_type]} is not implemented in leader-selected tasks")
    try:
        decoded = profile.messages.TaskConfiguration.decode(bytes(config))
        task = profile.task_cls.from_configuration(derive_task_id(config), decoded, profile)
        task.vdaf()
    except (DecodeError, TaskError, ValueError) as exc:
        raise OptOut(f"cannot configure the task ({names[raw.vdaf_type]}, batch mode "
                     f"{mode.name.lower()}): {exc}") from None
    interval = task.task_interval
    if interval is not None:
        end = (int(interval.start) + int(interval.duration)) * int(task.time_precision)
        if end <= now:
            raise OptOut(f"the task ended at {end} (task_interval), it is now {int(now)}")
    return task


@dataclass(frozen=True)
class Taskprov:
    """What ``Profile.taskprov`` offers (see the module docstring)."""

    #: The exception :meth:`opt_in` raises.
    error: ClassVar[type[Exception]] = OptOut
    header: str = HEADER
    invalid_task: str = INVALID_TASK
    verify_key_init_size: int = VERIFY_KEY_INIT_SIZE

    @staticmethod
    def header_value(config: bytes) -> str:
        return header_value(config)

    @staticmethod
    def parse_header(values: Sequence[str]) -> bytes | None:
        return parse_header(values)

    @staticmethod
    def read_configuration(config: bytes) -> AdvertisedConfiguration | None:
        return read_configuration(config)

    @staticmethod
    def derive_task_id(config: bytes) -> bytes:
        return derive_task_id(config)

    @staticmethod
    def derive_verify_key(verify_key_init: bytes, task_id: bytes, length: int) -> bytes:
        return derive_verify_key(verify_key_init, task_id, length)

    @staticmethod
    def opt_in(config: bytes, profile: Profile, now: float) -> Any:
        return opt_in(config, profile, now)

    def advertises(self, task: Any) -> bool:
        """Whether a task is a taskprov task: its ID is the one derived from its
        configuration (a randomly drawn ID never is), so Aggregators, Clients and
        Collectors advertise exactly those tasks without storing a flag."""
        return bool(bytes(task.task_id) == derive_task_id(task.config_bytes()))


TASKPROV = Taskprov()

__all__ = ["HEADER", "INVALID_TASK", "TASKPROV", "AdvertisedConfiguration", "OptOut",
           "Taskprov", "derive_task_id", "derive_verify_key", "header_value", "opt_in",
           "parse_header", "read_configuration"]
