"""The CFRG test-vector JSON schema: read, check, generate (draft-irtf-cfrg-vdaf-20, Appendix C).

A vector file describes one VDAF instance (its parameters are top-level keys), the
deterministic inputs of each report (`measurement`, `nonce`, `rand`, plus `verify_key`
and `ctx`), every message the VDAF produces, and the `operations` to replay.

`check_file` replays the operations in order, the way a real deployment would: an
operation that consumes a message decodes it from the file's bytes (so that hand-mutated
negative vectors exercise the decoders and the verification), and every value an
operation produces is encoded and compared with the bytes recorded in the file. An
operation marked `success: false` must be rejected (raise `ValueError`); every other
operation must succeed. In a positive vector (no `success: false`) every recorded output
must also be reproduced by some operation, so that a vector cannot pass by omission.
The XOF vectors of the same directory (`XofTurboShake128.json`, ...) are checked against
the version's XOFs (`VdafProfile.xofs`), and the IDPF vector (`IdpfBBCGGI21_0.json`,
VDAF-08's `IdpfPoplar_0.json`) by `check_idpf_document`: `gen` must give the recorded
keys and public share, and the keys must evaluate to beta on alpha's path.

`generate_vector` runs the same flow forward from a `VectorSpec` and returns the JSON
document. `STANDARD_SPECS` is the table of the published Prio3 and Poplar1 vectors (a
Poplar1 spec carries its aggregation parameter); `generate_idpf_vector` and
`generate_poplar1_bad_corr_inner` write the IDPF vector and Poplar1's negative one: with
the deterministic randomness convention below our output is byte-identical to them.

Deterministic randomness convention of the published vectors (read off the files):
`verify_key`, every report's `nonce` and every report's `rand` are the byte strings
0x00, 0x01, 0x02, ... (mod 256) of the VDAF's VERIFY_KEY_SIZE, NONCE_SIZE and RAND_SIZE;
`ctx` is b"some application". JSON formatting: `json.dumps(doc, indent=4,
sort_keys=True)` followed by one newline.

Which VDAF a file describes is given by its file name: the instance name is the part
before the first underscore (`Prio3Histogram_2.json`, `Prio3Count_bad_meas_share.json`),
unless the caller names it. The classes per VDAF wire version are looked up in
`VERSIONS`, one `VersionTable` per version: its VDAF profile (`vdaf.profiles`), its
instances, and its file schema (`VectorSchema`).

Version 8 (draft-irtf-cfrg-vdaf-08). The published VDAF-08 files use an older schema,
described by `SCHEMA_V08`; the reader and the generator take every difference from it:

- the reports are under `prep` (not `reports`), the verifier shares and messages under
  `prep_shares` and `prep_messages` (not `verifier_shares`, `verifier_messages`);
- there is no `ctx` (VDAF-08 has no application context: the empty one is used);
- there are no `operations`: a file implies the standard flow (per report: shard,
  verify_init of each Aggregator, verifier_shares_to_message and verify_next for each
  round; then aggregate for each Aggregator and unshard), which `check` replays;
- Prio3's aggregation parameter is JSON `null` (not `""`), Poplar1's the JSON
  `[level, [prefix, ...]]` with integer prefixes (not hex), and its measurement an integer;
- each output share is a list with one hex string per field element (not one string).

The measurements are the same in both; the parameters are the version's (VDAF-08's Sum
takes `bits`, ...). The VDAF-08 standard set also contains the two XOF vector files.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from ppm_reference.vdaf.profiles import VDAF_08, VDAF_18, VdafProfile

DEFAULT_VERSION = 18
DEFAULT_CTX = b"some application"

# Exceptions by which a VDAF operation rejects its input. A `success: false` operation
# must raise one of these; any other exception is reported as a crash, not a rejection.
REJECTIONS: tuple[type[Exception], ...] = (ValueError,)

# Instances that appear in the published directories but that this tool does not replay
# in some version: VDAF-08's Poplar1 and its IDPF (IdpfPoplar). A name that the version's
# table knows (`instances`, `VersionTable.idpf`) is replayed whatever this says.
OUT_OF_SCOPE: dict[str, str] = {
    "Poplar1": "Poplar1/IDPF out of scope",
    "IdpfBBCGGI21": "Poplar1/IDPF out of scope",
    "IdpfPoplar": "Poplar1/IDPF out of scope",  # VDAF-08's name of the IDPF
}

# The XOF vectors share the directory but not the VDAF schema; they are checked separately.
XOF_NAMES = ("XofTurboShake128", "XofFixedKeyAes128")


class VectorError(Exception):
    """A vector file (or a spec for one) cannot be interpreted."""


class VdafLike(Protocol):
    """The parts of the VDAF interface (draft-irtf-cfrg-vdaf-20, section 5) used here."""

    @property
    def ID(self) -> int: ...  # noqa: N802
    @property
    def SHARES(self) -> int: ...  # noqa: N802
    @property
    def ROUNDS(self) -> int: ...  # noqa: N802
    @property
    def NONCE_SIZE(self) -> int: ...  # noqa: N802
    @property
    def RAND_SIZE(self) -> int: ...  # noqa: N802
    @property
    def VERIFY_KEY_SIZE(self) -> int: ...  # noqa: N802

    def shard(self, ctx: bytes, measurement: Any, nonce: bytes, rand: bytes) -> Any: ...
    def verify_init(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        agg_param: Any,
        nonce: bytes,
        public_share: Any,
        input_share: Any,
    ) -> Any: ...
    def verifier_shares_to_message(
        self, ctx: bytes, agg_param: Any, verifier_shares: Any
    ) -> Any: ...
    def verify_next(self, ctx: bytes, verify_state: Any, verifier_message: Any) -> Any: ...
    def agg_init(self, agg_param: Any) -> Any: ...
    def agg_update(self, agg_param: Any, agg_share: Any, out_share: Any) -> Any: ...
    def merge(self, agg_param: Any, agg_shares: Any) -> Any: ...
    def unshard(self, agg_param: Any, agg_shares: Any, num_measurements: int) -> Any: ...

    def encode_public_share(self, public_share: Any) -> bytes: ...
    def decode_public_share(self, data: bytes) -> Any: ...
    def encode_input_share(self, input_share: Any) -> bytes: ...
    def decode_input_share(self, agg_id: int, data: bytes) -> Any: ...
    def encode_verifier_share(self, verifier_share: Any) -> bytes: ...
    def decode_verifier_share(self, verify_state: Any, data: bytes) -> Any: ...
    def encode_verifier_message(self, verifier_message: Any) -> bytes: ...
    def decode_verifier_message(self, verify_state: Any, data: bytes) -> Any: ...
    def encode_agg_share(self, agg_share: Any) -> bytes: ...
    def decode_agg_share(self, agg_param: Any, data: bytes) -> Any: ...
    def encode_agg_param(self, agg_param: Any) -> bytes: ...
    def decode_agg_param(self, data: bytes) -> Any: ...
    def encode_out_share(self, out_share: Any) -> bytes: ...


# ---------------------------------------------------------------------------------------
# The instances a version knows, as data.


@dataclass(frozen=True)
class Instance:
    """How a test-vector instance name becomes a VDAF object.

    `params` are the schema's parameter keys after `shares`, in constructor order.
    `hidden` are constructor parameters that the published schema does not record,
    with the values the published files use; a file may still carry them as keys
    (our generator writes them when they differ from these defaults).
    `measurement` is the JSON shape of one measurement: "int", "int_list" or "bool_list".
    `constructor` is the order of the class's constructor arguments, when it is not
    `shares`, `params`, then `hidden`.
    """

    name: str
    module: str
    cls: str
    params: tuple[str, ...]
    measurement: str
    hidden: tuple[tuple[str, Any], ...] = ()
    constructor: tuple[str, ...] | None = None

    def parameter_keys(self) -> tuple[str, ...]:
        return ("shares", *self.params)

    def constructor_keys(self) -> tuple[str, ...]:
        """The keys in the order of the class's constructor arguments."""
        if self.constructor is not None:
            return self.constructor
        return (*self.parameter_keys(), *(key for key, _ in self.hidden))

    def build(self, values: Mapping[str, Any]) -> VdafLike:
        """Instantiate the VDAF from parameter values (schema keys, plus hidden ones)."""
        resolved: dict[str, Any] = {}
        for key in self.parameter_keys():
            if key not in values:
                raise VectorError(f"missing parameter {key!r} for {self.name}")
            resolved[key] = values[key]
        for key, default in self.hidden:
            resolved[key] = values.get(key, default)
        for key, value in resolved.items():
            if key == "field":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise VectorError(f"parameter {key!r} of {self.name} must be an integer")
        args = [
            _field_class(resolved[key]) if key == "field" else resolved[key]
            for key in self.constructor_keys()
        ]
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise VectorError(f"cannot import {self.module} for {self.name}: {exc}") from exc
        ctor = getattr(module, self.cls, None)
        if ctor is None:
            raise VectorError(f"{self.module} has no class {self.cls} (needed for {self.name})")
        try:
            return cast(VdafLike, ctor(*args))
        except Exception as exc:  # the constructor validates the parameters
            shown = ", ".join(f"{key}={value!r}" for key, value in resolved.items())
            raise VectorError(f"cannot instantiate {self.name}({shown}): {exc}") from exc

    def measurement_from_json(self, value: Any) -> Any:
        """Check the JSON shape of a measurement and convert it for `shard`."""
        if self.measurement == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise VectorError(f"a {self.name} measurement is an integer, got {value!r}")
            return value
        if not isinstance(value, list):
            raise VectorError(f"a {self.name} measurement is a list, got {value!r}")
        if self.measurement == "bool_list":
            if not all(isinstance(v, bool) for v in value):
                raise VectorError(f"a {self.name} measurement is a list of booleans")
            return list(value)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise VectorError(f"a {self.name} measurement is a list of integers")
        return list(value)


