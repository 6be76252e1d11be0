"""Retry, backoff and error mapping, against a scripted stdlib stub server (no sleeping: the client's
sleep is replaced by a recorder, jitter by a seeded RNG)."""

from __future__ import annotations

import asyncio
import random
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone
from typing import List

import pytest

from conftest import closed_port
from debate_reward import (
    AsyncRewardClient,
    BadRequestError,
    NotFoundError,
    RetryPolicy,
    RewardClient,
    RewardInternalError,
    RewardProtocolError,
    RewardRequestError,
    RewardServerError,
    RewardUnavailableError,
    UnauthorizedError,
)
from debate_reward._http import parse_retry_after
from stub import StubServer, group_ok, reply

OVERLOADED = {"code": "RW_OVERLOADED", "message": "queue full"}


def make_client(url: str, **kw) -> "tuple[RewardClient, List[float]]":
    client = RewardClient(url, **kw)
    slept: List[float] = []
    client._sleep = slept.append
    client._rng = random.Random(7)
    return client, slept


@pytest.fixture
def stub_factory():
    opened: List[StubServer] = []

    def make(script, fallback=None, port=0) -> StubServer:
        s = StubServer(script, fallback, port=port)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def test_503_with_retry_after_is_retried_after_the_advertised_delay(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED, Retry_After="2"), reply(200, group_ok([1, 0]))])
    events = []
    client, slept = make_client(stub.url, backoff_base_s=0.5, on_retry=events.append)
    assert client.reward("q", "gt", ["a", "b"]) == [1.0, 0.0]
    assert len(stub.requests) == 2
    assert len(slept) == 1 and 2.0 <= slept[0] < 2.5  # Retry-After + at most backoff_base_s of jitter
    assert events[0].status == 503 and events[0].code == "RW_OVERLOADED" and events[0].retry_after_s == 2.0
    assert stub.requests[0]["body"] == stub.requests[1]["body"]  # the same request is replayed


def test_retry_after_is_capped(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED, Retry_After="3600"), reply(200, group_ok([1]))])
    client, slept = make_client(stub.url, max_retry_after_s=5, backoff_base_s=0)
    client.reward("q", "gt", ["a"])
    assert slept == [5.0]


def test_retry_after_http_date_is_understood():
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    parsed = parse_retry_after(format_datetime(when, usegmt=True))
    assert parsed is not None and 28 <= parsed <= 30
    assert parse_retry_after("garbage") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


def test_without_retry_after_backoff_is_full_jitter_under_an_exponential_ceiling(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED)] * 4 + [reply(200, group_ok([0]))])
    client, slept = make_client(stub.url, backoff_base_s=1.0, backoff_max_s=3.0, max_retries=4)
    client.reward("q", "gt", ["a"])
    assert len(slept) == 4
    for attempt, delay in enumerate(slept, start=1):
        assert 0 <= delay <= min(3.0, 1.0 * 2 ** (attempt - 1))
    # Full jitter: the delays are not all the ceiling (seeded RNG makes this deterministic).
    assert slept != [1.0, 2.0, 3.0, 3.0]


def test_retries_are_bounded_and_end_in_a_typed_unavailable_error(stub_factory):
    stub = stub_factory([], fallback=reply(503, OVERLOADED, Retry_After="1"))
    client, slept = make_client(stub.url, max_retries=2)
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert len(stub.requests) == 3 and len(slept) == 2
    err = info.value
    assert (err.status, err.code, err.message, err.attempts) == (503, "RW_OVERLOADED", "queue full", 3)
    assert isinstance(err, RewardServerError)


@pytest.mark.parametrize(
    "status, code, cls",
    [
        (400, "RW_BAD_REQUEST", BadRequestError),
        (401, "RW_UNAUTHORIZED", UnauthorizedError),
        (404, "RW_UNKNOWN_GRAPH", NotFoundError),
        (415, "RW_UNSUPPORTED_MEDIA_TYPE", RewardRequestError),
    ],
)
def test_4xx_raises_a_typed_error_at_once(stub_factory, status, code, cls):
    stub = stub_factory([reply(status, {"code": code, "message": "nope", "details": ["x"]})])
    client, slept = make_client(stub.url)
    with pytest.raises(cls) as info:
        client.reward("q", "gt", ["a"])
    assert (info.value.status, info.value.code, info.value.message, info.value.details) == (
        status, code, "nope", ["x"])
    assert isinstance(info.value, RewardRequestError)
    assert len(stub.requests) == 1 and slept == []


def test_500_is_a_bug_and_is_not_retried(stub_factory):
    stub = stub_factory([reply(500, {"code": "RW_INTERNAL", "message": "internal error"})])
    client, slept = make_client(stub.url)
    with pytest.raises(RewardInternalError) as info:
        client.reward("q", "gt", ["a"])
    assert info.value.code == "RW_INTERNAL" and len(stub.requests) == 1


