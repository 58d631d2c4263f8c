"""Test vectors of the DAP drafts, the part no draft owns (the schema is in
test_vectors/README.md; the file format is :mod:`dap.vector_format`).

A draft's ``vectors`` module subclasses :class:`DraftVectors` with its cases (message
values, invalid encodings) and its differences (seed, task, upload, requests, the names
of its messages); this module has what every draft does alike:

* the seeded derivation of every random input (:class:`Derive`) and the example inputs
  drawn from it (:meth:`DraftVectors.example_inputs`);
* an example: the HPKE keys, the upload of each report, the run of the protocol core
  (:func:`dap.profiles.example_run.run_example`), the VDAF's intermediate values and the
  collection (:meth:`DraftVectors.build_example`);
* the message files (:meth:`DraftVectors.build_message_file`), :meth:`DraftVectors.generate`
  and the checks of both kinds of file, with the decryption of every ciphertext.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppm_reference.dap.codec import DecodeError, Struct
from ppm_reference.dap.common import Role
from ppm_reference.dap.hpke import (
    Aead,
    HpkeError,
    HpkeKeypair,
    Kdf,
    Kem,
    derive_keypair,
    open_aggregate_share,
)
from ppm_reference.dap.profiles.base import Profile
from ppm_reference.dap.profiles.example_run import ExampleRun, message, run_example
from ppm_reference.dap.vector_format import (
    FORMAT_VERSION,
    CheckReport,
    ExampleMessages,
    VectorError,
    _diff,
    _dump,
    _hex,
    _msg,
    _unhex,
    _value_json,
    check_example_messages,
    check_message_cases,
)

LEADER_URL = "https://leader.example.com/dap/"
HELPER_URL = "https://helper.example.com/dap/"
ROLES = ("leader", "helper", "collector")
MANDATORY_SUITE = (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM)

Cases = dict[str, list[tuple[str, Any]]]
InvalidCases = dict[str, list[tuple[str, bytes]]]


class Derive:
    """``derive(label, n) = SHAKE128(seed || "/" || label)[:n]``: every random input of a
    draft's vectors comes from its fixed seed."""

    def __init__(self, seed: bytes) -> None:
        self.seed = seed

    def __call__(self, label: str, n: int) -> bytes:
        return hashlib.shake_128(self.seed + b"/" + label.encode()).digest(n)


# ---------------------------------------------------------------------------------------
# Examples: the fixed choices
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleSpec:
    """The fixed choices of one example; every random input is derived from ``name``."""

    name: str
    vdaf_name: str
    vdaf_parameters: dict[str, int]
    measurements: list[Any]
    batch_mode: int  # the draft's code point (DAP-09: its query type)
    report_times: list[int]  # in the draft's unit of time
    suites: dict[str, tuple[Kem, Kdf, Aead]]
    config_ids: dict[str, int]
    task_interval: tuple[int, int] | None = None
    description: str = ""
    time_precision: int = 3600
    min_batch_size: int = 2

    @classmethod
    def prio3_count(cls, batch_mode: int, report_times: list[int], description: str,
                    **choices: Any) -> ExampleSpec:
        """Prio3Count, three reports; every HPKE config uses the mandatory suite."""
        return cls(
            name="Prio3Count", vdaf_name="Prio3Count", vdaf_parameters={},
            measurements=[1, 0, 1], batch_mode=batch_mode, report_times=report_times,
            suites=dict.fromkeys(ROLES, MANDATORY_SUITE),
            config_ids={"leader": 1, "helper": 2, "collector": 200},
            description=description, **choices,
        )

    @classmethod
    def prio3_histogram(cls, batch_mode: int, report_times: list[int], description: str,
                        **choices: Any) -> ExampleSpec:
        """Prio3Histogram (length 4, chunk_length 2), four reports; the Helper's HPKE
        config uses P-256 and the Collector's ChaCha20Poly1305."""
        return cls(
            name="Prio3Histogram", vdaf_name="Prio3Histogram",
            vdaf_parameters={"length": 4, "chunk_length": 2},
            measurements=[0, 3, 3, 1], batch_mode=batch_mode, report_times=report_times,
            suites={
                "leader": MANDATORY_SUITE,
                "helper": (Kem.DHKEM_P256_HKDF_SHA256, Kdf.HKDF_SHA256, Aead.AES_128_GCM),
                "collector": (Kem.DHKEM_X25519_HKDF_SHA256, Kdf.HKDF_SHA256,
                              Aead.CHACHA20_POLY1305),
            },
            config_ids={"leader": 7, "helper": 9, "collector": 33},
            description=description, **choices,
        )


