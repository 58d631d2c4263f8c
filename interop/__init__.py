"""The DAP interop test API (draft-dcook-ppm-dap-interop-test-design-07) for DAP-18.

    ppm interop serve --role client|leader|helper|collector [--port 8080] [--host 127.0.0.1]
                      [--data-dir DIR] [--log-dir DIR]
    ppm interop run --client URL --leader URL --helper URL --collector URL [--json]

Modules: ``fields`` (request fields -> task parameters, results -> JSON; no I/O),
``server`` (the aiohttp app of each role, the version table), ``runner`` (the draft's
test-runner flow and its cases), ``cli``.

Endpoints (POST, JSON objects, under ``/internal/test/``; other paths there: 404):

=================  ==================  ==========================================
role               command             answer (besides ``status``/``error``)
=================  ==================  ==========================================
all                ready               ``{"status": "success"}``
leader, helper     endpoint_for_task   ``endpoint``: ``"/dap/"`` (DAP resources are
                                       served on the same port under ``/dap/``)
leader, helper     add_task            (``notes`` when a field was ignored)
collector          add_task            ``collector_hpke_config`` (base64url)
client             upload              --
collector          collection_start    ``handle``
collector          collection_poll     ``status`` ``"complete"`` / ``"in progress"``,
                                       ``report_count``, ``interval_start``,
                                       ``interval_duration`` (seconds), ``result``
=================  ==================  ==========================================

A command that was understood answers 200 with ``status`` ``"success"`` (or, for
collection_poll, ``"complete"`` / ``"in progress"``) or ``"error"`` with ``error`` giving
the reason (missing field, bad base64url, unknown VDAF, DAP failure ...); a body that is
not a JSON object answers 400 with the same shape. Binary values are unpadded base64url
(padding accepted); integers are accepted as JSON numbers or decimal strings; VDAF
results are decimal strings (arrays of them for vector VDAFs).

Task fields (add_task on all three servers, and upload). DAP-18 binds the whole
``TaskConfiguration`` (task_info, both endpoints, time_precision, min_batch_size, batch
mode, VDAF configuration, extensions) into the HPKE AAD of every input and aggregate
share, so every role must receive the same values and derives the same bytes:

* ``task_id`` (base64url, 32 bytes), ``leader``, ``helper`` (the endpoint URLs, used byte
  for byte; the draft gives the Collector no ``helper``: dap-18 requires it),
  ``vdaf`` (below), ``time_precision`` (seconds), ``min_batch_size``, and ``batch_mode``
  (1 time-interval, 2 leader-selected; also ``"time_interval"`` / ``"leader_selected"``)
  or the draft's ``query_type`` (same numbers; both must agree if both are given) --
  all required for every role, Client and Collector included.
* ``task_info`` (base64url, optional): default ``"interop:" + base64url(task_id)``.
* ``task_start`` / ``task_end`` (seconds, optional; the draft's ``task_expiration`` is
  ``task_end``): the ``task_interval`` extension, start rounded down and end rounded up to
  ``time_precision``, a missing start is 0, a missing end the last Time; no extension if
  all are absent.
* ``dp_policy`` (optional object, as in ``dap/dp.py``, e.g.
  ``{"policy": "HistogramWithAggregatorLaplace", "epsilon": 1.0}``): the private-use
  DP_POLICY task extension; Aggregators add noise, the Client applies client
  randomization, collection_poll adds ``debiased_result``.
* ``dap_version`` (optional, our addition; the draft's API is not versioned):
  ``"dap-18"`` (default); ``"dap-09"`` is reserved and answers ``"not yet supported"``.
* ``max_batch_query_count`` (draft-07) is accepted and ignored (DAP-18 collects a batch
  once; a value other than 1 is reported in ``notes``); ``max_batch_size`` (Leader,
  leader-selected) is the size the Leader fills a batch to (null or absent:
  ``min_batch_size``).

Aggregator add_task also takes ``role``, ``vdaf_verify_key`` (base64url, 32 bytes),
``collector_hpke_config`` (base64url ``HpkeConfig``), ``leader_authentication_token`` and
(Leader) ``collector_authentication_token``; the tokens travel as
``Authorization: Bearer`` (DAP-18 Section 3.5), not the draft's ``DAP-Auth-Token``.
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
  measurement an array of booleans (or ``"0"``/``"1"``), result an array.

Any other ``type`` (Poplar1 included) answers status error.
"""
