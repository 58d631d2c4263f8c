"""The DAP interop test API (draft-dcook-ppm-dap-interop-test-design-07) for DAP-18 and
DAP-09 tasks, served side by side by the same processes.

    ppm interop serve --role client|leader|helper|collector [--port 8080] [--host 127.0.0.1]
                      [--data-dir DIR] [--log-dir DIR] [--token T | --token-file FILE]
                      [--allow-unauthenticated]
    ppm interop run --client URL --leader URL --helper URL --collector URL
                    [--dap-version dap-19|dap-18|dap-09|all ...] [--dialect draft07|janus]
                    [--json] [--token T]

Authentication (ours; the draft defines none and its runner sends none): with a token
(``--token``, ``--token-file`` or ``PPM_INTEROP_TOKEN``) every ``/internal/test/``
request needs ``Authorization: Bearer <token>`` (401/403 otherwise), which ``ppm interop
run --token`` sends; without one the API serves only on a loopback address, unless
``--allow-unauthenticated`` (the container, on the runner's private network).

Protocol version of a request (:func:`interop.fields.request_version`): its
``dap_version`` (``"dap-18"`` / ``"dap-09"``, our addition) when present; otherwise
``batch_mode`` (the DAP-18 field current Janus sends, never sent by draft-07) means
dap-18, and anything else -- draft-07's bodies, with ``query_type`` on add_task and no
mode on upload -- dap-09, the protocol draft-07 was written for. A stock draft-07 runner
therefore drives dap-09 tasks unchanged. collection_start and collection_poll follow the
version their task was added with (a ``dap_version`` there must agree). This choice is the
only place the package names a draft.

Two dialects (:data:`interop.fields.DIALECTS`). Every role accepts and answers both
without being told; ``ppm interop run --dialect`` chooses the bodies it sends
(:func:`interop.runner.add_task_body`, :func:`~interop.runner.upload_body`,
:func:`~interop.runner.collection_start_body` build them, one function per command):

* ``draft07``: draft-07's bodies; for dap-18 and later with ``dap_version`` and every
  DAP-18 field next to the draft's spellings (below).
* ``janus``: what Janus's interop driver (divviup/janus ``interop_binaries/tests/
  end_to_end.rs``) and binaries send and expect, measured from their source (issue 13):
  for DAP-18 (Janus main) no ``dap_version`` (only a dap-19 body says it: nothing else
  tells it from dap-18), ``batch_mode`` (number), ``min_batch_size``,
  ``time_precision``, ``task_start`` with ``task_end`` (seconds), VDAF parameters as
  decimal strings with ``max_measurement`` for Prio3Sum and Prio3SumVec, to every role;
  for DAP-09 (Janus 0.7) the 0.7 driver's draft-07 bodies (``query_type``, ``bits``,
  ``max_batch_query_count``, the Collector without ``helper``). Requests have
  ``Content-Type: application/json`` exactly, ready has no body, and every answer's type
  must be exactly ``application/json``.

Where Janus and the drafts disagree we follow what makes interop work, for both dialects:

* Answers are ``Content-Type: application/json`` without the ``charset`` parameter
  aiohttp adds: Janus's driver compares the header with that string; JSON is UTF-8 by
  definition (RFC 8259 Section 8.1), so the parameter says nothing.
* endpoint_for_task answers ``"/"`` and the Leader and the Helper serve their DAP
  resources at the root of their port (and still under ``/dap/``, the same Aggregator):
  Janus's driver asserts ``"/"`` and its binaries use the root URL. The draft lets an
  implementation choose its path.
* A request without ``task_info`` binds ``task-info`` (the bytes Janus's binaries bind;
  the draft defines no task_info), so that a report sharded by one decrypts at the other:
  DAP-18 binds the TaskConfiguration into every AAD.
* ``task_start`` and ``task_end`` are rounded *down* to the time precision, as Janus's
  binaries do (DAP-18 counts times in time_precision units; the draft is silent).
* DAP tokens of a DAP-18-or-later task added by a Janus-dialect request (no
  ``dap_version``) travel as ``DAP-Auth-Token`` -- the Leader's to the Helper, the
  Collector's to the Leader -- because Janus's interop aggregator authenticates DAP-18
  peers with that header only (the interop design names it too); DAP-18 Section 3.5's
  ``Authorization: Bearer`` stays for draft07-dialect tasks. Our Aggregators accept
  both headers from any peer.

What a request's fields mean is the draft's business: each DAP profile that the API
serves carries ``profile.interop`` (a :class:`dap.profiles.interop_base.InteropFields`,
in ``dap/profiles/<draft>/interop.py``) that reads its task, VDAF and query fields and
gives the runner its cases' VDAF objects and request bodies. This package reaches it only
through ``dap.profiles.get_profile(version).interop``; the versions it serves and runs
are the shipped profiles (``dap.profiles.SHIPPED``) that have one. A profile built on
another with ``dataclasses.replace`` (DAP-19 on DAP-18) inherits its ``interop``.

Modules: ``fields`` (the version choice, draft-neutral fields, measurements and results
-> JSON; no I/O), ``server`` (the aiohttp app of each role, the version table),
``runner`` (the draft's test-runner flow and its cases), ``cli``.

Endpoints (POST, JSON objects, under ``/internal/test/``; other paths there: 404):

=================  ==================  ==========================================
role               command             answer (besides ``status``/``error``)
=================  ==================  ==========================================
all                ready               ``{"status": "success"}`` (any body or none)
leader, helper     endpoint_for_task   ``endpoint``: ``"/"`` (DAP resources are served
                                       on the same port at the root, and under
                                       ``/dap/``)
leader, helper     add_task            (``notes`` when a field was ignored)
collector          add_task            ``collector_hpke_config`` (base64url)
client             upload              --
collector          collection_start    ``handle``
collector          collection_poll     ``status`` ``"complete"`` / ``"in progress"``,
                                       ``report_count``, ``interval_start``,
                                       ``interval_duration`` (seconds), ``result``;
                                       ``batch_id`` (dap-09 fixed_size)
=================  ==================  ==========================================

A command that was understood answers 200 with ``status`` ``"success"`` (or, for
collection_poll, ``"complete"`` / ``"in progress"``) or ``"error"`` with ``error`` giving
the reason (missing field, bad base64url, unknown VDAF, DAP failure ...); a body that is
not a JSON object answers 400 with the same shape. Binary values are unpadded base64url
(padding accepted); integers are accepted as JSON numbers or decimal strings; VDAF
results are decimal strings (arrays of them for vector VDAFs).

DAP-18 task fields (add_task on all three servers, and upload). DAP-18 binds the whole
``TaskConfiguration`` (task_info, both endpoints, time_precision, min_batch_size, batch
mode, VDAF configuration, extensions) into the HPKE AAD of every input and aggregate
share, so every role must receive the same values and derives the same bytes:

* ``task_id`` (base64url, 32 bytes), ``leader``, ``helper`` (the endpoint URLs, used byte
  for byte; the draft gives the Collector no ``helper``: dap-18 requires it),
  ``vdaf`` (below), ``time_precision`` (seconds), ``min_batch_size``, and ``batch_mode``
  (1 time-interval, 2 leader-selected; also ``"time_interval"`` / ``"leader_selected"``)
  or the draft's ``query_type`` (same numbers; both must agree if both are given) --
  all required for every role, Client and Collector included.
* ``task_info`` (base64url, optional): default ``task-info`` (Janus's).
* ``task_start`` / ``task_end`` (seconds, optional; the draft's ``task_expiration`` is
  ``task_end``): the ``task_interval`` extension, both rounded down to
  ``time_precision`` (as Janus), a missing start is 0, a missing end the last Time; no
  extension if all are absent.
* ``dp_policy`` (optional object, as in ``dap/dp.py``, e.g.
  ``{"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0}``): the private-use
  DP_POLICY task extension; Aggregators add noise, the Client applies client
  randomization, collection_poll adds ``debiased_result``.
* ``dap_version`` (optional, our addition; the draft's API is not versioned):
  ``"dap-18"``; without it a request is dap-18 only if it has ``batch_mode`` (above).
* ``max_batch_query_count`` (draft-07) is accepted and ignored (DAP-18 collects a batch
  once; a value other than 1 is reported in ``notes``); ``max_batch_size`` (Leader,
  leader-selected) is the size the Leader fills a batch to (null or absent:
  ``min_batch_size``).

Aggregator add_task also takes ``role``, ``vdaf_verify_key`` (base64url, 32 bytes),
``collector_hpke_config`` (base64url ``HpkeConfig``), ``leader_authentication_token`` and
(Leader) ``collector_authentication_token``; the tokens travel as
``Authorization: Bearer`` (DAP-18 Section 3.5) for a request with ``dap_version``, and as
the draft's ``DAP-Auth-Token`` for one without (Janus's dialect, above).
Collector add_task takes ``collector_authentication_token``. Upload takes ``measurement``
and optionally ``time`` (seconds). collection_start takes ``task_id``, ``agg_param``
(base64url, empty for Prio3) and ``query``: ``{"type": 1, "batch_interval_start": s,
"batch_interval_duration": d}`` (seconds, aligned to time_precision) or ``{"type": 2,
"subtype": 1}`` (current batch; DAP-18 has no by-batch-ID query, and its collection
result carries no batch ID, so collection_poll has no ``batch_id``).

VDAF objects (integers as decimal strings or numbers):

* ``{"type": "Prio3Count"}`` -- measurement ``"0"`` / ``"1"``, result ``"n"``;
* ``{"type": "Prio3Sum", "max_measurement": "255"}`` (or the draft's ``"bits": "8"``,
  meaning max_measurement 2^bits - 1) -- measurement ``"n"``;
* ``{"type": "Prio3SumVec", "length", "max_measurement" (or "bits"), "chunk_length"}`` --
  measurement an array of decimal strings, result an array;
* ``{"type": "Prio3Histogram", "length", "chunk_length"}`` -- measurement the bucket
  index ``"i"``, result an array;
* ``{"type": "Prio3MultihotCountVec", "length", "max_weight", "chunk_length"}`` (ours) --
  measurement an array of booleans (or ``"0"``/``"1"``), result an array;
* ``{"type": "Prio3L1BoundSum", "length", "max_value", "chunk_length"}`` (ours; the names
  of draft-ietf-ppm-l1-bound-sum-02's ``Prio3L1BoundSumConfig``; dap-18 and dap-19) --
  measurement an array of decimal strings whose sum is at most max_value, result an
  array.

Any other ``type`` (Poplar1 included) answers status error.

DAP-09 task fields (draft-07's, :func:`dap.profiles.dap09.interop.task09_from_fields`). DAP-09 binds
only the task ID into its HPKE associated data, so each role needs -- and the draft sends
it -- only the parameters it uses:

* every role: ``task_id``, ``leader``, ``vdaf`` (VDAF-08, below);
* Client (upload): ``helper``, ``time_precision``, ``measurement``, optional ``time``;
  no query type (a report does not depend on it);
* Collector (add_task): ``query_type`` (1 time_interval, 2 fixed_size),
  ``collector_authentication_token``; ``helper`` and ``time_precision`` are optional
  (with ``time_precision`` the Collector itself refuses misaligned intervals, without it
  the Leader does);
* Leader / Helper (add_task): ``helper``, ``role``, ``query_type``, ``min_batch_size``,
  ``time_precision``, ``vdaf_verify_key`` (base64url, 16 bytes: VDAF-08),
  ``collector_hpke_config``, ``leader_authentication_token`` and (Leader)
  ``collector_authentication_token``, sent as ``DAP-Auth-Token`` as the draft says;
  optional ``max_batch_size`` (fixed_size only, null: no maximum; the Leader fills
  batches to it, else to min_batch_size), ``max_batch_query_count`` (default 1; a Prio3
  batch is collected once whatever it is) and ``task_expiration`` (seconds).

DAP-18 spellings are accepted where they do not conflict: ``batch_mode`` for
``query_type`` (2 = fixed_size), ``task_end`` for ``task_expiration``,
``max_measurement`` = 2^bits - 1 for ``bits``; ``task_start`` and ``task_info`` have no
DAP-09 counterpart and are ignored (add_task says so in ``notes``). ``dp_policy`` works as for
DAP-18 but nothing binds it, so every role must be given the same one.

DAP-09 VDAF objects (VDAF-08): ``Prio3Count``; ``Prio3Sum`` with ``bits``;
``Prio3SumVec`` with ``length``, ``bits``, ``chunk_length``; ``Prio3Histogram`` with
``length``, ``chunk_length``; measurements and results as above. ``Prio3L1BoundSum`` is
refused (a VDAF-18 Prio3 variant). ``Prio3MultihotCountVec``
is refused (VDAF-08 has none: it first appears in VDAF-10, and the test-only VDAF-08
``Prio3MultiHotHistogram`` uses a private-use codepoint no other implementation shares).

DAP-09 collection_start ``query``: ``{"type": 1, "batch_interval_start": s,
"batch_interval_duration": d}`` (seconds), ``{"type": 2, "subtype": 1}`` (current batch)
or ``{"type": 2, "subtype": 0, "batch_id": b}`` (by batch ID, base64url); collection_poll
of a fixed_size task answers the collected ``batch_id``.
"""
