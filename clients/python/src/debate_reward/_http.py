"""HTTP plumbing shared by the sync and async clients: a small keep-alive pool over `http.client`,
and the retry policy (capped exponential backoff with full jitter, honouring Retry-After, bounded by the
call's deadline)."""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import queue
import random
import socket
import ssl
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from .errors import RewardProtocolError, RewardUnavailableError, error_for_status

#: Statuses worth retrying: overload and transient upstream trouble. 500 is a bug, 4xx is the caller's.
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


class ConnectionFailure(Exception):
    """No HTTP response: refused, reset, DNS, TLS or socket timeout."""


@dataclass(frozen=True)
class RetryEvent:
    """Passed to `on_retry` before each backoff sleep."""

    method: str
    path: str
    attempt: int
    """The attempt that just failed (1-based)."""
    status: Optional[int]
    """HTTP status of the failed attempt, None for a connection failure."""
    code: Optional[str]
    retry_after_s: Optional[float]
    """The server's Retry-After, parsed (before capping), when it sent one."""
    delay_s: float
    """How long the client sleeps before the next attempt."""
    error: str


@dataclass(frozen=True)
class RetryPolicy:
    """Retries bounded by time: a call is retried until its deadline (`RewardClient.deadline_s`), not a
    number of times, so that a reward server restarting for tens of seconds (a pod reschedule, an OOM
    kill, a load balancer's 502s) costs a slower step, not the run. `max_retries` (None by default) adds a
    cap on the count (0 disables retrying).

    Delay before retry n (1-based): with a Retry-After header, `min(retry_after, max_retry_after_s)` plus up
    to `backoff_base_s` of jitter (so that a crowd of clients told "1 s" does not come back in the same
    millisecond); without one, full jitter under a capped exponential ceiling:
    `uniform(0, min(backoff_max_s, backoff_base_s * 2 ** (n - 1)))`. The cap (5 s) bounds how long a
    client keeps waiting after the server is back; a refused connection costs the server nothing."""

    max_retries: Optional[int] = None
    backoff_base_s: float = 0.5
    backoff_max_s: float = 5.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError("max_retries must be >= 0 (or None: retry until the deadline)")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff delays must be >= 0")

    def delay_s(self, attempt: int, retry_after_s: Optional[float], rng: random.Random) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self.max_retry_after_s) + rng.uniform(0, self.backoff_base_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2 ** min(attempt - 1, 30)))
        return rng.uniform(0, ceiling)

    def may_retry(self, attempt: int) -> bool:
        """Whether the count cap allows another attempt after `attempt` (1-based) failed."""
        return self.max_retries is None or attempt <= self.max_retries


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds (delta-seconds or an HTTP-date); None when absent or unparsable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


