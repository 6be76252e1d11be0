"""Blocking client for the debate-reward server (DESIGN §5). Thread-safe: share one per process."""

from __future__ import annotations

import random
import ssl
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._http import (
    Attempts,
    ConnectionFailure,
    Response,
    RetryEvent,
    RetryPolicy,
    Transport,
    control_headers,
    decode_json,
    dumps,
    idempotency_headers,
)
from .results import GroupResult, JudgeResult, parse_batch, parse_group, parse_judgment

#: How long one call waits across its retries when neither `deadline_s` nor `max_retries` is given: long
#: enough for a reward server to restart or be rescheduled (tens of seconds to minutes), short enough that
#: a server that is gone stops the run within 10 minutes instead of stalling it.
DEFAULT_DEADLINE_S = 600.0

#: A preset name (`"default"`, `"vote-3"`, ...) or an inline graph spec (DESIGN §3).
Graph = Union[str, Mapping[str, Any]]
#: One group for `reward_batch`: a mapping with question / ground_truth / candidates (and optional
#: graph), or a `(question, ground_truth, candidates)` tuple.
GroupInput = Union[Mapping[str, Any], Tuple[str, str, Sequence[str]]]


def _check_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return value


def _check_candidates(candidates: Any) -> List[str]:
    # A bare string is a sequence too; treating it as one candidate per character is a classic bug.
    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Iterable):
        raise TypeError("candidates must be a list of str (one per rollout)")
    out = list(candidates)
    for i, c in enumerate(out):
        if not isinstance(c, str):
            raise TypeError(f"candidates[{i}] must be a str, got {type(c).__name__}")
    return out


PRIORITIES = ("high", "normal")


def with_priority(body: Dict[str, Any], priority: Optional[str]) -> Dict[str, Any]:
    """Adds the request's lane (`priority`: "high" is served before queued "normal" work, within the
    server's HIGH_PRIORITY_SHARE); None leaves it to the server (normal)."""
    if priority is not None:
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        body["priority"] = priority
    return body


def reward_body(
    question: str,
    ground_truth: str,
    candidates: Any,
    graph: Optional[Graph],
    include_transcripts: bool = False,
    request_id: Optional[str] = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "question": _check_text("question", question),
        "ground_truth": _check_text("ground_truth", ground_truth),
        "candidates": _check_candidates(candidates),
    }
    if graph is not None:
        body["graph"] = graph
    if include_transcripts:
        body["include_transcripts"] = True
    if request_id is not None:
        body["request_id"] = _check_text("request_id", request_id)
    return body


def batch_body(groups: Iterable[GroupInput], graph: Optional[Graph]) -> Dict[str, Any]:
    out = []
    for i, g in enumerate(groups):
        if isinstance(g, Mapping):
            unknown = set(g) - {"question", "ground_truth", "candidates", "graph", "request_id"}
            if unknown:
                raise TypeError(f"groups[{i}] has unknown keys {sorted(unknown)}")
            try:
                out.append(
                    reward_body(
                        g["question"],
                        g["ground_truth"],
                        g["candidates"],
                        g.get("graph", graph),
                        request_id=g.get("request_id"),
                    )
                )
            except KeyError as exc:
                raise TypeError(f"groups[{i}] is missing {exc}") from None
        elif isinstance(g, tuple) and len(g) == 3:
            out.append(reward_body(g[0], g[1], g[2], graph))
        else:
            raise TypeError(f"groups[{i}] must be a mapping or a (question, ground_truth, candidates) tuple")
    return {"groups": out}


def judge_body(question: str, ground_truth: str, candidate: str, graph: Optional[Graph]) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "question": _check_text("question", question),
        "ground_truth": _check_text("ground_truth", ground_truth),
        "candidate": _check_text("candidate", candidate),
    }
    if graph is not None:
        body["graph"] = graph
    return body


def cancel_body(request_ids: Optional[Sequence[str]], tag: Optional[str]) -> Dict[str, Any]:
    if (request_ids is None) == (tag is None):
        raise ValueError("give exactly one of request_ids or tag")
    if tag is not None:
        return {"tag": _check_text("tag", tag)}
    if isinstance(request_ids, (str, bytes)):
        raise TypeError("request_ids must be a list of str")
    ids = [_check_text(f"request_ids[{i}]", r) for i, r in enumerate(request_ids or [])]
    if not ids:
        raise ValueError("request_ids must not be empty")
    return {"request_ids": ids}


