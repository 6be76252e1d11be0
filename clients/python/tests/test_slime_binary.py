"""`slime_binary_rm` against the real built server, called the way slime calls `--custom-rm-path`: one
Sample per call, a list (a batch, or one group under `--group-rm`), many calls at once."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from types import SimpleNamespace

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, closed_port, post_json
from debate_reward import AsyncRewardClient, BadRequestError, JudgeFailedError
from debate_reward.slime import slime_binary_rm

ARGS = SimpleNamespace(rm_url=None, group_rm=False)  # what slime passes; unused

SYSTEM = "You are a research assistant. Propose one idea."
PROMPTS = [
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    f"{SYSTEM}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{QUESTION}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
    QUESTION,
]
LABELS = [
    GROUND_TRUTH,
    {"ground_truth": GROUND_TRUTH},
    json.dumps({"ground_truth": GROUND_TRUTH, "question": QUESTION}),
]


def batch_requests(server) -> float:
    m = re.search(r'^reward_requests_total\{route="/v1/reward/batch",code="200"\} (\S+)$', server.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def rollouts(n: int, tag: str):
    """n slime Samples over the prompt forms and label forms above; responses unique to this test (so
    nothing is already cached) and with the control tokens slime's decode leaves on them."""
    ideas = [MATCHING, UNRELATED, DEGENERATE]
    out = []
    for k in range(n):
        idea = ideas[k % 3]
        response = idea if idea == DEGENERATE else f"{idea} ({tag} {k})"
        if k % 4 == 1:  # a reasoning model's rollout: whatever /slime judges of it, this must judge too
            response = f"<think>The bias idea seems closest; check the ground truth.</think>{response}"
        out.append(SimpleNamespace(prompt=PROMPTS[k % 4], response=response + "<|im_end|>",
                                   label=LABELS[k % 3], metadata={}, reward=None))
    return out


def run(rm, calls):
    async def main():
        return await asyncio.gather(*(rm(ARGS, c) for c in calls), return_exceptions=True)

    return asyncio.run(main())


@pytest.fixture
def aclient(offline_server):
    c = AsyncRewardClient(offline_server.url, timeout_s=30, max_retries=0)
    yield c
    c.close()


def test_a_batch_gets_the_judgments_slime_would_get_from_slash_slime_in_one_request(offline_server, aclient):
    samples = rollouts(12, uuid.uuid4().hex[:8])
    before = batch_requests(offline_server)
    [rewards] = run(slime_binary_rm(aclient), [samples])
    assert batch_requests(offline_server) - before == 1
    assert len(rewards) == 12 and all(type(r) is float for r in rewards)
    assert rewards[2] == 0.0 and rewards[0] == 1.0 and rewards[1] == 0.0
    for s, reward in zip(samples, rewards):
        status, body, _ = post_json(offline_server.url + "/slime",
                                    {"prompt": s.prompt, "response": s.response, "label": s.label})
        # The same reward, and the same judgment: /slime found it in the cache (same question,
        # candidate and ground truth as the server reads them, whatever the prompt and label form). A
        # rejected input is decided from its text without a call, so it is the same 0 cached or not.
        rejected = body["status"] == "rejected_input"
        assert status == 200 and body["reward"] == reward and (rejected or body["cached"] is True), (s, body)


def test_group_rm_calls_and_single_sample_calls_share_requests_split_at_max_candidates(offline_server, aclient):
    samples = rollouts(12, uuid.uuid4().hex[:8])
    groups = [samples[k:k + 3] for k in range(0, 12, 3)]
    before = batch_requests(offline_server)
    out = run(slime_binary_rm(aclient, max_candidates=5), groups)  # --group-rm: one call per group
    assert batch_requests(offline_server) - before == 3  # 12 rollouts in requests of at most 5
    assert [len(g) for g in out] == [3, 3, 3, 3]
    singles = rollouts(6, uuid.uuid4().hex[:8])
    before = batch_requests(offline_server)
    rm = slime_binary_rm(aclient)
    one_by_one = run(lambda args, s: rm(args, s, evaluation=False), singles)  # no --group-rm: one per call
    assert batch_requests(offline_server) - before == 1
    assert all(type(r) is float for r in one_by_one)
    assert one_by_one[0] == 1.0 and one_by_one[2] == 0.0


def test_a_bad_sample_fails_its_own_call_not_the_calls_pooled_with_it(offline_server, aclient):
    good = rollouts(2, uuid.uuid4().hex[:8])
    bad = SimpleNamespace(prompt=QUESTION, response=MATCHING, label="   ")
    out = run(slime_binary_rm(aclient), [good[0], bad, good[1]])
    assert out[0] == 1.0 and out[2] == 0.0
    assert isinstance(out[1], BadRequestError) and out[1].code == "RW_BAD_REQUEST"
    with pytest.raises(TypeError):
        asyncio.run(slime_binary_rm(aclient)(ARGS, SimpleNamespace(prompt=QUESTION, response=MATCHING)))


