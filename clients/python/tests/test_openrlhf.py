"""Issue 39 item 4: `debate_reward/openrlhf.py` as OpenRLHF 0.11.0 loads and calls it
(`--reward.remote_url path/to/openrlhf.py`), against the real server.

`OpenRLHFEngine` follows openrlhf/utils/agent.py (v0.11.0): `SingleTurnAgentExecutor.__init__` (191-200)
loads the file with `spec_from_file_location("reward_func", path)` (a fresh module per vLLM engine actor);
`execute` decodes prompt + response with its special tokens as the query, calls
`_fetch_rewards_via_func([query], [prompt], [label])` (308-320: `asyncio.to_thread(reward_func, ...)`, one
rollout per call, every rollout of the engine at once), takes element 0, reads `rewards`, `scores` (else
`rewards`) and `extra_logs`, and on an exception logs it and leaves `reward` None; then
`samples_generator._process_response_into_experience` makes `torch.tensor([reward_val])` of it, and
`experience_maker` `torch.cat`s the rewards: None there is a crash, so it is asserted here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

import debate_reward.openrlhf as openrlhf_module
from conftest import FAIL_MARKER, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED

GT_2 = UNRELATED + " And nothing else."


def chatml_prompt(question: str) -> str:
    return (f"<|im_start|>system\nPropose a research idea.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


class OpenRLHFEngine:
    """One vLLM engine actor's `SingleTurnAgentExecutor` reward path (see the module docstring)."""

    def __init__(self, path: str) -> None:
        spec = importlib.util.spec_from_file_location("reward_func", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.reward_func = module.reward_func

    async def execute(self, prompt: str, response: str, label: Any) -> Dict[str, Any]:
        output: Dict[str, Any] = {"reward": None, "scores": None, "extra_logs": {}}
        try:
            query = prompt + response  # hf_tokenizer.decode(observation_tokens, skip_special_tokens=False)
            infos = await asyncio.gather(asyncio.to_thread(self.reward_func, [query], [prompt], [label]))
            info = infos[0] if infos else None
            if info:
                score = info.get("scores")
                if score is None:
                    score = info.get("rewards")
                output.update(reward=info.get("rewards"), scores=score, extra_logs=info.get("extra_logs") or {})
        except Exception as exc:  # noqa: BLE001 - OpenRLHF logs it at info level and goes on with None
            output["error"] = repr(exc)
        return output

    def step(self, rollouts: List[tuple]) -> List[Dict[str, Any]]:
        async def main() -> List[Dict[str, Any]]:
            return list(await asyncio.gather(*(self.execute(p, r, lab) for p, r, lab in rollouts)))

        return asyncio.run(main())


def as_experience(output: Dict[str, Any]) -> float:
    """`torch.tensor([reward_val])` then `torch.cat`: a number, one per query, or the crash."""
    reward = output["reward"]
    assert reward is not None, f"None reward: torch.cat crashes ({output.get('error')})"
    assert isinstance(reward, list) and len(reward) == 1 and isinstance(reward[0], float) and math.isfinite(reward[0])
    for key, values in output["extra_logs"].items():
        assert isinstance(values, list) and len(values) == 1, key
    return reward[0]


def rollouts(tag: str) -> List[tuple]:
    """Group A (label with its question): judged 1, 0, 1 and a judge failure (mean 2/3); group B (plain label,
    the question from the prompt): 1, 0, 0, 0."""
    # Questions of this step's own: the server's group ledger outlives a test, and other tests on the same
    # server judge the same abstract and question.
    question_a, question_b = f"{QUESTION} [{tag}]", f"Can a small recurrent student inherit dialogue skill? [{tag}]"
    a_label = {"ground_truth": GROUND_TRUTH, "question": question_a}
    a = [f"{MATCHING} (a0 {tag})", f"{UNRELATED} (a1 {tag})", f"{MATCHING} {FAIL_MARKER} (a2 {tag})",
         f"{MATCHING} (a3 {tag})"]
    b = [f"{MATCHING} (b0 {tag})"] + [f"{UNRELATED} (b{k} {tag})" for k in (1, 2, 3)]
    return ([(chatml_prompt(question_a), f"{r}<|im_end|>", a_label) for r in a]
            + [(chatml_prompt(question_b), f"{r}<|im_end|>", GT_2) for r in b])


def run_step(path: str, tag: str) -> List[Dict[str, Any]]:
    """Two engines (each its own load of the file), group A's failure on the engine that has group B."""
    rows = rollouts(tag)
    engines = [OpenRLHFEngine(path), OpenRLHFEngine(path)]
    parts = {0: [rows[0], rows[1], rows[3]], 1: [rows[4], rows[5], rows[6], rows[7], rows[2]]}
    out: Dict[int, List[Dict[str, Any]]] = {}
    threads = [threading.Thread(target=lambda k=k: out.update({k: engines[k].step(parts[k])})) for k in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    by_row = dict(zip([0, 1, 3], out[0]))
    by_row.update(zip([4, 5, 6, 7, 2], out[1]))
    return [by_row[i] for i in range(8)]


def check(outputs: List[Dict[str, Any]]) -> None:
    assert [as_experience(o) for o in outputs] == [1.0, 0.0, pytest.approx(2 / 3), 1.0, 1.0, 0.0, 0.0, 0.0]
    assert [o["scores"] == o["reward"] for o in outputs] == [True] * 8
    assert [o["extra_logs"]["judge_failed"] for o in outputs] == [[0.0], [0.0], [1.0]] + [[0.0]] * 5


def test_reward_func_through_openrlhfs_calling_code(marker_server, monkeypatch):
    monkeypatch.setenv("DEBATE_REWARD_URL", marker_server.url)
    check(run_step(openrlhf_module.__file__, uuid.uuid4().hex[:8]))


@pytest.mark.parametrize("down_s", [3.0, pytest.param(30.0, marks=pytest.mark.slow)])
def test_a_keyed_server_restarted_mid_step(server_factory, slow_marker_backend, monkeypatch, tmp_path, down_s):
    """The key from a file (never the trainer's config, which OpenRLHF prints and logs); the server is killed
    with the step's requests in flight and comes back `down_s` later: every rollout its reward."""
    server = server_factory({"JUDGE_BASE_URL": slow_marker_backend.base_url, "JUDGE_API_KEY": "test",
                             "JUDGE_MODEL": "marker-judge", "JUDGE_MAX_RETRIES": "0", "REWARD_API_KEY": "run-key"})
    key_file = tmp_path / "key"
    key_file.write_text("run-key\n")
    monkeypatch.delenv("DEBATE_REWARD_API_KEY", raising=False)
    monkeypatch.setenv("DEBATE_REWARD_API_KEY_FILE", str(key_file))
    monkeypatch.setenv("DEBATE_REWARD_URL", server.url)
    result: Dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(out=run_step(openrlhf_module.__file__, uuid.uuid4().hex[:8])))
    runner.start()
    time.sleep(0.5)
    assert "out" not in result
    server.kill()
    time.sleep(down_s)
    server.start_again()
    runner.join(timeout=down_s + 300)
    check(result["out"])


def test_the_response_is_found_after_its_prompt():
    prompt = chatml_prompt(QUESTION)
    assert openrlhf_module.response_after_prompt(prompt + "Idea.<|im_end|>", prompt) == "Idea.<|im_end|>"
    # A BOS the prompt lacks, other whitespace: still found; another prompt: None.
    assert openrlhf_module.response_after_prompt("<|endoftext|>" + prompt.replace("\n", " ") + "Idea.", prompt) == "Idea."
    assert openrlhf_module.response_after_prompt(chatml_prompt("Other?") + "Idea.", prompt) is None
