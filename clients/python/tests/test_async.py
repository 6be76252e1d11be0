"""AsyncRewardClient against the real server."""

from __future__ import annotations

import asyncio

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED
from debate_reward import AsyncRewardClient, NotFoundError, RewardClient


def run(coro):
    return asyncio.run(coro)


def test_async_reward_batch_and_judge(offline_server):
    async def main():
        async with AsyncRewardClient(offline_server.url, max_concurrency=8) as c:
            rewards = await c.reward(QUESTION, GROUND_TRUTH, [MATCHING, UNRELATED, DEGENERATE])
            batch = await c.reward_batch([(QUESTION, GROUND_TRUTH, [UNRELATED, MATCHING])])
            judged = await c.judge(QUESTION, GROUND_TRUTH, MATCHING)
            healthy = await c.health()
            graphs = await c.graphs()
        return rewards, batch, judged, healthy, graphs

    rewards, batch, judged, healthy, graphs = run(main())
    assert rewards == [1.0, 0.0, 0.0]
    assert batch == [[0.0, 1.0]]
    assert judged.reward == 1.0 and judged.transcript
    assert healthy and "lexical" in str(graphs)


def test_many_groups_concurrently_keep_their_own_results(offline_server):
    async def main():
        async with AsyncRewardClient(offline_server.url, max_concurrency=4) as c:
            calls = [
                c.reward(QUESTION, GROUND_TRUTH,
                         [MATCHING] if i % 2 == 0 else [UNRELATED, f"{MATCHING} ({i})"])
                for i in range(16)
            ]
            return await asyncio.gather(*calls)

    results = run(main())
    assert results == [[1.0] if i % 2 == 0 else [0.0, 1.0] for i in range(16)]


def test_async_failure_is_none(failing_server):
    async def main():
        async with AsyncRewardClient(failing_server.url, max_retries=0) as c:
            return await c.reward_details(QUESTION, GROUND_TRUTH, [MATCHING, DEGENERATE])

    d = run(main())
    assert d.rewards == [None, 0.0] and d.results[0].status == "judge_error"


def test_async_4xx_is_typed(offline_server):
    async def main():
        async with AsyncRewardClient(offline_server.url) as c:
            await c.reward(QUESTION, GROUND_TRUTH, [MATCHING], graph="nope")

    with pytest.raises(NotFoundError) as info:
        run(main())
    assert info.value.code == "RW_UNKNOWN_GRAPH" and info.value.status == 404


def test_wrapping_a_sync_client_shares_its_settings(offline_server):
    sync = RewardClient(offline_server.url, graph="lexical")
    aclient = AsyncRewardClient.from_client(sync)

    async def main():
        return await aclient.reward_details(QUESTION, GROUND_TRUTH, [MATCHING])

    try:
        assert run(main()).graph["name"] == "lexical"
    finally:
        aclient.close()
        sync.close()
