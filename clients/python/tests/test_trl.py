"""The TRL reward function against the real server, called through TRL 1.9's own reward path
(`tests/trainers.py`: `GRPOTrainer._calculate_rewards` and its aggregation, reproduced from the source)."""

from __future__ import annotations

import asyncio
import inspect
import math
import pickle
from typing import Any, Dict, List

import pytest

from conftest import (
    DEGENERATE,
    FAIL_MARKER,
    GROUND_TRUTH,
    MATCHING,
    QUESTION,
    UNRELATED,
    closed_port,
)
from debate_reward import AsyncRewardClient, RewardClient, RewardUnavailableError, UnauthorizedError
from debate_reward.trl import completion_text, prompt_text, trl_reward_func
from trainers import TRLGRPOTrainer, trl_get_callable_name

QUESTION_2 = "Can a small recurrent network inherit a large transformer's dialogue ability?"
GROUND_TRUTH_2 = (
    "We distill a large dense transformer teacher into a small recurrent student network by matching "
    "hidden states on synthetic dialogue transcripts collected from crowd workers, and then prune the "
    "student's attention heads."
)
SYSTEM = "You are a research assistant. Propose one idea."
CHATML_PROMPT = (
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
)
TRACE = "The reference probably uses a bias per expert; let me check the routing details first."


class RecordingClient(AsyncRewardClient):
    """Records the body of every request the reward function sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.bodies: List[Dict[str, Any]] = []

    async def _request(self, method, path, payload=None, tag=None):
        self.bodies.append({"path": path, **(payload or {})})
        return await super()._request(method, path, payload, tag)

    def candidates(self) -> List[str]:
        return [c for b in self.bodies for g in b.get("groups", []) for c in g["candidates"]]


@pytest.fixture
def recording(offline_server):
    c = RecordingClient(offline_server.url)
    yield c
    c.close()


def rows(prompt, truth=GROUND_TRUTH, n=1, **extra):
    """Dataset rows as RepeatSampler yields them: each prompt `n` times in a row."""
    return [{"prompt": prompt, "ground_truth": truth, **extra} for _ in range(n)]


def train_step(funcs, inputs, completions, **trainer_kw):
    trainer = TRLGRPOTrainer(funcs, num_generations=trainer_kw.pop("num_generations", len(completions)), **trainer_kw)
    try:
        advantages = trainer.step(inputs, completions)
        return trainer, advantages
    finally:
        trainer.close()


def conversational(text: str) -> list:
    return [{"role": "assistant", "content": text}]


def test_trl_awaits_it_and_logs_it_under_its_own_name(recording):
    """TRL 1.9 unwraps a functools.partial to name a reward function: this is not one, and two debate
    rewards (two graphs) get two names."""
    a = trl_reward_func(recording)
    b = trl_reward_func(recording, graph="vote-3")
    c = trl_reward_func(recording, name="idea_match")
    assert inspect.iscoroutinefunction(a) and asyncio.iscoroutinefunction(a)
    assert [trl_get_callable_name(f) for f in (a, b, c)] == ["debate_reward", "debate_reward_vote-3", "idea_match"]
    trainer = TRLGRPOTrainer([a, b], num_generations=2)
    try:
        assert trainer.reward_func_names == ["debate_reward", "debate_reward_vote-3"] and trainer._has_async_funcs
    finally:
        trainer.close()


def test_plain_completions_one_request_for_the_call(recording):
    func = trl_reward_func(recording)
    _, advantages = train_step([func], rows(QUESTION, n=3, question=QUESTION), [MATCHING, UNRELATED, DEGENERATE])
    assert [len(b["groups"]) for b in recording.bodies] == [1]
    assert recording.candidates() == [MATCHING, UNRELATED, DEGENERATE]
    assert advantages[0] > 0 > advantages[1]


def test_conversational_and_templated_prompts_give_the_user_turn_as_the_question(recording):
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    for prompt in (chat, CHATML_PROMPT):
        recording.bodies.clear()
        trainer = TRLGRPOTrainer([trl_reward_func(recording)], num_generations=2)
        try:
            trainer.step(rows(prompt, n=2), [conversational(MATCHING), conversational(UNRELATED)]
                         if isinstance(prompt, list) else [MATCHING, UNRELATED])
            assert trainer.rewards_per_func == [[1.0], [0.0]]
        finally:
            trainer.close()
        [group] = recording.bodies[0]["groups"]
        assert group["question"] == QUESTION  # not the system prompt, not the chat tokens
    assert prompt_text(CHATML_PROMPT) == QUESTION


def test_tool_calls_the_last_assistant_message_only_is_judged(recording):
    """The tool returned the paper's abstract; the final turn is empty (or missing). Judging the preamble or
    the tool's output would reward a lookup: an empty answer is a real 0 (`empty`)."""
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"q": "moe balance"}}}
    preamble = {"role": "assistant", "content": MATCHING, "tool_calls": [call]}
    tool = {"role": "tool", "name": "search", "content": GROUND_TRUTH}
    completions = [
        [preamble, tool, {"role": "assistant", "content": ""}],  # empty final turn
        [preamble, tool],  # the turn after the tool was cut off entirely (TRL appends nothing)
        [preamble, tool, {"role": "assistant", "content": [{"type": "text", "text": MATCHING}]}],
        [{"role": "assistant", "content": UNRELATED}],
    ]
    trainer, _ = train_step([trl_reward_func(recording)], rows(QUESTION, n=4), completions)
    assert trainer.rewards_per_func == [[0.0], [0.0], [1.0], [0.0]]
    assert recording.candidates() == ["", "", MATCHING, UNRELATED]
    assert completion_text([preamble, tool]) == ""


