"""RewardClient against the real built server (`node dist/server/main.js`)."""

from __future__ import annotations

import threading
from typing import List

import pytest

from conftest import DEGENERATE, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, post_json
from debate_reward import (
    BadRequestError,
    NotFoundError,
    RetryEvent,
    RewardClient,
    RewardRequestError,
    UnauthorizedError,
    group_stats,
)

# A second group whose ground truth is the UNRELATED idea, so the expected rewards flip.
QUESTION_2 = "Can a small recurrent network inherit a large transformer's dialogue ability?"
GROUND_TRUTH_2 = (
    "We distill a large dense transformer teacher into a small recurrent student network by matching "
    "hidden states on synthetic dialogue transcripts collected from crowd workers, and then prune the "
    "student's attention heads."
)


@pytest.fixture
def client(offline_server):
    with RewardClient(offline_server.url, timeout_s=30, max_retries=2) as c:
        yield c


def test_reward_scores_a_group_in_order(client):
    rewards = client.reward(QUESTION, GROUND_TRUTH, [MATCHING, UNRELATED, DEGENERATE])
    assert rewards == [1.0, 0.0, 0.0]
    assert all(type(r) is float for r in rewards)


def test_reward_details_judge_the_answer_after_a_reasoning_trace(client):
    trace = "<think>Maybe the reference uses contrastive pairs.</think>"
    d = client.reward_details(QUESTION, GROUND_TRUTH, [f"{trace}\n{MATCHING}", f"<think>{MATCHING}"])
    assert d.results[0].status == "ok" and d.results[0].reasoning_chars == len(trace)
    assert d.results[1].reason == "truncated_reasoning" and d.rewards[1] == 0.0


def test_reward_details_carry_statuses_scores_and_dr_grpo_advantages(client):
    d = client.reward_details(QUESTION, GROUND_TRUTH, [MATCHING, UNRELATED, DEGENERATE])
    assert [r.status for r in d.results] == ["ok", "ok", "rejected_input"]
    assert d.results[2].reason == "master_key_filler" and d.results[2].calls == 0
    assert d.scores[0] > 0.5 > d.scores[1]
    local = group_stats(d.rewards)
    assert d.mean == pytest.approx(local["mean"]) and d.std == pytest.approx(local["std"])
    assert d.advantages == pytest.approx(local["advantages"])
    assert (d.n_ok, d.n_failed) == (3, 0)
    assert d.backend == "offline" and d.graph["name"] == "analysts-2" and len(d.graph["hash"]) == 16
    assert d.usage["calls"] >= 0


def test_transcripts_come_back_when_asked(client):
    d = client.reward_details(QUESTION, GROUND_TRUTH, [MATCHING], include_transcripts=True)
    transcript = d.results[0].raw["transcript"]
    assert isinstance(transcript, list) and {m["role"] for m in transcript} >= {"analyst", "evaluator"}


def test_reward_batch_keeps_group_order(client):
    batch = client.reward_batch(
        [
            {"question": QUESTION, "ground_truth": GROUND_TRUTH, "candidates": [MATCHING, UNRELATED]},
            (QUESTION_2, GROUND_TRUTH_2, [MATCHING, UNRELATED, DEGENERATE]),
        ]
    )
    assert batch == [[1.0, 0.0], [0.0, 1.0, 0.0]]
    details = client.reward_batch_details([(QUESTION, GROUND_TRUTH, [UNRELATED])], graph="lexical")
    assert details[0].graph["name"] == "lexical" and details[0].rewards == [0.0]


def test_judge_returns_the_transcript(client):
    j = client.judge(QUESTION, GROUND_TRUTH, MATCHING)
    assert j.reward == 1.0 and j.verdict == "match" and j.status == "ok"
    roles = [m["role"] for m in j.transcript]
    assert roles.count("analyst") == 2 and roles[-1] == "evaluator"
    assert j.graph["name"] == "analysts-2" and j.rounds == 1


def test_graph_can_be_chosen_per_client_and_per_call(offline_server):
    with RewardClient(offline_server.url, graph="lexical") as c:
        d = c.reward_details(QUESTION, GROUND_TRUTH, [MATCHING])
        assert d.graph["name"] == "lexical" and d.results[0].calls == 0
        assert c.reward_details(QUESTION, GROUND_TRUTH, [MATCHING], graph="vote-3").graph["name"] == "vote-3"


def test_unknown_graph_raises_not_found_with_the_server_code(client):
    with pytest.raises(NotFoundError) as info:
        client.reward(QUESTION, GROUND_TRUTH, [MATCHING], graph="no-such-graph")
    err = info.value
    assert (err.status, err.code) == (404, "RW_UNKNOWN_GRAPH") and "no-such-graph" in err.message
    assert err.attempts == 1  # 4xx is never retried


def test_invalid_body_raises_bad_request(client):
    with pytest.raises(BadRequestError) as info:
        client.reward(QUESTION, "a ground truth with a NUL \u0000 byte in it", [MATCHING])
    assert (info.value.status, info.value.code) == (400, "RW_BAD_REQUEST")
    assert isinstance(info.value.details, list) and info.value.details[0]["path"] == "ground_truth"
    # Inline graphs are off by default (ALLOW_INLINE_GRAPHS): a caller's error, not retried.
    with pytest.raises(RewardRequestError) as info2:
        client.reward(QUESTION, GROUND_TRUTH, [MATCHING], graph={"nodes": "not a graph"})
    assert (info2.value.status, info2.value.code) == (403, "RW_GRAPH_NOT_ALLOWED")


