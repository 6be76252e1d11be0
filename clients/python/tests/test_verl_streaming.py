"""Issue 39 items 1, 2, 8: verl 0.9.0's DEFAULT reward path — each finished rollout scored alone on a randomly
chosen reward-worker process (`tests/verl_stream.py`) — against the real server.

A failed judgment scores its OWN group's mean, which the server supplies from every worker's judgments
(`POST /v1/reward/group-mean`), even on a worker that judged only other prompts (before: that worker's
recent mean, another prompt's, or an exception); a 30 s server restart mid-step loses no reward; nothing
raises; a multi-turn rollout is judged on its final assistant turn only; the key never comes from config.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid

import pytest

import debate_reward.verl as verl_module
from conftest import (
    FAIL_MARKER,
    GROUND_TRUTH,
    MATCHING,
    PY_ROOT,
    QUESTION,
    UNRELATED,
)
from debate_reward.verl import SCORE_KEYS, verl_compute_score
from verl_stream import VerlRewardWorkers

GT = {"ground_truth": GROUND_TRUTH, "question": QUESTION}
GT_2 = {"ground_truth": UNRELATED + " And nothing else.", "question": "Can a small recurrent student inherit dialogue skill?"}
SRC = str(PY_ROOT / "src")


def sample(response: str, gt=GT):
    return {"data_source": "ideas", "response_str": response, "reward_model": {"ground_truth": gt},
            "extra_info": {"index": 0}}


def step(tag: str):
    """Two GRPO groups of 4. Group A: judged 1, 0, 1 and one judge failure (its mean: 2/3); group B: 1, 0, 0, 0."""
    a = [f"{MATCHING} (a0 {tag})", f"{UNRELATED} (a1 {tag})", f"{MATCHING} {FAIL_MARKER} (a2 {tag})",
         f"{MATCHING} (a3 {tag})"]
    b = [f"{MATCHING} (b0 {tag})"] + [f"{UNRELATED} (b{k} {tag})" for k in (1, 2, 3)]
    # A question of this step's own: the server's group ledger outlives a test, and other tests on the same
    # server judge the same abstract and question.
    gt_a = {**GT, "question": f"{GT['question']} [{tag}]"}
    gt_b = {**GT_2, "question": f"{GT_2.get('question', QUESTION)} [{tag}]"}
    return [sample(r, gt_a) for r in a] + [sample(r, gt_b) for r in b]


EXPECTED = [1.0, 0.0, pytest.approx(2 / 3), 1.0, 1.0, 0.0, 0.0, 0.0]
FAILED = [False, False, True, False, False, False, False, False]


def check(answers):
    assert [kind for kind, _ in answers] == ["ok"] * 8, answers
    scores = [out["reward_score"] for _, out in answers]
    infos = [out["reward_extra_info"] for _, out in answers]
    assert scores == EXPECTED
    assert [i["judge_failed"] for i in infos] == FAILED
    assert [i["group_unjudged"] for i in infos] == [False] * 8
    assert all(sorted(i) == sorted(SCORE_KEYS) for i in infos)


@pytest.mark.parametrize("name", ["compute_score", "compute_score_sync"])
def test_a_failure_on_a_worker_that_judged_only_another_prompt_scores_its_own_groups_mean(marker_server, name):
    """Worker 0 judges all of group B (mean 0.25) and then A's failed rollout alone; A's other rollouts are
    judged on workers 1 and 2. The failure scores A's mean (2/3), not worker 0's recent mean (0.25)."""
    workers = VerlRewardWorkers(SRC, verl_module.__file__, name, {"base_url": marker_server.url}, num_workers=3)
    try:
        placement = {0: 1, 1: 1, 2: 0, 3: 2, 4: 0, 5: 0, 6: 0, 7: 0}
        send_at = [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0]  # B is judged on worker 0 before A's failure arrives
        check(workers.stream(step(uuid.uuid4().hex[:8]), placement.__getitem__, send_at))
    finally:
        workers.close()


@pytest.mark.parametrize("down_s", [3.0, pytest.param(30.0, marks=pytest.mark.slow)])
def test_a_server_restart_mid_step_with_a_judge_failure(server_factory, slow_marker_backend, down_s):
    """The server is stopped (SIGKILL: connections reset) while every rollout of the step is in flight on 3
    worker processes (random placement, as verl's), stays down `down_s`, and starts again on the same port:
    no exception, every rollout its reward, the failure its own group's mean."""
    server = server_factory({"JUDGE_BASE_URL": slow_marker_backend.base_url, "JUDGE_API_KEY": "test",
                             "JUDGE_MODEL": "marker-judge", "JUDGE_MAX_RETRIES": "0"})
    workers = VerlRewardWorkers(SRC, verl_module.__file__, "compute_score", {"base_url": server.url}, num_workers=3)
    rng = random.Random(39)
    answers: dict = {}
    try:
        runner = threading.Thread(
            target=lambda: answers.update(out=workers.stream(step(uuid.uuid4().hex[:8]), lambda i: rng.randrange(3),
                                                             [0.05 * (i % 4) for i in range(8)], timeout_s=down_s + 240)),
            daemon=True)
        runner.start()
        time.sleep(0.5)  # every rollout sent; a judgment takes 3 calls x 300 ms: none is finished
        assert "out" not in answers
        server.kill()
        time.sleep(down_s)
        server.start_again()
        back = time.monotonic()
        runner.join(timeout=down_s + 300)
        check(answers["out"])
        print(f"step finished {time.monotonic() - back:.1f} s after the server was back")
    finally:
        workers.close()


def test_a_group_none_of_whose_rollouts_could_be_judged_scores_the_same_for_all_and_says_so(failing_server, tmp_path):
    """Never an exception: every rollout of an all-failed group waits `group_wait_s` for a sibling, then
    scores `unjudged_score` (the same for all: zero advantage), flagged `group_unjudged`."""
    path = tmp_path / "my_reward.py"
    path.write_text(
        "from debate_reward.verl import verl_compute_score\n"
        f"compute_score = verl_compute_score({failing_server.url!r}, max_rounds=0, group_wait_s=1.5, poll_s=0.5)\n"
    )
    workers = VerlRewardWorkers(SRC, str(path), "compute_score", num_workers=2)
    try:
        tag = uuid.uuid4().hex[:8]
        gt = {**GT, "question": f"{QUESTION} [{tag}]"}  # a group of its own (the server's ledger outlives a test)
        answers = workers.stream([sample(f"{MATCHING} ({tag} {k})", gt) for k in range(4)], lambda i: i % 2)
    finally:
        workers.close()
    assert [kind for kind, _ in answers] == ["ok"] * 4, answers
    infos = [out["reward_extra_info"] for _, out in answers]
    assert [out["reward_score"] for _, out in answers] == [0.5] * 4
    assert all(i["judge_failed"] and i["group_unjudged"] for i in infos)


# --- item 2: the final assistant turn only ------------------------------------------------------------------


def qwen_tool_rollout(final: str) -> str:
    """A ToolAgentLoop rollout of a Qwen2.5/Qwen3 template as verl decodes it (`skip_special_tokens=True`:
    `<|im_start|>`/`<|im_end|>` gone, role words and the plain-text tool tags kept): a search call whose
    response quotes the paper's abstract, then the final answer."""
    return (
        "Let me look for related work first.\n<tool_call>\n"
        '{"name": "search", "arguments": {"query": "expert load balancing mixture of experts"}}\n'
        f"</tool_call>\nuser\n<tool_response>\nTop result: {GROUND_TRUTH} {MATCHING}\n</tool_response>\n"
        f"assistant\n{final}"
    )


def test_a_multi_turn_rollout_is_judged_on_its_final_assistant_turn_only(offline_server):
    fn = verl_compute_score(offline_server.url)

    def score(text: str) -> float:
        return asyncio.run(fn(data_source="x", solution_str=text, ground_truth=GT))["score"]

    # The tool response quotes the abstract: judging the whole decode would be a reward-1 shortcut.
    assert score(qwen_tool_rollout(UNRELATED)) == 0.0
    assert score(qwen_tool_rollout(MATCHING)) == 1.0
    # Cut off after the tool call (nothing answered), or inside the tool response: a real 0.
    assert score(qwen_tool_rollout("")) == 0.0
    assert score(qwen_tool_rollout("").split("</tool_response>")[0]) == 0.0
    # Decoded with its chat tokens (a custom reward manager): the same rule.
    with_tokens = (f"I will search.<|im_end|>\n<|im_start|>user\n<tool_response>\n{GROUND_TRUTH}\n</tool_response>"
                   f"<|im_end|>\n<|im_start|>assistant\n{UNRELATED}<|im_end|>")
    assert score(with_tokens) == 0.0
    assert score(MATCHING) == 1.0  # single turn: as before


# --- item 8: the key never from config ----------------------------------------------------------------------


def test_the_key_comes_from_the_environment_or_a_file_never_from_reward_kwargs(auth_server, monkeypatch, tmp_path):
    monkeypatch.delenv("DEBATE_REWARD_API_KEY", raising=False)
    with pytest.raises(ValueError, match="wandb"):
        asyncio.run(verl_module.compute_score("x", MATCHING, GT, base_url=auth_server.url, api_key="s3cret-key"))
    key_file = tmp_path / "reward.key"
    key_file.write_text("s3cret-key\n")
    monkeypatch.setenv("DEBATE_REWARD_API_KEY_FILE", str(key_file))
    out = asyncio.run(verl_module.compute_score("x", MATCHING, GT, base_url=auth_server.url))
    assert out["score"] == 1.0 and out["judge_failed"] is False


ABSTRACT_QUOTE = f"Search result: {GROUND_TRUTH}"
FAMILIES = {
    # Decoded with their chat tokens (a custom reward manager, or `skip_special_tokens=False`).
    "chatml-qwen": (f"Searching.<|im_end|>\n<|im_start|>user\n<tool_response>\n{ABSTRACT_QUOTE}\n</tool_response>"
                    "<|im_end|>\n<|im_start|>assistant\nFINAL<|im_end|>"),
    "chatml-tool-role": f"Searching.<|im_end|>\n<|im_start|>tool\n{ABSTRACT_QUOTE}<|im_end|>\n<|im_start|>assistant\nFINAL",
    "llama-3.1-ipython": (f"<|python_tag|>search(q)<|eom_id|><|start_header_id|>ipython<|end_header_id|>\n\n{ABSTRACT_QUOTE}"
                          "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nFINAL<|eot_id|>"),
    "gemma": f"Searching.<end_of_turn>\n<start_of_turn>user\n{ABSTRACT_QUOTE}<end_of_turn>\n<start_of_turn>model\nFINAL",
    "deepseek-v3": ("<\uff5ctool\u2581calls\u2581begin\uff5c>search<\uff5ctool\u2581calls\u2581end\uff5c>"
                    f"<\uff5ctool\u2581outputs\u2581begin\uff5c>{ABSTRACT_QUOTE}<\uff5ctool\u2581outputs\u2581end\uff5c>FINAL"),
    "mistral": f'[TOOL_CALLS][{{"name": "search"}}]</s>[TOOL_RESULTS]{ABSTRACT_QUOTE}[/TOOL_RESULTS]FINAL</s>',
    "phi-3": f"Searching.<|end|>\n<|user|>\n{ABSTRACT_QUOTE}<|end|>\n<|assistant|>\nFINAL<|end|>",
    # Decoded without them (verl's default): Hermes-style tool tags survive, the role words too.
    "qwen-skip-special": f"<tool_call>\n{{}}\n</tool_call>\nuser\n<tool_response>\n{ABSTRACT_QUOTE}\n</tool_response>\nassistant\nFINAL",
    "qwen-two-tools": ("<tool_call>{}</tool_call>user\n<tool_response>\nA\n</tool_response>\nassistant\n<tool_call>{}</tool_call>"
                       f"user\n<tool_response>\n{ABSTRACT_QUOTE}\n</tool_response>\nassistant\nFINAL"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_final_assistant_turn_of_each_template_family(family):
    from debate_reward._chat import final_assistant_text, strip_chat_tokens

    text = FAMILIES[family]
    assert strip_chat_tokens(final_assistant_text(text)) == "FINAL"
    # Cut off inside or right after the tool turn: nothing answered.
    cut = text[: text.rindex(ABSTRACT_QUOTE) + len(ABSTRACT_QUOTE)]
    assert strip_chat_tokens(final_assistant_text(cut)) == ""


def test_a_server_from_before_wait_ms_still_supplies_the_group_mean():
    """The client asks the server to wait for the group's judgments in flight (`wait_ms`); a server that
    refuses the field (400 naming it) is asked again without it, and its mean is used."""
    from stub import StubServer, group_ok, reply

    refused = reply(400, {"code": "RW_BAD_REQUEST", "message": "invalid body: wait_ms: unknown key"})
    batch = {"groups": [group_ok([None])], "backend": "stub", "usage": {"calls": 0}}
    with StubServer([reply(200, batch), refused, reply(200, {"mean": 0.25, "n": 4})]) as stub:
        fn = verl_compute_score(stub.url, max_rounds=0)
        out = asyncio.run(fn(data_source="x", solution_str=MATCHING, ground_truth=GT))
    assert out["score"] == 0.25 and out["judge_failed"] is True
    asked = [r["body"] for r in stub.requests if r["path"] == "/v1/reward/group-mean"]
    assert len(asked) == 2 and asked[0]["wait_ms"] > 0 and "wait_ms" not in asked[1]


def test_a_server_from_before_wait_ms_is_asked_without_it_after_its_first_refusal():
    """The pool remembers the old server's 400 naming `wait_ms`: a later failure's group-mean request goes
    without the field at once, instead of hearing the same 400 on every failed rollout."""
    from stub import StubServer, group_ok, reply

    refused = reply(400, {"code": "RW_BAD_REQUEST", "message": "invalid body: wait_ms: unknown key"})
    answered = []

    def old_server(mean):
        """/v1/reward/group-mean as a server from before `wait_ms` answers it: 400 whenever it is sent."""
        def answer(request):
            out = refused if "wait_ms" in request["body"] else reply(200, {"mean": mean, "n": 4})
            answered.append(out["status"])
            return out
        return answer

    batch = {"groups": [group_ok([None])], "backend": "stub", "usage": {"calls": 0}}
    script = [reply(200, batch), old_server(0.25), old_server(0.25), reply(200, batch), old_server(0.5)]
    # The same old server past the script, so that a client that asks with `wait_ms` again fails fast.
    with StubServer(script, fallback=old_server(0.5)) as stub:
        fn = verl_compute_score(stub.url, max_rounds=0, group_wait_s=10.0)

        async def two_failures():
            first = await fn(data_source="x", solution_str=MATCHING, ground_truth=GT)
            second = await fn(data_source="x", solution_str=MATCHING + " again", ground_truth=GT)
            return first, second

        first, second = asyncio.run(two_failures())
    assert (first["score"], second["score"]) == (0.25, 0.5)
    assert first["judge_failed"] is True and second["judge_failed"] is True
    asked = [r["body"] for r in stub.requests if r["path"] == "/v1/reward/group-mean"]
    assert len(asked) == 3 and asked[0]["wait_ms"] > 0 and "wait_ms" not in asked[1]
    assert "wait_ms" not in asked[2]  # the second failure's request
    assert answered == [400, 200, 200]  # one 400 in all


def test_a_failure_after_an_outage_asks_for_its_group_mean_once_its_siblings_backoff_has_passed():
    """A request that got through only after a retry (the server restarting) means its siblings were re-sent
    each on its own backoff: a failure among them asks for the group mean `backoff_max_s` later, when every
    sibling is back at the server (and in its `wait_ms`), not at once (a mean missing a sibling)."""
    from debate_reward import RewardClient
    from stub import StubServer, group_ok, reply

    backoff_max_s = 0.8
    batch = {"groups": [group_ok([None])], "backend": "stub", "usage": {"calls": 0}}
    script = [{"drop": True}, reply(200, batch), reply(200, {"mean": 2 / 3, "n": 3})]
    with StubServer(script) as stub:
        client = RewardClient(stub.url, backoff_base_s=0.05, backoff_max_s=backoff_max_s)
        fn = verl_compute_score(client, max_rounds=0, group_wait_s=10.0)
        started = time.monotonic()
        out = asyncio.run(fn(data_source="x", solution_str=MATCHING, ground_truth=GT))
        took_s = time.monotonic() - started
    assert out["score"] == pytest.approx(2 / 3) and out["judge_failed"] is True
    assert [r["path"] for r in stub.requests] == ["/v1/reward/batch"] * 2 + ["/v1/reward/group-mean"]
    assert took_s >= backoff_max_s

    # Without an outage, the failure asks at once.
    with StubServer([reply(200, batch), reply(200, {"mean": 0.5, "n": 2})]) as stub:
        client = RewardClient(stub.url, backoff_base_s=0.05, backoff_max_s=backoff_max_s)
        fn = verl_compute_score(client, max_rounds=0, group_wait_s=10.0)
        started = time.monotonic()
        out = asyncio.run(fn(data_source="x", solution_str=MATCHING, ground_truth=GT))
        assert time.monotonic() - started < backoff_max_s
    assert out["score"] == 0.5
