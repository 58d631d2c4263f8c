"""The file format of the DAP test vectors, shared by every profile (the schema is in
test_vectors/README.md): hex and JSON helpers, the check report, and the checks of
message files and example messages. Generating and checking a directory is
:mod:`dap.vectors`; each profile's cases are ``dap.profiles.<draft>.vectors``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ppm_reference.dap.codec import DecodeError, Struct

if TYPE_CHECKING:
    from ppm_reference.dap.profiles.base import Profile

FORMAT_VERSION = 1


class VectorError(Exception):
    """A vector file is malformed or does not check."""


def _hex(b: bytes) -> str:
    return bytes(b).hex()


def _unhex(obj: Any, what: str) -> bytes:
    if not isinstance(obj, str):
        raise VectorError(f"{what}: expected a hex string")
    try:
        return bytes.fromhex(obj)
    except ValueError as exc:
        raise VectorError(f"{what}: {exc}") from None


def _msg(msg: Struct) -> dict[str, Any]:
    return {"fields": msg.to_json(), "encoding": msg.encode().hex()}


def _value_json(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_json()
    if isinstance(value, bytes):
        return {"value": value.hex()}
    return {"value": int(value)}


def _value_from_json(cls: type, obj: Any) -> Any:
    if issubclass(cls, Struct):
        return cls.from_json(obj)
    if not isinstance(obj, dict) or set(obj) != {"value"}:
        raise VectorError(f"{cls.__name__}: expected {{'value': ...}}")
    value = obj["value"]
    if issubclass(cls, bytes):
        return cls(_unhex(value, cls.__name__))
    if issubclass(cls, int):
        return cls(value)
    raise VectorError(f"{cls.__name__}: not a message type")


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2) + "\n"


@dataclass
class CheckReport:
    files: int = 0
    checks: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.files > 0 and not self.errors


def _diff(expected: Any, actual: Any, path: str = "") -> Iterator[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected.keys() | actual.keys():
            if key not in actual:
                yield f"{path}.{key}: missing from the file"
            elif key not in expected:
                yield f"{path}.{key}: unexpected field"
            else:
                yield from _diff(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: {len(actual)} items, expected {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            yield from _diff(e, a, f"{path}[{i}]")
    elif expected != actual or type(expected) is not type(actual):
        yield f"{path}: file has {actual!r}, re-derived {expected!r}"


def check_message_cases(doc: dict[str, Any], report: CheckReport, where: str,
                        types: dict[str, type], profile: Profile) -> None:
    """Check a message file of any profile: each valid case's fields and encoding agree
    both ways (and its base64url form), each invalid encoding is rejected with the recorded
    problem type, and the media type is the profile's."""
    name = doc.get("message")
    cls = types.get(name) if isinstance(name, str) else None
    if cls is None or not isinstance(name, str):
        raise VectorError(f"{where}: unknown {profile.name} message type {name!r}")
    for i, case in enumerate(doc.get("valid", [])):
        at = f"{where}: valid[{i}] ({case.get('description')})"
        try:
            value = _value_from_json(cls, case["fields"])
            encoding = _unhex(case["encoding"], "encoding")
            if value.encode() != encoding:
                report.errors.append(f"{at}: fields encode to {value.encode().hex()}")
            decoded = cls.decode(encoding)  # type: ignore[attr-defined]
            if decoded != value or type(decoded) is not cls:
                report.errors.append(f"{at}: encoding decodes to {decoded!r}")
            if "base64url" in case and value.to_base64url() != case["base64url"]:
                report.errors.append(f"{at}: base64url mismatch")
        except (ValueError, KeyError, TypeError) as exc:
            report.errors.append(f"{at}: {type(exc).__name__}: {exc}")
        report.checks += 1
    for i, case in enumerate(doc.get("invalid", [])):
        at = f"{where}: invalid[{i}] ({case.get('description')})"
        try:
            cls.decode(_unhex(case["encoding"], "encoding"))  # type: ignore[attr-defined]
        except DecodeError as exc:
            if case.get("problem_type", exc.problem_type) != exc.problem_type:
                report.errors.append(f"{at}: problem type {exc.problem_type}")
        except (ValueError, KeyError) as exc:
            report.errors.append(f"{at}: {type(exc).__name__}: {exc}")
        else:
            report.errors.append(f"{at}: decodes, but must be rejected")
        report.checks += 1
    expected = profile.media_type_for(name) if name in profile.message_types else None
    if doc.get("media_type") != expected:
        report.errors.append(f"{where}: wrong media_type")


ExampleMessages = list[tuple[Callable[[dict[str, Any]], list[Any]], type[Struct]]]


def check_example_messages(doc: dict[str, Any], report: CheckReport, where: str,
                           table: ExampleMessages) -> None:
    """Every structured message of an example file agrees with its encoding, both ways."""
    for getter, cls in table:
        try:
            items = getter(doc)
        except (KeyError, TypeError) as exc:
            report.errors.append(f"{where}: missing {cls.__name__}: {exc}")
            continue
        for item in items:
            try:
                value = cls.from_json(item["fields"])
                encoding = _unhex(item["encoding"], "encoding")
                if value.encode() != encoding or cls.decode(encoding) != value:
                    report.errors.append(f"{where}: {cls.__name__} fields and encoding differ")
            except (ValueError, KeyError, TypeError) as exc:
                report.errors.append(f"{where}: {cls.__name__}: {exc}")
            report.checks += 1