def _field_class(value: Any) -> Any:
    """A field class from its name ("Field64", "Field128", ...)."""
    if not isinstance(value, str):
        raise VectorError(f"parameter 'field' must be a field name, got {value!r}")
    module = importlib.import_module("ppm_reference.vdaf.field")
    cls = getattr(module, value, None)
    if cls is None or not value.startswith("Field"):
        raise VectorError(f"unknown field {value!r}")
    return cls


def _prio3_v08() -> dict[str, Instance]:
    m = "ppm_reference.vdaf.prio3"
    table = [
        Instance("Prio3Count", m, "Prio3CountV08", (), "int"),
        Instance("Prio3Sum", m, "Prio3SumV08", ("bits",), "int"),
        Instance(
            "Prio3SumVec", m, "Prio3SumVecV08", ("length", "bits", "chunk_length"), "int_list",
        ),
        Instance("Prio3Histogram", m, "Prio3HistogramV08", ("length", "chunk_length"), "int"),
        Instance(
            "Prio3MultiHotHistogram", m, "Prio3MultiHotHistogramV08",
            ("length", "max_count", "chunk_length"), "int_list",
        ),
        # As in version 18 the field and the number of proofs are not recorded; the sizes
        # show Field64 (8-byte output-share elements) and 4 proofs (the verifier share is
        # 4 verifiers of 1 + 18 + 1 elements).
        Instance(
            "Prio3SumVecWithMultiproof", m, "Prio3SumVecWithMultiproofV08",
            ("length", "bits", "chunk_length"), "int_list",
            hidden=(("field", "Field64"), ("num_proofs", 4)),
            constructor=("shares", "field", "num_proofs", "length", "bits", "chunk_length"),
        ),
        # draft-08 Section 8: the measurement is an integer of `bits` bits.
        Instance("Poplar1", "ppm_reference.vdaf.poplar1", "Poplar1V08", ("bits",), "int",
                 constructor=("bits",)),
    ]
    return {inst.name: inst for inst in table}


def _prio3_v18() -> dict[str, Instance]:
    m = "ppm_reference.vdaf.prio3"
    table = [
        Instance("Prio3Count", m, "Prio3Count", (), "int"),
        Instance("Prio3Sum", m, "Prio3Sum", ("max_measurement",), "int"),
        Instance(
            "Prio3SumVec", m, "Prio3SumVec", ("length", "max_measurement", "chunk_length"),
            "int_list",
        ),
        Instance("Prio3Histogram", m, "Prio3Histogram", ("length", "chunk_length"), "int"),
        Instance(
            "Prio3MultihotCountVec", m, "Prio3MultihotCountVec",
            ("length", "max_weight", "chunk_length"), "bool_list",
        ),
        # The published files do not record the field and the number of proofs; their
        # sizes show Field64 (8-byte output-share elements) and 3 proofs (the verifier
        # share is 3 verifiers long).
        Instance(
            "Prio3SumVecWithMultiproof", m, "Prio3SumVecWithMultiproof",
            ("length", "max_measurement", "chunk_length"), "int_list",
            hidden=(("field", "Field64"), ("num_proofs", 3)),
            constructor=(
                "shares", "field", "num_proofs", "length", "max_measurement", "chunk_length",
            ),
        ),
        Instance("Prio3HigherDegree", m, "Prio3HigherDegree", (), "int"),
        # draft-ietf-ppm-l1-bound-sum-02 (VDAF-18 wire; its vector is in its own folder).
        Instance(
            "Prio3L1BoundSum", m, "Prio3L1BoundSum", ("length", "max_value", "chunk_length"),
            "int_list",
        ),
        # Section 8.2; the schema's parameter is `bits` (Appendix C), shares is always 2.
        Instance("Poplar1", "ppm_reference.vdaf.poplar1", "Poplar1", ("bits",), "bool_list",
                 constructor=("bits",)),
    ]
    return {inst.name: inst for inst in table}


@dataclass(frozen=True)
class VectorSchema:
    """How a version's vector files spell things (see the module docstring)."""

    reports: str = "reports"
    verifier_shares: str = "verifier_shares"
    verifier_messages: str = "verifier_messages"
    ctx: bool = True            # files record `ctx`
    operations: bool = True     # files list `operations`; otherwise the flow is implied
    null_agg_param: bool = False  # an empty aggregation parameter is JSON null, not ""
    out_share_elements: bool = False  # out shares: one hex string per field element

    def agg_param_to_json(self, encoded: bytes) -> Any:
        return None if self.null_agg_param and not encoded else encoded.hex()

    def agg_param_from_json(self, value: Any) -> bytes:
        if value is None and self.null_agg_param:
            return b""
        return _hex(value, "agg_param")


SCHEMA_V18 = VectorSchema()
SCHEMA_V08 = VectorSchema(
    reports="prep",
    verifier_shares="prep_shares",
    verifier_messages="prep_messages",
    ctx=False,
    operations=False,
    null_agg_param=True,
    out_share_elements=True,
)


@dataclass(frozen=True)
class VersionTable:
    """Everything the tool knows of one VDAF wire version."""

    profile: VdafProfile
    instances: Callable[[], dict[str, Instance]]
    schema: VectorSchema
    xof_vectors: bool = False  # the standard set includes the XOF vector files
    idpf: str | None = None    # the name of the version's IDPF vectors, if replayed
    poplar1_negative: bool = False  # the standard set has Poplar1_bad_corr_inner.json


# VDAF wire version -> its table. Adding a version is one more entry.
VERSIONS: dict[int, VersionTable] = {
    18: VersionTable(VDAF_18, _prio3_v18, SCHEMA_V18, idpf="IdpfBBCGGI21",
                     poplar1_negative=True),
    8: VersionTable(VDAF_08, _prio3_v08, SCHEMA_V08, xof_vectors=True, idpf="IdpfPoplar"),
}


def version_table(version: int = DEFAULT_VERSION) -> VersionTable:
    table = VERSIONS.get(version)
    if table is None:
        known = ", ".join(str(v) for v in sorted(VERSIONS))
        raise VectorError(f"unsupported VDAF version {version} (known: {known})")
    return table


def instances(version: int = DEFAULT_VERSION) -> dict[str, Instance]:
    return version_table(version).instances()


def instance_name_from_path(path: Path) -> str:
    """The instance name encoded in a vector file name: the part before the first `_`."""
    return path.stem.split("_", 1)[0]


def lookup_instance(name: str, version: int = DEFAULT_VERSION) -> Instance:
    table = instances(version)
    inst = table.get(name)
    if inst is None:
        known = ", ".join(sorted(table))
        raise VectorError(
            f"unknown VDAF instance {name!r} for version {version} (known: {known})"
        )
    return inst


# ---------------------------------------------------------------------------------------
# Results.


