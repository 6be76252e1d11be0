"""The trainer adapter endpoints, called with exactly the payloads OpenRLHF, slime and NeMo-Gym send
(so that the README snippets are known to work), against the real server."""

from __future__ import annotations

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, post_json

CHATML_PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"


def openrlhf_payload(responses, labels):
    """OpenRLHF's remote reward call: `query` = prompt + response (special tokens included)."""
    return {
        "query": [CHATML_PROMPT + r + "<|im_end|>" for r in responses],
        "prompts": [CHATML_PROMPT] * len(responses),
        "labels": labels,
    }


def test_openrlhf_get_reward(offline_server):
    status, body, _ = post_json(
        offline_server.url + "/get_reward",
        openrlhf_payload([MATCHING, UNRELATED, DEGENERATE],
                         [GROUND_TRUTH, {"ground_truth": GROUND_TRUTH, "question": QUESTION}, GROUND_TRUTH]),
    )
    assert status == 200
    assert body["rewards"] == [1, 0, 0] and len(body["scores"]) == 3
    logs = body["extra_logs"]
    assert all(len(v) == 3 and all(isinstance(x, (int, float)) for x in v) for v in logs.values())
    assert logs["rejected_input"] == [0, 0, 1] and logs["judge_failed"] == [0, 0, 0]


def test_openrlhf_empty_batch(offline_server):
    empty = {"query": [], "prompts": [], "labels": []}
    status, body, _ = post_json(offline_server.url + "/get_reward", empty)
    assert (status, body) == (200, {"rewards": [], "scores": [], "extra_logs": {}})


def test_openrlhf_judge_failure_is_a_503_not_a_zero(failing_server):
    """OpenRLHF has no skip value: without FAILURE_REWARD the server refuses to invent one."""
    status, body, headers = post_json(failing_server.url + "/get_reward",
                                      openrlhf_payload([MATCHING], [GROUND_TRUTH]))
    assert status == 503 and body["code"] == "RW_JUDGE_FAILED"
    assert {k.lower() for k in headers} >= {"retry-after"}


def test_openrlhf_failure_reward_when_the_operator_chose_one(server_factory):
    from conftest import closed_port

    server = server_factory({
        "JUDGE_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "JUDGE_API_KEY": "t",
        "JUDGE_MODEL": "m", "JUDGE_MAX_RETRIES": "0", "FAILURE_REWARD": "-1",
    })
    status, body, _ = post_json(server.url + "/get_reward", openrlhf_payload([MATCHING, DEGENERATE],
                                                                               [GROUND_TRUTH] * 2))
    assert status == 200 and body["rewards"] == [-1, 0] and body["extra_logs"]["judge_failed"] == [1, 0]


@pytest.mark.parametrize("prompt", [QUESTION, [{"role": "user", "content": QUESTION}]])
def test_slime_remote_rm(offline_server, prompt):
    status, body, _ = post_json(offline_server.url + "/slime",
                                {"prompt": prompt, "response": MATCHING, "label": GROUND_TRUTH})
    assert status == 200 and body["reward"] == 1 and body["status"] == "ok"  # --reward-key reward
    status, body, _ = post_json(offline_server.url + "/slime?graph=lexical",
                                {"prompt": prompt, "response": UNRELATED, "label": GROUND_TRUTH})
    assert status == 200 and body["reward"] == 0 and body["graph"]["name"] == "lexical"


def test_slime_judge_failure_is_retryable_503(failing_server):
    status, body, headers = post_json(failing_server.url + "/slime",
                                      {"prompt": QUESTION, "response": MATCHING, "label": GROUND_TRUTH})
    assert status == 503 and body["code"] == "RW_JUDGE_FAILED"


def nemo_gym_row(text: str) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "response": {
            "id": "resp_1", "object": "response", "model": "policy",
            "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        },
        "ground_truth": GROUND_TRUTH,
        "row_id": 17,
    }


def test_nemo_gym_verify_echoes_the_row_with_a_reward(offline_server):
    status, body, _ = post_json(offline_server.url + "/verify", nemo_gym_row(MATCHING))
    assert status == 200 and body["reward"] == 1 and body["row_id"] == 17
    assert body.get("instance_config", {}).get("mask_sample") is not True


def test_nemo_gym_verify_masks_failed_judgments(failing_server):
    status, body, _ = post_json(failing_server.url + "/verify", nemo_gym_row(MATCHING))
    assert status == 200 and body["instance_config"]["mask_sample"] is True and body["row_id"] == 17
