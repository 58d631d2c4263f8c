"""`ppm upload --task client-task.json MEASUREMENT...`: upload reports as a DAP Client."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from ppm_reference.dap.cli.args import add_json, positive_int
from ppm_reference.dap.cli.errors import run_command, usage_error, usage_errors
from ppm_reference.dap.cli.output import emit_json, iso
from ppm_reference.dap.cli.taskfile import load_view
from ppm_reference.vdaf import registry


def parse_measurement(text: str, vdaf: Any, policy: Any = None) -> Any:
    """A measurement of the task's VDAF from the command line: an integer (Count: 0/1,
    Sum, Histogram bucket index, and the bucket index for a client-randomized
    multi-hot histogram) or a JSON list (SumVec; MultihotCountVec as 0/1 or booleans).
    Raises CliError (usage) with what was expected."""
    name = registry.name_of(vdaf)
    params = registry.parameters_of(vdaf)
    if name == "Poplar1":
        return parse_bit_string_measurement(text, params["bits"])
    rappor = policy is not None and hasattr(policy, "rappor")
    top = params.get("max_measurement")
    if top is None and "bits" in params:
        top = (1 << params["bits"]) - 1  # VDAF-08 Sum, SumVec
    expected = {
        "Prio3Count": "0 or 1",
        "Prio3Sum": f"an integer in [0, {top}]",
        "Prio3Histogram": f"a bucket index in [0, {params.get('length')})",
        "Prio3SumVec": f"a JSON list of {params.get('length')} integers in [0, {top}]",
        "Prio3L1BoundSum": (
            f"a JSON list of {params.get('length')} non-negative integers with sum at most "
            f"{params.get('max_value')}"),
        "Prio3MultihotCountVec": (
            f"a bucket index in [0, {params.get('length')})" if rappor else
            f"a JSON list of {params.get('length')} bits (0/1 or true/false) with at "
            f"most {params.get('max_weight')} ones"),
    }.get(name, "a measurement")
    bad = usage_error(f"bad measurement {text!r} for {registry.describe(vdaf)}: expected "
                      f"{expected}")
    try:
        value = json.loads(text)
    except ValueError:
        raise bad from None
    if isinstance(value, bool) and name == "Prio3Count":
        value = int(value)
    if rappor:
        if not (isinstance(value, int) and not isinstance(value, bool)
                and 0 <= value < params["length"]):
            raise bad
        return value
    if name == "Prio3MultihotCountVec":
        if not isinstance(value, list) or any(v not in (0, 1) for v in value):
            raise bad
        value = [bool(v) for v in value]
    elif name in ("Prio3SumVec", "Prio3L1BoundSum"):
        if not isinstance(value, list) or any(isinstance(v, bool) for v in value):
            raise bad
    elif not isinstance(value, int) or isinstance(value, bool):
        raise bad
    try:
        vdaf.flp.encode(value)
    except (ValueError, TypeError):
        raise bad from None
    return value


def parse_bit_string_measurement(text: str, bits: int) -> tuple[bool, ...]:
    """A Poplar1 measurement: BITS characters 0/1, or `hex:...` / `text:...` for a string
    of exactly BITS/8 bytes (each byte MSB first, draft-irtf-cfrg-vdaf-20 Section 8.1.1;
    text is UTF-8, zero-padded on the right)."""
    expected = f"{bits} bits as 0/1" + (f", or hex:/text: for {bits // 8} bytes"
                                         if bits % 8 == 0 else "")
    bad = usage_error(f"bad measurement {text!r} for Poplar1(bits={bits}): expected "
                      f"{expected}")
    data: bytes | None = None
    if text.startswith("hex:"):
        try:
            data = bytes.fromhex(text[4:])
        except ValueError:
            raise bad from None
    elif text.startswith("text:"):
        data = text[5:].encode()
        if bits % 8 == 0 and len(data) <= bits // 8:
            data = data.ljust(bits // 8, b"\0")
    if data is not None:
        if len(data) * 8 != bits:
            raise bad
        return tuple(bool((byte >> (7 - i)) & 1) for byte in data for i in range(8))
    if len(text) != bits or any(c not in "01" for c in text):
        raise bad
    return tuple(c == "1" for c in text)


def read_measurement_texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.measurements)
    if args.file is not None:
        try:
            content = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        except OSError as exc:
            raise usage_error(f"cannot read {args.file}: {exc.strerror or exc}") from None
        texts += [line.strip() for line in content.splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    if not texts:
        raise usage_error("no measurements (give them as arguments or with --file)")
    return texts


def _cmd_upload(args: argparse.Namespace) -> int:
    from ppm_reference.dap.client import Client
    from ppm_reference.dap.common import BatchMode
    from ppm_reference.dap.dp import task_policy
    from ppm_reference.dap.provision import b64

    _, task = load_view(args.task, collector=False)
    vdaf = task.vdaf()
    policy = task_policy(task)
    measurements = [parse_measurement(t, vdaf, policy) for t in read_measurement_texts(args)]
    now = time.time()

    extensions = []
    if args.min_batch_bound is not None:
        from ppm_reference.dap.sampling import min_batch_size_extension

        extensions.append(min_batch_size_extension(args.min_batch_bound))
    route = None
    if args.relay is not None:
        from ppm_reference.dap.client import RelayRoute
        from ppm_reference.dap.ohttp import OhttpError, decode_key_configs

        if not args.relay.startswith(("http://", "https://")):
            raise usage_error(f"--relay must be an http(s) URL, got {args.relay!r}")
        pinned = None
        if args.ohttp_keys is not None:
            try:
                pinned = decode_key_configs(Path(args.ohttp_keys).read_bytes())[0]
            except OSError as exc:
                raise usage_error(f"cannot read {args.ohttp_keys}: "
                                  f"{exc.strerror or exc}") from None
            except OhttpError as exc:
                raise usage_error(f"{args.ohttp_keys}: not application/ohttp-keys: "
                                  f"{exc}") from None
        route = RelayRoute(args.relay, pinned)
    elif args.ohttp_keys is not None:
        raise usage_error("--ohttp-keys goes with --relay")

    # On-device sampling (paper 000): each measurement is one Client's, which decides by
    # itself (OS CSPRNG) whether to take part; a sampled-out one sends nothing, or a
    # dummy report with probability --dummy-rate.
    dummies: list[Any] = []
    sampled_out = 0
    if args.sample_rate is not None or args.dummy_rate:
        from ppm_reference.dap.sampling import Decision, ParticipationPlan, dummy_measurement

        with usage_errors():
            plan = ParticipationPlan(q=1.0 if args.sample_rate is None else args.sample_rate,
                                     dummy_rate=args.dummy_rate)
            if args.dummy_rate:
                dummy_measurement(registry.name_of(vdaf), registry.parameters_of(vdaf))
        kept = []
        for m in measurements:
            decision = plan.decide()
            if decision == Decision.CONTRIBUTE:
                kept.append(m)
                continue
            sampled_out += 1
            if decision == Decision.DUMMY:
                dummies.append(dummy_measurement(registry.name_of(vdaf),
                                                 registry.parameters_of(vdaf), policy))
        measurements = kept

    _check_task_interval(task, now)
    show = _UploadProgress(len(measurements) + len(dummies))

    async def go() -> Any:
        async with Client(task, extensions=extensions, relay=route) as client:
            from ppm_reference.dap.client import UploadResult

            result = UploadResult(0, {})
            for i in range(0, len(measurements), args.batch_size):
                part = await client.upload(measurements[i:i + args.batch_size],
                                           batch_size=args.batch_size, time_seconds=now)
                result.accepted += part.accepted
                result.rejected.update(part.rejected)
                show(result.accepted + len(result.rejected))
            if dummies:
                extra = await client.upload_reports(
                    await client.prepare(dummies, now, randomized=True))
                result.accepted += extra.accepted
                result.rejected.update(extra.rejected)
            return result

    try:
        result = asyncio.run(go())
    finally:
        show.done()
    tp = task.time_precision
    start = int(now) // tp * tp
    rejected = {b64(rid): err.name.lower() for rid, err in result.rejected.items()}
    hint = (f"--interval {start},{tp}" if task.batch_mode == BatchMode.TIME_INTERVAL
            else "--current-batch")
    by_reason: dict[str, int] = {}
    for err in rejected.values():
        by_reason[err] = by_reason.get(err, 0) + 1
    # Reports refused because their batch was collected cannot be collected again.
    spent = bool(rejected) and result.accepted == 0 and set(by_reason) <= SPENT_REASONS
    if args.json:
        emit_json({"ok": not rejected, "accepted": result.accepted, "rejected": rejected,
                   "rejected_by_reason": by_reason,
                   "task_id": b64(bytes(task.task_id)), "report_time": start,
                   "collect_hint": None if spent else hint, "sampled_out": sampled_out,
                   "dummies": len(dummies)})
    else:
        print(f"uploaded {result.accepted} of {len(measurements) + len(dummies)} reports "
              f"to {task.leader_aggregator_endpoint}")
        if sampled_out:
            print(f"  {sampled_out} Clients sampled themselves out and sent nothing but "
                  f"{len(dummies)} dummy reports")
        if by_reason:
            print("  rejected: " + ", ".join(
                f"{n} {reason} ({REASONS.get(reason, 'see the DAP draft')})"
                for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1])))
        if spent:
            print(f"reports are timestamped {iso(start)} ({start}), in a batch that was "
                  "already collected: they cannot be collected; upload into a later "
                  "interval (or a new task)")
        else:
            print(f"reports are timestamped {iso(start)} ({start}); collect with: "
                  f"ppm collect --task COLLECTOR_TASK {hint}")
    if rejected:
        print(f"ppm: error: the Leader rejected {len(rejected)} of "
              f"{len(measurements) + len(dummies)} reports", file=sys.stderr)
        return 1
    return 0


# What a report rejection means for the user (DAP-18 Section 4.5.2 report errors).
REASONS = {
    "batch_collected": "its batch was already collected",
    "report_replayed": "a report with this ID was already uploaded",
    "report_dropped": "too old for the Leader to keep",
    "hpke_unknown_config_id": "the Leader's HPKE key changed; retry",
    "outdated_config": "the Leader's HPKE key changed; retry",
    "hpke_decrypt_error": "the Leader could not decrypt it",
    "vdaf_prep_error": "the measurement was refused by the VDAF",
    "task_expired": "the task has ended",
    "task_not_started": "the task has not started",
    "report_too_early": "its time is ahead of the Leader's clock",
    "invalid_message": "malformed",
}
SPENT_REASONS = {"batch_collected"}


def _check_task_interval(task: Any, now: float) -> None:
    """Refuse, before encrypting anything, an upload whose time is outside the task's
    interval, in the user's units (seconds and UTC), not the wire's."""
    expiration = getattr(task, "task_expiration", None)  # DAP-09: seconds, no start
    if expiration is not None and now >= expiration:
        raise usage_error(f"the task has ended: it took reports until {iso(expiration)} "
                          f"({expiration}); it is now {iso(int(now))} ({int(now)})")
    interval = getattr(task, "task_interval", None)
    if interval is None:
        return
    from ppm_reference.dap.cli.output import interval_json

    iv = interval_json(interval, task.profile.flow.interval_unit(task))
    lo, hi = iv["start"], iv["start"] + iv["duration"]
    if not lo <= int(now) < hi:
        when = "has not started" if now < lo else "has ended"
        raise usage_error(f"the task {when}: it takes reports from {iso(lo)} ({lo}) to "
                          f"{iso(hi)} ({hi}); it is now {iso(int(now))} ({int(now)})")


class _UploadProgress:
    """`uploaded N/M` on stderr while uploading, only when stderr is a terminal and the
    upload takes more than one request."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.enabled = sys.stderr.isatty() and total > 500
        self.shown = False

    def __call__(self, done: int) -> None:
        if self.enabled:
            sys.stderr.write(f"\ruploading: {done}/{self.total} reports\033[K")
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def register(subparsers: Any) -> None:
    """Add `upload` to the `ppm` parser."""
    p = subparsers.add_parser("upload", help="upload measurements as a DAP Client")
    p.add_argument("--task", required=True, metavar="FILE", help="client-task.json")
    p.add_argument("measurements", nargs="*", metavar="MEASUREMENT",
                   help="an integer, or a JSON list for SumVec / MultihotCountVec; for "
                   "Poplar1 a string of 0/1 (or hex:..., text:... for whole bytes)")
    p.add_argument("--file", metavar="PATH", help="more measurements, one per line (- for "
                   "stdin)")
    p.add_argument("--batch-size", type=positive_int, default=500,
                   help="reports per upload request")
    p.add_argument("--min-batch-bound", type=positive_int, metavar="B",
                   help="bind into each report the smallest batch it may be released in "
                   "(report extension 0xFF01, enforced by both Aggregators)")
    p.add_argument("--sample-rate", type=float, metavar="Q",
                   help="each measurement is a Client taking part with probability Q "
                   "(Poisson sampling on the device, paper 000); others send nothing")
    p.add_argument("--dummy-rate", type=float, default=0.0, metavar="R",
                   help="a sampled-out Client sends a zero-effect dummy report with "
                   "probability R (not for Histogram)")
    p.add_argument("--relay", metavar="URL",
                   help="upload through this Oblivious HTTP relay (RFC 9458) to the "
                   "Leader's gateway: the Leader sees the relay's address only")
    p.add_argument("--ohttp-keys", metavar="FILE",
                   help="the gateway's key configuration (application/ohttp-keys) to pin; "
                   "default: fetched through the relay")
    add_json(p)
    p.set_defaults(func=run_command(_cmd_upload))
