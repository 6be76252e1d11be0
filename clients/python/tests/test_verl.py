"""The verl compute_score, called the way verl calls it, against the real server."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys

import pytest

import debate_reward.verl as verl_module
from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED
from debate_reward import JudgeFailedError, RewardClient
from debate_reward.verl import SCORE_KEYS, split_ground_truth, verl_compute_score, verl_compute_score_sync


def score(fn, **kwargs):
    return asyncio.run(fn(**kwargs))


def test_key_set_is_the_same_for_success_rejection_and_failure(offline_server, failing_server):
    ok = verl_compute_score(RewardClient(offline_server.url), failure_score=-1.0)
    bad = verl_compute_score(RewardClient(failing_server.url, max_retries=0), failure_score=-1.0)
    gt = {"ground_truth": GROUND_TRUTH, "question": QUESTION}
    out = [
        score(ok, data_source="ideas", solution_str=MATCHING, ground_truth=gt, extra_info={"index": 0}),
        score(ok, data_source="ideas", solution_str=DEGENERATE, ground_truth=gt),
        score(bad, data_source="ideas", solution_str=MATCHING, ground_truth=gt,
              reward_router_address=None, reward_model_tokenizer=None),
    ]
    assert [set(o) for o in out] == [set(SCORE_KEYS)] * 3
    assert [o["score"] for o in out] == [1.0, 0.0, -1.0]
    assert [o["judge_failed"] for o in out] == [False, False, True]  # the -1.0 is marked, the 0.0 is real
    assert all(isinstance(o["latency_s"], float) and o["latency_s"] >= 0 for o in out)
    assert all(isinstance(o["cached"], bool) for o in out)


def test_ground_truth_string_with_question_in_extra_info(offline_server):
    fn = verl_compute_score(RewardClient(offline_server.url), failure_score=0.0)
    out = score(fn, data_source="ideas", solution_str=UNRELATED, ground_truth=GROUND_TRUTH,
                extra_info={"question": QUESTION})
    assert out["score"] == 0.0 and out["judge_failed"] is False


def test_repeated_sample_is_served_from_the_cache(offline_server):
    fn = verl_compute_score(RewardClient(offline_server.url), failure_score=0.0)
    kw = dict(data_source="ideas", solution_str=f"{MATCHING} (cache probe)", ground_truth=GROUND_TRUTH,
              extra_info={"question": QUESTION})
    first, second = score(fn, **kw), score(fn, **kw)
    assert first["cached"] is False and second["cached"] is True and second["score"] == first["score"]


def test_failure_score_none_raises_instead_of_inventing_a_number(failing_server):
    fn = verl_compute_score(RewardClient(failing_server.url, max_retries=0), failure_score=None)
    with pytest.raises(JudgeFailedError, match="judge_error"):
        score(fn, data_source="x", solution_str=MATCHING, ground_truth=GROUND_TRUTH,
              extra_info={"question": QUESTION})


def test_failure_score_must_be_chosen():
    with pytest.raises(TypeError, match="failure_score is required"):
        verl_compute_score("http://127.0.0.1:9")


def test_sync_twin_for_older_verl(offline_server, failing_server):
    ok = verl_compute_score_sync(RewardClient(offline_server.url), failure_score=0.0)
    bad = verl_compute_score_sync(RewardClient(failing_server.url, max_retries=0), failure_score=0.0)
    a = ok("ideas", MATCHING, {"ground_truth": GROUND_TRUTH, "question": QUESTION})
    b = bad("ideas", MATCHING, {"ground_truth": GROUND_TRUTH, "question": QUESTION})
    assert set(a) == set(b) == set(SCORE_KEYS)
    assert (a["score"], a["judge_failed"], b["score"], b["judge_failed"]) == (1.0, False, 0.0, True)


def test_question_is_required():
    with pytest.raises(ValueError, match="question"):
        split_ground_truth(GROUND_TRUTH, None)
    assert split_ground_truth({"ground_truth": "g", "question": "q"}, {"question": "other"}) == ("q", "g")


def test_loaded_by_path_like_verl_with_reward_kwargs(offline_server, monkeypatch):
    """verl imports custom_reward_function.path with spec_from_file_location (not as a package member)
    and merges custom_reward_function.reward_kwargs into every call."""
    spec = importlib.util.spec_from_file_location("custom_module", verl_module.__file__)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "custom_module", module)
    spec.loader.exec_module(module)
    fn = module.compute_score
    assert inspect.iscoroutinefunction(fn)
    reward_kwargs = {"base_url": offline_server.url, "failure_score": 0.0}
    out = asyncio.run(fn(data_source="ideas", solution_str=MATCHING, ground_truth=GROUND_TRUTH,
                         extra_info={"question": QUESTION}, **reward_kwargs))
    assert out["score"] == 1.0 and set(out) == set(SCORE_KEYS)
    sync_out = module.compute_score_sync(
        "ideas", UNRELATED, GROUND_TRUTH, {"question": QUESTION}, **reward_kwargs
    )
    assert sync_out["score"] == 0.0


def test_config_only_entry_point_reads_env(failing_server, monkeypatch):
    monkeypatch.setenv("DEBATE_REWARD_URL", failing_server.url)
    monkeypatch.setenv("DEBATE_REWARD_FAILURE_SCORE", "-0.5")
    out = asyncio.run(verl_module.compute_score("ideas", MATCHING, GROUND_TRUTH, {"question": QUESTION}))
    assert out == {"score": -0.5, "judge_failed": True, "cached": False, "latency_s": out["latency_s"]}
    monkeypatch.delenv("DEBATE_REWARD_FAILURE_SCORE")
    with pytest.raises(JudgeFailedError):
        asyncio.run(verl_module.compute_score("ideas", MATCHING, GROUND_TRUTH, {"question": QUESTION}))
