"""`ppm vdaf ...` sub-commands: the test-vector tool.

    ppm vdaf vectors check FILE... [--json] [--vdaf NAME] [--vdaf-version 18|08]
    ppm vdaf vectors generate --out DIR [--vdaf-version 18|08] [--vdaf NAME --shares N
        --length L --chunk-length C --max-measurement M --max-weight W --max-value V
        --bits B --max-count K --num-proofs P --field F --measurements M... --ctx HEX
        --name FILE --level L --prefixes P...] [--set l1-bound-sum-02]

`check` prints one line per file and one per failing operation, or with `--json` a report;
it exits 1 when any file fails. `generate` without `--vdaf` writes the standard set
(byte-identical to the published Prio3 vectors, and for version 08 the XOF vectors too);
with `--vdaf` it writes one vector for the chosen parameters and measurements. Version 08
instances take VDAF-08's parameters (`--bits` for Prio3Sum and Prio3SumVec, `--max-count`
for Prio3MultiHotHistogram) and have no ctx. `--set NAME` writes a set published beside
another draft (`l1-bound-sum-02`: draft-ietf-ppm-l1-bound-sum-02's Prio3L1BoundSum_0.json).
Poplar1 takes `--bits`, its measurements as
JSON lists of booleans (an integer in version 08), and its aggregation parameter as
`--level L --prefixes 01 11 ...` (default: level 0, prefixes 0 and 1).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from ppm_reference.vdaf import vectors
from ppm_reference.vdaf.vectors import VectorError, VectorSpec

# Command-line option -> vector parameter key (for `generate --vdaf`).
_PARAM_OPTIONS = (
    ("shares", "shares"),
    ("length", "length"),
    ("chunk_length", "chunk_length"),
    ("max_measurement", "max_measurement"),
    ("max_weight", "max_weight"),
    ("max_value", "max_value"),
    ("bits", "bits"),
    ("max_count", "max_count"),
    ("num_proofs", "num_proofs"),
    ("field", "field"),
)

_POPLAR1_HELP = "Poplar1 only: the aggregation parameter's"


def register(subparsers: Any) -> None:
    """Add `vdaf` and its sub-commands to the `ppm` parser."""
    vdaf_parser = subparsers.add_parser("vdaf", help="VDAF tools (draft-irtf-cfrg-vdaf)")
    vdaf_sub = vdaf_parser.add_subparsers(dest="vdaf_command", metavar="COMMAND")
    vdaf_parser.set_defaults(func=lambda _args: _help(vdaf_parser))

    vec_parser = vdaf_sub.add_parser("vectors", help="check or generate VDAF test vectors")
    vec_sub = vec_parser.add_subparsers(dest="vectors_command", metavar="COMMAND")
    vec_parser.set_defaults(func=lambda _args: _help(vec_parser))

    check = vec_sub.add_parser(
        "check",
        help="replay test-vector files (CFRG JSON schema)",
        description="Replay every operation of each vector file. Exit status 1 if any fails.",
    )
    check.add_argument(
        "files", nargs="*", default=[], metavar="FILE",
        help="vector JSON files (a directory: its *.json); default: the vectors shipped "
             "with this package for --vdaf-version",
    )
    check.add_argument("--json", action="store_true", help="print a JSON report")
    check.add_argument(
        "--vdaf", metavar="NAME",
        help="instance name to use for every file (default: from the file name)",
    )
    check.add_argument(
        "--vdaf-version", type=int, default=None, metavar="N",
        help="VDAF wire version (default: each file's, from a vdaf-NN folder in its path "
        f"or its layout; else {vectors.DEFAULT_VERSION})",
    )
    check.set_defaults(func=cmd_check)

    gen = vec_sub.add_parser(
        "generate",
        help="write test vectors (the standard set, or one for chosen parameters)",
        description=(
            "Without --vdaf, write the standard set of Prio3 vectors (the published file "
            "names). With --vdaf, write one vector for the given parameters."
        ),
    )
    gen.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    gen.add_argument(
        "--vdaf-version", type=int, default=vectors.DEFAULT_VERSION, metavar="N",
        help=f"VDAF wire version (default {vectors.DEFAULT_VERSION})",
    )
    gen.add_argument("--vdaf", metavar="NAME", help="instance, e.g. Prio3Histogram")
    gen.add_argument(
        "--set", metavar="NAME", choices=sorted(vectors.EXTRA_SETS),
        help="write a vector set published beside another draft: "
             + ", ".join(sorted(vectors.EXTRA_SETS)),
    )
    gen.add_argument("--shares", type=int, default=2, help="number of shares (default 2)")
    gen.add_argument("--length", type=int)
    gen.add_argument("--chunk-length", type=int)
    gen.add_argument("--max-measurement", type=int)
    gen.add_argument("--max-weight", type=int)
    gen.add_argument("--max-value", type=int, help="Prio3L1BoundSum (the L1 bound)")
    gen.add_argument("--bits", type=int, help="VDAF-08 Prio3Sum and Prio3SumVec")
    gen.add_argument("--max-count", type=int, help="VDAF-08 Prio3MultiHotHistogram")
    gen.add_argument("--num-proofs", type=int, help="Prio3SumVecWithMultiproof only")
    gen.add_argument("--field", help="Prio3SumVecWithMultiproof only, e.g. Field64")
    gen.add_argument("--level", type=int, help=f"{_POPLAR1_HELP} level (default 0)")
    gen.add_argument("--prefixes", nargs="+", metavar="BITS",
                     help=f"{_POPLAR1_HELP} candidate prefixes, each level+1 characters 0/1 "
                     "(default: all of them)")
    gen.add_argument(
        "--measurements", nargs="+", metavar="M",
        help="measurements, each a JSON value (e.g. 3, '[1,0,2]', '[true,false]')",
    )
    gen.add_argument(
        "--ctx", default=vectors.DEFAULT_CTX.hex(), metavar="HEX",
        help="application context, hex (default: 'some application'; version 08 has none)",
    )
    gen.add_argument("--name", metavar="FILE", help="output file name (default NAME_custom.json)")
    gen.add_argument("--json", action="store_true", help="print the written files as JSON")
    gen.set_defaults(func=cmd_generate)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _error(message: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"ok": False, "error": message}, indent=2))
    else:
        print(f"ppm vdaf vectors: error: {message}", file=sys.stderr)
    return 2


def detect_version(path: Path) -> int:
    """The VDAF version of a vector file: a `vdaf-NN` folder in its path (as the DAP
    checker reads `dap-NN`), else its layout (VDAF-08 files have `prep`, later ones
    `operations`), else the default."""
    for part in reversed(path.resolve().parts[:-1]):
        m = re.fullmatch(r"vdaf-(\d+)", part)
        if m and int(m.group(1)) in vectors.VERSIONS:
            return int(m.group(1))
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return vectors.DEFAULT_VERSION
    if isinstance(data, dict) and "prep" in data and "operations" not in data \
            and 8 in vectors.VERSIONS:
        return 8
    return vectors.DEFAULT_VERSION


def cmd_check(args: argparse.Namespace) -> int:
    if args.vdaf_version is not None:
        try:
            vectors.instances(args.vdaf_version)
        except VectorError as exc:
            return _error(str(exc), args.json)
    paths: list[Path] = []
    names = list(args.files)
    if not names:
        from ppm_reference.vdaf.packaged import vdaf_vectors_dir

        version = args.vdaf_version or vectors.DEFAULT_VERSION
        shipped = vdaf_vectors_dir(version)
        if shipped is None:
            return _error(f"no test vectors shipped for VDAF version {version}; "
                          "give vector files or a directory", args.json)
        names = [str(shipped)]
    for name in names:
        path = Path(name)
        # A path that does not exist is checked as a file: it fails with "cannot read"
        # beside the others (exit 1), as any unreadable file does.
        # A directory stands for the vector files in it.
        paths += sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not paths:
        return _error(f"no vector files (*.json) in {' '.join(args.files)}", args.json)
    versions = {path: args.vdaf_version or detect_version(path) for path in paths}
    results = [
        vectors.check_file(path, vdaf_name=args.vdaf, version=versions[path])
        for path in paths
    ]
    failed = [r for r in results if r.status == "fail"]
    if args.json:
        report = {
            "ok": not failed,
            "vdaf_version": args.vdaf_version or sorted(set(versions.values())),
            "summary": {
                status: sum(1 for r in results if r.status == status)
                for status in ("pass", "fail", "skip")
            },
            "files": [r.to_json() for r in results],
        }
        print(json.dumps(report, indent=2))
    else:
        for r in results:
            print(_line(r))
            for op in r.failed_operations:
                print(f"    {op.describe()}: {op.detail}")
        passed = sum(1 for r in results if r.status == "pass")
        skipped = sum(1 for r in results if r.status == "skip")
        print(f"{passed} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


def _line(r: vectors.FileResult) -> str:
    label = r.status.upper()
    kind = "negative" if r.negative else "positive"
    if r.status == "pass":
        return f"{label} {r.path} ({r.instance}, {kind}, {len(r.operations)} operations)"
    return f"{label} {r.path}: {r.reason}"


def _parse_measurement(text: str, instance: vectors.Instance) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VectorError(f"measurement {text!r} is not a JSON value") from exc
    if instance.measurement == "bool_list" and isinstance(value, list):
        if all(v in (0, 1) for v in value):
            value = [bool(v) for v in value]
    return value


def cmd_generate(args: argparse.Namespace) -> int:
    try:
        if args.set is not None:
            if args.vdaf is not None:
                raise VectorError("--set and --vdaf are exclusive")
            paths = vectors.generate_set(args.set, args.out)
        elif args.vdaf is None:
            paths = vectors.generate_standard(args.out, args.vdaf_version)
        else:
            paths = [_generate_one(args)]
    except VectorError as exc:
        return _error(str(exc), args.json)
    if args.json:
        print(json.dumps({"ok": True, "files": [str(p) for p in paths]}, indent=2))
    else:
        for path in paths:
            print(f"wrote {path}")
    return 0


def _agg_param(args: argparse.Namespace, name: str) -> Any:
    """Poplar1's (level, prefixes) from --level and --prefixes; None for the others."""
    if name != "Poplar1":
        if args.level is not None or args.prefixes:
            raise VectorError(f"{name} has no aggregation parameter (--level, --prefixes)")
        return None
    level = 0 if args.level is None else args.level
    if not 0 <= level < (args.bits or 0):
        raise VectorError(f"--level must be in [0, --bits), got {level}")
    texts = args.prefixes or [format(i, f"0{level + 1}b") for i in range(2 ** (level + 1))]
    prefixes = []
    for text in texts:
        if len(text) != level + 1 or any(c not in "01" for c in text):
            raise VectorError(f"prefix {text!r} is not {level + 1} characters 0/1")
        prefixes.append(tuple(c == "1" for c in text))
    return (level, tuple(sorted(set(prefixes))))