def test_a_prompt_that_opens_the_trace_makes_a_cut_off_completion_a_real_zero(recording):
    """DeepSeek-R1 / Qwen3-thinking templates end the generation prompt with `<think>\\n`: the completion
    then carries only `...</think>answer`, and a completion cut off inside the trace carries no tag at all."""
    opened = CHATML_PROMPT + "<think>\n"
    completions = [f"{TRACE}\n</think>\n\n{MATCHING}", f"{TRACE} {MATCHING}"]  # closed, then cut off
    trainer, _ = train_step([trl_reward_func(recording)], rows(opened, n=2), completions)
    assert trainer.rewards_per_func == [[1.0], [0.0]]
    assert recording.candidates() == [f"<think>\n{c}" for c in completions]

    class R1Tokenizer:
        """A policy tokenizer whose chat template opens the trace (as DeepSeek-R1's does)."""

        def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False, **kw):
            text = "".join(f"<|{m['role'].title()}|>{m['content']}" for m in messages)
            return text + ("<|Assistant|><think>\n" if add_generation_prompt else "")

    recording.bodies.clear()
    chat = [{"role": "user", "content": QUESTION}]
    func = trl_reward_func(recording, chat_template=R1Tokenizer())
    trainer, _ = train_step([func], rows(chat, n=2), [conversational(c) for c in completions])
    assert trainer.rewards_per_func == [[1.0], [0.0]]
    # A completion whose reasoning the tokenizer's response parser already split off closed its trace.
    parsed = [{"role": "assistant", "content": MATCHING, "reasoning_content": TRACE}]
    trainer, _ = train_step([func], rows(chat, n=1), [parsed])
    assert trainer.rewards_per_func == [[1.0]]


def test_a_second_reward_function_does_not_turn_a_failed_judgment_into_zero(marker_server):
    """`reward_funcs=[idea_match, format_reward]`: TRL nansums [NaN, 1.0] to 1.0, what a debate reward of 0
    gives. By default the failure gets its group's mean, so its advantage is what it would be with no
    debate reward at all, under both aggregations; with on_failure="none" it is trained as a 0."""
    def format_reward(prompts, completions, **kw):
        return [1.0 for _ in completions]

    group = [MATCHING, UNRELATED, f"{MATCHING} {FAIL_MARKER}", MATCHING + " It also warms up the bias."]
    inputs = rows(QUESTION, n=4)
    client = AsyncRewardClient(marker_server.url)
    try:
        for aggregation in ("sum_then_normalize", "normalize_then_sum"):
            neutral = trl_reward_func(client, max_rounds=0)
            trainer, adv = train_step([neutral, format_reward], inputs, group, multi_objective_aggregation=aggregation)
            assert [r[0] for r in trainer.rewards_per_func] == [1.0, 0.0, pytest.approx(2 / 3), 1.0]
            # The failed rollout sits exactly at its group's debate mean: its advantage is 0 (format is constant).
            assert adv[2] == pytest.approx(0.0, abs=1e-6) and adv[0] > 0 > adv[1]
            assert trainer.metrics["debate_reward/failed"] == [0.25]
        naive = trl_reward_func(client, on_failure="none", max_rounds=0)
        trainer, adv = train_step([naive, format_reward], inputs, group)
        assert math.isnan(trainer.rewards_per_func[2][0])
        assert adv[2] == pytest.approx(adv[1])  # TRL's default aggregation trains the failure as a 0
    finally:
        client.close()