SCHEDULES = ("all_pairs", "circular", "swiss")
CRITERIA = ("match", "novelty", "feasibility", "effectiveness")


def rank_body(
    question: str,
    candidates: Any,
    *,
    ground_truth: Optional[str] = None,
    criterion: Optional[str] = None,
    schedule: str = "all_pairs",
    judges: int = 1,
    reward_mode: str = "graded",
    top_k: Optional[int] = None,
    method: str = "bradley_terry",
    request_id: Optional[str] = None,
) -> Dict[str, Any]:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}")
    if criterion is not None and criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}")
    if ground_truth is None and criterion is None:
        raise ValueError("give a ground_truth or a criterion")
    body: Dict[str, Any] = {
        "question": _check_text("question", question),
        "candidates": _check_candidates(candidates),
        "schedule": schedule,
        "judges": judges,
        "reward_mode": reward_mode,
        "method": method,
    }
    if ground_truth is not None:
        body["ground_truth"] = _check_text("ground_truth", ground_truth)
    if criterion is not None:
        body["criterion"] = criterion
    if top_k is not None:
        body["top_k"] = top_k
    if request_id is not None:
        body["request_id"] = _check_text("request_id", request_id)
    return body


def best_of_n_body(
    question: str,
    candidates: Any,
    criterion: Optional[str] = None,
    *,
    ground_truth: Optional[str] = None,
    method: str = "tournament",
    schedule: str = "all_pairs",
    judges: int = 1,
) -> Dict[str, Any]:
    """As `rank_body`: without a criterion the server judges on `match`, which needs the ground truth."""
    if criterion is not None and criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}")
    if ground_truth is None and criterion is None:
        raise ValueError("give a ground_truth or a criterion")
    body: Dict[str, Any] = {
        "question": _check_text("question", question),
        "candidates": _check_candidates(candidates),
        "method": method,
        "schedule": schedule,
        "judges": judges,
    }
    if criterion is not None:
        body["criterion"] = criterion
    if ground_truth is not None:
        body["ground_truth"] = _check_text("ground_truth", ground_truth)
    return body


