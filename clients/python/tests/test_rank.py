"""/v1/rank, /v1/best-of-n and the slime group adapter through the client, against the real built server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED
from debate_reward import AsyncRewardClient, RewardClient, RewardUnavailableError
from debate_reward.slime import group_body, slime_group_rm

CLOSE = (
    "Keep mixture-of-experts load balanced by adding a bias to each expert's routing score before top-k "
    "selection and nudging it after every step, with a small auxiliary loss as a fallback."
)


@pytest.fixture
def client(offline_server):
    with RewardClient(offline_server.url, timeout_s=30, max_retries=0) as c:
        yield c


def test_rank_orders_a_group_and_a_degenerate_idea_loses_everything(client):
    r = client.rank(QUESTION, [UNRELATED, MATCHING, DEGENERATE, CLOSE], ground_truth=GROUND_TRUTH)
    assert r["backend"] == "offline"
    assert r["ranking"][0] == 1 and r["ranking"][-1] == 2
    # The degenerate idea is rejected before any pair: it loses to each real candidate by rule, and the
    # schedule is played among the three real ones (3 pairs).
    assert r["comparisons"] == {"scheduled": 3, "ok": 3, "failed": 0, "cached": 0}
    assert r["results"][2]["losses"] == 3 and r["results"][2]["wins"] == 0
    assert r["rewards"] == r["scores"] and all(0 <= s <= 1 for s in r["scores"])
    top = client.rank(QUESTION, [UNRELATED, MATCHING, CLOSE], ground_truth=GROUND_TRUTH, reward_mode="top_k", top_k=1)
    assert top["rewards"] == [0, 1, 0]


def test_rank_checks_its_arguments_before_sending(client):
    with pytest.raises(ValueError):
        client.rank(QUESTION, [MATCHING, UNRELATED])  # neither ground truth nor criterion
    with pytest.raises(ValueError):
        client.rank(QUESTION, [MATCHING, UNRELATED], criterion="beauty")
    with pytest.raises(TypeError):
        client.rank(QUESTION, MATCHING, ground_truth=GROUND_TRUTH)


def test_best_of_n_by_tournament_and_by_one_pick(client):
    ideas = [UNRELATED, MATCHING, CLOSE]
    t = client.best_of_n(QUESTION, ideas, "match", ground_truth=GROUND_TRUTH)
    assert t["best_index"] == 1 and t["method"] == "tournament" and len(t["scores"]) == 3
    p = client.best_of_n(QUESTION, ideas, "match", ground_truth=GROUND_TRUTH, method="pick")
    assert p["best_index"] == 1 and p["method"] == "pick" and p["scores"] is None
    # The body /v1/rank takes: with a ground truth and no criterion, best-of-n judges on match.
    m = client.best_of_n(QUESTION, ideas, ground_truth=GROUND_TRUTH)
    assert m["best_index"] == 1 and m["criterion"] == "match"
    with pytest.raises(ValueError):
        client.best_of_n(QUESTION, ideas)


def test_slime_group_rm_returns_one_float_per_sample_in_order(offline_server):
    samples = [
        SimpleNamespace(prompt=[{"role": "user", "content": QUESTION}], response=r, label=GROUND_TRUTH)
        for r in (UNRELATED, MATCHING, CLOSE)
    ]
    assert group_body(samples)["samples"][1]["response"] == MATCHING
    aclient = AsyncRewardClient(offline_server.url, timeout_s=30, max_retries=0)
    try:
        rm = slime_group_rm(aclient, schedule="all_pairs")
        rewards = asyncio.run(rm(None, samples))
    finally:
        aclient.close()
    assert len(rewards) == 3 and all(type(r) is float for r in rewards)
    assert rewards[1] == max(rewards) and rewards[0] == min(rewards)


def test_failed_comparisons_are_none_in_rank_and_masked_by_the_group_adapter(failing_server):
    with RewardClient(failing_server.url, timeout_s=30, max_retries=0) as c:
        r = c.rank(QUESTION, [MATCHING, UNRELATED], ground_truth=GROUND_TRUTH)
        assert r["scores"] == [None, None] and r["rewards"] == [None, None]
        assert r["pairs"][0]["status"] == "judge_error"
    aclient = AsyncRewardClient(failing_server.url, timeout_s=30, max_retries=0)
    try:
        rm = slime_group_rm(aclient)
        samples = [{"prompt": QUESTION, "response": x, "label": GROUND_TRUTH} for x in (MATCHING, UNRELATED)]
        # slime ends the run on a reward exception: no comparison succeeded, so both are masked (issue 39
        # item 3), at 0.0 (nothing of the group judged, no FAILURE_REWARD), never None (slime's tensor).
        assert asyncio.run(rm(None, samples)) == [0.0, 0.0]
        assert [s["remove_sample"] for s in samples] == [True, True]
        assert samples[0]["metadata"]["debate_reward"]["masked"] is True
    finally:
        aclient.close()