@dataclass
class OpResult:
    """The outcome of replaying one operation."""

    index: int
    operation: str
    expect_success: bool
    ok: bool
    detail: str = ""
    report_index: int | None = None
    aggregator_id: int | None = None
    round: int | None = None

    def describe(self) -> str:
        parts = [f"op {self.index} {self.operation}"]
        if self.report_index is not None:
            parts.append(f"report {self.report_index}")
        if self.aggregator_id is not None:
            parts.append(f"aggregator {self.aggregator_id}")
        if self.round is not None:
            parts.append(f"round {self.round}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "operation": self.operation,
            "report_index": self.report_index,
            "aggregator_id": self.aggregator_id,
            "round": self.round,
            "expect_success": self.expect_success,
            "ok": self.ok,
            "detail": self.detail,
        }


@dataclass
class FileResult:
    """The outcome of checking one file: status is "pass", "fail" or "skip"."""

    path: str
    instance: str | None
    status: str
    reason: str = ""
    negative: bool = False
    operations: list[OpResult] = field(default_factory=list)

    @property
    def failed_operations(self) -> list[OpResult]:
        return [op for op in self.operations if not op.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "instance": self.instance,
            "status": self.status,
            "reason": self.reason,
            "negative": self.negative,
            "operations": len(self.operations),
            "failed_operations": [op.to_json() for op in self.failed_operations],
        }


# ---------------------------------------------------------------------------------------
# Reading.


