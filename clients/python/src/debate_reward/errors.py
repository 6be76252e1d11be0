"""Typed exceptions. Match on `code` (the server's stable `RW_*` code), never on message text."""

from __future__ import annotations

from typing import Any, Optional


class RewardServerError(Exception):
    """Base class for everything the client raises about a request.

    Attributes:
        status: HTTP status, or None when no response arrived (connection refused, reset, timeout).
        code: the server's `RW_*` error code, or None when the body carried none.
        message: the server's message (or a description of the transport failure).
        details: the server's optional `details` field.
        attempts: HTTP attempts made, retries included.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        details: Any = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details
        self.attempts = attempts

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status is not None else "no response"
        code = f" {self.code}" if self.code else ""
        return f"{where}{code}: {self.message}"


class RewardRequestError(RewardServerError):
    """A 4xx: the request itself is wrong (bad body, unknown graph, auth). Never retried."""


class BadRequestError(RewardRequestError):
    """400, e.g. `RW_BAD_REQUEST`, `RW_INVALID_GRAPH`."""


class UnauthorizedError(RewardRequestError):
    """401 `RW_UNAUTHORIZED`: missing or wrong API key."""


class ForbiddenError(RewardRequestError):
    """403: `RW_FORBIDDEN` (this key lacks the route's scope: `details["scope"]` names it) or
    `RW_GRAPH_NOT_ALLOWED`."""


class NotFoundError(RewardRequestError):
    """404, e.g. `RW_UNKNOWN_GRAPH`, `RW_NOT_FOUND`."""


class PayloadTooLargeError(RewardRequestError):
    """413 `RW_PAYLOAD_TOO_LARGE`."""


class RewardUnavailableError(RewardServerError):
    """The server could not be reached or stayed overloaded (503/429/502/504) through every retry."""


class RewardInternalError(RewardServerError):
    """A 5xx that is not worth retrying (500 `RW_INTERNAL`: a server bug)."""


class RewardProtocolError(RewardServerError):
    """The server answered 2xx with a body that breaks the API contract (not JSON, wrong lengths,
    a reward attached to a failed judgment...)."""


class JudgeFailedError(RewardServerError):
    """A judgment failed (status judge_error / timeout / overloaded) where the caller asked for an
    exception instead of a failure value (e.g. verl adapter with `failure_score=None`)."""


_BY_STATUS = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    413: PayloadTooLargeError,
}


def error_for_status(
    status: int, code: Optional[str], message: str, details: Any, attempts: int
) -> RewardServerError:
    """The exception class for a final (non-retried or retries-exhausted) HTTP error status."""
    if status in _BY_STATUS:
        cls: type[RewardServerError] = _BY_STATUS[status]
    elif 400 <= status < 500 and status not in (408, 429):
        cls = RewardRequestError
    elif status in (408, 429, 502, 503, 504):
        cls = RewardUnavailableError
    elif status >= 500:
        cls = RewardInternalError
    else:
        cls = RewardProtocolError
    return cls(message, status=status, code=code, details=details, attempts=attempts)
