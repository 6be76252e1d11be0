"""Pooled judging for the trainer adapters (slime, verl, TRL): the rollouts of calls that arrive together are
sent as `/v1/reward/batch` requests grouped by (question, ground truth), failed judgments are sent again a
few times, and each rollout's outcome comes back with what a neutral value for it would be (the mean of its
group's rewards), so that an adapter can turn a failure into something its trainer can train on without
training the policy toward or away from it.

A defect in one rollout stays that rollout's: a request the server refuses (400) because of some
candidates is sent again without them (those score as rejected, a real 0), and one refused because of a
group's own fields fails only the calls of that group.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import re
import threading
import time
import weakref
from collections import OrderedDict, deque
from concurrent.futures import Future as ThreadFuture
from dataclasses import dataclass, replace
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from .aio import AsyncRewardClient
from .client import Graph, batch_body
from .errors import RewardProtocolError, RewardRequestError
from .results import parse_batch

log = logging.getLogger("debate_reward.pool")

Key = Tuple[str, str]


@dataclass(frozen=True)
class Item:
    """One rollout as the server will judge it."""

    question: str
    ground_truth: str
    candidate: str

    @property
    def key(self) -> Key:
        return (self.question, self.ground_truth)

    @property
    def size(self) -> int:
        """Upper bound of its share of a request body, in bytes (JSON may escape a character to 6)."""
        return 6 * (len(self.question) + len(self.ground_truth) + len(self.candidate)) + 64


@dataclass(frozen=True)
class Outcome:
    """What became of one rollout."""

    reward: Optional[float]
    """1.0 / 0.0 (`ok`, or `rejected_input`: a real 0), None when it failed or was cancelled."""
    status: str
    reason: Optional[str] = None
    cached: bool = False
    error: Optional[str] = None
    """Why it failed (status and error code), for failed outcomes."""
    failure_reward: Optional[float] = None
    """The server's FAILURE_REWARD, when it sets one (for failed outcomes)."""
    group_mean: Optional[float] = None
    """For a failed outcome: the mean reward of the rollouts of its group (same question and ground truth)
    judged in the same request, else of those this pool judged in the last `history_s`; None when none."""
    pool_mean: Optional[float] = None
    """For a failed outcome: the mean reward of everything this pool judged in the last `history_s`."""

    @property
    def failed(self) -> bool:
        return self.reward is None and self.status != "cancelled"


_Entry = Tuple[Item, "asyncio.Future[Outcome]"]

#: `groups[g].candidates[i]` in a 400's details: a candidate the server refused.
_CANDIDATE_PATH = re.compile(r"^groups\[(\d+)\]\.candidates\[(\d+)\]$")


def refused_candidates(exc: RewardRequestError) -> Optional[List[int]]:
    """The candidates of a one-group batch that a 400 names, when it names nothing else (a server that
    refuses a NUL byte in a rollout, from before it rejected such a rollout alone); else None."""
    details = exc.details
    if exc.status != 400 or not isinstance(details, list) or not details:
        return None
    out: List[int] = []
    for issue in details:
        path = issue.get("path") if isinstance(issue, dict) else None
        m = _CANDIDATE_PATH.match(path) if isinstance(path, str) else None
        if m is None or m.group(1) != "0":
            return None
        out.append(int(m.group(2)))
    return sorted(set(out))


class _History:
    """The rewards judged in the last `window_s`, per group, bounded in groups and per-group length."""

    def __init__(self, window_s: float, max_groups: int = 4096, per_group: int = 256) -> None:
        self.window_s = window_s
        self.max_groups = max_groups
        self.per_group = per_group
        self._groups: "OrderedDict[Key, Deque[Tuple[float, float]]]" = OrderedDict()
        self._all: Deque[Tuple[float, float]] = deque(maxlen=8192)

    def add(self, key: Key, reward: float, now: float) -> None:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = deque(maxlen=self.per_group)
            while len(self._groups) > self.max_groups:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end(key)
        group.append((now, reward))
        self._all.append((now, reward))

    def _mean(self, values: "Deque[Tuple[float, float]]", now: float) -> Optional[float]:
        recent = [r for t, r in values if now - t <= self.window_s]
        return sum(recent) / len(recent) if recent else None

    def group_mean(self, key: Key, now: float) -> Optional[float]:
        group = self._groups.get(key)
        return None if group is None else self._mean(group, now)

    def pool_mean(self, now: float) -> Optional[float]:
        return self._mean(self._all, now)


class _Waiting:
    """The rollouts waiting to be sent, per event loop."""

    def __init__(self) -> None:
        self.entries: List[_Entry] = []
        self.size = 0
        self.timer: Optional[asyncio.TimerHandle] = None