def parse_error_body(body: bytes) -> Tuple[Optional[str], str, Any]:
    """`{code, message, details?}` → its parts; tolerant of non-JSON bodies (proxies, crashes)."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        code = data.get("code")
        message = data.get("message")
        return (
            code if isinstance(code, str) else None,
            message if isinstance(message, str) else (text[:500] or "no message"),
            data.get("details"),
        )
    return None, text[:500] or "empty body", None


class Attempts:
    """Sans-IO retry bookkeeping for one logical request, shared by the sync and async clients.

    Feed each attempt's outcome to `next_delay`: it returns None for a 2xx (done), a delay in seconds
    when the request should be retried, and raises the typed error when it should not (or may not any
    more: the next attempt would start after `give_up_at`, on `clock`, or the count cap is reached)."""

    def __init__(
        self,
        method: str,
        path: str,
        policy: RetryPolicy,
        rng: random.Random,
        on_retry: Optional[Callable[[RetryEvent], None]],
        give_up_at: float = math.inf,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.method = method
        self.path = path
        self.policy = policy
        self.rng = rng
        self.on_retry = on_retry
        self.give_up_at = give_up_at
        self.clock = clock
        self.started_at = clock()
        self.attempt = 0

    def next_delay(self, outcome: Response | ConnectionFailure) -> Optional[float]:
        self.attempt += 1
        if isinstance(outcome, ConnectionFailure):
            delay = self._delay(None)
            if delay is None:
                raise RewardUnavailableError(
                    f"{self.method} {self.path} failed after {self.attempt} attempt(s) in "
                    f"{self.clock() - self.started_at:.1f} s: {outcome}",
                    attempts=self.attempt,
                ) from outcome
            return self._retry(delay, None, None, None, str(outcome))
        if 200 <= outcome.status < 300:
            return None
        code, message, details = parse_error_body(outcome.body)
        if outcome.status in RETRY_STATUSES:
            retry_after = parse_retry_after(_header(outcome.headers, "retry-after"))
            delay = self._delay(retry_after)
            if delay is not None:
                return self._retry(delay, outcome.status, code, retry_after, message)
        raise error_for_status(outcome.status, code, message, details, self.attempt)

    def _delay(self, retry_after: Optional[float]) -> Optional[float]:
        """The wait before the next attempt, or None when there is to be no next attempt."""
        if not self.policy.may_retry(self.attempt):
            return None
        delay = self.policy.delay_s(self.attempt, retry_after, self.rng)
        return delay if self.clock() + delay < self.give_up_at else None

    def _retry(
        self, delay: float, status: Optional[int], code: Optional[str], retry_after: Optional[float], error: str
    ) -> float:
        if self.on_retry is not None:
            self.on_retry(
                RetryEvent(self.method, self.path, self.attempt, status, code, retry_after, delay, error)
            )
        return delay


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def decode_json(response: Response, attempts: int) -> Any:
    try:
        return json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RewardProtocolError(
            f"HTTP {response.status} with a body that is not JSON: {response.body[:200]!r}",
            status=response.status,
            attempts=attempts,
        ) from exc


class Transport:
    """Thread-safe keep-alive connection pool to one origin (`http://` or `https://`).

    `timeout_s` bounds connecting and every socket read (not the whole exchange). A request that fails
    on a reused idle connection before any response byte (the server closed it meanwhile) is replayed
    once on a fresh connection without counting as an attempt.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        pool_size: int,
        headers: Mapping[str, str],
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port][/prefix], got {base_url!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"base_url must not carry a query or fragment, got {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self.headers: Dict[str, str] = dict(headers)
        self._ssl_context = ssl_context
        self._idle: "queue.LifoQueue[http.client.HTTPConnection]" = queue.LifoQueue(maxsize=pool_size)
        self._closed = False

    def _connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout_s, context=self._ssl_context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def request(
        self, method: str, path: str, body: Optional[bytes], extra_headers: Optional[Mapping[str, str]] = None
    ) -> Response:
        headers = dict(self.headers)
        if extra_headers:
            headers.update(extra_headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        url = self.prefix + path
        for _ in range(2):
            try:
                conn, reused = self._idle.get_nowait(), True
            except queue.Empty:
                conn, reused = self._connect(), False
            try:
                conn.request(method, url, body=body, headers=headers)
                raw = conn.getresponse()
                data = raw.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                if reused:
                    continue  # stale keep-alive connection: replay once on a fresh one
                raise ConnectionFailure(f"{type(exc).__name__}: {exc}") from exc
            except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
                conn.close()
                if isinstance(exc, socket.timeout):
                    raise ConnectionFailure(f"no response within {self.timeout_s} s") from exc
                raise ConnectionFailure(f"{type(exc).__name__}: {exc}") from exc
            response = Response(raw.status, {k: v for k, v in raw.getheaders()}, data)
            if raw.will_close or self._closed:
                conn.close()
            else:
                try:
                    self._idle.put_nowait(conn)
                except queue.Full:
                    conn.close()
            return response
        raise ConnectionFailure("connection closed by the server twice in a row")

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


def idempotency_headers(method: str) -> Dict[str, str]:
    """One `Idempotency-Key` per logical POST, sent unchanged with every retry of it: the server then
    recognises the retry, and keeps the judgments of an attempt whose connection timed out running
    (`IDEMPOTENCY_LINGER_MS`) so that the retry joins them instead of starting over. A `request_id` in
    the body takes precedence on the server."""
    return {"Idempotency-Key": uuid.uuid4().hex} if method == "POST" else {}


#: The client's own deadline (its timeout, ms) and the cancel tag, as the server reads them on every route.
DEADLINE_HEADER = "x-reward-deadline-ms"
TAG_HEADER = "x-reward-tag"


def control_headers(method: str, remaining_s: float, tag: Optional[str]) -> Dict[str, str]:
    """The deadline every POST attempt carries, the time the client still waits for the logical call (the
    server answers before it expires: unfinished items come back `timeout` instead of the client giving
    up), and the request's tag for `cancel(tag=...)`."""
    if method != "POST":
        return {}
    headers = {DEADLINE_HEADER: str(max(1, int(remaining_s * 1000)))}
    if tag is not None:
        if not isinstance(tag, str) or not tag or len(tag) > 200:
            raise ValueError("tag must be a non-empty str of at most 200 characters")
        headers[TAG_HEADER] = tag
    return headers


def dumps(payload: Any) -> bytes:
    """The JSON body as UTF-8. A string holding an unpaired surrogate (a rollout decoded with
    `surrogateescape`, `json.loads` of a lone `\\ud800`) cannot be UTF-8: then the body is sent with
    `\\uXXXX` escapes instead, and the server judges that rollout alone (`invalid_text`, a real 0)."""
    try:
        text = json.dumps(payload, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"request body is not JSON-serialisable: {exc}") from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, allow_nan=False, ensure_ascii=True).encode("ascii")

