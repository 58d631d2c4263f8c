"""Errors the protocol core raises; the servers turn them into problem documents."""

from __future__ import annotations


class DapProblem(Exception):
    """Abort with a DAP error (DAP-18 Section 3.6): `token` is the error type, e.g.
    "invalidMessage"; `status` the HTTP status; `task_id` fills the `taskid` member."""

    def __init__(self, token: str, detail: str = "", status: int = 400,
                 task_id: bytes | None = None, unsupported_extensions: list[int] | None = None,
                 dap_type: bool = True) -> None:
        super().__init__(f"{token}: {detail}" if detail else token)
        self.token = token
        self.detail = detail
        self.status = status
        self.task_id = task_id
        self.unsupported_extensions = unsupported_extensions
        # False for errors outside the DAP URN namespace (e.g. authentication).
        self.dap_type = dap_type


class NotReady(Exception):
    """A resource exists but is not ready yet (answer with Retry-After)."""

    def __init__(self, retry_after: int = 1) -> None:
        super().__init__("not ready")
        self.retry_after = retry_after
