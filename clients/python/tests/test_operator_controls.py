"""Issue 21 from the Python side, against the real built server in front of the fake backend: the client
sends its timeout as the deadline, `cancel(request_ids=... | tag=...)`, and the slime abort path (a slime-like
rollout module whose `abort` drains its pending reward tasks, as slime's does)."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
import types
from typing import Any, Dict, List

import pytest

from conftest import GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, FakeBackend
from debate_reward import RewardClient
from debate_reward.aio import AsyncRewardClient
from debate_reward.slime import SlimeReward, install_abort_hook, slime_binary_rm


@pytest.fixture(scope="module")
def hung_backend(built) -> Any:
    """A judge that takes 30 s per call: every judgment is still running when a test cancels it."""
    backend = FakeBackend(latency_ms=30_000, reply="match")
    yield backend
    backend.stop()


@pytest.fixture(scope="module")
def slow_server(server_factory, hung_backend):
    return server_factory(
        {
            "JUDGE_BASE_URL": hung_backend.base_url,
            "JUDGE_API_KEY": "test",
            "JUDGE_MODEL": "fake-judge",
            "JUDGE_MAX_RETRIES": "0",
            "JUDGE_TIMEOUT_MS": "60000",
            "REQUEST_DEADLINE_MS": "60000",
        }
    )


def candidates(n: int) -> List[str]:
    return [f"{MATCHING} Variant {i}." for i in range(n)]


def cancelled_metric(server, route: str) -> float:
    for line in server.metrics().splitlines():
        if line.startswith(f'reward_cancelled_judgments_total{{route="{route}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def metric(server, name: str) -> float:
    for line in server.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_metric(server, name: str, at_least: float) -> None:
    for _ in range(400):  # bounded: 400 × 25 ms
        if metric(server, name) >= at_least:
            return
        time.sleep(0.025)
    raise AssertionError(f"{name} never reached {at_least}")


def test_the_client_timeout_is_the_deadline(slow_server):
    # Without retries the client waits timeout_s for the call: that is the deadline it sends.
    client = RewardClient(slow_server.url, timeout_s=1.5, max_retries=0)
    started = time.monotonic()
    result = client.reward_details(QUESTION, GROUND_TRUTH, candidates(2))
    elapsed = time.monotonic() - started
    # Answered before the client's own 1.5 s timeout, not a socket timeout: the items are `timeout`.
    assert elapsed < 1.5
    assert [r.status for r in result.results] == ["timeout", "timeout"]
    assert result.rewards == [None, None]


def test_an_explicit_deadline_s_bounds_the_call(slow_server):
    client = RewardClient(slow_server.url, timeout_s=30, max_retries=3, deadline_s=1.0)
    started = time.monotonic()
    result = client.reward_details(QUESTION, GROUND_TRUTH, candidates(1))
    assert time.monotonic() - started < 1.0
    assert result.results[0].status == "timeout"


def test_cancel_by_request_id_answers_the_waiting_call_at_once(slow_server):
    client = RewardClient(slow_server.url, timeout_s=30, max_retries=0)
    out: Dict[str, Any] = {}

    def call() -> None:
        out["result"] = client.reward_details(QUESTION, GROUND_TRUTH, candidates(3), request_id="py-rid-1")

    thread = threading.Thread(target=call)
    thread.start()
    # Until its 3 judgments run (a cancel before the request arrives would leave it a tombstone instead).
    wait_metric(slow_server, "reward_inflight_judgments", 3)
    answer = client.cancel(request_ids=["py-rid-1"])
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert answer == {"cancelled_judgments": 3, "cancelled_requests": 1}
    result = out["result"]
    assert [r.status for r in result.results] == ["cancelled"] * 3
    assert result.rewards == [None, None, None]
    assert [r.error_code for r in result.results] == ["RW_CANCELLED"] * 3


def test_cancel_needs_ids_or_a_tag(slow_server):
    client = RewardClient(slow_server.url)
    with pytest.raises(ValueError):
        client.cancel()
    with pytest.raises(ValueError):
        client.cancel(request_ids=["a"], tag="b")


class Sample:
    """The fields of slime's `Sample` that the reward functions read, and its status enum."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        ABORTED = "aborted"

    def __init__(self, prompt: str, response: str, label: str) -> None:
        self.prompt, self.response, self.label = prompt, response, label
        self.status = Sample.Status.COMPLETED
        self.remove_sample = False
        self.metadata: Dict[str, Any] = {}


