"""Group commit of small uploads (DAP-18 Section 4.4.2.2, DAP-09 Section 4.4.2).

A Client that uploads one report per request (DAP-09 always does) would cost the Leader
one datastore commit per report, and with SQLite's ``synchronous=FULL`` one fsync: about
250 reports/s whatever the CPU. Here the small uploads that arrive while a commit is in
progress wait for the next one, and are all stored in one transaction: the first upload
of a quiet period is committed at once, and under load each commit carries every upload
that arrived during the previous one.

Nothing is acknowledged early: an upload's answer is sent only after the transaction that
stored its reports has committed (durable with ``synchronous=FULL``). The outcome of each
upload is the one it would have had alone: its reports are checked and stored in arrival
order (a report ID repeated across two uploads of one group is the second one's
``report_replayed``, as it would be one transaction later), an upload whose body does not
decode is refused on its own, and if the group's transaction fails each of its uploads is
retried in a transaction of its own, so that one upload's failure is not another's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ppm_reference.dap.core import leader as core

log = logging.getLogger("ppm.upload")

# Uploads at most this large (bytes) are grouped; larger ones are stored by
# `store_upload` in chunks of their own.
GROUP_MAX_BODY = 16 * 1024
# At most this many uploads, and this many bytes, per group transaction.
GROUP_MAX_UPLOADS = 512
GROUP_MAX_BYTES = 1 << 20


@dataclass
class _Upload:
    task: Any
    keyring: Any
    body: bytes
    future: asyncio.Future[list[tuple[bytes, Any]]]
    stored: Callable[[set[bytes]], None] | None = None
    outcome: list[tuple[bytes, Any]] | None = None
    error: BaseException | None = None
    reports: list[Any] = field(default_factory=list)


class UploadGroups:
    """The group commit of one server (one event loop)."""

    def __init__(self, st: Any) -> None:
        self.st = st
        self._pending: list[_Upload] = []
        self._committing = False
        self._task: asyncio.Task[None] | None = None

    async def store(self, task: Any, keyring: Any, body: bytes,
                    stored: Callable[[set[bytes]], None] | None = None
                    ) -> list[tuple[bytes, Any]]:
        """Store an upload's reports; returns the refused ones with their ReportError
        once the reports are durable (or raises the upload's problem). `stored` (e.g.
        waking the background worker) is called once per group transaction that stored
        uploads passing it, not once per upload, with the IDs of their tasks, before
        they are answered."""
        loop = asyncio.get_running_loop()
        item = _Upload(task, keyring, body, loop.create_future(), stored)
        self._pending.append(item)
        if not self._committing:
            self._committing = True
            self._task = loop.create_task(self._commit_loop())
        return await item.future

    async def _commit_loop(self) -> None:
        group: list[_Upload] = []
        try:
            while self._pending:
                group = []
                size = 0
                while self._pending and len(group) < GROUP_MAX_UPLOADS and \
                        (not group or size + len(self._pending[0].body) <= GROUP_MAX_BYTES):
                    item = self._pending.pop(0)
                    group.append(item)
                    size += len(item.body)
                try:
                    await self.st.offload(store_group, self.st, group)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - answered to each upload
                    for item in group:
                        if item.outcome is None and item.error is None:
                            item.error = exc
                except BaseException as exc:  # noqa: BLE001 - the process is dying
                    # Every upload in flight shares the fate (none was acknowledged).
                    for item in (*group, *self._pending):
                        if not item.future.done():
                            item.future.set_exception(exc)
                    self._pending.clear()
                    return
                callbacks: dict[Callable[[set[bytes]], None], set[bytes]] = {}
                for item in group:
                    if item.stored is not None and item.error is None:
                        callbacks.setdefault(item.stored, set()).add(
                            bytes(item.task.task_id))
                for callback, task_ids in callbacks.items():
                    try:
                        callback(task_ids)
                    except Exception:  # noqa: BLE001 - the uploads are stored all the same
                        log.exception("after storing uploads")
                for item in group:
                    if item.future.done():
                        continue
                    if item.error is not None:
                        item.future.set_exception(item.error)
                    else:
                        item.future.set_result(item.outcome or [])
        finally:
            self._committing = False
            for item in (*group, *self._pending):  # cancelled (the server is closing)
                if not item.future.done():
                    item.future.cancel()
            self._pending.clear()


def store_group(st: Any, group: list[_Upload]) -> None:
    """Decode each upload and store all of them in one transaction (in a worker thread);
    sets each upload's outcome or error."""
    now = st.clock()
    ready: list[_Upload] = []
    for item in group:
        try:
            item.reports = core.decode_upload(item.task, item.body)
            ready.append(item)
        except Exception as exc:  # noqa: BLE001 - this upload's problem (invalidMessage...)
            item.error = exc
    if not ready:
        return
    try:
        # The checks and encodings that need no datastore, before the transaction.
        prepared = core.prepare_uploads(
            [(item.task, item.keyring, item.reports) for item in ready], now,
            st.config.clock_skew)
        with st.datastore.upload_transaction() as tx:
            outcomes = core.commit_uploads(tx, prepared)
        # Committed (durable): now the outcomes count.
        for item, outcome in zip(ready, outcomes, strict=True):
            item.outcome = outcome
    except Exception:  # noqa: BLE001 - nothing of the group was stored: one by one
        for item in ready:
            try:
                item.outcome = store_upload(st, item.task, item.keyring, item.body)
            except Exception as exc:  # noqa: BLE001
                item.error = exc


def groups_of(st: Any) -> UploadGroups:
    """The server's group commit (made on first use, on the server's event loop)."""
    groups = getattr(st, "_upload_groups", None)
    if groups is None:
        groups = UploadGroups(st)
        st._upload_groups = groups
    return groups


# Reports stored per transaction: an upload of any size holds the datastore briefly.
UPLOAD_CHUNK = 256


def store_upload(st: Any, task: Any, keyring: Any, body: bytes
                 ) -> list[tuple[bytes, Any]]:
    """Decode an upload and store its reports in transactions of at most UPLOAD_CHUNK
    reports, in a worker thread (`AppState.offload`): the event loop and other requests are not
    held up by a large body. A crash midway leaves the first chunks stored; the Client,
    which got no answer, retries and its stored reports then count as replays (they
    are aggregated once, as every stored report)."""
    reports = core.decode_upload(task, body)
    now = st.clock()
    errors: list[tuple[bytes, Any]] = []
    for i in range(0, len(reports), UPLOAD_CHUNK):
        prepared = core.prepare_uploads([(task, keyring, reports[i:i + UPLOAD_CHUNK])], now,
                                        st.config.clock_skew)
        with st.datastore.upload_transaction() as tx:
            errors += core.commit_uploads(tx, prepared)[0]
        # Between chunks a waiting request takes the datastore (its lock is fair).
    return errors