def test_a_whole_group_that_failed_stays_none_and_trains_nothing(marker_server):
    client = AsyncRewardClient(marker_server.url)
    try:
        func = trl_reward_func(client, max_rounds=0)
        failing = [f"{MATCHING} {FAIL_MARKER} {k}" for k in range(2)]
        trainer, adv = train_step([func], rows(QUESTION, n=2) + rows(QUESTION_2, GROUND_TRUTH_2, n=2),
                                  failing + [MATCHING, UNRELATED], num_generations=2)
        assert all(math.isnan(r[0]) for r in trainer.rewards_per_func[:2])
        assert adv[:2] == [0.0, 0.0] and trainer.warnings  # TRL masks an all-NaN row
    finally:
        client.close()


def test_failed_judgments_are_sent_again_before_counting_as_failed(marker_server):
    client = RecordingClient(marker_server.url)
    try:
        func = trl_reward_func(client, max_rounds=1)
        trainer, _ = train_step([func], rows(QUESTION, n=2), [MATCHING, f"{UNRELATED} {FAIL_MARKER}"])
        assert [len(b["groups"][0]["candidates"]) for b in client.bodies] == [2, 1]
        assert trainer.rewards_per_func == [[1.0], [1.0]]  # the group's mean of what was judged
    finally:
        client.close()


def test_a_nul_byte_in_one_rollout_scores_it_zero_and_judges_the_others(offline_server, recording):
    func = trl_reward_func(recording)
    completions = [f"{MATCHING}\u0000", MATCHING, f"{MATCHING} \ud800"]
    trainer, _ = train_step([func], rows(QUESTION, n=3), completions)
    assert trainer.rewards_per_func == [[0.0], [1.0], [0.0]]
    assert len(recording.bodies) == 1


def test_interleaved_groups_come_back_in_order(recording):
    completions = [MATCHING, UNRELATED, UNRELATED, MATCHING, DEGENERATE]
    inputs = [rows(q, t, question=q)[0] for q, t in
              [(QUESTION, GROUND_TRUTH), (QUESTION_2, GROUND_TRUTH_2), (QUESTION, GROUND_TRUTH),
               (QUESTION_2, GROUND_TRUTH_2), (QUESTION, GROUND_TRUTH)]]
    trainer = TRLGRPOTrainer([trl_reward_func(recording)], num_generations=5)
    try:
        trainer.step(inputs, completions)
    finally:
        trainer.close()
    assert [r[0] for r in trainer.rewards_per_func] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert [len(g["candidates"]) for g in recording.bodies[0]["groups"]] == [3, 2]


def test_label_column_may_carry_the_question(recording):
    labels = [{"ground_truth": GROUND_TRUTH, "question": QUESTION}] * 2
    func = trl_reward_func(recording, ground_truth_column="label")
    out = asyncio.run(func(prompts=["ignored", "ignored"], completions=[MATCHING, UNRELATED], label=labels))
    assert out == [1.0, 0.0]


def test_missing_ground_truth_column_is_a_clear_error(recording):
    with pytest.raises(KeyError, match="ground_truth"):
        asyncio.run(trl_reward_func(recording)(prompts=[QUESTION], completions=[MATCHING], answer=["x"],
                                               log_metric=print, trainer_state=None))