def make_vdaf(name: str, parameters: dict[str, int], profile: Profile) -> Any:
    """The VDAF ``name`` of the profile's VDAF draft, with two Aggregators."""
    return profile.vdaf_class(name)(profile.shares, **parameters)


def hpke_keypair(entry: dict[str, Any]) -> HpkeKeypair:
    """The HPKE keypair of an ``inputs.hpke`` entry (RFC 9180 ``DeriveKeyPair``)."""
    return derive_keypair(
        entry["config_id"], _unhex(entry["ikm"], "ikm"),
        Kem(entry["kem_id"]), Kdf(entry["kdf_id"]), Aead(entry["aead_id"]),
    )


# ---------------------------------------------------------------------------------------
# Message vectors
# ---------------------------------------------------------------------------------------


def common_invalid_cases() -> InvalidCases:
    """Encodings of the message types every draft has alike that a strict decoder
    rejects."""
    return {
        "HpkeConfigList": [("empty list", b"\x00\x00")],
        "HpkeCiphertext": [("empty enc", b"\x01\x00\x00\x00\x00\x00\x01\x00")],
    }


# ---------------------------------------------------------------------------------------
# A draft's vectors
# ---------------------------------------------------------------------------------------


class DraftVectors:
    """Generate and check one draft's vectors. A subclass names what the draft does its
    own way; the methods that raise :class:`NotImplementedError` are its to define."""

    examples: list[ExampleSpec]
    # The ``inputs.task`` fields, in order; ``batch_mode_field`` names the batch mode.
    task_fields: tuple[str, ...]
    batch_mode_field: str = "batch_mode"
    # The 16-byte IDs the inputs record (``<example>/<name>``), in order.
    input_ids: tuple[str, ...]
    # Whether the draft names the VDAF verification key (``verification_key_id``).
    verification_key_ids: bool
    # The batch mode in which the Leader names the batch (the inputs record ``batch_id``).
    leader_selected: int
    # The draft's words for the verifier share and message of the VDAF.
    verifier_terms: tuple[str, str] = ("verifier_share", "verifier_message")
    # The Collector's request and the collection result: (``collection`` key, class name).
    collection_request: tuple[str, str]
    collection_result: tuple[str, str]
    # The ID types of the message files, which also get a ``base64url`` form.
    id_types: tuple[type, ...]

    def __init__(self, seed: bytes) -> None:
        self.derive = Derive(seed)

    # -- sample values and the cases every draft has alike --------------------------------
    def sample_ids(self, m: Any) -> tuple[Any, Any, Any, Any]:
        """Two report IDs, a task ID and a batch ID of the draft's message module ``m``."""
        derive = self.derive
        return (m.ReportID(derive("messages/report_id/1", 16)),
                m.ReportID(derive("messages/report_id/2", 16)),
                m.TaskID(derive("messages/task_id", 32)),
                m.BatchID(derive("messages/batch_id", 32)))

    def ciphertext(self, m: Any, i: int) -> Any:
        """An ``HpkeCiphertext`` for config ID ``i``."""
        return m.HpkeCiphertext(i, self.derive(f"messages/enc/{i}", 32),
                                self.derive(f"messages/payload/{i}", 24))

    def common_message_cases(self, m: Any) -> Cases:
        """The valid values of the message types every draft has alike."""
        derive = self.derive
        r1, _, task_id, batch_id = self.sample_ids(m)
        return {
            "ReportID": [("random report ID", r1)],
            "TaskID": [("random task ID", task_id)],
            "BatchID": [("random batch ID", batch_id)],
            "AggregationJobID": [("16-byte job ID",
                                  m.AggregationJobID(derive("messages/aj", 16)))],
            "CollectionJobID": [("16-byte job ID", m.CollectionJobID(derive("messages/cj", 16)))],
            "Empty": [("empty struct", m.Empty())],
            "HpkeCiphertext": [("config 1", self.ciphertext(m, 1))],
            "HpkeConfig": [("X25519", m.HpkeConfig(1, 0x0020, 0x0001, 0x0001, derive("pk", 32)))],
            "HpkeConfigList": [
                ("two configs, decreasing preference", m.HpkeConfigList([
                    m.HpkeConfig(194, 0x0010, 0x0001, 0x0001, b"\x04" + derive("pk1", 64)),
                    m.HpkeConfig(17, 0x0020, 0x0001, 0x0003, derive("pk2", 32)),
                ])),
            ],
            "PingPongMessage": [
                ("initialize", m.PingPongMessage.initialize(b"\x01\x02")),
                ("continue", m.PingPongMessage.continue_(b"\x03", b"\x04\x05")),
                ("finish", m.PingPongMessage.finish(b"")),
            ],
            "AggregateShare": [("encrypted share", m.AggregateShare(self.ciphertext(m, 200)))],
        }

    def aggregation_step_cases(self, m: Any, resp: Any, finish: Callable[[Any], Any],
                               vdaf_error: Any, continue_cls: Any) -> Cases:
        """The Helper's response to an aggregation job and the Leader's continuation, with
        the draft's classes of one report's response and continuation (DAP-09:
        ``PrepareResp``, ``PrepareContinue``; DAP-18: ``VerifyResp``, ``VerifyContinue``)
        and its ``finish`` response and VDAF error."""
        r1, r2, _, _ = self.sample_ids(m)
        return {
            "AggregationJobResp": [
                ("three responses", m.AggregationJobResp([
                    resp.continue_(r1, b"\x02\x00\x00\x00\x00"),
                    finish(r2),
                    resp.reject(r2, vdaf_error),
                ])),
            ],
            continue_cls.__name__: [("continue", continue_cls(r1, b"\x01\x02"))],
            "AggregationJobContinueReq": [
                ("step 1", m.AggregationJobContinueReq(1, [continue_cls(r1, b"\x01\x02")])),
            ],
        }

    def all_message_cases(self, m: Any) -> Cases:
        return {**self.common_message_cases(m), **self.message_cases(m)}

    def all_invalid_cases(self, m: Any) -> InvalidCases:
        return {**common_invalid_cases(), **self.invalid_cases(m)}

    @staticmethod
    def task_arguments(task_inputs: dict[str, Any]) -> dict[str, Any]:
        """The task parameters every draft has, from the ``inputs.task`` section."""
        return {
            "task_id": _unhex(task_inputs["task_id"], "task_id"),
            "leader_aggregator_endpoint": task_inputs["leader_aggregator_endpoint"],
            "helper_aggregator_endpoint": task_inputs["helper_aggregator_endpoint"],
            "time_precision": task_inputs["time_precision"],
            "min_batch_size": task_inputs["min_batch_size"],
        }

    # -- the draft's own -----------------------------------------------------------------
    def message_cases(self, m: Any) -> Cases:
        """Valid sample values of the draft's own message types, with a description each
        (beyond :meth:`common_message_cases`)."""
        raise NotImplementedError

    def invalid_cases(self, m: Any) -> InvalidCases:
        """Encodings that a strict decoder must reject, beyond the generic ones."""
        raise NotImplementedError

    def types(self, m: Any) -> dict[str, type]:
        """Every message type of the message files, by name."""
        raise NotImplementedError

    def task(self, vdaf: Any, task_inputs: dict[str, Any], profile: Profile) -> Any:
        raise NotImplementedError

    def vdaf_section(self, vdaf: Any, inputs: dict[str, Any], profile: Profile) -> Any:
        raise NotImplementedError

    def task_section(self, task: Any, ctx: bytes) -> dict[str, Any]:
        raise NotImplementedError

    def input_share_aad(self, task: Any, report: Any) -> Struct:
        raise NotImplementedError

    def upload_section(self, task: Any, reports: list[Any], upload_reports: list[Any],
                       profile: Profile) -> dict[str, Any]:
        raise NotImplementedError

    def run(self, task: Any, inputs: dict[str, Any], keys: dict[str, HpkeKeypair],
            reports: list[Any], agg_param: bytes) -> tuple[ExampleRun, Struct]:
        """Run the example through the core; returns the run and the Collector's request."""
        raise NotImplementedError

    def aggregation_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        raise NotImplementedError

    def collection_urls(self, task: Any, run: ExampleRun, profile: Profile) -> dict[str, Any]:
        raise NotImplementedError

    def aggregate_share_aad(self, task: Any, request: Any, run: ExampleRun,
                            agg_param: bytes) -> Struct:
        raise NotImplementedError

    def more_example_messages(self, m: Any) -> ExampleMessages:
        """The draft's own messages of an example file (besides the common ones)."""
        return []

    # -- inputs --------------------------------------------------------------------------
    def example_inputs(self, spec: ExampleSpec, profile: Profile) -> dict[str, Any]:
        """All inputs of an example, derived from the seed (the ``inputs`` section)."""
        derive, p = self.derive, spec.name
        vdaf = make_vdaf(spec.vdaf_name, spec.vdaf_parameters, profile)
        hpke = {}
        for role in ROLES:
            kem, kdf, aead = spec.suites[role]
            hpke[role] = {"config_id": spec.config_ids[role], "kem_id": int(kem),
                          "kdf_id": int(kdf), "aead_id": int(aead),
                          "ikm": _hex(derive(f"{p}/hpke/{role}/ikm", 66))}
        reports = []
        for i, (measurement, t) in enumerate(zip(spec.measurements, spec.report_times,
                                                 strict=True)):
            report: dict[str, Any] = {"measurement": measurement,
                                      "report_id": _hex(derive(f"{p}/report/{i}/report_id", 16)),
                                      "time": t,
                                      "rand": _hex(derive(f"{p}/report/{i}/rand", vdaf.RAND_SIZE))}
            for role in ("leader", "helper"):
                key = f"{role}_ephemeral_ikm"
                report[key] = _hex(derive(f"{p}/report/{i}/{key}", 66))
            reports.append(report)
        task = {
            "task_id": _hex(derive(f"{p}/task_id", 32)),
            "task_info": _hex(f"ppm-reference {p} example".encode()),
            "leader_aggregator_endpoint": LEADER_URL,
            "helper_aggregator_endpoint": HELPER_URL,
            "time_precision": spec.time_precision,
            "min_batch_size": spec.min_batch_size,
            self.batch_mode_field: int(spec.batch_mode),
            "task_interval": (
                {"start": spec.task_interval[0], "duration": spec.task_interval[1]}
                if spec.task_interval else None
            ),
        }
        inputs: dict[str, Any] = {
            "vdaf": {"name": spec.vdaf_name, "parameters": dict(spec.vdaf_parameters)},
            "task": {name: task[name] for name in self.task_fields},
            "hpke": hpke,
            "vdaf_verify_key": _hex(derive(f"{p}/vdaf_verify_key", vdaf.VERIFY_KEY_SIZE)),
        }
        if self.verification_key_ids:
            inputs["verification_key_id"] = 0
        inputs["reports"] = reports
        for name in self.input_ids:
            inputs[name] = _hex(derive(f"{p}/{name}", 16))
        for role in ("leader", "helper"):
            inputs[f"{role}_agg_share_ephemeral_ikm"] = _hex(
                derive(f"{p}/collect/{role}_ephemeral_ikm", 66))
        if spec.batch_mode == self.leader_selected:
            inputs["batch_id"] = _hex(derive(f"{p}/batch_id", 32))
        return inputs

    # -- an example ----------------------------------------------------------------------
    def build_example(self, inputs: dict[str, Any], description: str,
                      profile: Profile) -> dict[str, Any]:
        """Compute every output of an example from its inputs. Deterministic."""
        m = profile.messages
        vdaf = make_vdaf(inputs["vdaf"]["name"], inputs["vdaf"]["parameters"], profile)
        task = self.task(vdaf, inputs["task"], profile)
        ctx = task.vdaf_ctx()
        keys = {role: hpke_keypair(entry) for role, entry in inputs["hpke"].items()}
        agg_param = vdaf.encode_agg_param(None)
        out: dict[str, Any] = {
            "kind": "example",
            "format_version": FORMAT_VERSION,
            "draft": profile.draft,
            "vdaf_draft": profile.vdaf_draft,
            "description": description,
            "inputs": inputs,
            "vdaf": self.vdaf_section(vdaf, inputs, profile),
            "task": self.task_section(task, ctx),
            "hpke": {role: {"private_key": _hex(kp.private_key), "config": _msg(kp.config)}
                     for role, kp in keys.items()},
            "hpke_config_lists": {role: _msg(m.HpkeConfigList([keys[role].config]))
                                  for role in ("leader", "helper")},
        }
        reports, upload_reports = self._upload(task, vdaf, inputs, keys, profile)
        out["upload"] = self.upload_section(task, reports, upload_reports, profile)
        # The protocol run: the Leader and the Helper of dap.core. The Client's and the
        # Collector's messages go in; every message an Aggregator sends is what the core
        # produced.
        run, request = self.run(task, inputs, keys, reports, agg_param)
        agg_shares, agg_reports = self._aggregate(task, vdaf, ctx, inputs, keys, reports,
                                                  profile)
        out["aggregation"] = {
            **self.aggregation_urls(task, run, profile),
            "agg_param": _hex(agg_param),
            "reports": agg_reports,
            "aggregation_job_init_req": message(m.AggregationJobInitReq,
                                                run.aggregation_job_init_req),
            "aggregation_job_resp": message(m.AggregationJobResp, run.aggregation_job_resp),
            "leader_agg_share": _hex(vdaf.encode_agg_share(agg_shares[0])),
            "helper_agg_share": _hex(vdaf.encode_agg_share(agg_shares[1])),
        }
        result_key, result_cls = self.collection_result
        out["collection"] = {
            **self.collection_urls(task, run, profile),
            self.collection_request[0]: _msg(request),
            "aggregate_share_req": message(m.AggregateShareReq, run.aggregate_share_req),
            "aggregate_share_aad": _msg(self.aggregate_share_aad(task, request, run,
                                                                 agg_param)),
            "leader_hpke_info": _hex(profile.aggregate_share_info(Role.LEADER)),
            "helper_hpke_info": _hex(profile.aggregate_share_info(Role.HELPER)),
            "aggregate_share": message(m.AggregateShare, run.aggregate_share),
            result_key: message(getattr(m, result_cls), run.collection_job_resp),
            "aggregate_result": vdaf.unshard(None, agg_shares, len(reports)),
        }
        return out

    def run_core(self, task: Any, inputs: dict[str, Any], keys: dict[str, HpkeKeypair], *,
                 uploads: list[bytes], collection_req: Struct, leader_ids: list[bytes],
                 helper_ids: list[bytes], collection_job_id: bytes | None,
                 now: int) -> ExampleRun:
        """:func:`run_example` with what the inputs and keys say; the rest is the draft's."""
        return run_example(
            task,
            vdaf_verify_key=_unhex(inputs["vdaf_verify_key"], "vdaf_verify_key"),
            # Without verification key IDs (DAP-09), a task has one key.
            verification_key_id=inputs["verification_key_id"] if self.verification_key_ids
            else 0,
            leader_keypair=keys["leader"],
            helper_keypair=keys["helper"],
            collector_hpke_config=keys["collector"].config,
            uploads=uploads,
            report_count=len(uploads),
            collection_req=collection_req.encode(),
            leader_ids=leader_ids,
            helper_ids=helper_ids,
            collection_job_id=collection_job_id,
            leader_agg_share_ephemeral_ikm=_unhex(inputs["leader_agg_share_ephemeral_ikm"],
                                                  "ikm"),
            helper_agg_share_ephemeral_ikm=_unhex(inputs["helper_agg_share_ephemeral_ikm"],
                                                  "ikm"),
            now=now,
        )

    def _upload(self, task: Any, vdaf: Any, inputs: dict[str, Any],
                keys: dict[str, HpkeKeypair], profile: Profile) -> tuple[list[Any], list[Any]]:
        """The Client's reports and, for each, the values behind it."""
        client = profile.flow.client
        plaintext = profile.messages.PlaintextInputShare
        reports, upload_reports = [], []
        for r in inputs["reports"]:
            report_id = profile.messages.ReportID(_unhex(r["report_id"], "report_id"))
            rand = _unhex(r["rand"], "rand")
            sharded = client.shard(task, vdaf, r["measurement"], report_id, rand)
            report = client.generate_report(
                task, r["measurement"], time=r["time"],
                leader_hpke_config=keys["leader"].config,
                helper_hpke_config=keys["helper"].config,
                vdaf=vdaf, report_id=report_id, rand=rand,
                ephemeral_ikms=(_unhex(r["leader_ephemeral_ikm"], "ikm"),
                                _unhex(r["helper_ephemeral_ikm"], "ikm")),
            )
            reports.append(report)
            upload_reports.append({
                "public_share": _hex(sharded.public_share),
                "leader_input_share": _hex(sharded.input_shares[0]),
                "helper_input_share": _hex(sharded.input_shares[1]),
                "leader_plaintext_input_share": _msg(plaintext([], sharded.input_shares[0])),
                "helper_plaintext_input_share": _msg(plaintext([], sharded.input_shares[1])),
                "input_share_aad": _msg(self.input_share_aad(task, report)),
                "leader_hpke_info": _hex(profile.input_share_info(Role.LEADER)),
                "helper_hpke_info": _hex(profile.input_share_info(Role.HELPER)),
                "report": _msg(report),
            })
        return reports, upload_reports

    def _aggregate(self, task: Any, vdaf: Any, ctx: bytes, inputs: dict[str, Any],
                   keys: dict[str, HpkeKeypair], reports: list[Any],
                   profile: Profile) -> tuple[list[Any], list[Any]]:
        """The VDAF's intermediate values of the aggregation (Prio3 has one round), for
        the reader: the core computed the same inside."""
        open_input_share = profile.flow.client.open_input_share
        verify_key = _unhex(inputs["vdaf_verify_key"], "vdaf_verify_key")
        share_term, message_term = self.verifier_terms
        agg_shares = [vdaf.agg_init(None), vdaf.agg_init(None)]
        agg_reports = []
        for report in reports:
            nonce = bytes(report.report_metadata.report_id)
            public_share = vdaf.decode_public_share(report.public_share)
            aad = self.input_share_aad(task, report)
            shares = [
                open_input_share(keys["leader"], Role.LEADER, aad,
                                 report.leader_encrypted_input_share, profile=profile).payload,
                open_input_share(keys["helper"], Role.HELPER, aad,
                                 report.helper_encrypted_input_share, profile=profile).payload,
            ]
            states, vshares = [], []
            for agg_id in (0, 1):
                state, vshare = vdaf.verify_init(
                    verify_key, ctx, agg_id, None, nonce, public_share,
                    vdaf.decode_input_share(agg_id, shares[agg_id]),
                )
                states.append(state)
                vshares.append(vshare)
            vmessage = vdaf.verifier_shares_to_message(ctx, None, vshares)
            out_shares = [vdaf.verify_next(ctx, states[j], vmessage) for j in (0, 1)]
            for j in (0, 1):
                agg_shares[j] = vdaf.agg_update(None, agg_shares[j], out_shares[j])
            # The Leader initializes; the Helper finishes with an outbound message and
            # answers "continue" with the finish message; the Leader then finishes.
            pingpong = profile.messages.PingPongMessage
            agg_reports.append({
                "report_id": _hex(nonce),
                f"leader_{share_term}": _hex(vdaf.encode_verifier_share(vshares[0])),
                f"helper_{share_term}": _hex(vdaf.encode_verifier_share(vshares[1])),
                message_term: _hex(vdaf.encode_verifier_message(vmessage)),
                "leader_outbound": _msg(pingpong.initialize(
                    vdaf.encode_verifier_share(vshares[0]))),
                "helper_outbound": _msg(pingpong.finish(vdaf.encode_verifier_message(vmessage))),
                "leader_out_share": _hex(vdaf.encode_out_share(out_shares[0])),
                "helper_out_share": _hex(vdaf.encode_out_share(out_shares[1])),
            })
        return agg_shares, agg_reports

    # -- message files -------------------------------------------------------------------
    def build_message_file(self, name: str, profile: Profile) -> dict[str, Any]:
        m = profile.messages
        cls = self.types(m)[name]
        valid = self.all_message_cases(m)[name]
        invalid = list(self.all_invalid_cases(m).get(name, []))
        first = valid[0][1].encode()
        invalid.append(("one trailing byte", first + b"\x00"))
        if first:
            invalid.append(("last byte missing", first[:-1]))
        doc: dict[str, Any] = {
            "kind": "message",
            "format_version": FORMAT_VERSION,
            "draft": profile.draft,
            "message": name,
            "media_type": (
                profile.media_type_for(name) if name in profile.message_types else None
            ),
            "valid": [
                {"description": d, "fields": _value_json(v), "encoding": v.encode().hex()}
                for d, v in valid
            ],
            "invalid": [],
        }
        for d, data in invalid:
            try:
                cls.decode(data)  # type: ignore[attr-defined]
            except DecodeError as exc:
                doc["invalid"].append(
                    {"description": d, "encoding": data.hex(), "error": str(exc),
                     "problem_type": exc.problem_type}
                )
            else:  # pragma: no cover - a generator bug
                raise VectorError(f"{name}: invalid case {d!r} decodes")
        if isinstance(valid[0][1], self.id_types):
            for case, (_, v) in zip(doc["valid"], valid, strict=True):
                case["base64url"] = v.to_base64url()
        return doc

    # -- generate and check --------------------------------------------------------------
    def generate(self, out_dir: Path, profile: Profile) -> list[Path]:
        """Write every vector file of ``profile`` under ``out_dir``; returns the paths
        written."""
        written = []
        (out_dir / "messages").mkdir(parents=True, exist_ok=True)
        (out_dir / "examples").mkdir(parents=True, exist_ok=True)
        for name in self.all_message_cases(profile.messages):
            path = out_dir / "messages" / f"{name}.json"
            path.write_text(_dump(self.build_message_file(name, profile)))
            written.append(path)
        for spec in self.examples:
            path = out_dir / "examples" / f"{spec.name}.json"
            inputs = self.example_inputs(spec, profile)
            path.write_text(_dump(self.build_example(inputs, spec.description, profile)))
            written.append(path)
        return written

    def check_message_file(self, doc: dict[str, Any], report: CheckReport, where: str,
                           profile: Profile) -> None:
        check_message_cases(doc, report, where, self.types(profile.messages), profile)

    def example_messages(self, m: Any) -> ExampleMessages:
        """Every structured message of an example file, and its type."""
        request_key, request_cls = self.collection_request
        result_key, result_cls = self.collection_result
        return [
            (lambda d: [h["config"] for h in d["hpke"].values()], m.HpkeConfig),
            (lambda d: list(d["hpke_config_lists"].values()), m.HpkeConfigList),
            (lambda d: [r["report"] for r in d["upload"]["reports"]], m.Report),
            (lambda d: [r["input_share_aad"] for r in d["upload"]["reports"]], m.InputShareAad),
            (lambda d: [r[k] for r in d["upload"]["reports"]
                        for k in ("leader_plaintext_input_share", "helper_plaintext_input_share")],
             m.PlaintextInputShare),
            (lambda d: [r[k] for r in d["aggregation"]["reports"]
                        for k in ("leader_outbound", "helper_outbound")], m.PingPongMessage),
            (lambda d: [d["aggregation"]["aggregation_job_init_req"]], m.AggregationJobInitReq),
            (lambda d: [d["aggregation"]["aggregation_job_resp"]], m.AggregationJobResp),
            (lambda d: [d["collection"][request_key]], getattr(m, request_cls)),
            (lambda d: [d["collection"]["aggregate_share_req"]], m.AggregateShareReq),
            (lambda d: [d["collection"]["aggregate_share_aad"]], m.AggregateShareAad),
            (lambda d: [d["collection"]["aggregate_share"]], m.AggregateShare),
            (lambda d: [d["collection"][result_key]], getattr(m, result_cls)),
            *self.more_example_messages(m),
        ]

    def check_example_file(self, doc: dict[str, Any], report: CheckReport, where: str,
                           profile: Profile) -> None:
        # 1. Re-derive everything from the recorded inputs and compare.
        expected = self.build_example(doc["inputs"], doc.get("description", ""), profile)
        for problem in _diff(expected, doc):
            report.errors.append(f"{where}: {problem}")
        report.checks += 1
        # 2. Every structured message in the file agrees with its encoding, both ways.
        check_example_messages(doc, report, where, self.example_messages(profile.messages))
        # 3. Decrypt every ciphertext with the recorded private keys.
        try:
            self._decrypt_example(doc, report, where, profile)
        except (HpkeError, ValueError, KeyError, TypeError) as exc:
            report.errors.append(f"{where}: decryption check failed: {type(exc).__name__}: "
                                 f"{exc}")

    def _decrypt_example(self, doc: dict[str, Any], report: CheckReport, where: str,
                         profile: Profile) -> None:
        m = profile.messages
        open_input_share = profile.flow.client.open_input_share
        keys = {
            role: HpkeKeypair(m.HpkeConfig.from_json(entry["config"]["fields"]),
                              _unhex(entry["private_key"], "private_key"))
            for role, entry in doc["hpke"].items()
        }
        for i, r in enumerate(doc["upload"]["reports"]):
            report_msg = m.Report.decode(_unhex(r["report"]["encoding"], "report"))
            share_aad = m.InputShareAad.decode(_unhex(r["input_share_aad"]["encoding"], "aad"))
            for role, server, ct in (
                ("leader", Role.LEADER, report_msg.leader_encrypted_input_share),
                ("helper", Role.HELPER, report_msg.helper_encrypted_input_share),
            ):
                plaintext = open_input_share(keys[role], server, share_aad, ct, profile=profile)
                if plaintext.encode().hex() != r[f"{role}_plaintext_input_share"]["encoding"]:
                    report.errors.append(f"{where}: report {i} {role} share decrypts "
                                         "differently")
                report.checks += 1
        result_key, result_cls = self.collection_result
        result = getattr(m, result_cls).decode(
            _unhex(doc["collection"][result_key]["encoding"], result_key))
        aad = m.AggregateShareAad.decode(
            _unhex(doc["collection"]["aggregate_share_aad"]["encoding"], "aad"))
        for role, server, ct in (
            ("leader", Role.LEADER, result.leader_encrypted_agg_share),
            ("helper", Role.HELPER, result.helper_encrypted_agg_share),
        ):
            agg_share = open_aggregate_share(keys["collector"], server, aad, ct, profile=profile)
            if agg_share.hex() != doc["aggregation"][f"{role}_agg_share"]:
                report.errors.append(f"{where}: {role} aggregate share decrypts differently")
            report.checks += 1


__all__ = [
    "HELPER_URL",
    "LEADER_URL",
    "MANDATORY_SUITE",
    "ROLES",
    "Cases",
    "Derive",
    "DraftVectors",
    "ExampleSpec",
    "InvalidCases",
    "common_invalid_cases",
    "hpke_keypair",
    "make_vdaf",
]