def _hex(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise VectorError(f"{where}: expected a hex string, got {type(value).__name__}")
    try:
        return bytes.fromhex(value)
    except ValueError as exc:
        raise VectorError(f"{where}: not a hex string") from exc


def _short(data: bytes, limit: int = 24) -> str:
    text = data.hex()
    if len(text) <= 2 * limit:
        return text or "(empty)"
    return f"{text[:2 * limit]}... ({len(data)} bytes)"


def _jsonable(value: Any) -> Any:
    """A VDAF result as the JSON value it is written as (tuples become lists)."""
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def load_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VectorError(f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise VectorError("not UTF-8 text") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VectorError(f"not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise VectorError("not a JSON object at the top level")
    return doc


def dumps(doc: Mapping[str, Any]) -> str:
    """The exact text of a vector file (formatting of the published vectors)."""
    return json.dumps(doc, indent=4, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------------------
# Checking.


class _OpFailure(Exception):
    """An operation that ran but whose result does not match, or whose input is absent."""


def flow_operations(num_reports: int, shares: int, rounds: int) -> list[dict[str, Any]]:
    """The operations of the standard flow, in the order `generate_vector` runs them:
    per report shard, verify_init of each Aggregator, then per round
    verifier_shares_to_message and verify_next of each Aggregator; then aggregate of each
    Aggregator and unshard. (The operations a VDAF-08 file implies.)"""
    ops: list[dict[str, Any]] = []
    for r in range(num_reports):
        ops.append({"operation": "shard", "report_index": r, "success": True})
        ops += [{"aggregator_id": j, "operation": "verify_init", "report_index": r,
                 "success": True} for j in range(shares)]
        for rnd in range(rounds):
            ops.append({"operation": "verifier_shares_to_message", "report_index": r,
                        "round": rnd, "success": True})
            ops += [{"aggregator_id": j, "operation": "verify_next", "report_index": r,
                     "round": rnd + 1, "success": True} for j in range(shares)]
    ops += [{"aggregator_id": j, "operation": "aggregate", "success": True}
            for j in range(shares)]
    ops.append({"operation": "unshard", "success": True})
    return ops


class _Replay:
    """Replays a VDAF vector's operations against a VDAF object."""

    def __init__(self, vdaf: VdafLike, inst: Instance, doc: Mapping[str, Any],
                 schema: VectorSchema = SCHEMA_V18) -> None:
        self.vdaf = vdaf
        self.inst = inst
        self.doc = doc
        self.schema = schema
        # The file's names for the reports and the verification messages.
        self.rk = schema.reports
        self.vsk = schema.verifier_shares
        self.vmk = schema.verifier_messages
        if schema.ctx or "ctx" in doc:
            self.ctx = _hex(doc.get("ctx"), "ctx")
        else:
            self.ctx = b""
        self.verify_key = _hex(doc.get("verify_key"), "verify_key")
        if "agg_param" not in doc:
            raise VectorError("missing 'agg_param'")
        raw_param = doc["agg_param"]
        try:
            if isinstance(raw_param, list) and hasattr(vdaf, "agg_param_from_json"):
                # VDAF-08's Poplar1 files write the parameter as JSON, not as bytes.
                self.agg_param = vdaf.agg_param_from_json(raw_param)
            else:
                self.agg_param = vdaf.decode_agg_param(schema.agg_param_from_json(raw_param))
        except VectorError:
            raise
        except Exception as exc:
            raise VectorError(f"agg_param: cannot decode: {exc}") from exc
        reports = doc.get(self.rk)
        if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
            raise VectorError(f"'{self.rk}' must be a list of objects")
        self.reports: list[dict[str, Any]] = reports
        shares = doc.get("shares")
        if shares != vdaf.SHARES:
            raise VectorError(f"'shares' is {shares!r} but the VDAF has {vdaf.SHARES}")
        if schema.operations:
            ops = doc.get("operations")
            if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
                raise VectorError("'operations' must be a list of objects")
        else:
            if "operations" in doc:
                raise VectorError("this schema has no 'operations'")
            ops = flow_operations(len(reports), vdaf.SHARES, vdaf.ROUNDS)
        if not ops:
            raise VectorError("'operations' is empty: nothing to replay")
        self.ops: list[dict[str, Any]] = ops
        if len(self.verify_key) != vdaf.VERIFY_KEY_SIZE:
            raise VectorError(
                f"verify_key is {len(self.verify_key)} bytes, "
                f"the VDAF wants {vdaf.VERIFY_KEY_SIZE}"
            )
        # Negative vectors record only what the operations before the failure produce;
        # positive ones record everything, and everything must be compared.
        self.strict = all(op.get("success") is True for op in ops)
        # The recorded outputs that some operation compared (by their `where`).
        self.checked: set[str] = set()
        self.verify_states: dict[tuple[int, int], Any] = {}
        self.out_shares: dict[tuple[int, int], Any] = {}
        self.agg_shares: dict[int, Any] = {}

    # -- helpers ------------------------------------------------------------------------

    def _report(self, index: Any) -> dict[str, Any]:
        if isinstance(index, bool) or not isinstance(index, int):
            raise VectorError(f"report_index must be an integer, got {index!r}")
        if not 0 <= index < len(self.reports):
            raise VectorError(f"report_index {index} out of range ({len(self.reports)} reports)")
        return self.reports[index]

    def _agg_id(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise VectorError(f"aggregator_id must be an integer, got {value!r}")
        if not 0 <= value < self.vdaf.SHARES:
            raise VectorError(f"aggregator_id {value} out of range ({self.vdaf.SHARES} shares)")
        return value

    def _round(self, value: Any) -> int:
        if value is None:
            raise VectorError("a verification operation needs a 'round'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise VectorError(f"round must be an integer, got {value!r}")
        if not 0 <= value <= self.vdaf.ROUNDS:
            raise VectorError(f"round {value} out of range (the VDAF has {self.vdaf.ROUNDS})")
        return value

    def _recorded(self, container: Any, path: Sequence[str | int], where: str) -> bytes | None:
        """The hex value at `path` inside `container`, or None when it is not recorded.

        A key that is absent, an index past the end of a list and a JSON null mean "not
        recorded"; a value of the wrong type makes the file uninterpretable."""
        value = container
        for depth, key in enumerate(path):
            if value is None:
                return None
            if isinstance(key, str):
                if not isinstance(value, dict):
                    raise VectorError(f"{where}: expected an object around {key!r}")
                if key not in value:
                    return None
            else:
                if not isinstance(value, list):
                    inner = "".join(f"[{k}]" for k in path[depth:])
                    raise VectorError(f"{where}: expected a list before {inner}")
                if not 0 <= key < len(value):
                    return None
            value = value[key]
        if value is None:
            return None
        if isinstance(value, list) and self.schema.out_share_elements \
                and path and path[0] == "out_shares":
            # One hex string per field element: their concatenation is the encoding.
            return b"".join(_hex(v, f"{where}[{i}]") for i, v in enumerate(value))
        return _hex(value, where)

    def _need(self, container: Any, path: Sequence[str | int], where: str) -> bytes:
        data = self._recorded(container, path, where)
        if data is None:
            raise _OpFailure(f"{where} is not in the file")
        return data

    def _compare(self, got: bytes, container: Any, path: Sequence[str | int], where: str) -> None:
        expected = self._recorded(container, path, where)
        if expected is None:
            if self.strict:
                raise _OpFailure(f"{where} is not in the file")
            return
        self.checked.add(where)
        if got != expected:
            raise _OpFailure(f"{where} mismatch: expected {_short(expected)}, got {_short(got)}")

    def recorded_outputs(self) -> list[str]:
        """Every output value the file records (the `where` names used by `_compare`)."""
        names: list[str] = []

        def listed(value: Any) -> int:
            return len(value) if isinstance(value, list) else 0

        rk, vsk, vmk = self.rk, self.vsk, self.vmk
        for r, report in enumerate(self.reports):
            if report.get("public_share") is not None:
                names.append(f"{rk}[{r}].public_share")
            names += [f"{rk}[{r}].input_shares[{j}]"
                      for j in range(listed(report.get("input_shares")))]
            shares = report.get(vsk)
            for k in range(listed(shares)):
                assert isinstance(shares, list)
                names += [f"{rk}[{r}].{vsk}[{k}][{j}]" for j in range(listed(shares[k]))]
            names += [f"{rk}[{r}].{vmk}[{k}]" for k in range(listed(report.get(vmk)))]
            names += [f"{rk}[{r}].out_shares[{j}]"
                      for j in range(listed(report.get("out_shares")))]
        names += [f"agg_shares[{j}]" for j in range(listed(self.doc.get("agg_shares")))]
        if self.doc.get("agg_result") is not None:
            names.append("agg_result")
        return names

    def _state(self, r: int, j: int) -> Any:
        state = self.verify_states.get((r, j))
        if state is None:
            raise _OpFailure(f"no verify state for report {r}, aggregator {j} (run verify_init)")
        return state

    # -- operations ---------------------------------------------------------------------

    def run(self) -> list[OpResult]:
        results = []
        for i, op in enumerate(self.ops):
            results.append(self._run_op(i, op))
        if self.strict:
            # A positive vector's every recorded value must be reproduced by some operation.
            unchecked = [w for w in self.recorded_outputs() if w not in self.checked]
            if unchecked:
                shown = ", ".join(unchecked[:5]) + (", ..." if len(unchecked) > 5 else "")
                results.append(OpResult(
                    index=len(self.ops), operation="(coverage)", expect_success=True, ok=False,
                    detail=f"recorded but compared by no operation: {shown}",
                ))
        return results

    def _run_op(self, i: int, op: dict[str, Any]) -> OpResult:
        name = op.get("operation")
        success = op.get("success")
        if not isinstance(name, str):
            raise VectorError(f"operations[{i}]: missing 'operation'")
        if not isinstance(success, bool):
            raise VectorError(f"operations[{i}]: 'success' must be true or false")
        result = OpResult(
            index=i,
            operation=name,
            expect_success=success,
            ok=False,
            report_index=op.get("report_index"),
            aggregator_id=op.get("aggregator_id"),
            round=op.get("round"),
        )
        handler: Callable[[dict[str, Any]], None] | None = {
            "shard": self._shard,
            "verify_init": self._verify_init,
            "verifier_shares_to_message": self._verifier_shares_to_message,
            "verify_next": self._verify_next,
            "aggregate": self._aggregate,
            "unshard": self._unshard,
        }.get(name)
        if handler is None:
            raise VectorError(f"operations[{i}]: unknown operation {name!r}")
        try:
            handler(op)
        except VectorError:
            raise
        except _OpFailure as exc:
            result.detail = str(exc)
            return result
        except REJECTIONS as exc:
            if success:
                result.detail = f"rejected unexpectedly: {type(exc).__name__}: {exc}"
            else:
                result.ok = True
                result.detail = f"rejected as expected: {type(exc).__name__}: {exc}"
            return result
        except Exception as exc:  # a crash is never the expected rejection
            result.detail = f"crashed: {type(exc).__name__}: {exc}"
            return result
        if success:
            result.ok = True
        else:
            result.detail = "succeeded, but the vector says it must fail"
        return result

    def _shard(self, op: dict[str, Any]) -> None:
        r = op.get("report_index")
        report = self._report(r)
        assert isinstance(r, int)
        rk = self.rk
        if report.get("measurement") is None:
            raise VectorError(f"{rk}[{r}]: shard needs a measurement")
        measurement = self.inst.measurement_from_json(report["measurement"])
        nonce = _hex(report.get("nonce"), f"{rk}[{r}].nonce")
        rand = _hex(report.get("rand"), f"{rk}[{r}].rand")
        if len(nonce) != self.vdaf.NONCE_SIZE:
            raise VectorError(f"{rk}[{r}].nonce is {len(nonce)} bytes, "
                              f"the VDAF wants {self.vdaf.NONCE_SIZE}")
        if len(rand) != self.vdaf.RAND_SIZE:
            raise VectorError(f"{rk}[{r}].rand is {len(rand)} bytes, "
                              f"the VDAF wants {self.vdaf.RAND_SIZE}")
        (public_share, input_shares) = self.vdaf.shard(self.ctx, measurement, nonce, rand)
        self._compare(self.vdaf.encode_public_share(public_share), report, ["public_share"],
                      f"{rk}[{r}].public_share")
        if len(input_shares) != self.vdaf.SHARES:
            raise _OpFailure(f"shard returned {len(input_shares)} input shares")
        for j, share in enumerate(input_shares):
            self._compare(self.vdaf.encode_input_share(share), report, ["input_shares", j],
                          f"{rk}[{r}].input_shares[{j}]")

    def _verify_init(self, op: dict[str, Any]) -> None:
        r = op.get("report_index")
        report = self._report(r)
        assert isinstance(r, int)
        j = self._agg_id(op.get("aggregator_id"))
        rk, vsk = self.rk, self.vsk
        nonce = _hex(report.get("nonce"), f"{rk}[{r}].nonce")
        public_bytes = self._need(report, ["public_share"], f"{rk}[{r}].public_share")
        input_bytes = self._need(report, ["input_shares", j], f"{rk}[{r}].input_shares[{j}]")
        public_share = self.vdaf.decode_public_share(public_bytes)
        input_share = self.vdaf.decode_input_share(j, input_bytes)
        (state, verifier_share) = self.vdaf.verify_init(
            self.verify_key, self.ctx, j, self.agg_param, nonce, public_share, input_share
        )
        self.verify_states[(r, j)] = state
        self._compare(self.vdaf.encode_verifier_share(verifier_share), report,
                      [vsk, 0, j], f"{rk}[{r}].{vsk}[0][{j}]")

    def _verifier_shares_to_message(self, op: dict[str, Any]) -> None:
        r = op.get("report_index")
        report = self._report(r)
        assert isinstance(r, int)
        rnd = self._round(op.get("round"))
        rk, vsk, vmk = self.rk, self.vsk, self.vmk
        shares = []
        for j in range(self.vdaf.SHARES):
            data = self._need(report, [vsk, rnd, j], f"{rk}[{r}].{vsk}[{rnd}][{j}]")
            shares.append(self.vdaf.decode_verifier_share(self._state(r, j), data))
        message = self.vdaf.verifier_shares_to_message(self.ctx, self.agg_param, shares)
        self._compare(self.vdaf.encode_verifier_message(message), report,
                      [vmk, rnd], f"{rk}[{r}].{vmk}[{rnd}]")

    def _verify_next(self, op: dict[str, Any]) -> None:
        r = op.get("report_index")
        report = self._report(r)
        assert isinstance(r, int)
        j = self._agg_id(op.get("aggregator_id"))
        rnd = self._round(op.get("round"))
        if rnd < 1:
            raise VectorError("verify_next needs a round of at least 1")
        rk, vsk, vmk = self.rk, self.vsk, self.vmk
        state = self._state(r, j)
        data = self._need(report, [vmk, rnd - 1], f"{rk}[{r}].{vmk}[{rnd - 1}]")
        message = self.vdaf.decode_verifier_message(state, data)
        result = self.vdaf.verify_next(self.ctx, state, message)
        if rnd < self.vdaf.ROUNDS:
            (state, verifier_share) = result
            self.verify_states[(r, j)] = state
            self._compare(self.vdaf.encode_verifier_share(verifier_share), report,
                          [vsk, rnd, j], f"{rk}[{r}].{vsk}[{rnd}][{j}]")
        else:
            del self.verify_states[(r, j)]
            self.out_shares[(r, j)] = result
            self._compare(self.vdaf.encode_out_share(result), report, ["out_shares", j],
                          f"{rk}[{r}].out_shares[{j}]")

    def _aggregate(self, op: dict[str, Any]) -> None:
        j = self._agg_id(op.get("aggregator_id"))
        outs = [self.out_shares[(r, j)] for r in range(len(self.reports))
                if (r, j) in self.out_shares]
        if not outs:
            raise _OpFailure(f"aggregator {j} has no output shares to aggregate")
        agg_share = self.vdaf.agg_init(self.agg_param)
        for out in outs:
            agg_share = self.vdaf.agg_update(self.agg_param, agg_share, out)
        encoded = self.vdaf.encode_agg_share(agg_share)
        # merge() of one-report aggregate shares must agree with agg_update().
        singles = [
            self.vdaf.agg_update(self.agg_param, self.vdaf.agg_init(self.agg_param), out)
            for out in outs
        ]
        merged = self.vdaf.encode_agg_share(self.vdaf.merge(self.agg_param, singles))
        if merged != encoded:
            raise _OpFailure(
                f"merge disagrees with agg_update: {_short(merged)} vs {_short(encoded)}"
            )
        self.agg_shares[j] = agg_share
        self._compare(encoded, self.doc, ["agg_shares", j], f"agg_shares[{j}]")

    def _unshard(self, op: dict[str, Any]) -> None:
        shares = []
        for j in range(self.vdaf.SHARES):
            data = self._need(self.doc, ["agg_shares", j], f"agg_shares[{j}]")
            shares.append(self.vdaf.decode_agg_share(self.agg_param, data))
        result = _jsonable(self.vdaf.unshard(self.agg_param, shares, len(self.reports)))
        if "agg_result" not in self.doc:
            if self.strict:
                raise _OpFailure("agg_result is not in the file")
            return
        expected = self.doc["agg_result"]
        self.checked.add("agg_result")
        if result != expected or type(result) is not type(expected):
            raise _OpFailure(f"agg_result mismatch: expected {expected!r}, got {result!r}")


def check_vdaf_document(doc: Mapping[str, Any], inst: Instance,
                        schema: VectorSchema = SCHEMA_V18) -> list[OpResult]:
    """Replay a VDAF vector document. Raises VectorError when it cannot be interpreted."""
    values = {key: doc[key] for key in inst.parameter_keys() if key in doc}
    for key, _default in inst.hidden:
        if key in doc:
            values[key] = doc[key]
    for key in inst.parameter_keys():
        if key not in doc:
            raise VectorError(f"missing parameter {key!r} for {inst.name}")
    vdaf = inst.build(values)
    return _Replay(vdaf, inst, doc, schema).run()


def check_xof_document(doc: Mapping[str, Any], name: str,
                       version: int = DEFAULT_VERSION) -> list[OpResult]:
    """Check an XOF vector (seed, dst, binder -> derived_seed, expanded_vec_field128)
    against the XOF of that name in the version's profile."""
    try:
        field_module = importlib.import_module("ppm_reference.vdaf.field")
    except ImportError as exc:
        raise VectorError(f"cannot import the field module: {exc}") from exc
    xof = version_table(version).profile.xofs.get(name)
    if xof is None:
        raise VectorError(f"no XOF {name} in VDAF version {version}")
    field128 = field_module.Field128
    seed = _hex(doc.get("seed"), "seed")
    dst = _hex(doc.get("dst"), "dst")
    binder = _hex(doc.get("binder"), "binder")
    length = doc.get("length")
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise VectorError("'length' must be a non-negative integer")
    expected_seed = _hex(doc.get("derived_seed"), "derived_seed")
    expected_vec = _hex(doc.get("expanded_vec_field128"), "expanded_vec_field128")

    results = []

    def run(index: int, operation: str, compute: Callable[[], bytes], expected: bytes) -> None:
        res = OpResult(index=index, operation=operation, expect_success=True, ok=False)
        try:
            got = compute()
        except Exception as exc:
            res.detail = f"crashed: {type(exc).__name__}: {exc}"
        else:
            if got == expected:
                res.ok = True
            else:
                res.detail = f"mismatch: expected {_short(expected)}, got {_short(got)}"
        results.append(res)

    run(0, "derive_seed", lambda: bytes(xof.derive_seed(seed, dst, binder)), expected_seed)
    run(
        1,
        "expand_into_vec",
        lambda: bytes(field128.encode_vec(xof.expand_into_vec(field128, seed, dst, binder,
                                                               length))),
        expected_vec,
    )
    return results


def is_out_of_scope(name: str, version: int = DEFAULT_VERSION) -> bool:
    """Whether `check_file` skips files of this instance name in this version."""
    if name not in OUT_OF_SCOPE:
        return False
    table = version_table(version)
    return name != table.idpf and name not in table.instances()


def check_file(
    path: Path | str,
    vdaf_name: str | None = None,
    version: int = DEFAULT_VERSION,
) -> FileResult:
    """Check one vector file; never raises for problems with the file itself."""
    path = Path(path)
    name = vdaf_name or instance_name_from_path(path)
    negative = "_bad_" in path.stem
    result = FileResult(path=str(path), instance=name, status="fail", negative=negative)
    if is_out_of_scope(name, version):
        result.status = "skip"
        result.reason = OUT_OF_SCOPE[name]
        return result
    try:
        if name in XOF_NAMES:
            doc = load_json(path)
            result.operations = check_xof_document(doc, name, version)
        elif name == version_table(version).idpf:
            result.operations = check_idpf_document(load_json(path), version)
        else:
            inst = lookup_instance(name, version)
            doc = load_json(path)
            result.operations = check_vdaf_document(doc, inst, version_table(version).schema)
            if negative and all(op.expect_success for op in result.operations):
                raise VectorError("negative vector has no operation marked success: false")
    except VectorError as exc:
        result.reason = str(exc)
        return result
    except Exception as exc:  # keep going over the other files; say what happened
        result.reason = f"unexpected error while checking: {type(exc).__name__}: {exc}"
        return result
    failed = result.failed_operations
    if failed:
        result.reason = f"{len(failed)} of {len(result.operations)} operations failed"
    else:
        result.status = "pass"
    return result


# ---------------------------------------------------------------------------------------
# Generating.


def counting_bytes(length: int) -> bytes:
    """0x00, 0x01, ... (mod 256): the published vectors' verify_key, nonce and rand."""
    return bytes(i % 256 for i in range(length))


@dataclass(frozen=True)
class VectorSpec:
    """One vector to generate: an instance, its parameters and its measurements."""

    instance: str
    params: Mapping[str, Any]
    measurements: tuple[Any, ...]
    ctx: bytes = DEFAULT_CTX
    index: int | None = None  # the `_N` of the file name, for the standard set
    agg_param: Any = None     # the decoded aggregation parameter (Prio3: None)

    def file_name(self) -> str:
        suffix = "custom" if self.index is None else str(self.index)
        return f"{self.instance}_{suffix}.json"


def _spec(instance: str, index: int, measurements: Iterable[Any], **params: Any) -> VectorSpec:
    return VectorSpec(instance, dict(params), tuple(measurements), index=index)


def _bits(text: str) -> tuple[bool, ...]:
    return tuple(c == "1" for c in text)


def _poplar1_spec(index: int, bits: int, level: int, prefixes: str,
                  measurements: Iterable[str]) -> VectorSpec:
    """A Poplar1 vector: prefixes and measurements as strings of 0 and 1."""
    return VectorSpec("Poplar1", {"shares": 2, "bits": bits},
                      tuple(list(_bits(m)) for m in measurements), index=index,
                      agg_param=(level, tuple(_bits(p) for p in prefixes.split())))


_F, _T = False, True

# The published Prio3 vectors of wire version 18: parameters and measurements are data,
# every byte is computed by our VDAF.
STANDARD_SPECS: dict[int, tuple[VectorSpec, ...]] = {
    18: (
        _spec("Prio3Count", 0, [1], shares=2),
        _spec("Prio3Count", 1, [1], shares=3),
        _spec("Prio3Count", 2, [0, 1, 1, 0, 1], shares=2),
        _spec("Prio3Sum", 0, [100], shares=2, max_measurement=255),
        _spec("Prio3Sum", 1, [100], shares=3, max_measurement=255),
        _spec("Prio3Sum", 2, [0, 1, 1337, 99, 42, 0, 0, 42], shares=2, max_measurement=1337),
        _spec(
            "Prio3SumVec", 0,
            [list(range(10)), [1] * 10, [255] * 10],
            shares=2, length=10, max_measurement=255, chunk_length=9,
        ),
        _spec(
            "Prio3SumVec", 1,
            [[10000, 32000, 9], [19342, 19615, 3061], [15986, 24671, 23910]],
            shares=3, length=3, max_measurement=32000, chunk_length=7,
        ),
        _spec("Prio3Histogram", 0, [2], shares=2, length=4, chunk_length=2),
        _spec("Prio3Histogram", 1, [2], shares=3, length=11, chunk_length=3),
        _spec(
            "Prio3Histogram", 2, [2, 99, 99, 17, 42, 0, 0, 1, 2, 0],
            shares=2, length=100, chunk_length=10,
        ),
        _spec(
            "Prio3MultihotCountVec", 0, [[_F, _T, _T, _F]],
            shares=2, length=4, max_weight=2, chunk_length=2,
        ),
        _spec(
            "Prio3MultihotCountVec", 1, [[_F, _T, _F, _F, _F, _F, _F, _F, _F, _T]],
            shares=4, length=10, max_weight=2, chunk_length=3,
        ),
        _spec(
            "Prio3MultihotCountVec", 2,
            [
                [_F, _T, _T, _F],
                [_F, _F, _T, _F],
                [_F, _F, _F, _F],
                [_T, _T, _T, _F],
                [_T, _T, _T, _T],
            ],
            shares=2, length=4, max_weight=4, chunk_length=1,
        ),
        _spec(
            "Prio3SumVecWithMultiproof", 0,
            [list(range(10)), [1] * 10, [255] * 10],
            shares=2, length=10, max_measurement=255, chunk_length=9,
        ),
        _spec(
            "Prio3SumVecWithMultiproof", 1,
            [[10000, 32000, 9], [19342, 19615, 3061], [15986, 24671, 23910]],
            shares=3, length=3, max_measurement=65535, chunk_length=7,
        ),
        _spec("Prio3HigherDegree", 0, [2], shares=2),
        # Poplar1 (Section 8.2): one 4-bit and one 11-bit measurement, every level's
        # candidate prefixes as the draft's reference generator chooses them.
        _poplar1_spec(0, 4, 0, "0 1", ["1101"]),
        _poplar1_spec(1, 4, 1, "00 01 10 11", ["1101"]),
        _poplar1_spec(2, 4, 2, "000 010 100 110", ["1101"]),
        _poplar1_spec(3, 4, 3, "0001 0011 0101 0111 1001 1101 1111", ["1101"]),
        _poplar1_spec(4, 11, 0, "0 1", ["11001000001"]),
        _poplar1_spec(5, 11, 10, "00000000000 11001000000 11001000001 11111111111",
                      ["11001000001"]),
    ),
    # The published VDAF-08 Prio3 vectors (ctx is unused: VDAF-08 has none).
    8: (
        _spec("Prio3Count", 0, [1], shares=2),
        _spec("Prio3Count", 1, [1], shares=3),
        _spec("Prio3Sum", 0, [100], shares=2, bits=8),
        _spec("Prio3Sum", 1, [100], shares=3, bits=8),
        _spec(
            "Prio3SumVec", 0,
            [list(range(10)), [1] * 10, [255] * 10],
            shares=2, length=10, bits=8, chunk_length=9,
        ),
        _spec(
            "Prio3SumVec", 1,
            [[10000, 32000, 9], [19342, 19615, 3061], [15986, 24671, 23910]],
            shares=3, length=3, bits=16, chunk_length=7,
        ),
        _spec("Prio3Histogram", 0, [2], shares=2, length=4, chunk_length=2),
        _spec("Prio3Histogram", 1, [2], shares=3, length=11, chunk_length=3),
        _spec(
            "Prio3MultiHotHistogram", 0, [[0, 1, 1, 0]],
            shares=2, length=4, max_count=2, chunk_length=2,
        ),
        _spec(
            "Prio3MultiHotHistogram", 1, [[1] * 5 + [0] * 6],
            shares=3, length=11, max_count=5, chunk_length=3,
        ),
        _spec(
            "Prio3SumVecWithMultiproof", 0,
            [list(range(10)), [1] * 10, [255] * 10],
            shares=2, length=10, bits=8, chunk_length=9,
        ),
        # VDAF-08's Poplar1 vectors: the measurement 13 (1101) of 4 bits.
        *(VectorSpec("Poplar1", {"shares": 2, "bits": 4}, (13,), index=i,
                     agg_param=(level, tuple(_bits(p) for p in prefixes.split())))
          for i, (level, prefixes) in enumerate([
              (0, "0 1"), (1, "00 01 10 11"), (2, "000 010 100 110"),
              (3, "0001 0011 0101 0111 1001 1101 1111")])),
    ),
}


#: Vector sets published beside a draft other than the VDAF draft, by folder name, with
#: their VDAF wire version. `generate --set NAME` writes one.
EXTRA_SETS: dict[str, tuple[int, tuple[VectorSpec, ...]]] = {
    # draft-ietf-ppm-l1-bound-sum-02's published vector (its folder of the same name).
    "l1-bound-sum-02": (18, (
        _spec(
            "Prio3L1BoundSum", 0,
            [list(range(10)), [240] + [0] * 9, [0] * 9 + [240], [0] * 10, [1] * 10],
            shares=2, length=10, max_value=240, chunk_length=9,
        ),
    )),
}


def extra_set(name: str) -> tuple[int, tuple[VectorSpec, ...]]:
    """The VDAF version and the specs of a set of `EXTRA_SETS`."""
    found = EXTRA_SETS.get(name)
    if found is None:
        raise VectorError(f"unknown vector set {name!r} (known: {', '.join(EXTRA_SETS)})")
    return found


def generate_set(name: str, out_dir: Path) -> list[Path]:
    """Write the vectors of the set `name` of `EXTRA_SETS` into `out_dir`."""
    version, specs = extra_set(name)
    return [write_vector(spec, out_dir, version) for spec in specs]


def standard_specs(version: int = DEFAULT_VERSION) -> tuple[VectorSpec, ...]:
    specs = STANDARD_SPECS.get(version)
    if specs is None:
        known = ", ".join(str(v) for v in sorted(STANDARD_SPECS))
        raise VectorError(f"no standard vectors for VDAF version {version} (known: {known})")
    return specs


def _schema_params(inst: Instance, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameter keys written to the file: the schema's, and hidden ones if changed."""
    out = {key: params[key] for key in inst.parameter_keys()}
    for key, default in inst.hidden:
        if key in params and params[key] != default:
            out[key] = params[key]
    return out


def _out_share_json(vdaf: VdafLike, out_share: Any, schema: VectorSchema) -> Any:
    encoded = vdaf.encode_out_share(out_share)
    if not schema.out_share_elements:
        return encoded.hex()
    if not out_share:
        return []
    size = len(encoded) // len(out_share)
    return [encoded[i : i + size].hex() for i in range(0, len(encoded), size)]


def generate_vector(spec: VectorSpec, version: int = DEFAULT_VERSION) -> dict[str, Any]:
    """Run shard, verification, aggregation and unsharding; return the vector document
    in the version's schema."""
    inst = lookup_instance(spec.instance, version)
    schema = version_table(version).schema
    vdaf = inst.build(spec.params)
    if not spec.measurements:
        raise VectorError("a vector needs at least one measurement")
    agg_param = spec.agg_param
    agg_param_bytes = vdaf.encode_agg_param(agg_param)
    verify_key = counting_bytes(vdaf.VERIFY_KEY_SIZE)
    n = vdaf.SHARES
    # A schema without ctx (VDAF-08) has no application context: the empty one.
    ctx = spec.ctx if schema.ctx else b""
    reports: list[dict[str, Any]] = []
    out_shares: list[list[Any]] = [[] for _ in range(n)]
    for measurement_json in spec.measurements:
        measurement = inst.measurement_from_json(measurement_json)
        nonce = counting_bytes(vdaf.NONCE_SIZE)
        rand = counting_bytes(vdaf.RAND_SIZE)
        (public_share, input_shares) = vdaf.shard(ctx, measurement, nonce, rand)
        states = []
        round_shares = []
        for j in range(n):
            (state, share) = vdaf.verify_init(
                verify_key, ctx, j, agg_param, nonce, public_share, input_shares[j]
            )
            states.append(state)
            round_shares.append(share)
        verifier_shares = [[vdaf.encode_verifier_share(s).hex() for s in round_shares]]
        verifier_messages = []
        outs: list[Any] = []
        for rnd in range(vdaf.ROUNDS):
            message = vdaf.verifier_shares_to_message(ctx, agg_param, round_shares)
            verifier_messages.append(vdaf.encode_verifier_message(message).hex())
            round_shares = []
            for j in range(n):
                result = vdaf.verify_next(ctx, states[j], message)
                if rnd + 1 < vdaf.ROUNDS:
                    (states[j], share) = result
                    round_shares.append(share)
                else:
                    outs.append(result)
            if round_shares:
                verifier_shares.append([vdaf.encode_verifier_share(s).hex()
                                        for s in round_shares])
        for j in range(n):
            out_shares[j].append(outs[j])
        reports.append({
            "input_shares": [vdaf.encode_input_share(s).hex() for s in input_shares],
            "measurement": measurement_json,
            "nonce": nonce.hex(),
            "out_shares": [_out_share_json(vdaf, o, schema) for o in outs],
            "public_share": vdaf.encode_public_share(public_share).hex(),
            "rand": rand.hex(),
            schema.verifier_messages: verifier_messages,
            schema.verifier_shares: verifier_shares,
        })
    agg_shares = []
    for j in range(n):
        agg_share = vdaf.agg_init(agg_param)
        for out in out_shares[j]:
            agg_share = vdaf.agg_update(agg_param, agg_share, out)
        agg_shares.append(agg_share)
    agg_result = vdaf.unshard(agg_param, agg_shares, len(spec.measurements))
    doc: dict[str, Any] = {
        "agg_param": (vdaf.agg_param_to_json(agg_param)
                      if not schema.ctx and hasattr(vdaf, "agg_param_to_json")
                      else schema.agg_param_to_json(agg_param_bytes)),
        "agg_result": _jsonable(agg_result),
        "agg_shares": [vdaf.encode_agg_share(s).hex() for s in agg_shares],
        schema.reports: reports,
        "verify_key": verify_key.hex(),
    }
    if schema.ctx:
        doc["ctx"] = ctx.hex()
    if schema.operations:
        doc["operations"] = flow_operations(len(reports), n, vdaf.ROUNDS)
    doc.update(_schema_params(inst, spec.params))
    return doc


#: The inputs of the published XOF vectors (both versions): seed 00 01 02 ... of the
#: XOF's SEED_SIZE, these dst and binder, 40 Field128 elements.
XOF_DST = b"domain separation tag"
XOF_BINDER = b"binder string"
XOF_LENGTH = 40


def generate_xof_vector(name: str, version: int = DEFAULT_VERSION) -> dict[str, Any]:
    """The XOF vector of the version's XOF `name` (the published files' schema)."""
    xof = version_table(version).profile.xofs.get(name)
    if xof is None:
        raise VectorError(f"no XOF {name} in VDAF version {version}")
    field128 = importlib.import_module("ppm_reference.vdaf.field").Field128
    seed = counting_bytes(xof.SEED_SIZE)
    vec = xof.expand_into_vec(field128, seed, XOF_DST, XOF_BINDER, XOF_LENGTH)
    return {
        "binder": XOF_BINDER.hex(),
        "derived_seed": xof.derive_seed(seed, XOF_DST, XOF_BINDER).hex(),
        "dst": XOF_DST.hex(),
        "expanded_vec_field128": field128.encode_vec(vec).hex(),
        "length": XOF_LENGTH,
        "seed": seed.hex(),
    }


def write_vector(spec: VectorSpec, out_dir: Path, version: int = DEFAULT_VERSION,
                 file_name: str | None = None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (file_name or spec.file_name())
    path.write_text(dumps(generate_vector(spec, version)), encoding="utf-8")
    return path


def standard_file_names(version: int = DEFAULT_VERSION) -> list[str]:
    """The file names `generate_standard` writes for a version."""
    names = [spec.file_name() for spec in standard_specs(version)]
    table = version_table(version)
    if table.idpf is not None:
        names.append(f"{table.idpf}_0.json")
    if table.poplar1_negative:
        names.append(POPLAR1_BAD_CORR_INNER)
    if table.xof_vectors:
        names += [f"{name}.json" for name in XOF_NAMES]
    return names


def generate_standard(out_dir: Path, version: int = DEFAULT_VERSION) -> list[Path]:
    """Write the standard set of vectors for every VDAF into `out_dir`: the positive
    ones of `STANDARD_SPECS`, for a version with an IDPF its vector and Poplar1's
    negative vector, and the XOF vectors for a version whose table says so."""
    paths = [write_vector(spec, out_dir, version) for spec in standard_specs(version)]
    table = version_table(version)
    extra: list[tuple[str, dict[str, Any]]] = []
    if table.idpf is not None:
        extra.append((f"{table.idpf}_0.json", generate_idpf_vector(version=version)))
    if table.poplar1_negative:
        extra.append((POPLAR1_BAD_CORR_INNER, generate_poplar1_bad_corr_inner()))
    if extra:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, doc in extra:
            path = out_dir / name
            path.write_text(dumps(doc), encoding="utf-8")
            paths.append(path)
    if version_table(version).xof_vectors:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in XOF_NAMES:
            path = out_dir / f"{name}.json"
            path.write_text(dumps(generate_xof_vector(name, version)), encoding="utf-8")
            paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------
# The IDPF vector and Poplar1's negative vector (draft-20's reference generator).

#: The published IDPF vector: IdpfBBCGGI21 with VALUE_LEN 2 and BITS 10, alpha all zero,
#: `beta_inner[level] = [level, level]`, `beta_leaf = [BITS - 1] * 2`; rand (the two
#: keys) and nonce are counting bytes, ctx the default.
IDPF_VALUE_LEN = 2
IDPF_BITS = 10
POPLAR1_BAD_CORR_INNER = "Poplar1_bad_corr_inner.json"


#: VDAF-08's IDPF vector (IdpfPoplar_0.json): the same inputs, but `alpha` is an integer
#: (written as a decimal string), there is no ctx, and a 10-byte binder replaces the nonce.
IDPF_BINDER_V08 = b"some nonce"


def _idpf(value_len: int, bits: int, version: int = DEFAULT_VERSION) -> Any:
    name = version_table(version).idpf
    if name is None:
        raise VectorError(f"no IDPF vectors in VDAF version {version}")
    return getattr(importlib.import_module("ppm_reference.vdaf.idpf"), name)(value_len, bits)


def _decimal_elems(value: Any, where: str) -> list[int]:
    """Field elements written as decimal strings (the IDPF vector's beta values)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.isdigit()
                                              for v in value):
        raise VectorError(f"{where}: expected a list of decimal strings")
    return [int(v) for v in value]


def generate_idpf_vector(alpha: Sequence[bool] | None = None, bits: int = IDPF_BITS,
                         value_len: int = IDPF_VALUE_LEN, ctx: bytes = DEFAULT_CTX,
                         version: int = DEFAULT_VERSION) -> dict[str, Any]:
    """The IDPF vector (the published file's schema: the inputs of `gen`, the keys it
    returns and the encoded public share)."""
    idpf = _idpf(value_len, bits, version)
    alpha = tuple(alpha) if alpha is not None else (False,) * bits
    beta_inner = [[level] * value_len for level in range(bits - 1)]
    beta_leaf = [bits - 1] * value_len
    rand = counting_bytes(idpf.RAND_SIZE)
    if not version_table(version).schema.ctx:
        public_share, keys = idpf.gen(alpha, beta_inner, beta_leaf, b"", IDPF_BINDER_V08,
                                      rand)
        return {
            "alpha": str(int("".join("1" if b else "0" for b in alpha), 2)),
            "beta_inner": [[str(x) for x in v] for v in beta_inner],
            "beta_leaf": [str(x) for x in beta_leaf],
            "binder": IDPF_BINDER_V08.hex(),
            "bits": bits,
            "keys": [k.hex() for k in keys],
            "public_share": idpf.encode_public_share(public_share).hex(),
        }
    nonce = counting_bytes(idpf.NONCE_SIZE)
    public_share, keys = idpf.gen(alpha, beta_inner, beta_leaf, ctx, nonce, rand)
    return {
        "alpha": list(alpha),
        "beta_inner": [[str(x) for x in v] for v in beta_inner],
        "beta_leaf": [str(x) for x in beta_leaf],
        "bits": bits,
        "ctx": ctx.hex(),
        "keys": [k.hex() for k in keys],
        "nonce": nonce.hex(),
        "public_share": idpf.encode_public_share(public_share).hex(),
    }


def check_idpf_document(doc: Mapping[str, Any],
                        version: int = DEFAULT_VERSION) -> list[OpResult]:
    """Check an IDPF vector: `gen` on the recorded inputs (rand is the two keys) must
    return the recorded keys and public share, and the public share must decode and
    re-encode to the same bytes; then each key is evaluated on the path to `alpha` at
    every level and the shares must sum to the programmed values."""
    if version_table(version).idpf is None:
        raise VectorError(f"no IDPF vectors in VDAF version {version}")
    bits = doc.get("bits")
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 1:
        raise VectorError("'bits' must be a positive integer")
    alpha = doc.get("alpha")
    if isinstance(alpha, str) and alpha.isdigit() and int(alpha) < 2**bits:
        # VDAF-08: an integer of `bits` bits, MSB first.
        alpha = [bool((int(alpha) >> (bits - 1 - i)) & 1) for i in range(bits)]
    if not isinstance(alpha, list) or not all(isinstance(b, bool) for b in alpha):
        raise VectorError("'alpha' must be a list of booleans (or, VDAF-08, an integer "
                          "below 2^bits as a decimal string)")
    inner_json = doc.get("beta_inner")
    if not isinstance(inner_json, list):
        raise VectorError("'beta_inner' must be a list")
    beta_inner = [_decimal_elems(v, f"beta_inner[{i}]") for i, v in enumerate(inner_json)]
    beta_leaf = _decimal_elems(doc.get("beta_leaf"), "beta_leaf")
    if "binder" in doc:  # VDAF-08: no ctx, a binder in place of the nonce
        ctx = b""
        nonce = _hex(doc.get("binder"), "binder")
    else:
        ctx = _hex(doc.get("ctx"), "ctx")
        nonce = _hex(doc.get("nonce"), "nonce")
    keys_json = doc.get("keys")
    if not isinstance(keys_json, list):
        raise VectorError("'keys' must be a list of hex strings")
    keys = [_hex(k, f"keys[{i}]") for i, k in enumerate(keys_json)]
    expected_public = _hex(doc.get("public_share"), "public_share")
    idpf = _idpf(len(beta_leaf), bits, version)
    results: list[OpResult] = []

    def run(operation: str, compute: Callable[[], str]) -> None:
        res = OpResult(index=len(results), operation=operation, expect_success=True, ok=False)
        try:
            res.detail = compute()
            res.ok = not res.detail
        except Exception as exc:
            res.detail = f"crashed: {type(exc).__name__}: {exc}"
        results.append(res)

    state: dict[str, Any] = {}

    def gen() -> str:
        public_share, got_keys = idpf.gen(tuple(alpha), beta_inner, beta_leaf, ctx, nonce,
                                          b"".join(keys))
        state["keys"] = got_keys
        encoded = idpf.encode_public_share(public_share)
        if got_keys != keys:
            return "keys mismatch"
        if encoded != expected_public:
            return (f"public_share mismatch: expected {_short(expected_public)}, "
                    f"got {_short(encoded)}")
        return ""

    def decode() -> str:
        decoded = idpf.decode_public_share(expected_public)
        state["public_share"] = decoded
        return "" if idpf.encode_public_share(decoded) == expected_public else \
            "public_share does not re-encode to the same bytes"

    def evaluate() -> str:
        public_share = state["public_share"]
        for level in range(bits):
            prefix = tuple(alpha[: level + 1])
            other = prefix[:-1] + (not prefix[-1],)
            field = idpf.current_field(level)
            shares = [idpf.eval(j, public_share, keys[j], level, [prefix, other], ctx, nonce)
                      for j in range(2)]
            on_path = field.vec_add(shares[0][0], shares[1][0])
            off_path = field.vec_add(shares[0][1], shares[1][1])
            want = beta_inner[level] if level < bits - 1 else beta_leaf
            if on_path != want or any(off_path):
                return f"level {level}: the keys do not evaluate to beta on the path"
        return ""

    run("gen", gen)
    run("decode_public_share", decode)
    if results[-1].ok:
        run("eval", evaluate)
    return results


def generate_poplar1_bad_corr_inner(ctx: bytes = DEFAULT_CTX) -> dict[str, Any]:
    """The published negative Poplar1 vector: Poplar1(2) sharding (False, True); the
    first element of the Leader's `corr_inner` is incremented; at level 0 with prefixes
    0 and 1 both Aggregators run the first round, and the second
    `verifier_shares_to_message` must fail (the sketch does not verify)."""
    poplar1 = importlib.import_module("ppm_reference.vdaf.poplar1")
    vdaf = poplar1.Poplar1(2)
    nonce = counting_bytes(vdaf.NONCE_SIZE)
    rand = counting_bytes(vdaf.RAND_SIZE)
    verify_key = counting_bytes(vdaf.VERIFY_KEY_SIZE)
    agg_param = (0, ((False,), (True,)))
    public_share, (share0, share1) = vdaf.shard(ctx, (False, True), nonce, rand)
    corr_inner = list(share0[2])
    corr_inner[0] = (corr_inner[0] + 1) % vdaf.idpf.field_inner.MODULUS
    share0 = (share0[0], share0[1], corr_inner, share0[3])
    states, round0 = [], []
    for j, share in enumerate((share0, share1)):
        state, verifier_share = vdaf.verify_init(verify_key, ctx, j, agg_param, nonce,
                                                 public_share, share)
        states.append(state)
        round0.append(verifier_share)
    message = vdaf.verifier_shares_to_message(ctx, agg_param, round0)
    round1 = [vdaf.verify_next(ctx, state, message)[1] for state in states]
    try:
        vdaf.verifier_shares_to_message(ctx, agg_param, round1)
    except ValueError:
        pass
    else:  # pragma: no cover - the tampered share must be caught
        raise VectorError("the tampered Poplar1 report verified")

    def op(name: str, **fields: Any) -> dict[str, Any]:
        return {"operation": name, "report_index": 0, "success": True, **fields}

    operations = [op("verify_init", aggregator_id=0), op("verify_init", aggregator_id=1),
                  op("verifier_shares_to_message", round=0),
                  op("verify_next", aggregator_id=0, round=1),
                  op("verify_next", aggregator_id=1, round=1),
                  op("verifier_shares_to_message", round=1)]
    operations[-1]["success"] = False
    return {
        "agg_param": vdaf.encode_agg_param(agg_param).hex(),
        "agg_result": None,
        "agg_shares": [],
        "bits": 2,
        "ctx": ctx.hex(),
        "operations": operations,
        "reports": [{
            "input_shares": [vdaf.encode_input_share(s).hex() for s in (share0, share1)],
            "measurement": None,
            "nonce": nonce.hex(),
            "out_shares": [],
            "public_share": vdaf.encode_public_share(public_share).hex(),
            "rand": rand.hex(),
            "verifier_messages": [vdaf.encode_verifier_message(message).hex()],
            "verifier_shares": [[vdaf.encode_verifier_share(s).hex() for s in round0],
                                [vdaf.encode_verifier_share(s).hex() for s in round1]],
        }],
        "shares": 2,
        "verify_key": verify_key.hex(),
    }


def default_measurements(instance: str, params: Mapping[str, Any]) -> tuple[Any, ...]:
    """A few valid measurements for chosen parameters (used when none are given)."""
    length = params.get("length", 1)
    # VDAF-08 ranges integers by `bits`, draft-20 by `max_measurement`.
    top = (1 << params["bits"]) - 1 if "bits" in params else params.get("max_measurement", 1)
    if instance in ("Prio3Count", "Prio3HigherDegree"):
        return (1, 0, 1)
    if instance == "Prio3Sum":
        return (top, 0, 1)
    if instance == "Prio3Histogram":
        return (0, length - 1, length // 2)
    if instance in ("Prio3SumVec", "Prio3SumVecWithMultiproof"):
        return ([i % (top + 1) for i in range(length)], [top] * length, [0] * length)
    if instance == "Prio3L1BoundSum":
        top = params["max_value"]
        first = [min(i, top) for i in range(length)]
        while sum(first) > top:  # bring the L1 norm down to max_value
            first[first.index(max(first))] -= 1
        return (first, [top] + [0] * (length - 1), [0] * length)
    if instance == "Prio3MultihotCountVec":
        weight = min(params["max_weight"], length)
        return ([i < weight for i in range(length)], [False] * length)
    if instance == "Poplar1":
        bits = params["bits"]
        return ([i % 2 == 0 for i in range(bits)], [True] * bits, [False] * bits)
    if instance == "Prio3MultiHotHistogram":
        weight = min(params["max_count"], length)
        return ([int(i < weight) for i in range(length)], [0] * length)
    raise VectorError(f"no default measurements for {instance}")