def test_error_body_that_is_not_json_still_gives_a_typed_error(stub_factory):
    stub = stub_factory([{"status": 502, "body": b"<html>bad gateway</html>"}] * 2)
    client, _ = make_client(stub.url, max_retries=1)
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert info.value.status == 502 and info.value.code is None and "bad gateway" in info.value.message


class FakeClock:
    """A monotonic clock that only the client's (recorded) sleeps move."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def timed_client(url: str, **kw) -> "tuple[RewardClient, FakeClock]":
    client = RewardClient(url, **kw)
    clock = FakeClock()
    client._clock, client._sleep, client._rng = clock, clock.sleep, random.Random(3)
    return client, clock


def test_retries_are_bounded_by_the_deadline_not_a_count():
    """Against a closed port the old client (5 retries, 0.5 s base) gave up after 6-13 s: a pod restart
    ended the run. Now it keeps trying for its whole deadline (600 s by default), at most 5 s apart."""
    client, clock = timed_client(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert client.deadline_s == 600.0 and client.max_retries is None
    assert 595.0 <= clock.now - 1000.0 < 600.0  # it stopped when the next attempt would start past the deadline
    assert max(clock.slept) <= 5.0 and info.value.attempts == len(clock.slept) + 1 > 100
    assert "in 59" in str(info.value)  # how long it tried


def test_a_30_s_restart_is_waited_out_and_the_reward_arrives_soon_after(stub_factory):
    """The server's port refuses connections for 30 s (fake clock), then a server answers there: the call
    succeeds, within the 5 s backoff cap of the server's return."""
    port = closed_port()
    client, clock = timed_client(f"http://127.0.0.1:{port}")
    up: List[StubServer] = []

    def sleep(s: float) -> None:
        clock.sleep(s)
        if clock.now - 1000.0 >= 30.0 and not up:
            up.append(stub_factory([reply(200, group_ok([1.0]))], port=port))

    client._sleep = sleep
    assert client.reward("q", "gt", ["a"]) == [1.0]
    assert 30.0 <= clock.now - 1000.0 <= 35.0


def test_an_explicit_max_retries_still_caps_the_count_and_sets_the_old_deadline():
    client, clock = timed_client(f"http://127.0.0.1:{closed_port()}", max_retries=2, timeout_s=10)
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert info.value.attempts == 3 and client.deadline_s == 30.0


def test_503s_are_retried_until_the_deadline_with_retry_after(stub_factory):
    stub = stub_factory([], fallback=reply(503, OVERLOADED, Retry_After="10"))
    client, clock = timed_client(stub.url, deadline_s=45.0)
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert info.value.status == 503 and len(stub.requests) == 5  # t = 0, ~10, ~20, ~30, ~40; ~50 is past 45
    assert all(10.0 <= d <= 10.5 for d in clock.slept)


def test_connection_refused_is_retried_then_unavailable():
    client, slept = make_client(f"http://127.0.0.1:{closed_port()}", max_retries=3)
    with pytest.raises(RewardUnavailableError) as info:
        client.reward("q", "gt", ["a"])
    assert info.value.status is None and info.value.attempts == 4 and len(slept) == 3


def test_dropped_connection_is_retried(stub_factory):
    stub = stub_factory([{"drop": True}, reply(200, group_ok([1]))])
    client, slept = make_client(stub.url)
    assert client.reward("q", "gt", ["a"]) == [1.0]
    assert len(stub.requests) == 2 and len(slept) == 1  # a fresh connection failing is a real attempt


def test_stale_keep_alive_connection_is_replayed_without_backoff(stub_factory):
    stub = stub_factory([reply(200, group_ok([1])), {"drop": True}, reply(200, group_ok([0]))])
    client, slept = make_client(stub.url, max_retries=0)
    assert client.reward("q", "gt", ["a"]) == [1.0]
    # The pooled connection is closed by the server mid-request: replayed once on a new connection,
    # which neither sleeps nor uses up a retry (max_retries=0 would otherwise raise).
    assert client.reward("q", "gt", ["a"]) == [0.0]
    assert len(stub.requests) == 3 and slept == []


def test_null_reward_stays_none(stub_factory):
    stub = stub_factory([reply(200, group_ok([1, None, 0]))])
    client, _ = make_client(stub.url)
    details = client.reward_details("q", "gt", ["a", "b", "c"])
    assert details.rewards == [1.0, None, 0.0]
    assert details.results[1].failed and details.results[1].status == "judge_error"
    assert details.advantages[1] is None and details.n_failed == 1