def test_a_rollout_that_is_not_text_is_a_real_zero_and_the_others_are_judged(client):
    """A NUL byte or an unpaired surrogate (not even UTF-8: sent \\u-escaped) in one rollout: that rollout
    is rejected_input / invalid_text, the request's others are judged (issue 33 item 7)."""
    d = client.reward_details(QUESTION, GROUND_TRUTH, [f"{MATCHING}\u0000", MATCHING, f"{MATCHING} \ud800"])
    assert d.rewards == [0.0, 1.0, 0.0]
    assert [(r.status, r.reason) for r in d.results] == [
        ("rejected_input", "invalid_text"), ("ok", None), ("rejected_input", "invalid_text")]


def test_judge_failure_is_none_never_zero(failing_server):
    """Every LLM call fails: the items that need the judge are None, on the wire (JSON null) and in the
    client. The degenerate candidate is decided without an LLM: a real 0. If the server ever turned a
    failure into 0, the client would raise RewardProtocolError and this test would fail."""
    with RewardClient(failing_server.url, max_retries=0) as c:
        d = c.reward_details(QUESTION, GROUND_TRUTH, [MATCHING, UNRELATED, DEGENERATE])
    assert d.rewards == [None, None, 0.0]
    assert d.rewards[0] is None and d.rewards[1] is None
    assert [r.status for r in d.results] == ["judge_error", "judge_error", "rejected_input"]
    assert d.results[0].error_code is not None and d.results[0].error
    assert d.advantages == [None, None, 0.0] and (d.n_ok, d.n_failed) == (1, 1 + 1)
    assert d.scores[:2] == [None, None]

    status, raw, _ = post_json(failing_server.url + "/v1/reward",
                               {"question": QUESTION, "ground_truth": GROUND_TRUTH, "candidates": [MATCHING]})
    assert status == 200
    assert raw["rewards"] == [None] and raw["results"][0]["reward"] is None  # JSON null, not 0
    assert raw["group"]["advantages"] == [None] and raw["group"]["mean"] is None


def test_failed_judgment_through_judge_endpoint_is_none(failing_server):
    with RewardClient(failing_server.url, max_retries=0) as c:
        j = c.judge(QUESTION, GROUND_TRUTH, MATCHING)
    assert j.reward is None and j.failed and j.status == "judge_error" and j.verdict is None


def test_api_key_is_required_and_sent_as_bearer(auth_server):
    with RewardClient(auth_server.url) as anonymous:
        with pytest.raises(UnauthorizedError) as info:
            anonymous.reward(QUESTION, GROUND_TRUTH, [MATCHING])
    assert (info.value.status, info.value.code) == (401, "RW_UNAUTHORIZED")
    assert isinstance(info.value, RewardRequestError)
    with RewardClient(auth_server.url, api_key="wrong") as wrong, pytest.raises(UnauthorizedError):
        wrong.reward(QUESTION, GROUND_TRUTH, [MATCHING])
    with RewardClient(auth_server.url, api_key="s3cret-key") as ok:
        assert ok.reward(QUESTION, GROUND_TRUTH, [MATCHING]) == [1.0]
        assert ok.health()


def test_overload_503_with_retry_after_is_retried_by_the_client(tiny_server):
    """Room for 1 running + 1 queued judgment in front of a 300 ms judge; 6 concurrent requests with
    distinct candidates (no coalescing) overflow, get 503 RW_OVERLOADED + Retry-After, and the client
    retries them until all succeed."""
    events: List[RetryEvent] = []
    lock = threading.Lock()

    def record(event: RetryEvent) -> None:
        with lock:
            events.append(event)

    results: List[object] = [None] * 6
    start = threading.Barrier(6, timeout=30)  # all six hit the server together
    with RewardClient(tiny_server.url, max_retries=20, on_retry=record, backoff_base_s=0.2) as c:

        def worker(i: int) -> None:
            try:
                start.wait()
                results[i] = c.reward(QUESTION, GROUND_TRUTH, [f"{MATCHING} Variant number {i}."],
                                      graph="single-judge")
            except Exception as exc:  # surfaced by the assertion below
                results[i] = exc

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert results == [[1.0]] * 6
    overloaded = [e for e in events if e.status == 503]
    assert overloaded, "no request was refused: the overload path was not exercised"
    assert all(e.code == "RW_OVERLOADED" and e.retry_after_s is not None and e.retry_after_s >= 1
               for e in overloaded)
    assert all(e.delay_s >= e.retry_after_s for e in overloaded)


def _metric_sum(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def test_a_client_timeout_shorter_than_the_judgment_still_gets_the_reward(server_factory, fake_backend):
    """A 300 ms judge: the default graph needs two stages, ~0.6 s, and the client gives up on each attempt
    after 0.25 s. The attempts share one Idempotency-Key, so the server keeps the judgment of a timed-out
    attempt running and the retry joins it: one judgment, and the reward. Without the key every attempt
    would cancel and restart it, and all six would time out."""
    server = server_factory({"JUDGE_BASE_URL": fake_backend.base_url, "JUDGE_API_KEY": "test",
                             "JUDGE_MODEL": "fake-judge"})
    events: List[RetryEvent] = []
    with RewardClient(server.url, timeout_s=0.25, max_retries=5, backoff_base_s=0.05,
                      on_retry=events.append) as c:
        assert c.reward(QUESTION, GROUND_TRUTH, [f"{MATCHING} Timed out once."]) == [1.0]
    assert events and all(e.status is None and "no response" in e.error for e in events)
    metrics = server.metrics()
    assert _metric_sum(metrics, "reward_judgments_total") == 1
    assert _metric_sum(metrics, "reward_idempotency_lookups_total") == len(events) + 1