class RewardClient:
    """Client for `POST /v1/reward`, `/v1/reward/batch`, `/v1/judge`, `/v1/rank` and `/v1/best-of-n`.

    Args:
        base_url: e.g. `http://127.0.0.1:8080` (a path prefix is kept, e.g. behind a proxy).
        api_key: sent as `Authorization: Bearer <key>` when the server sets `REWARD_API_KEY`.
        timeout_s: socket timeout for connecting and for each read.
        deadline_s: how long one call may take across its retries (default 600 s; with an explicit
            `max_retries`, `timeout_s × (max_retries + 1)`), sent with each attempt as what is left of it
            (`x-reward-deadline-ms`): the server answers before it (capped by its `REQUEST_DEADLINE_MS`),
            unfinished items `timeout`. Retries stop when the next attempt would start after it, so a server
            that is down (a restart, a reschedule) is waited for up to this long.
        tag: sent as `x-reward-tag` with every POST (a call's own `tag=` wins): what `cancel(tag=...)`
            selects, e.g. the trainer's step.
        max_retries: None (default): 408/429/502/503/504 and connection failures are retried until the
            deadline; a number caps the retries after the first attempt as well (0 disables retrying).
            Backoff: full jitter under `min(backoff_max_s, backoff_base_s · 2ⁿ⁻¹)` (0.5 s doubling to 5 s),
            or the server's Retry-After (capped at `max_retry_after_s`) plus up to `backoff_base_s` of jitter.
        graph: default judge graph for every call (a preset name or an inline spec); None = the
            server's `DEFAULT_GRAPH`.
        on_retry: called with a `RetryEvent` before each backoff sleep (logging, metrics).
        pool_size: idle keep-alive connections kept for reuse.

    Raises (from every call): `RewardRequestError` subclasses for 4xx (never retried),
    `RewardUnavailableError` once retries are exhausted, `RewardInternalError` for a 500,
    `RewardProtocolError` for a malformed 2xx. A failed judgment is not an exception: its reward is None.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        timeout_s: float = 120.0,
        max_retries: Optional[int] = None,
        graph: Optional[Graph] = None,
        *,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 5.0,
        max_retry_after_s: float = 60.0,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
        pool_size: int = 32,
        headers: Optional[Mapping[str, str]] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        tag: Optional[str] = None,
        deadline_s: Optional[float] = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if deadline_s is not None and deadline_s <= 0:
            raise ValueError("deadline_s must be > 0")
        # Kept so that a client can be pickled (to a trainer's worker process) and rebuilt there.
        self._config: Dict[str, Any] = dict(
            base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries, graph=graph,
            backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s, max_retry_after_s=max_retry_after_s,
            on_retry=on_retry, pool_size=pool_size, headers=dict(headers) if headers else None,
            ssl_context=ssl_context, tag=tag, deadline_s=deadline_s,
        )
        self.base_url = base_url.rstrip("/")
        #: Sent as `x-reward-tag` with every POST unless a call names its own: what `cancel(tag=...)` selects
        #: (e.g. the trainer's step). None = untagged.
        self.tag = tag
        #: How long the client waits for one logical call, across its retries: sent (what is left of it)
        #: with every attempt as `x-reward-deadline-ms`. Retries stop when the next attempt would start after
        #: it. Default: `DEFAULT_DEADLINE_S` (600 s), or `timeout_s × (max_retries + 1)` with a `max_retries`.
        if deadline_s is not None:
            self.deadline_s = deadline_s
        elif max_retries is not None:
            self.deadline_s = timeout_s * (max_retries + 1)
        else:
            self.deadline_s = DEFAULT_DEADLINE_S
        self.timeout_s = timeout_s
        self.graph = graph
        self.retry = RetryPolicy(max_retries, backoff_base_s, backoff_max_s, max_retry_after_s)
        self.on_retry = on_retry
        self._api_key = api_key
        all_headers = {"Accept": "application/json", "User-Agent": _user_agent()}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self._transport = Transport(
            self.base_url,
            timeout_s=timeout_s,
            pool_size=max(1, pool_size),
            headers=all_headers,
            ssl_context=ssl_context,
        )
        # Seams for tests: deterministic jitter, no real sleeping, a clock that sleeping moves.
        self._rng = random.Random()
        self._sleep: Callable[[float], None] = time.sleep
        self._clock: Callable[[], float] = time.monotonic

    @property
    def max_retries(self) -> Optional[int]:
        return self.retry.max_retries

    # --- plumbing --------------------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, payload: Any = None, tag: Optional[str] = None
    ) -> Tuple[Any, int]:
        """One logical request with retries; returns (decoded JSON, attempts made). Every POST carries the
        deadline (what is left of `deadline_s`, `x-reward-deadline-ms`) and its tag (`x-reward-tag`)."""
        body = None if payload is None else dumps(payload)
        headers = idempotency_headers(method)
        tag = tag if tag is not None else self.tag
        give_up_at = self._clock() + self.deadline_s
        attempts = Attempts(method, path, self.retry, self._rng, self.on_retry, give_up_at, self._clock)
        while True:
            outcome: Union[Response, ConnectionFailure]
            headers.update(control_headers(method, give_up_at - self._clock(), tag))
            try:
                outcome = self._transport.request(method, path, body, headers)
            except ConnectionFailure as exc:
                outcome = exc
            delay = attempts.next_delay(outcome)
            if delay is None:
                assert isinstance(outcome, Response)
                return decode_json(outcome, attempts.attempt), attempts.attempt
            self._sleep(delay)

    # --- API -------------------------------------------------------------------------------------------

    def reward(
        self,
        question: str,
        ground_truth: str,
        candidates: Sequence[str],
        *,
        graph: Optional[Graph] = None,
        request_id: Optional[str] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[Optional[float]]:
        """Rewards for one group, in order: 1.0 / 0.0, or None where the judgment failed (or was cancelled).
        `priority="high"` puts its judgments ahead of queued normal ones (a validation pass, a human's check)."""
        result = self.reward_details(
            question,
            ground_truth,
            candidates,
            graph=graph,
            request_id=request_id,
            tag=tag,
            priority=priority,
        )
        return result.rewards

    def reward_details(
        self,
        question: str,
        ground_truth: str,
        candidates: Sequence[str],
        *,
        graph: Optional[Graph] = None,
        include_transcripts: bool = False,
        request_id: Optional[str] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> GroupResult:
        """The full `/v1/reward` answer: per-item results, scores, group mean/std/advantages, usage."""
        body = with_priority(
            reward_body(
                question,
                ground_truth,
                candidates,
                graph if graph is not None else self.graph,
                include_transcripts,
                request_id,
            ),
            priority,
        )
        data, attempts = self._request("POST", "/v1/reward", body, tag=tag)
        return parse_group(data, len(body["candidates"]), attempts)

    def reward_batch(
        self,
        groups: Iterable[GroupInput],
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[List[Optional[float]]]:
        """Rewards for several groups in one request (`/v1/reward/batch`), one list per group."""
        details = self.reward_batch_details(groups, graph=graph, tag=tag, priority=priority)
        return [g.rewards for g in details]

    def reward_batch_details(
        self,
        groups: Iterable[GroupInput],
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[GroupResult]:
        body = with_priority(batch_body(groups, graph if graph is not None else self.graph), priority)
        data, attempts = self._request("POST", "/v1/reward/batch", body, tag=tag)
        return parse_batch(data, [len(g["candidates"]) for g in body["groups"]], attempts)

    def judge(
        self,
        question: str,
        ground_truth: str,
        candidate: str,
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> JudgeResult:
        """One judgment with its debate transcript (`/v1/judge`)."""
        body = with_priority(
            judge_body(question, ground_truth, candidate, graph if graph is not None else self.graph), priority
        )
        data, attempts = self._request("POST", "/v1/judge", body, tag=tag)
        return parse_judgment(data, attempts)

    def cancel(
        self, request_ids: Optional[Sequence[str]] = None, tag: Optional[str] = None
    ) -> Dict[str, Any]:
        """`POST /v1/cancel`: cancel the requests with these `request_ids`, or every request carrying `tag`.

        The judgments only cancelled requests wait for are aborted (their judge calls too); the cancelled
        requests answer at once, their unfinished items with status `cancelled` and reward None. A judgment
        another live request waits for keeps running. Returns `{"cancelled_judgments", "cancelled_requests"}`
        (with REDIS_URL summed over every replica, with `processes` and `shared`).
        """
        return self._request("POST", "/v1/cancel", cancel_body(request_ids, tag), tag=None)[0]

    def rank(self, question: str, candidates: Sequence[str], **options: Any) -> Dict[str, Any]:
        """`POST /v1/rank`: a pairwise tournament over one group (keyword options as in `rank_body`:
        ground_truth, criterion, schedule, judges, reward_mode, top_k, method, request_id). Returns the
        answer as a dict: `scores` / `rewards` (None for a candidate without any successful comparison),
        `ranking`, `ci`, `comparisons`, `calls`, `position_bias`, `results`, `pairs`."""
        data, _ = self._request("POST", "/v1/rank", rank_body(question, candidates, **options))
        return data

    def best_of_n(
        self, question: str, candidates: Sequence[str], criterion: Optional[str] = None, **options: Any
    ) -> Dict[str, Any]:
        """`POST /v1/best-of-n`: `best_index` (None when nothing could be picked), the scores behind it and
        the method (`tournament`, or `pick`: one "pick the best" call)."""
        data, _ = self._request("POST", "/v1/best-of-n", best_of_n_body(question, candidates, criterion, **options))
        return data

    def graphs(self) -> Any:
        """`GET /v1/graphs`: the presets and their specs."""
        return self._request("GET", "/v1/graphs")[0]

    def health(self) -> bool:
        """True when `GET /healthz` answers 2xx (no retries)."""
        try:
            response = self._transport.request("GET", "/healthz", None)
        except ConnectionFailure:
            return False
        return 200 <= response.status < 300

    def close(self) -> None:
        self._transport.close()

    def __getstate__(self) -> Dict[str, Any]:
        # Connections, locks and the RNG stay behind; the copy opens its own. (`on_retry` and
        # `ssl_context` must themselves be picklable for this to work.)
        return dict(self._config)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __enter__(self) -> "RewardClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RewardClient({self.base_url!r}, graph={self.graph!r}, max_retries={self.max_retries})"


def _user_agent() -> str:
    from . import __version__

    return f"debate-reward-python/{__version__}"
