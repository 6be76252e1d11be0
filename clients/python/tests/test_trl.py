"""The TRL reward function, called the way GRPOTrainer calls it, against the real server."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, closed_port
from debate_reward import AsyncRewardClient, RewardClient, RewardUnavailableError
from debate_reward.trl import completion_text, trl_reward_func

QUESTION_2 = "Can a small recurrent network inherit a large transformer's dialogue ability?"
GROUND_TRUTH_2 = (
    "We distill a large dense transformer teacher into a small recurrent student network by matching "
    "hidden states on synthetic dialogue transcripts collected from crowd workers, and then prune the "
    "student's attention heads."
)


class CountingClient(AsyncRewardClient):
    """Records every /v1/reward call the reward function makes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: List[List[str]] = []

    async def reward_details(self, question, ground_truth, candidates, **kw):
        self.calls.append(list(candidates))
        return await super().reward_details(question, ground_truth, candidates, **kw)


@pytest.fixture
def counting(offline_server):
    c = CountingClient(offline_server.url)
    yield c
    c.close()


def call(func, **kwargs):
    """What GRPOTrainer does: run the coroutine function on an event loop with keyword arguments."""
    assert asyncio.iscoroutinefunction(func)
    return asyncio.run(func(**kwargs))


def conversational(text: str) -> list:
    return [{"role": "assistant", "content": text}]


def test_is_an_async_function_named_for_trl_logs(counting):
    func = trl_reward_func(counting, name="idea_match")
    assert asyncio.iscoroutinefunction(func) and func.__name__ == "idea_match"


def test_plain_completions_one_group(counting):
    func = trl_reward_func(counting)
    rewards = call(
        func,
        prompts=[QUESTION] * 3,
        completions=[MATCHING, UNRELATED, DEGENERATE],
        completion_ids=[[1], [2], [3]],
        question=[QUESTION] * 3,
        ground_truth=[GROUND_TRUTH] * 3,
        trainer_state=object(),
    )
    assert rewards == [1.0, 0.0, 0.0]
    assert counting.calls == [[MATCHING, UNRELATED, DEGENERATE]]  # one request for the group


def test_conversational_completions_and_question_from_the_prompt(counting):
    prompt = [
        {"role": "system", "content": "You propose research ideas."},
        {"role": "user", "content": QUESTION},
    ]
    completions = [
        conversational(MATCHING),
        [{"role": "assistant", "content": [{"type": "text", "text": UNRELATED}]}],
        [
            {"role": "assistant", "content": "Let me look up related work.", "tool_calls": [{"id": "t"}]},
            {"role": "tool", "content": "search results ..."},
            {"role": "assistant", "content": MATCHING},
        ],
    ]
    func = trl_reward_func(counting)  # no "question" column: taken from the last user message
    rewards = call(func, prompts=[prompt] * 3, completions=completions, ground_truth=[GROUND_TRUTH] * 3)
    assert rewards == [1.0, 0.0, 1.0]
    assert counting.calls == [[MATCHING, UNRELATED, MATCHING]]


def test_interleaved_groups_get_one_request_each_and_values_in_order(counting):
    completions = [MATCHING, UNRELATED, UNRELATED, MATCHING, DEGENERATE]
    truths = [GROUND_TRUTH, GROUND_TRUTH_2, GROUND_TRUTH, GROUND_TRUTH_2, GROUND_TRUTH]
    questions = [QUESTION, QUESTION_2, QUESTION, QUESTION_2, QUESTION]
    rewards = call(trl_reward_func(counting), prompts=questions, completions=completions,
                   question=questions, ground_truth=truths)
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert sorted(counting.calls) == sorted([[MATCHING, UNRELATED, DEGENERATE], [UNRELATED, MATCHING]])


def test_a_group_split_across_two_calls(counting):
    """GRPO groups can be split across devices / gradient-accumulation steps: each call scores the
    rollouts it gets, returns exactly len(completions) values, and agrees with the unsplit group."""
    func = trl_reward_func(counting)
    texts = (MATCHING, UNRELATED, f"{MATCHING} It also warms up the bias.", DEGENERATE)
    group = [conversational(t) for t in texts]
    whole = call(func, prompts=[QUESTION] * 4, completions=group, ground_truth=[GROUND_TRUTH] * 4)
    first = call(func, prompts=[QUESTION] * 2, completions=group[:2], ground_truth=[GROUND_TRUTH] * 2)
    second = call(func, prompts=[QUESTION] * 2, completions=group[2:], ground_truth=[GROUND_TRUTH] * 2)
    assert len(first) == 2 and len(second) == 2
    assert first + second == whole == [1.0, 0.0, 1.0, 0.0]
    assert [len(c) for c in counting.calls] == [4, 2, 2]


