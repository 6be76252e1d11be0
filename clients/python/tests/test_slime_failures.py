"""Issue 39 item 3: slime (THUDM/slime 624b824, >= 0.3.1) through its own calling patterns
(`tests/trainers.py`): per sample (`--custom-rm-path`, `async_rm(args, sample)` per finished rollout), per
group (`--group-rm`: `batched_async_rm(args, group)`), and fully-async (`AsyncRolloutWorker`, which drops a
group whose task raised). Each group holds a rollout the judge fails on; the reward server is killed
mid-step (SIGKILL) and started again after `down_s` (3 s in the default suite; 30 s marked slow; the env
var DEBATE_REWARD_TEST_RESTART_S replaces the slow case's 30 s). No crash, no lost reward, no dropped group,
and the failure is neither trained (`remove_sample`) nor a 0 or a constant in its siblings' group mean."""

from __future__ import annotations

import os
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any, Callable, Dict, List

import pytest

from conftest import FAIL_MARKER, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED
from debate_reward._chat import split_final_assistant
from debate_reward.slime import slime_binary_rm
from trainers import SlimeSample, slime_fully_async, slime_rollout, slime_train_data

SLOW_RESTART_S = float(os.environ.get("DEBATE_REWARD_TEST_RESTART_S", "30"))


@pytest.fixture(scope="module")
def judged_server(server_factory, slow_marker_backend):
    """A judge at 300 ms a call (requests are in flight when the server dies) deciding by marker."""
    return server_factory({"JUDGE_BASE_URL": slow_marker_backend.base_url, "JUDGE_API_KEY": "t", "JUDGE_MODEL": "m",
                           "JUDGE_MAX_RETRIES": "0"})


def groups(tag: str) -> List[List[SlimeSample]]:
    return [[SlimeSample(QUESTION, text, GROUND_TRUTH, group_index=g) for text in (
        f"{MATCHING} ({tag} {g} 0)", f"{UNRELATED} ({tag} {g})", f"{MATCHING} {FAIL_MARKER} ({tag} {g})",
        f"{MATCHING} ({tag} {g} 3)")] for g in range(2)]


def args(rm: Any, group_rm: bool) -> SimpleNamespace:
    return SimpleNamespace(rm_function=rm, group_rm=group_rm, custom_rm_path="my_rm.custom_rm")


def per_sample(url: str, tag: str) -> List[List[Any]]:
    return slime_rollout(args(slime_binary_rm(url, max_rounds=1), False), groups(tag))


def group_rm(url: str, tag: str) -> List[List[Any]]:
    return slime_rollout(args(slime_binary_rm(url, max_rounds=1), True), groups(tag))


def fully_async(url: str, tag: str) -> List[List[Any]]:
    out = slime_fully_async(args(slime_binary_rm(url, max_rounds=1), False), groups(tag))
    assert out["dropped"] == [] and out["requeued"] == []
    return out["trained"]


def check(trained: List[List[Any]]) -> None:
    assert len(trained) == 2
    for group in trained:
        assert [s.reward for s in group] == [1.0, 0.0, pytest.approx(2 / 3), 1.0]
        assert [s.remove_sample for s in group] == [False, False, True, False]
        assert [s.status for s in group] == [SlimeSample.Status.COMPLETED] * 4
        assert group[2].metadata["debate_reward"]["masked"] is True
    data = slime_train_data(trained)
    # The siblings' advantages are r - (their own mean): the masked sample moved nothing.
    assert data["advantages"][:4] == [pytest.approx(a) for a in (1 / 3, -2 / 3, 0.0, 1 / 3)]


MODES: Dict[str, Callable[[str, str], List[List[Any]]]] = {
    "per_sample": per_sample, "group_rm": group_rm, "fully_async": fully_async,
}


def test_a_judge_failure_is_masked_at_its_group_mean_in_every_calling_pattern(judged_server):
    tag = uuid.uuid4().hex[:8]
    for name, mode in MODES.items():
        check(mode(judged_server.url, f"{name} {tag}"))


@pytest.mark.parametrize("down_s", [3.0, pytest.param(SLOW_RESTART_S, marks=pytest.mark.slow)])
def test_a_server_restart_mid_step_loses_nothing_in_any_calling_pattern(judged_server, down_s):
    tag = uuid.uuid4().hex[:8]
    results: Dict[str, Any] = {}

    def run(name: str) -> None:
        try:
            results[name] = MODES[name](judged_server.url, f"restart {name} {tag}")
        except BaseException as exc:  # noqa: BLE001 - asserted below
            results[name] = exc

    modes = ["per_sample", "group_rm", "fully_async"]
    threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in modes]
    for t in threads:
        t.start()
    time.sleep(0.4)  # every pattern has requests in flight (a judgment takes 2 × 300 ms)
    assert not results, f"finished before the restart: {list(results)}"
    judged_server.kill()
    time.sleep(down_s)
    judged_server.start_again()
    for t in threads:
        t.join(timeout=down_s + 120)
    for name in modes:
        assert not isinstance(results.get(name), BaseException), (name, results.get(name))
        check(results[name])


def test_a_multi_turn_response_is_judged_on_its_final_assistant_turn(judged_server):
    """A custom generate function's tool loop decodes every turn into `sample.response`: a search tool that
    returns the abstract is not the policy's idea; a response that ends on the tool's output answered
    nothing (a real 0, `empty`)."""
    tag = uuid.uuid4().hex[:8]
    tool = f"<|im_end|>\n<|im_start|>user\n<tool_response>{MATCHING} {GROUND_TRUTH}</tool_response><|im_end|>\n"
    shortcut = f"Let me search ({tag}).<tool_call>{{}}</tool_call>{tool}<|im_start|>assistant\n{UNRELATED} ({tag})<|im_end|>"
    earned = f"Let me search ({tag} 2).<tool_call>{{}}</tool_call>{tool}<|im_start|>assistant\n{MATCHING} ({tag})<|im_end|>"
    cut = f"Let me search ({tag} 3).<tool_call>{{}}</tool_call>{tool}"
    group = [SlimeSample(QUESTION, r, GROUND_TRUTH) for r in (shortcut, earned, cut)]
    [out] = slime_rollout(args(slime_binary_rm(judged_server.url), True), [group])
    assert [s.reward for s in out] == [0.0, 1.0, 0.0]
    assert not any(s.remove_sample for s in out)
    assert split_final_assistant(cut) == ("", True)