class Pool:
    """Pools the rollouts of concurrent `score` calls on one event loop into `/v1/reward/batch` requests.

    Args:
        client: the client every request goes through (its retries, deadline, key and tag).
        graph: a preset name or inline spec; None = the client's graph, else the server's DEFAULT_GRAPH.
        max_candidates / max_body_bytes: a request's limits (the server's MAX_CANDIDATES and, under,
            BODY_LIMIT_BYTES).
        linger_s: how long the first rollout waits for others to join its request.
        max_rounds: how many times failed judgments are sent again (1 s apart plus jitter, as `/slime`'s
            Retry-After says) before their outcome is the failure.
        history_s: how long judged rewards count towards `Outcome.group_mean` / `pool_mean`.
    """

    def __init__(
        self,
        client: AsyncRewardClient,
        graph: Optional[Graph] = None,
        *,
        max_candidates: int = 1024,
        max_body_bytes: int = 4_000_000,
        linger_s: float = 0.02,
        max_rounds: int = 2,
        history_s: float = 600.0,
    ) -> None:
        if max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        if linger_s < 0 or max_body_bytes < 1:
            raise ValueError("linger_s must be >= 0 and max_body_bytes >= 1")
        if max_rounds < 0:
            raise ValueError("max_rounds must be >= 0")
        self._config: Dict[str, Any] = dict(
            graph=graph, max_candidates=max_candidates, max_body_bytes=max_body_bytes, linger_s=linger_s,
            max_rounds=max_rounds, history_s=history_s,
        )
        self.client = client
        self.graph = graph
        self.max_candidates = max_candidates
        self.max_body_bytes = max_body_bytes
        self.linger_s = linger_s
        self.max_rounds = max_rounds
        self.history = _History(history_s)
        #: False once the server refused `wait_ms` on `/v1/reward/group-mean` (a server from before it): later
        #: calls ask without it instead of hearing the same 400 again (`_group.server_group_mean`). A copy
        #: (`__setstate__`) learns it again, once.
        self.server_takes_wait_ms = True
        #: When (time.monotonic()) a request last got through after being sent more than once — the server
        #: was down, reset it or refused it. Rollouts sent beside it were re-sent each on its own backoff, so
        #: until `backoff_max_s` after this some may not be back at the server (`_group.settle` waits).
        self.recovered_at = -math.inf
        self._history_lock = threading.Lock()
        self._rng = random.Random()
        self._waiting: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiting]" = weakref.WeakKeyDictionary()
        self._tasks: "set[asyncio.Task[None]]" = set()

    def __getstate__(self) -> Dict[str, Any]:
        # A copy (a trainer's worker process) opens its own connections and starts with an empty history.
        return {"client": self.client, **self._config}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(state.pop("client"), **state)  # type: ignore[misc]

    def recent_means(self, key: Key) -> Tuple[Optional[float], Optional[float]]:
        """(group mean, pool mean) of the rewards judged in the last `history_s`: a neutral value for a
        rollout of group `key` that could not be judged at all (the server unreachable)."""
        now = time.monotonic()
        with self._history_lock:
            return self.history.group_mean(key, now), self.history.pool_mean(now)

    async def score(self, items: Sequence[Item]) -> List[Outcome]:
        """The outcome of every item, in order. Raises what the request raised: `RewardUnavailableError`
        when the server stayed unreachable until the client's deadline, a `RewardRequestError` for a group
        whose own fields the server refused (only that group's callers)."""
        loop = asyncio.get_running_loop()
        waiting = self._waiting.get(loop)
        if waiting is None:
            waiting = self._waiting[loop] = _Waiting()
        futures = [self._submit(loop, waiting, item) for item in items]
        return list(await asyncio.gather(*futures))

    def _submit(self, loop: asyncio.AbstractEventLoop, waiting: _Waiting, item: Item) -> "asyncio.Future[Outcome]":
        future: "asyncio.Future[Outcome]" = loop.create_future()
        if waiting.entries and (
            len(waiting.entries) >= self.max_candidates or waiting.size + item.size > self.max_body_bytes
        ):
            self._flush(loop, waiting)
        waiting.entries.append((item, future))
        waiting.size += item.size
        if waiting.timer is None:
            waiting.timer = loop.call_later(self.linger_s, self._flush, loop, waiting)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop, waiting: _Waiting) -> None:
        if waiting.timer is not None:
            waiting.timer.cancel()
            waiting.timer = None
        entries, waiting.entries, waiting.size = waiting.entries, [], 0
        if entries:
            task = loop.create_task(self._send(entries))
            self._tasks.add(task)  # a reference, so that the task is not collected while it runs
            task.add_done_callback(self._tasks.discard)

    async def _send(self, entries: List[_Entry]) -> None:
        """One request for `entries`; the failed ones again, up to `max_rounds` times."""
        for round_ in range(1, self.max_rounds + 2):
            entries = [(item, f) for item, f in entries if not f.done()]
            if not entries:
                return
            try:
                failed = await self._request_isolating(entries)
            except RewardRequestError as exc:
                if len(_by_group(entries)) > 1:
                    # A group's own fields were refused: one request per group, so only its callers hear it.
                    await asyncio.gather(*(self._send(group) for group in _by_group(entries).values()))
                else:
                    _fail(entries, exc)
                return
            except asyncio.CancelledError:
                for _, future in entries:
                    future.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - every waiting caller hears of it
                _fail(entries, exc)
                return
            if not failed:
                return
            if round_ > self.max_rounds:
                for item, future, outcome in failed:
                    if not future.done():
                        future.set_result(outcome)
                return
            delay = self.client.sync.retry.delay_s(round_, 1.0, self._rng)
            log.info("%d judgments failed; sending them again in %.1f s", len(failed), delay)
            await asyncio.sleep(delay)
            entries = [(item, f) for item, f, _ in failed]

    async def _request_isolating(self, entries: List[_Entry]) -> List[Tuple[Item, "asyncio.Future[Outcome]", Outcome]]:
        """`_request`, and when a one-group request is refused because of some of its candidates only,
        those candidates are rejected (0) and the others are sent again (at most once per candidate)."""
        for _ in range(len(entries) + 1):
            try:
                return await self._request(entries)
            except RewardRequestError as exc:
                if len(_by_group(entries)) != 1:
                    raise
                refused = refused_candidates(exc)
                if not refused or refused[-1] >= len(entries):
                    raise
                log.warning("the server refused %d rollout(s) of a group; scoring them 0: %s", len(refused), exc)
                for i in refused:
                    entries[i][1].set_result(Outcome(0.0, "rejected_input", reason="invalid_text", error=exc.message))
                entries = [e for e in entries if not e[1].done()]
                if not entries:
                    return []
        return []

    async def _request(self, entries: List[_Entry]) -> List[Tuple[Item, "asyncio.Future[Outcome]", Outcome]]:
        """Sends `entries` grouped by (question, ground truth), resolves the judged ones and returns the
        failed ones with their outcome (group and pool means filled in)."""
        groups = _by_group(entries)
        body = batch_body(
            [
                {"question": q, "ground_truth": gt, "candidates": [item.candidate for item, _ in group]}
                for (q, gt), group in groups.items()
            ],
            self.graph if self.graph is not None else self.client.graph,
        )
        data, attempts = await self.client._request("POST", "/v1/reward/batch", body)
        if attempts > 1:
            self.recovered_at = time.monotonic()
        results = parse_batch(data, [len(g) for g in groups.values()], attempts)
        fallback = data.get("failure_reward")
        if fallback is not None and (
            isinstance(fallback, bool) or not isinstance(fallback, (int, float)) or not math.isfinite(fallback)
        ):
            raise RewardProtocolError(f"failure_reward is {fallback!r}, not a number", attempts=attempts)
        now = time.monotonic()
        failed: List[Tuple[Item, "asyncio.Future[Outcome]", Outcome]] = []
        with self._history_lock:
            for key, group, result in zip(groups, groups.values(), results):
                judged: List[float] = []
                group_failed: List[Tuple[Item, "asyncio.Future[Outcome]", Outcome]] = []
                for (item, future), detail in zip(group, result.results):
                    if detail.reward is not None:
                        judged.append(detail.reward)
                        self.history.add(key, detail.reward, now)
                        if not future.done():
                            future.set_result(Outcome(detail.reward, detail.status, detail.reason, detail.cached))
                    elif detail.status == "cancelled":
                        if not future.done():  # POST /v1/cancel: no reward, and no retry
                            future.set_result(Outcome(None, "cancelled"))
                    else:
                        why = f"{detail.status}: {detail.error_code or detail.error or 'no error code'}"
                        outcome = Outcome(
                            None,
                            detail.status,
                            error=why,
                            failure_reward=None if fallback is None else float(fallback),
                        )
                        group_failed.append((item, future, outcome))
                mean = sum(judged) / len(judged) if judged else self.history.group_mean(key, now)
                failed.extend((i, f, replace(o, group_mean=mean)) for i, f, o in group_failed)
            pool_mean = self.history.pool_mean(now)
        return [(i, f, replace(o, pool_mean=pool_mean)) for i, f, o in failed]


def _by_group(entries: Sequence[_Entry]) -> Dict[Key, List[_Entry]]:
    """Entries by (question, ground truth), in order of first appearance."""
    groups: Dict[Key, List[_Entry]] = {}
    for entry in entries:
        groups.setdefault(entry[0].key, []).append(entry)
    return groups


def _fail(entries: Sequence[_Entry], exc: BaseException) -> None:
    for _, future in entries:
        if not future.done():
            future.set_exception(exc)


class BlockingPool:
    """A `Pool` for callers that block (verl's reward managers run a synchronous `compute_score` on a thread
    pool, one sample per call): one event loop on a daemon thread owns the pool, and the rollouts of calls
    made at the same time from any thread share its requests."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="debate-reward-pool", daemon=True).start()
                self._loop = loop
            return self._loop

    def score(self, items: Sequence[Item]) -> List[Outcome]:
        future: "ThreadFuture[List[Outcome]]" = asyncio.run_coroutine_threadsafe(
            self.pool.score(items), self._running_loop()
        )
        return future.result()

    def __getstate__(self) -> Dict[str, Any]:
        return {"pool": self.pool}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["pool"])  # type: ignore[misc]