def test_label_column_may_carry_the_question(counting):
    labels = [{"ground_truth": GROUND_TRUTH, "question": QUESTION}] * 2
    rewards = call(trl_reward_func(counting, ground_truth_column="label"),
                   prompts=["ignored", "ignored"], completions=[MATCHING, UNRELATED], label=labels)
    assert rewards == [1.0, 0.0]


def test_judge_failures_are_none(failing_server):
    func = trl_reward_func(RewardClient(failing_server.url, max_retries=0))
    rewards = call(func, prompts=[QUESTION] * 3, completions=[MATCHING, DEGENERATE, UNRELATED],
                   ground_truth=[GROUND_TRUTH] * 3)
    assert rewards == [None, 0.0, None]
    assert rewards[0] is None and rewards[2] is None


def test_missing_ground_truth_column_is_a_clear_error(counting):
    with pytest.raises(KeyError, match="ground_truth"):
        call(trl_reward_func(counting), prompts=[QUESTION], completions=[MATCHING], answer=["x"])


def test_unavailable_server_raises_by_default_or_gives_none_when_asked():
    url = f"http://127.0.0.1:{closed_port()}"
    kwargs = dict(prompts=[QUESTION] * 2, completions=[MATCHING, UNRELATED], ground_truth=[GROUND_TRUTH] * 2)
    dead = AsyncRewardClient(url, max_retries=1, backoff_base_s=0.01)
    try:
        with pytest.raises(RewardUnavailableError):
            call(trl_reward_func(dead), **kwargs)
        assert call(trl_reward_func(dead, on_unavailable="none"), **kwargs) == [None, None]
    finally:
        dead.close()


def test_completion_text_shapes():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    parts = [{"type": "text", "text": "x"}, {"type": "image"}, {"type": "text", "text": "y"}]
    assert completion_text([{"role": "assistant", "content": parts}]) == "xy"
    assert completion_text([]) == ""


def test_pickles_for_a_rollout_worker_process(offline_server):
    """TRL's AsyncGRPOTrainer (1.6+) pickles reward functions into a child process."""
    import pickle

    func = trl_reward_func(RewardClient(offline_server.url, graph="lexical"), name="idea_match")
    clone = pickle.loads(pickle.dumps(func))
    assert asyncio.iscoroutinefunction(clone) and clone.__name__ == "idea_match"
    rewards = call(clone, prompts=[QUESTION] * 2, completions=[MATCHING, UNRELATED],
                   ground_truth=[GROUND_TRUTH] * 2)
    assert rewards == [1.0, 0.0]
    assert clone.args[0].client is not func.args[0].client  # its own client, same settings
    assert clone.args[0].client.graph == "lexical"


def test_sync_variant_for_older_trl(offline_server):
    func = trl_reward_func(offline_server.url, sync=True)
    assert not asyncio.iscoroutinefunction(func)
    assert func(prompts=[QUESTION], completions=[[{"role": "assistant", "content": MATCHING}]],
                ground_truth=[GROUND_TRUTH]) == [1.0]


def test_group_mean_makes_failed_rollouts_neutral():
    """TRL turns an all-None row into reward 0 (nansum); group_mean keeps the failure out of the
    advantages instead: a failed rollout gets the mean of its group's successful rewards."""
    from stub import StubServer, group_ok, reply

    with StubServer([reply(200, group_ok([1, None, 0, None]))] * 2) as stub:
        client = AsyncRewardClient(stub.url)
        kwargs = dict(prompts=[QUESTION] * 4, completions=["a", "b", "c", "d"],
                      ground_truth=[GROUND_TRUTH] * 4)
        try:
            assert call(trl_reward_func(client), **kwargs) == [1.0, None, 0.0, None]
            assert call(trl_reward_func(client, on_failure="group_mean"), **kwargs) == [1.0, 0.5, 0.0, 0.5]
        finally:
            client.close()
