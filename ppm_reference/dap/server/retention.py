"""The retention pass of an Aggregator's background worker (`dap.core.retention`), at
most once per `retention_interval` seconds of its clock."""

from __future__ import annotations

import logging

from ppm_reference.dap.core.retention import RetentionPolicy, run_retention
from ppm_reference.dap.profiles import get_profile
from ppm_reference.dap.server.common import AppState
from ppm_reference.dap.server.scheduling import HOLDER, RETENTION

log = logging.getLogger("ppm.retention")


class RetentionTimer:
    """Runs the retention pass when it is due; the first one a `retention_interval`
    after the worker starts."""

    def __init__(self, st: AppState) -> None:
        self.st = st
        self.policy = RetentionPolicy.from_config(st.config)
        self.next_at = st.clock() + st.config.retention_interval

    def maybe_run(self) -> bool:
        """Run the pass if it is due. Returns whether it ran. A failing pass is logged
        and tried again at the next interval (it never stops the worker)."""
        st = self.st
        now = st.clock()
        if now < self.next_at:
            return False
        self.next_at = now + st.config.retention_interval
        try:
            with st.datastore.transaction() as tx:
                # One pass per interval for all the processes of the Aggregator: the
                # lease is kept (not released) until the next pass is due.
                if not tx.try_lease(RETENTION, st.config.role.encode(), HOLDER, now,
                                    st.config.retention_interval * 0.9):
                    return False
                stats = run_retention(tx, self.policy, now, get_profile)
        except Exception:  # noqa: BLE001 - isolate: the protocol work goes on
            log.exception("retention pass failed")
            return False
        if stats.rows_deleted:
            log.info("retention: %d rows deleted", stats.rows_deleted)
        return True
