"""The priority lane from the Python side (issue 21 item 4), against the real built server in front of the fake
backend: `priority="high"` on `reward`, `reward_batch` and `judge` of RewardClient and AsyncRewardClient puts
the call's judgments ahead of a queued step, while the same call without it waits behind the step."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List

import pytest

from conftest import GROUND_TRUTH, MATCHING, QUESTION, FakeBackend
from debate_reward import RewardClient
from debate_reward.aio import AsyncRewardClient

# 2 backend slots, 60 ms per call: a step of 40 rollouts (3 calls each) keeps the backend busy for ~3.6 s.
STEP_ROLLOUTS = 40


@pytest.fixture(scope="module")
def paced_backend(built) -> Any:
    backend = FakeBackend(latency_ms=60, reply="match")
    yield backend
    backend.stop()


@pytest.fixture(scope="module")
def lane_server(server_factory, paced_backend):
    return server_factory(
        {
            "JUDGE_BASE_URL": paced_backend.base_url,
            "JUDGE_API_KEY": "test",
            "JUDGE_MODEL": "fake-judge",
            "JUDGE_MAX_RETRIES": "0",
            "JUDGE_MAX_INFLIGHT": "2",
            "JUDGE_PREFIX_STAGGER_MS": "0",
            # Admission predicts from a drain rate measured on a few calls at first: room enough for a step.
            "REQUEST_DEADLINE_MS": "300000",
            # Room for the few high calls of each test (the default share refuses a burst of them).
            "HIGH_PRIORITY_SHARE": "0.5",
        }
    )


def rollouts(prefix: str, n: int) -> List[str]:
    return [f"{MATCHING} {prefix} variant {i}." for i in range(n)]


def queued_step(url: str, prefix: str) -> threading.Thread:
    """A training step of STEP_ROLLOUTS normal judgments, sent in the background; returns once it is queued."""
    client = RewardClient(url, timeout_s=120, max_retries=0)
    done: Dict[str, Any] = {}

    def run() -> None:
        done["rewards"] = client.reward(QUESTION, GROUND_TRUTH, rollouts(prefix, STEP_ROLLOUTS))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.4)  # the step's request has arrived and its judgments wait for backend slots
    thread.done = done  # type: ignore[attr-defined]
    return thread


def timed(call: Callable[[], Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        out["value"] = call()
        out["s"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    out["thread"] = thread
    return out


def test_high_priority_calls_pass_a_queued_step_and_normal_ones_wait(lane_server):
    client = RewardClient(lane_server.url, timeout_s=120, max_retries=0)
    # Unloaded: one judgment is 3 backend calls (~0.2 s here; more on a loaded machine).
    started = time.monotonic()
    client.judge(QUESTION, GROUND_TRUTH, f"{MATCHING} Warm-up.", priority="high")
    unloaded_s = time.monotonic() - started

    step = queued_step(lane_server.url, "sync-step")
    high_judge = timed(lambda: client.judge(QUESTION, GROUND_TRUTH, f"{MATCHING} High judge.", priority="high"))
    high_reward = timed(
        lambda: client.reward(QUESTION, GROUND_TRUTH, rollouts("high-reward", 1), priority="high")
    )
    high_batch = timed(
        lambda: client.reward_batch(
            [(QUESTION, GROUND_TRUTH, rollouts("high-batch", 1))], priority="high"
        )
    )
    normal_judge = timed(lambda: client.judge(QUESTION, GROUND_TRUTH, f"{MATCHING} Normal judge."))
    for t in (high_judge, high_reward, high_batch, normal_judge):
        t["thread"].join(timeout=60)
    step.join(timeout=60)

    assert high_judge["value"].status == "ok"
    assert high_reward["value"] == [1.0]
    assert high_batch["value"] == [[1.0]]
    assert step.done["rewards"] == [1.0] * STEP_ROLLOUTS  # type: ignore[attr-defined]
    # The three high calls (3 judgments, sharing 2 slots) came through ahead of the step's ~110 queued calls.
    slowest_high = max(high_judge["s"], high_reward["s"], high_batch["s"])
    assert slowest_high < 4 * unloaded_s + 0.5, (slowest_high, unloaded_s)
    # Without the lane the same call waits behind the step.
    assert normal_judge["s"] > 2 * slowest_high, (normal_judge["s"], slowest_high)


def test_the_async_client_sends_priority(lane_server):
    async def main() -> Dict[str, float]:
        async with AsyncRewardClient(lane_server.url, timeout_s=120, max_retries=0) as client:

            async def clock(coro: Any) -> float:
                started = time.monotonic()
                await coro
                return time.monotonic() - started

            high, high_judge, normal = await asyncio.gather(
                clock(client.reward(QUESTION, GROUND_TRUTH, rollouts("async-high", 1), priority="high")),
                clock(client.judge(QUESTION, GROUND_TRUTH, f"{MATCHING} Async high.", priority="high")),
                clock(client.reward_batch([(QUESTION, GROUND_TRUTH, rollouts("async-normal", 1))])),
            )
            return {"high": max(high, high_judge), "normal": normal}

    step = queued_step(lane_server.url, "async-step")
    times = asyncio.run(main())
    step.join(timeout=60)
    assert times["normal"] > 2 * times["high"], times


def test_priority_is_checked_before_sending():
    # A closed port: a call that got as far as the network would fail with a connection error instead.
    client = RewardClient("http://127.0.0.1:9", timeout_s=1, max_retries=0)
    with pytest.raises(ValueError, match="priority"):
        client.reward(QUESTION, GROUND_TRUTH, ["x"], priority="urgent")
    with pytest.raises(ValueError, match="priority"):
        client.judge(QUESTION, GROUND_TRUTH, "x", priority="HIGH")
    with pytest.raises(ValueError, match="priority"):
        client.reward_batch([(QUESTION, GROUND_TRUTH, ["x"])], priority="low")