def test_unavailable_server_raises_by_default_or_gives_none_when_asked():
    url = f"http://127.0.0.1:{closed_port()}"
    kwargs = dict(prompts=[QUESTION] * 2, completions=[MATCHING, UNRELATED], ground_truth=[GROUND_TRUTH] * 2)
    dead = AsyncRewardClient(url, deadline_s=0.3, backoff_base_s=0.01)
    try:
        with pytest.raises(RewardUnavailableError):
            asyncio.run(trl_reward_func(dead)(**kwargs))
        assert asyncio.run(trl_reward_func(dead, on_unavailable="none")(**kwargs)) == [None, None]
    finally:
        dead.close()


def test_a_keyed_server_reached_from_a_url(auth_server, monkeypatch):
    kwargs = dict(prompts=[QUESTION], completions=[MATCHING], ground_truth=[GROUND_TRUTH])
    monkeypatch.delenv("DEBATE_REWARD_API_KEY", raising=False)
    with pytest.raises(UnauthorizedError):
        asyncio.run(trl_reward_func(auth_server.url)(**kwargs))
    assert asyncio.run(trl_reward_func(auth_server.url, api_key="s3cret-key")(**kwargs)) == [1.0]
    monkeypatch.setenv("DEBATE_REWARD_API_KEY", "s3cret-key")
    assert asyncio.run(trl_reward_func(auth_server.url)(**kwargs)) == [1.0]


def test_pickles_for_a_rollout_worker_process(offline_server):
    """TRL's AsyncGRPOTrainer pickles reward functions into a spawned worker, which calls each with one
    group (async_rollout_worker.py `_score_group`)."""
    func = trl_reward_func(RewardClient(offline_server.url, graph="lexical"), name="idea_match")
    clone = pickle.loads(pickle.dumps(func))
    assert inspect.iscoroutinefunction(clone) and trl_get_callable_name(clone) == "idea_match"
    out = asyncio.run(clone(prompts=[QUESTION] * 2, completions=[MATCHING, UNRELATED], ground_truth=[GROUND_TRUTH] * 2))
    assert out == [1.0, 0.0]
    assert clone.cfg.pool.client is not func.cfg.pool.client and clone.cfg.pool.client.graph == "lexical"


def test_sync_variant_for_trl_before_0_27(offline_server):
    func = trl_reward_func(offline_server.url, sync=True)
    assert not inspect.iscoroutinefunction(func)
    trainer, _ = train_step([func], rows(QUESTION, n=1), [conversational(MATCHING)])
    assert trainer.rewards_per_func == [[1.0]]


def test_an_older_server_refusing_some_rollouts_scores_them_zero_and_judges_the_rest():
    """A server from before issue 33 answers 400 for the whole request when one candidate holds a NUL: the
    adapters used to re-raise it (the run stopped). Now the candidates the 400 names score 0 and the others
    are sent again; a 400 about the group's own fields still raises."""
    from stub import StubServer, group_ok, reply

    refused = reply(400, {"code": "RW_BAD_REQUEST", "message": "invalid body: groups[0].candidates[1]: must not "
                          "contain NUL bytes", "details": [{"path": "groups[0].candidates[1]",
                                                            "message": "must not contain NUL bytes"}]})
    with StubServer([refused, reply(200, {"groups": [group_ok([1.0, 0.0])]})]) as stub:
        client = RecordingClient(stub.url)
        try:
            out = asyncio.run(trl_reward_func(client)(prompts=[QUESTION] * 3, completions=["a", "b\u0000", "c"],
                                                      ground_truth=[GROUND_TRUTH] * 3))
            assert out == [1.0, 0.0, 0.0]
            assert [b["groups"][0]["candidates"] for b in client.bodies] == [["a", "b\u0000", "c"], ["a", "c"]]
        finally:
            client.close()
    bad_truth = reply(400, {"code": "RW_BAD_REQUEST", "message": "invalid body: groups[0].ground_truth: must not "
                            "be empty", "details": [{"path": "groups[0].ground_truth", "message": "must not be empty"}]})
    with StubServer([bad_truth]) as stub:
        client = RecordingClient(stub.url)
        try:
            from debate_reward import BadRequestError

            with pytest.raises(BadRequestError, match="ground_truth"):
                asyncio.run(trl_reward_func(client)(prompts=[QUESTION], completions=["a"], ground_truth=[" "]))
        finally:
            client.close()
