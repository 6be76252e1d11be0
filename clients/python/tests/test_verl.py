"""The verl compute_score against the real server, called through verl's non-streaming reward loop
(`tests/trainers.py`: `get_custom_reward_fn`, `RewardLoopManager.compute_rm_score` over `reward.num_workers`
workers, `NaiveRewardManager.run_single` awaiting a coroutine or running a plain function on a thread)."""

from __future__ import annotations

import asyncio
import textwrap
import uuid

import pytest

import debate_reward.verl as verl_module
from conftest import (
    DEGENERATE,
    FAIL_MARKER,
    GROUND_TRUTH,
    MATCHING,
    QUESTION,
    UNRELATED,
    requests_total,
)
from debate_reward import JudgeFailedError, RewardClient
from debate_reward.verl import SCORE_KEYS, split_ground_truth, verl_compute_score, verl_compute_score_sync
from trainers import VerlRewardLoop

QUESTION_2 = "Can a small recurrent network inherit a large transformer's dialogue ability?"
GT = {"ground_truth": GROUND_TRUTH, "question": QUESTION}
GT_2 = {"ground_truth": UNRELATED + " And nothing else.", "question": QUESTION_2}


def sample(response: str, gt=GT, **extra_info):
    """One row of verl's batch as `run_single` reads it (`response_str`: the decoded response)."""
    return {"data_source": "ideas", "response_str": response, "reward_model": {"ground_truth": gt},
            "extra_info": {"index": 0, **extra_info}}


def run_loop(path, name, batch, reward_kwargs=None, num_workers=2):
    loop = VerlRewardLoop(str(path), name, reward_kwargs, num_workers=num_workers)
    try:
        return loop.compute_rm_score(batch)
    finally:
        loop.close()


def my_reward(tmp_path, body: str):
    """The user's `my_reward.py`, as the README writes it."""
    path = tmp_path / f"my_reward_{uuid.uuid4().hex[:6]}.py"
    path.write_text(textwrap.dedent(body))
    return path


def unique(text: str) -> str:
    return f"{text} (run {uuid.uuid4().hex[:8]})"


def test_config_only_module_through_the_reward_loop_pools_each_workers_chunk(marker_server):
    """8 samples (2 groups of 4) over 2 workers: one /v1/reward/batch request per worker, the same keys for
    every sample, and the failed judgment scores its group's mean (flagged), not 0."""
    batch = [sample(unique(MATCHING)), sample(unique(UNRELATED)), sample(unique(f"{MATCHING} {FAIL_MARKER}")),
             sample(unique(MATCHING)), sample(unique(MATCHING), GT_2), sample(unique(DEGENERATE), GT_2),
             sample(unique(UNRELATED), GT_2), sample(unique(UNRELATED), GT_2)]
    before = requests_total(marker_server, "/v1/reward/batch")
    out = run_loop(verl_module.__file__, "compute_score", batch,
                   {"base_url": marker_server.url, "failure_score": "group_mean"})
    # Worker 1 had rollouts 0-3 (one group, one failed: sent again twice), worker 2 rollouts 4-7.
    assert requests_total(marker_server, "/v1/reward/batch") - before == 2 + 2
    assert out["scores"][:4] == [1.0, 0.0, pytest.approx(2 / 3), 1.0]
    assert out["scores"][4:] == [1.0, 0.0, 0.0, 0.0]
    assert sorted(out["reward_extra_info"]) == sorted(SCORE_KEYS)
    assert out["reward_extra_info"]["judge_failed"] == [False, False, True, False, False, False, False, False]


def test_sync_compute_score_on_verls_thread_pool_shares_requests(marker_server, tmp_path):
    path = my_reward(tmp_path, f"""
        from debate_reward.verl import verl_compute_score_sync
        compute_score = verl_compute_score_sync("{marker_server.url}", max_rounds=0)
    """)
    batch = [sample(unique(MATCHING if k % 2 else UNRELATED)) for k in range(8)]
    before = requests_total(marker_server, "/v1/reward/batch")
    out = run_loop(path, "compute_score", batch, num_workers=2)
    assert out["scores"] == [0.0, 1.0] * 4
    # run_in_executor runs the 4 calls of a worker at once; they share one request (not 4).
    assert requests_total(marker_server, "/v1/reward/batch") - before <= 2 + 1


def test_failure_scores_chosen_explicitly(marker_server, tmp_path):
    batch = [sample(unique(MATCHING)), sample(unique(f"{UNRELATED} {FAIL_MARKER}"))]
    fixed = my_reward(tmp_path, f"""
        from debate_reward.verl import verl_compute_score
        compute_score = verl_compute_score("{marker_server.url}", failure_score=-1.0, max_rounds=0)
    """)
    assert run_loop(fixed, "compute_score", batch, num_workers=1)["scores"] == [1.0, -1.0]
    raising = my_reward(tmp_path, f"""
        from debate_reward.verl import verl_compute_score
        compute_score = verl_compute_score("{marker_server.url}", failure_score=None, max_rounds=0)
    """)
    with pytest.raises(JudgeFailedError, match="judge_error"):
        run_loop(raising, "compute_score", batch, num_workers=1)