def test_slime_abort_cancels_pending_rewards(slow_server):
    async def scenario() -> Dict[str, Any]:
        aclient = AsyncRewardClient(slow_server.url, timeout_s=30, max_retries=0)
        reward = SlimeReward(aclient)
        first_tag = reward.tag

        # A stand-in for slime.rollout.sglang_rollout: generate_and_rm tasks pending, and an `abort` that
        # waits for all of them (slime's does, so a slow reward stalls the step).
        module = types.ModuleType("fake_sglang_rollout")
        module.pendings = set()  # type: ignore[attr-defined]

        async def abort(args: Any, rollout_id: int) -> List[Any]:
            done = []
            while module.pendings:  # type: ignore[attr-defined]
                finished, module.pendings = await asyncio.wait(  # type: ignore[attr-defined]
                    module.pendings, return_when=asyncio.FIRST_COMPLETED  # type: ignore[attr-defined]
                )
                done.extend(t.result() for t in finished)
            return done

        module.abort = abort  # type: ignore[attr-defined]
        samples = [Sample(QUESTION, text, GROUND_TRUTH) for text in [*candidates(3), UNRELATED]]
        module.pendings = {asyncio.ensure_future(reward.rm(None, s)) for s in samples}  # type: ignore[attr-defined]
        await asyncio.get_running_loop().run_in_executor(
            None, wait_metric, slow_server, "reward_inflight_judgments", 4
        )
        # Without the hook nothing would return for 30 s: the judgments really are hung.
        _, still = await asyncio.wait(set(module.pendings), timeout=0.5)  # type: ignore[attr-defined]
        assert len(still) == 4

        install_abort_hook(reward, module)
        started = time.monotonic()
        rewards = await module.abort(None, 7)  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
        aclient.close()
        return {"rewards": rewards, "elapsed": elapsed, "tag": reward.tag, "first": first_tag, "samples": samples}

    before = cancelled_metric(slow_server, "/slime")
    out = asyncio.run(scenario())
    # A float for slime, the sample masked (remove_sample), its status left COMPLETED: marked ABORTED, slime's
    # partial rollout would generate it again past its stop token (issue 39 item 3).
    assert out["rewards"] == [0.0, 0.0, 0.0, 0.0]
    assert [s.status for s in out["samples"]] == [Sample.Status.COMPLETED] * 4
    assert all(s.remove_sample and s.metadata["debate_reward"]["status"] == "cancelled" for s in out["samples"])
    assert out["elapsed"] < 5
    assert out["tag"] != out["first"]  # the next rollout gets a fresh tag
    assert cancelled_metric(slow_server, "/slime") - before == 4


def test_requests_arriving_with_a_cancelled_tag_are_cancelled_at_once(slow_server):
    client = RewardClient(slow_server.url, timeout_s=30, max_retries=0, tag="py-step-3")
    assert client.cancel(tag="py-step-3") == {"cancelled_judgments": 0, "cancelled_requests": 0}
    started = time.monotonic()
    result = client.reward_details(QUESTION, GROUND_TRUTH, candidates(2))
    assert time.monotonic() - started < 2
    assert [r.status for r in result.results] == ["cancelled", "cancelled"]


def test_results_carry_votes_and_stamps_also_when_cached(offline_server):
    client = RewardClient(offline_server.url)
    first = client.reward_details(QUESTION, GROUND_TRUTH, [MATCHING + " Stamped."])
    again = client.reward_details(QUESTION, GROUND_TRUTH, [MATCHING + " Stamped."])
    assert again.results[0].cached
    assert first.results[0].votes and again.results[0].votes == first.results[0].votes
    for vote in first.results[0].votes:
        assert set(vote) == {"node", "role", "round", "stance", "confidence"}
    assert first.judge_model is not None and first.prompt_version and first.graph_hash == first.graph["hash"]
    judged = client.judge(QUESTION, GROUND_TRUTH, MATCHING)
    assert judged.votes and judged.judge_model == first.judge_model and judged.graph_hash == first.graph_hash


def test_slime_binary_rm_through_a_slime_reward_client_is_cancelled_by_the_abort_hook(slow_server):
    async def scenario() -> Dict[str, Any]:
        reward = SlimeReward(AsyncRewardClient(slow_server.url, timeout_s=30, max_retries=0))
        binary = slime_binary_rm(reward.client)
        module = types.ModuleType("fake_sglang_rollout")
        samples = [Sample(QUESTION, text, GROUND_TRUTH) for text in candidates(3)]
        pending = asyncio.ensure_future(binary(None, samples))

        async def abort(args: Any, rollout_id: int) -> Any:
            return await pending  # slime waits for its pending reward tasks

        module.abort = abort  # type: ignore[attr-defined]
        await asyncio.get_running_loop().run_in_executor(
            None, wait_metric, slow_server, "reward_inflight_judgments", 3
        )
        install_abort_hook(reward, module)
        started = time.monotonic()
        rewards = await module.abort(None, 1)  # type: ignore[attr-defined]
        elapsed = time.monotonic() - started
        reward.client.close()
        return {"rewards": rewards, "elapsed": elapsed, "samples": samples}

    out = asyncio.run(scenario())
    assert out["rewards"] == [0.0, 0.0, 0.0]
    assert out["elapsed"] < 5
    assert [s.status for s in out["samples"]] == [Sample.Status.COMPLETED] * 3
    assert all(s.remove_sample and s.metadata["debate_reward"]["status"] == "cancelled" for s in out["samples"])