def test_a_zero_reward_on_a_failed_judgment_is_refused(stub_factory):
    body = group_ok([1, None])
    body["rewards"][1] = 0  # a server regression: failure turned into a zero
    body["results"][1]["reward"] = 0
    stub = stub_factory([reply(200, body)])
    client, _ = make_client(stub.url)
    with pytest.raises(RewardProtocolError, match="failures must be null"):
        client.reward("q", "gt", ["a", "b"])


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.update(rewards=[1]),  # wrong length
        lambda b: b.update(rewards=[True, 0]),  # bool is not a reward
        lambda b: b["results"][0].update(reward=0),  # results disagree with rewards
        lambda b: b["results"][0].update(status="ok", reward=None) or b["rewards"].__setitem__(0, None),
    ],
)
def test_contract_violations_raise_protocol_errors(stub_factory, mutate):
    body = group_ok([1, 0])
    mutate(body)
    stub = stub_factory([reply(200, body)])
    client, _ = make_client(stub.url)
    with pytest.raises(RewardProtocolError):
        client.reward("q", "gt", ["a", "b"])


def test_non_json_2xx_is_a_protocol_error(stub_factory):
    stub = stub_factory([{"status": 200, "body": b"not json"}])
    client, _ = make_client(stub.url)
    with pytest.raises(RewardProtocolError):
        client.reward("q", "gt", ["a"])


def test_request_body_headers_and_prefix(stub_factory):
    stub = stub_factory([reply(200, group_ok([1]))])
    client, _ = make_client(stub.url + "/prefix/", api_key="k1", graph="vote-3")
    client.reward("q", "gt", ["a"], request_id="r-1")
    req = stub.requests[0]
    assert req["path"] == "/prefix/v1/reward"
    assert req["headers"]["Authorization"] == "Bearer k1"
    assert req["body"] == {"question": "q", "ground_truth": "gt", "candidates": ["a"], "graph": "vote-3",
                           "request_id": "r-1"}


def test_every_retry_of_one_call_carries_the_same_idempotency_key_and_the_next_call_a_new_one(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED, Retry_After="1"), {"drop": True}, reply(200, group_ok([1])),
                         reply(200, group_ok([1]))])
    client, _ = make_client(stub.url)
    client.reward("q", "gt", ["a"])
    client.reward("q", "gt", ["a"])
    keys = [r["headers"].get("Idempotency-Key") for r in stub.requests]
    assert len(keys) == 4 and all(isinstance(k, str) and len(k) == 32 for k in keys)
    assert keys[0] == keys[1] == keys[2] != keys[3]


def test_async_retries_carry_the_same_idempotency_key(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED, Retry_After="1"), reply(200, group_ok([1]))])

    async def run() -> None:
        async with AsyncRewardClient(stub.url, backoff_base_s=0.0, max_retry_after_s=0.0) as client:
            await client.reward("q", "gt", ["a"])

    asyncio.run(run())
    keys = [r["headers"].get("Idempotency-Key") for r in stub.requests]
    assert len(keys) == 2 and keys[0] is not None and keys[0] == keys[1]


def test_a_get_carries_no_idempotency_key(stub_factory):
    stub = stub_factory([reply(200, {"graphs": []})])
    client, _ = make_client(stub.url)
    client.graphs()
    assert "Idempotency-Key" not in stub.requests[0]["headers"]


def test_keep_alive_connection_is_reused(stub_factory):
    stub = stub_factory([reply(200, group_ok([1]))] * 3)
    client, _ = make_client(stub.url)
    for _ in range(3):
        client.reward("q", "gt", ["a"])
    assert len(client._transport._idle.queue) == 1  # one pooled connection served all three


def test_inputs_are_checked_before_sending():
    client = RewardClient("http://127.0.0.1:9")
    with pytest.raises(TypeError):
        client.reward("q", "gt", "a single string is not a list of candidates")
    with pytest.raises(TypeError):
        client.reward("q", None, ["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RewardClient("ftp://example")
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


def test_async_client_retries_with_asyncio_sleep(stub_factory):
    stub = stub_factory([reply(503, OVERLOADED, Retry_After="1"), reply(200, group_ok([None, 1]))])

    async def main():
        slept: List[float] = []

        async def fake_sleep(s: float) -> None:
            slept.append(s)

        async with AsyncRewardClient(stub.url, backoff_base_s=0) as client:
            client._sleep = fake_sleep
            rewards = await client.reward("q", "gt", ["a", "b"])
        return rewards, slept

    rewards, slept = asyncio.run(main())
    assert rewards == [None, 1.0] and slept == [1.0]


def test_async_client_maps_4xx(stub_factory):
    stub = stub_factory([reply(404, {"code": "RW_UNKNOWN_GRAPH", "message": "no such graph"})])

    async def main():
        async with AsyncRewardClient(stub.url) as client:
            await client.reward("q", "gt", ["a"], graph="nope")

    with pytest.raises(NotFoundError) as info:
        asyncio.run(main())
    assert info.value.code == "RW_UNKNOWN_GRAPH"