def test_a_failure_never_scores_another_prompts_mean(failing_server):
    """The judged rollouts of another group (this worker's recent mean) are never a failure's value: with
    nothing of its own group judged, it waits `group_wait_s`, then scores `unjudged_score`, flagged."""
    fn = verl_compute_score(RewardClient(failing_server.url, max_retries=0), max_rounds=0, group_wait_s=0.5,
                            poll_s=0.2, unjudged_score=0.5)
    # Groups of this test's own: the server's group ledger outlives a test, and other tests judge GT.
    gt, gt_2 = {**GT, "question": unique(QUESTION)}, {**GT_2, "question": unique(QUESTION_2)}
    out = asyncio.run(fn(data_source="x", solution_str=DEGENERATE, ground_truth=gt_2))
    assert out["score"] == 0.0 and out["judge_failed"] is False  # judged without an LLM: a real 0
    out = asyncio.run(fn(data_source="x", solution_str=unique(MATCHING), ground_truth=gt))
    assert out == {"score": 0.5, "judge_failed": True, "group_unjudged": True, "cached": False,
                   "latency_s": out["latency_s"]}
    # ...and once a rollout of its own group is judged, its failures score that group's mean.
    out = asyncio.run(fn(data_source="x", solution_str=DEGENERATE, ground_truth=gt))
    out = asyncio.run(fn(data_source="x", solution_str=unique(MATCHING), ground_truth=gt))
    assert (out["score"], out["judge_failed"], out["group_unjudged"]) == (0.0, True, False)


def test_a_template_that_opens_the_trace_makes_a_cut_off_response_a_real_zero(offline_server):
    trace = "The reference probably uses a bias per expert; let me check the routing."
    closed, cut = f"{trace}\n</think>\n\n{MATCHING}", f"{trace} {MATCHING}"

    class QwenThinkingTokenizer:
        def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, **kw):
            out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
            return out + ("<|im_start|>assistant\n<think>\n" if add_generation_prompt else "")

    for fn in (verl_compute_score(offline_server.url, trace_opener="<think>\n"),
               verl_compute_score(offline_server.url, tokenizer=QwenThinkingTokenizer())):
        scores = [asyncio.run(fn(data_source="x", solution_str=s, ground_truth=GT))["score"] for s in (closed, cut)]
        assert scores == [1.0, 0.0]
    plain = verl_compute_score(offline_server.url)  # without it, the cut-off trace is judged as the idea
    assert asyncio.run(plain(data_source="x", solution_str=cut, ground_truth=GT))["score"] == 1.0


def test_a_nul_byte_in_one_rollout(offline_server):
    batch = [sample(f"{MATCHING}\u0000"), sample(MATCHING)]
    out = run_loop(verl_module.__file__, "compute_score_sync", batch, {"base_url": offline_server.url}, num_workers=1)
    assert out["scores"] == [0.0, 1.0] and out["reward_extra_info"]["judge_failed"] == [False, False]


def test_a_keyed_server_reached_from_a_url(auth_server, monkeypatch, tmp_path):
    monkeypatch.setenv("DEBATE_REWARD_API_KEY", "s3cret-key")
    batch = [sample(MATCHING), sample(UNRELATED)]
    for name in ("compute_score", "compute_score_sync"):
        assert run_loop(verl_module.__file__, name, batch, {"base_url": auth_server.url})["scores"] == [1.0, 0.0]
    user_file = my_reward(tmp_path, f"""
        from debate_reward.verl import verl_compute_score, verl_compute_score_sync
        compute_score = verl_compute_score("{auth_server.url}")
        compute_score_sync = verl_compute_score_sync("{auth_server.url}")
    """)
    for name in ("compute_score", "compute_score_sync"):
        assert run_loop(user_file, name, batch)["scores"] == [1.0, 0.0]
    monkeypatch.delenv("DEBATE_REWARD_API_KEY")
    explicit = verl_compute_score(auth_server.url, api_key="s3cret-key")
    assert asyncio.run(explicit(solution_str=MATCHING, ground_truth=GT))["score"] == 1.0


def test_env_configuration_of_the_config_only_entry_point(failing_server, monkeypatch):
    monkeypatch.setenv("DEBATE_REWARD_URL", failing_server.url)
    monkeypatch.setenv("DEBATE_REWARD_FAILURE_SCORE", "-0.5")
    out = asyncio.run(verl_module.compute_score("ideas", unique(MATCHING), GROUND_TRUTH, {"question": QUESTION},
                                                max_rounds=0))
    assert out == {"score": -0.5, "judge_failed": True, "group_unjudged": False, "cached": False,
                   "latency_s": out["latency_s"]}
    monkeypatch.setenv("DEBATE_REWARD_FAILURE_SCORE", "none")
    with pytest.raises(JudgeFailedError):
        asyncio.run(verl_module.compute_score("ideas", unique(MATCHING), GROUND_TRUTH, {"question": QUESTION},
                                              max_rounds=0))


def test_repeated_sample_is_served_from_the_cache(offline_server):
    fn = verl_compute_score(RewardClient(offline_server.url))
    kw = dict(data_source="ideas", solution_str=unique(MATCHING), ground_truth=GROUND_TRUTH,
              extra_info={"question": QUESTION})
    first, second = asyncio.run(fn(**kw)), asyncio.run(fn(**kw))
    assert first["cached"] is False and second["cached"] is True and second["score"] == first["score"]


def test_question_is_required():
    with pytest.raises(ValueError, match="question"):
        split_ground_truth(GROUND_TRUTH, None)
    assert split_ground_truth({"ground_truth": "g", "question": "q"}, {"question": "other"}) == ("q", "g")
    with pytest.raises(TypeError, match="failure_score"):
        verl_compute_score_sync("http://127.0.0.1:9", failure_score="zero")