def test_failed_judgments_are_sent_again_then_masked_or_raised_on_request(failing_server):
    c = AsyncRewardClient(failing_server.url, timeout_s=30, max_retries=0, max_retry_after_s=0.05,
                          backoff_base_s=0.01)
    try:
        samples = [SimpleNamespace(prompt=QUESTION, response=f"{MATCHING} {uuid.uuid4().hex}", label=GROUND_TRUTH)]
        before = batch_requests(failing_server)
        [rewards] = run(slime_binary_rm(c, max_rounds=2), [samples])
        assert batch_requests(failing_server) - before == 3  # the first try and 2 more
        # A float slime can use, the sample masked (slime >= 0.3.1's remove_sample), why in its metadata.
        assert rewards == [0.0] and samples[0].remove_sample is True
        assert samples[0].metadata["debate_reward"]["status"] == "judge_error"
        [err] = run(slime_binary_rm(c, max_rounds=0, on_failure="raise"), [samples])
        assert isinstance(err, JudgeFailedError) and err.code == "RW_JUDGE_FAILED"
        assert err.details["failed"][0]["status"] == "judge_error"
    finally:
        c.close()


def test_a_failed_judgment_is_masked_at_its_group_mean_also_with_failure_reward(server_factory):
    server = server_factory({
        "JUDGE_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "JUDGE_API_KEY": "t",
        "JUDGE_MODEL": "m", "JUDGE_MAX_RETRIES": "0", "FAILURE_REWARD": "-1",
    })
    c = AsyncRewardClient(server.url, timeout_s=30, max_retries=0)
    try:
        samples = [SimpleNamespace(prompt=QUESTION, response=r, label=GROUND_TRUTH) for r in (MATCHING, DEGENERATE)]
        before = batch_requests(server)
        [rewards] = run(slime_binary_rm(c), [samples])
        # The failure carries its group's judged mean (the degenerate idea's real 0), not FAILURE_REWARD's -1
        # (slime puts it into the group normalisation), and is masked; the degenerate idea is not.
        assert rewards == [0.0, 0.0]
        assert getattr(samples[0], "remove_sample", False) is True and not getattr(samples[1], "remove_sample", False)
        assert batch_requests(server) - before == 1
        status, body, _ = post_json(server.url + "/slime", {"prompt": QUESTION, "response": MATCHING,
                                                            "label": GROUND_TRUTH})
        assert status == 200 and body["reward"] == -1  # as /slime answers
    finally:
        c.close()


# --- through slime 0.3.1's own rollout path (tests/trainers.py) -------------------------------------------

from trainers import SlimeSample, slime_rollout  # noqa: E402

OPENED = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n"
CUT_TRACE = "The ground truth likely adds a bias per expert; checking the update rule before I answer"


def slime_args(rm, group_rm: bool) -> SimpleNamespace:
    return SimpleNamespace(rm_function=rm, group_rm=group_rm, custom_rm_path="my_rm.custom_rm")


@pytest.mark.parametrize("group_rm", [False, True])
def test_a_prompt_that_opens_the_trace_cut_off_rollouts_score_zero_as_slash_slime_says(offline_server, aclient, group_rm):
    """Qwen3-thinking / DeepSeek-R1 templates end slime's prompt with `<think>\\n`: a rollout cut off inside
    the trace carries no tag and was judged as an idea (1.0); /slime puts the opener back (0)."""
    tag = uuid.uuid4().hex[:8]
    closed = f"{CUT_TRACE}.\n</think>\n\n{MATCHING} ({tag})"
    cut = f"{CUT_TRACE} {MATCHING} ({tag})"
    groups = [[SlimeSample(OPENED, closed, GROUND_TRUTH), SlimeSample(OPENED, cut, GROUND_TRUTH)]]
    [[a, b]] = slime_rollout(slime_args(slime_binary_rm(aclient), group_rm), groups)
    assert (a.reward, b.reward) == (1.0, 0.0)
    status, body, _ = post_json(offline_server.url + "/slime", {"prompt": OPENED, "response": cut, "label": GROUND_TRUTH})
    assert (body["reward"], body["reason"], body["cached"]) == (0, "truncated_reasoning", True)


@pytest.mark.parametrize("group_rm", [False, True])
def test_a_nul_byte_in_one_rollout_scores_it_zero_and_the_group_is_judged(offline_server, aclient, group_rm):
    tag = uuid.uuid4().hex[:8]
    group = [SlimeSample(QUESTION, f"{MATCHING}\u0000 ({tag})", GROUND_TRUTH),
             SlimeSample(QUESTION, f"{MATCHING} ({tag})", GROUND_TRUTH),
             SlimeSample(QUESTION, f"{UNRELATED} \ud800 ({tag})", GROUND_TRUTH)]
    [out] = slime_rollout(slime_args(slime_binary_rm(aclient), group_rm), [group])
    assert [s.reward for s in out] == [0.0, 1.0, 0.0]


def test_a_keyed_server_reached_from_a_url(auth_server, monkeypatch):
    group = [SlimeSample(QUESTION, MATCHING, GROUND_TRUTH), SlimeSample(QUESTION, UNRELATED, GROUND_TRUTH)]
    monkeypatch.setenv("DEBATE_REWARD_API_KEY", "s3cret-key")
    [out] = slime_rollout(slime_args(slime_binary_rm(auth_server.url), True), [group])
    assert [s.reward for s in out] == [1.0, 0.0]
    from debate_reward.slime import SlimeReward

    reward = SlimeReward(auth_server.url)
    [out] = slime_rollout(slime_args(reward.rm, False), [group])
    assert [s.reward for s in out] == [1.0, 0.0]
    monkeypatch.delenv("DEBATE_REWARD_API_KEY")
    [out] = slime_rollout(slime_args(slime_binary_rm(auth_server.url, api_key="s3cret-key"), True), [group])
    assert [s.reward for s in out] == [1.0, 0.0]