def _generate_one(args: argparse.Namespace) -> Path:
    inst = vectors.lookup_instance(args.vdaf, args.vdaf_version)
    params: dict[str, Any] = {}
    for option, key in _PARAM_OPTIONS:
        value = getattr(args, option)
        if value is not None:
            params[key] = value
    allowed = set(inst.parameter_keys()) | {key for key, _ in inst.hidden}
    extra = sorted(set(params) - allowed)
    if extra:
        raise VectorError(
            f"{inst.name} takes no {', '.join(extra)} "
            f"(its parameters: {', '.join(sorted(allowed))})"
        )
    missing = [key for key in inst.parameter_keys() if key not in params]
    if missing:
        raise VectorError(
            f"{inst.name} needs " + ", ".join("--" + k.replace("_", "-") for k in missing)
        )
    try:
        ctx = bytes.fromhex(args.ctx)
    except ValueError as exc:
        raise VectorError("--ctx must be hex") from exc
    if args.measurements:
        measurements = tuple(_parse_measurement(m, inst) for m in args.measurements)
    else:
        measurements = vectors.default_measurements(inst.name, params)
    agg_param = _agg_param(args, inst.name)
    spec = VectorSpec(inst.name, params, measurements, ctx=ctx, agg_param=agg_param)
    try:
        return vectors.write_vector(spec, args.out, args.vdaf_version, file_name=args.name)
    except VectorError:
        raise
    except Exception as exc:  # e.g. an invalid measurement rejected by shard
        raise VectorError(f"cannot generate {spec.instance}: {type(exc).__name__}: {exc}") from exc
