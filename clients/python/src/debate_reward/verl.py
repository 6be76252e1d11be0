"""verl adapter: `custom_reward_function` for the debate-reward server.

verl calls `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **kw)`
once per sample. Its reward loop (verl >= 0.6, `reward_model.use_reward_loop=True`; default in later
releases) awaits coroutine functions and passes extra keywords (`reward_router_address`,
`reward_model_tokenizer`, and `custom_reward_function.reward_kwargs`). A returned dict must hold `score`;
every other key becomes a `reward_extra_info` column, so every sample must return the same keys.

This module uses absolute imports only, because verl loads the file by path
(`custom_reward_function.path=.../debate_reward/verl.py`) rather than as a package member.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, Union

from debate_reward.aio import AsyncRewardClient
from debate_reward.client import Graph, RewardClient
from debate_reward.errors import JudgeFailedError, RewardUnavailableError
from debate_reward.results import GroupResult

#: The keys of every dict `compute_score` returns, success or failure.
SCORE_KEYS = ("score", "judge_failed", "cached", "latency_s")

ScoreFunc = Callable[..., Awaitable[Dict[str, Any]]]
_MISSING = object()


def split_ground_truth(ground_truth: Any, extra_info: Optional[Mapping[str, Any]]) -> Tuple[str, str]:
    """(question, ground truth) from verl's `reward_model.ground_truth` (a string, or a mapping with
    `ground_truth` and optionally `question`) and `extra_info` (which may hold `question`)."""
    question: Any = None
    if isinstance(ground_truth, Mapping):
        question = ground_truth.get("question")
        ground_truth = ground_truth.get("ground_truth")
    if question is None and isinstance(extra_info, Mapping):
        question = extra_info.get("question")
    if not isinstance(ground_truth, str):
        raise ValueError("ground_truth must be a string or a mapping with a 'ground_truth' string")
    if not isinstance(question, str):
        raise ValueError(
            "no research question: put it in reward_model.ground_truth['question'] or extra_info['question']"
        )
    return question, ground_truth


def _failure(failure_score: Optional[float], latency_s: float, why: str) -> Dict[str, Any]:
    if failure_score is None:
        raise JudgeFailedError(f"judgment failed ({why}) and failure_score is None")
    return {"score": float(failure_score), "judge_failed": True, "cached": False, "latency_s": latency_s}


def _score(result: GroupResult, failure_score: Optional[float], latency_s: float) -> Dict[str, Any]:
    item = result.results[0]
    if item.reward is None:
        return _failure(failure_score, latency_s, item.status + (f": {item.error}" if item.error else ""))
    return {"score": item.reward, "judge_failed": False, "cached": item.cached, "latency_s": latency_s}


def _check_failure_score(failure_score: Any) -> None:
    if failure_score is _MISSING:
        raise TypeError(
            "failure_score is required: the score verl should train on when a judgment fails "
            "(verl has no skip value), or None to raise JudgeFailedError instead"
        )
    if failure_score is not None and not isinstance(failure_score, (int, float)):
        raise TypeError("failure_score must be a number or None")


def verl_compute_score(
    client: Union[AsyncRewardClient, RewardClient, str],
    *,
    failure_score: Any = _MISSING,
    graph: Optional[Graph] = None,
    on_unavailable: str = "raise",
) -> ScoreFunc:
    """Build an async verl `compute_score`. Each call sends one single-candidate `/v1/reward` request
    (the server coalesces a group's concurrent requests). It returns
    `{"score": float, "judge_failed": bool, "cached": bool, "latency_s": float}` for every sample.

    `failure_score` is required on purpose, like the server's `FAILURE_REWARD`: verl cannot skip a
    sample, so you choose the number a failed judgment becomes (`judge_failed` marks it for logging
    and filtering), or None to raise `JudgeFailedError`. `on_unavailable="fail"` treats a server that
    stayed unreachable through every retry like a failed judgment; the default re-raises.
    """
    _check_failure_score(failure_score)
    if on_unavailable not in ("raise", "fail"):
        raise ValueError("on_unavailable must be 'raise' or 'fail'")
    if isinstance(client, str):
        aclient = AsyncRewardClient(client)
    elif isinstance(client, RewardClient):
        aclient = AsyncRewardClient.from_client(client)
    elif isinstance(client, AsyncRewardClient):
        aclient = client
    else:
        raise TypeError("client must be an AsyncRewardClient, a RewardClient or a base URL")

    async def compute_score(
        data_source: Any = None,
        solution_str: str = "",
        ground_truth: Any = None,
        extra_info: Optional[Mapping[str, Any]] = None,
        **kw: Any,
    ) -> Dict[str, Any]:
        question, truth = split_ground_truth(ground_truth, extra_info)
        started = time.monotonic()
        try:
            result = await aclient.reward_details(question, truth, [solution_str], graph=graph)
        except RewardUnavailableError as exc:
            if on_unavailable == "raise":
                raise
            return _failure(failure_score, time.monotonic() - started, f"server unavailable: {exc}")
        return _score(result, failure_score, time.monotonic() - started)

    return compute_score


def verl_compute_score_sync(
    client: Union[RewardClient, str],
    *,
    failure_score: Any = _MISSING,
    graph: Optional[Graph] = None,
    on_unavailable: str = "raise",
) -> Callable[..., Dict[str, Any]]:
    """Blocking twin for verl versions whose reward managers call `compute_score` synchronously
    (NaiveRewardManager before the reward loop). Same arguments and return value."""
    _check_failure_score(failure_score)
    if on_unavailable not in ("raise", "fail"):
        raise ValueError("on_unavailable must be 'raise' or 'fail'")
    sclient = RewardClient(client) if isinstance(client, str) else client

    def compute_score(
        data_source: Any = None,
        solution_str: str = "",
        ground_truth: Any = None,
        extra_info: Optional[Mapping[str, Any]] = None,
        **kw: Any,
    ) -> Dict[str, Any]:
        question, truth = split_ground_truth(ground_truth, extra_info)
        started = time.monotonic()
        try:
            result = sclient.reward_details(question, truth, [solution_str], graph=graph)
        except RewardUnavailableError as exc:
            if on_unavailable == "raise":
                raise
            return _failure(failure_score, time.monotonic() - started, f"server unavailable: {exc}")
        return _score(result, failure_score, time.monotonic() - started)

    return compute_score


# --- config-only entry points ------------------------------------------------------------------------
# [reward.]custom_reward_function.path=<this file>  [reward.]custom_reward_function.name=compute_score
# +[reward.]custom_reward_function.reward_kwargs.base_url=http://HOST:8080
# +[reward.]custom_reward_function.reward_kwargs.failure_score=0.0   (omit to raise on failures)
# or the env vars DEBATE_REWARD_URL, DEBATE_REWARD_FAILURE_SCORE, DEBATE_REWARD_API_KEY on the workers.

_clients: Dict[str, AsyncRewardClient] = {}
_clients_lock = threading.Lock()


def _shared_client(base_url: Optional[str]) -> AsyncRewardClient:
    url = base_url or os.environ.get("DEBATE_REWARD_URL")
    if not url:
        raise ValueError("set custom_reward_function.reward_kwargs.base_url or DEBATE_REWARD_URL")
    with _clients_lock:
        if url not in _clients:
            _clients[url] = AsyncRewardClient(url, api_key=os.environ.get("DEBATE_REWARD_API_KEY"))
        return _clients[url]


def _env_failure_score(failure_score: Any) -> Optional[float]:
    if failure_score is not _MISSING:
        return failure_score  # type: ignore[no-any-return]
    raw = os.environ.get("DEBATE_REWARD_FAILURE_SCORE")
    return None if raw is None or raw.strip() == "" else float(raw)


async def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    failure_score: Any = _MISSING,
    graph: Optional[Graph] = None,
    **kw: Any,
) -> Dict[str, Any]:
    """Ready-made async `compute_score`, configured through verl's `reward_kwargs` (`base_url`,
    `failure_score`, `graph`) or the env vars `DEBATE_REWARD_URL`, `DEBATE_REWARD_FAILURE_SCORE`,
    `DEBATE_REWARD_API_KEY`. With no failure score configured, a failed judgment raises
    `JudgeFailedError` rather than becoming a number nobody chose."""
    fn = verl_compute_score(
        _shared_client(base_url), failure_score=_env_failure_score(failure_score), graph=graph
    )
    return await fn(data_source, solution_str, ground_truth, extra_info)


def compute_score_sync(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    failure_score: Any = _MISSING,
    graph: Optional[Graph] = None,
    **kw: Any,
) -> Dict[str, Any]:
    """Blocking twin of `compute_score` for older verl reward managers."""
    fn = verl_compute_score_sync(
        _shared_client(base_url).sync, failure_score=_env_failure_score(failure_score), graph=graph
    )
    return fn(data_source, solution_str, ground_truth, extra_info)


__all__ = [
    "SCORE_KEYS",
    "compute_score",
    "compute_score_sync",
    "split_ground_truth",
    "verl_compute_score",
    "verl_compute_score_sync",
]
