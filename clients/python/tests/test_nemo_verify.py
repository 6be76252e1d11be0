"""Issue 39 item 5: NeMo-RL (NVIDIA-NeMo/RL, August 2026) reads what NeMo-Gym echoes from `/verify`:

- `rollout_manager.py` `_result_to_completion`: `reward=float(result["full_result"]["reward"])`, and
  `rollouts.py`: `torch.tensor([r["full_result"]["reward"] for r in results])` — a `null` reward crashes both;
- `rollouts.py` `_extract_mask_sample_flags`: `(full_result.get("instance_config") or {}).get("mask_sample")`,
  then `grpo.py` `_apply_mask_sample_filter` zeroes the masked rows' loss multiplier (on by default:
  `env.should_mask_flagged_samples`);
- but `calculate_baseline_and_std_per_prompt` runs before, with an all-ones valid mask: the masked row's reward
  is in its siblings' (leave-one-out) baseline.

So every answer must float(), a failed or cancelled judgment must be masked, and its number must leave the
siblings' baseline where their own judged rewards put it (the group's judged mean), never a 0."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

from conftest import FAIL_MARKER, FakeBackend, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, post_json


def nemo_gym_row(text: str, **extra: Any) -> Dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "response": {"id": "resp", "object": "response", "model": "policy",
                     "output": [{"id": "m", "type": "message", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": text, "annotations": []}]}]},
        "ground_truth": GROUND_TRUTH,
        **extra,
    }


def nemo_rl_read(full_results: List[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """What NeMo-RL takes from each row: float(reward) (a None raises TypeError) and the mask flag."""
    rewards = [float(r["reward"]) for r in full_results]  # _result_to_completion / torch.tensor
    masked = [bool((r.get("instance_config") or {}).get("mask_sample", False)) for r in full_results]
    return {"rewards": rewards, "masked": masked}


def test_every_verify_answer_floats_and_a_failed_judgment_is_masked_at_its_group_mean(marker_server):
    tag = uuid.uuid4().hex[:8]
    texts = [f"{MATCHING} ({tag} 0)", f"{UNRELATED} ({tag})", f"{MATCHING} ({tag} 2)", f"{MATCHING} {FAIL_MARKER} ({tag})"]
    bodies = []
    for text in texts:  # NeMo-Gym verifies a group's rollouts as they finish; the failure here comes last
        status, body, _ = post_json(marker_server.url + "/verify", nemo_gym_row(text))
        assert status == 200
        bodies.append(body)
    read = nemo_rl_read(bodies)
    assert read["masked"] == [False, False, False, True]
    assert read["rewards"][:3] == [1.0, 0.0, 1.0]
    assert read["rewards"][3] == pytest.approx(2 / 3)  # not 0: the judged siblings' mean
    # NeMo-RL's group baseline (use_leave_one_out_baseline=false: the group mean) is the judged rollouts'
    # own mean, as if the failed row were not there; a 0 would have lowered it to 1/2.
    assert sum(read["rewards"]) / 4 == pytest.approx(sum(read["rewards"][:3]) / 3)
    assert bodies[3]["_ng_failure_class"] == "judge_failed" and bodies[3]["judge"]["status"] == "judge_error"


def test_a_failed_judgment_with_nothing_judged_in_its_group_is_a_masked_number(failing_server):
    status, body, _ = post_json(failing_server.url + "/verify", nemo_gym_row(f"{MATCHING} {uuid.uuid4().hex}"))
    assert status == 200
    read = nemo_rl_read([body, body])
    assert read["masked"][0] is True and read["rewards"][0] == 0.0


@pytest.fixture(scope="module")
def hung_server(server_factory, built):
    backend = FakeBackend(latency_ms=30_000, reply="match")  # every judgment still running when cancelled
    try:
        yield server_factory({"JUDGE_BASE_URL": backend.base_url, "JUDGE_API_KEY": "t", "JUDGE_MODEL": "m",
                              "JUDGE_MAX_RETRIES": "0", "JUDGE_TIMEOUT_MS": "60000", "REQUEST_DEADLINE_MS": "60000"})
    finally:
        backend.stop()


def test_a_cancelled_judgment_floats_and_is_masked(hung_server):
    rollout_id = f"r-{uuid.uuid4().hex[:8]}"
    answer: Dict[str, Any] = {}

    def verify() -> None:
        answer["status"], answer["body"], _ = post_json(
            hung_server.url + "/verify", nemo_gym_row(f"{MATCHING} {rollout_id}", rollout_id=rollout_id))

    t = threading.Thread(target=verify, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    cancelled = 0
    while cancelled == 0 and time.monotonic() < deadline:  # until the request is registered and cancelled
        time.sleep(0.1)
        status, body, _ = post_json(hung_server.url + "/v1/cancel", {"request_ids": [rollout_id]})
        assert status == 200
        cancelled = body.get("cancelled_requests", 0)
    t.join(timeout=20)
    assert answer["status"] == 200
    body = answer["body"]
    assert body["judge"]["status"] == "cancelled" and body["_ng_failure_class"] == "cancelled"
    read = nemo_rl_read([body, body])  # float() and torch.tensor() work: before, reward was null here
    assert read["masked"][0] is True and isinstance(read["rewards"][0], float)
