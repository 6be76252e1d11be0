"""What a streamed rollout whose judgment failed scores (verl's agent reward loop, OpenRLHF's `reward_func`).

Those trainers send each finished rollout alone, from whichever worker process finished it, so no client
sees its group; the server does. A failure's value therefore comes from its OWN group (same question and
ground truth, this run's key, this graph), in this order:

1. the server's mean of the group's judged rollouts (`POST /v1/reward/group-mean`: every worker's);
2. the mean of the group's rollouts this process judged (the same request, or its recent history: a
   restarted server has forgotten its ledger);
3. else nothing of the group is judged yet: its siblings are usually still being generated or judged, and
   the step cannot end before they are, so the rollout waits for them (`group_wait_s`, polling every
   `poll_s`), asking the judge again for itself on each poll (a recovered judge gives it a real reward);
4. a group none of whose rollouts could be judged within `group_wait_s` scores `unjudged_score` (0.5 by
   default) — every member of such a group the same, so GRPO-style advantages are 0 for all of them and
   DAPO's `filter_groups` drops the group — flagged `group_unjudged`.

Never another prompt's mean, never an exception. A server unreachable past the client's deadline counts as
a failure of this kind.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Optional

from ._pool import Item, Outcome, Pool
from .errors import RewardServerError

log = logging.getLogger("debate_reward.group")

#: Route that answers a group's judged mean (src/server/serving/group-means.ts).
GROUP_MEAN_PATH = "/v1/reward/group-mean"


@dataclass(frozen=True)
class Settled:
    """The score of one streamed rollout and how it was reached."""

    score: float
    judge_failed: bool
    group_unjudged: bool = False
    cached: bool = False
    source: str = "judged"
    """`judged`, `server_group_mean`, `local_group_mean` or `unjudged_score`."""


@dataclass(frozen=True)
class StreamPolicy:
    group_wait_s: float = 600.0
    poll_s: float = 2.0
    unjudged_score: float = 0.5

    def __post_init__(self) -> None:
        if self.group_wait_s < 0 or self.poll_s <= 0:
            raise ValueError("group_wait_s must be >= 0 and poll_s > 0")
        if isinstance(self.unjudged_score, bool) or not math.isfinite(float(self.unjudged_score)):
            raise ValueError("unjudged_score must be a finite number")


#: The longest one group-mean call waits on the server for the group's judgments in flight, s (the route's
#: cap is 120 s; the client's read timeout must outlast it).
MAX_GROUP_MEAN_WAIT_S = 60.0


async def server_group_mean(pool: Pool, item: Item, wait_s: float = 0.0) -> Optional[float]:
    """The server's mean of `item`'s group, or None (nothing judged, or the server unreachable or too old
    to have the route). With `wait_s`, the server first waits (that long at most) until the group's
    judgments in flight are recorded: the mean of every sibling it had received, not of the first done."""
    body: dict = {"question": item.question, "ground_truth": item.ground_truth}
    wait_ms = int(min(max(0.0, wait_s), MAX_GROUP_MEAN_WAIT_S, max(0.0, pool.client.sync.timeout_s - 5.0)) * 1000)
    if wait_ms > 0 and pool.server_takes_wait_ms:
        body["wait_ms"] = wait_ms
    graph = pool.graph if pool.graph is not None else pool.client.graph
    if graph is not None:
        body["graph"] = graph
    try:
        data, _ = await pool.client._request("POST", GROUP_MEAN_PATH, body)
    except RewardServerError as exc:
        if not (exc.status == 400 and "wait_ms" in body and "wait_ms" in exc.message):
            log.warning("group mean unavailable: %s", exc)
            return None
        # A server from before `wait_ms`: the mean of what it has judged so far, now and on every later call.
        pool.server_takes_wait_ms = False
        del body["wait_ms"]
        try:
            data, _ = await pool.client._request("POST", GROUP_MEAN_PATH, body)
        except RewardServerError as again:
            log.warning("group mean unavailable: %s", again)
            return None
    mean = data.get("mean") if isinstance(data, dict) else None
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
        return None
    return float(mean)


async def _value(pool: Pool, item: Item, outcome: Optional[Outcome], wait_s: float) -> Optional[Settled]:
    mean = await server_group_mean(pool, item, wait_s)
    if mean is not None:
        return Settled(mean, True, source="server_group_mean")
    local = outcome.group_mean if outcome is not None else None
    if local is None:
        local = pool.recent_means(item.key)[0]
    if local is not None:
        return Settled(local, True, source="local_group_mean")
    return None


async def settle(pool: Pool, item: Item, outcome: Optional[Outcome], policy: StreamPolicy) -> Settled:
    """The score of `item`, whose judgment failed with `outcome` (None: the server was unreachable)."""
    give_up_at = time.monotonic() + policy.group_wait_s
    # Just after an outage (a restart, a reset, a refusal) the siblings sent beside this rollout were re-sent
    # each on its own backoff, at most `backoff_max_s` after the server was back; the server can wait only for
    # those it has received, so the failure waits that long before asking. (Before: a group judged 1, 0, 1
    # with a failure scored 0.5 — a 1 still in its backoff — in a restart test under load.)
    backlog_s = pool.recovered_at + pool.client.sync.retry.backoff_max_s - time.monotonic()
    if backlog_s > 0:
        await asyncio.sleep(min(backlog_s, policy.group_wait_s))
    found = await _value(pool, item, outcome, policy.group_wait_s)
    while found is None and time.monotonic() < give_up_at:
        await asyncio.sleep(min(policy.poll_s, max(0.0, give_up_at - time.monotonic())))
        try:
            [again] = await pool.score([item])
        except RewardServerError:
            again = None
        if again is not None and again.reward is not None:
            return Settled(again.reward, False, cached=again.cached)
        found = await _value(pool, item, again, give_up_at - time.monotonic())
    if found is None:
        log.warning("no rollout of this group was judged in %.0f s: unjudged_score %.3f", policy.group_wait_s,
                    policy.unjudged_score)
        return Settled(float(policy.unjudged_score), True, group_unjudged=True, source="unjudged_score")
    log.info("judgment failed: its group's mean %.3f (%s)", found.score, found.source)
    return found


async def score_streamed(pool: Pool, item: Item, policy: StreamPolicy) -> Settled:
    """One rollout judged; a failure (or an unreachable server) settled by `settle`."""
    try:
        [outcome] = await pool.score([item])
    except RewardServerError as exc:
        log.warning("reward server unavailable: %s", exc)
        return await settle(pool, item, None, policy)
    if outcome.reward is not None:
        return Settled(outcome.reward, False, cached=outcome.cached)
    return await settle(pool, item, outcome, policy)


def run_on(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    """Run `coro` on `loop` (a daemon thread's) from a blocking caller."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
