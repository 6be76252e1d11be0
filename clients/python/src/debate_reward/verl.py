"""verl adapter: `reward.custom_reward_function` for the debate-reward server.

Read against verl 0.8.0 (`verl/experimental/reward_loop/reward_loop.py`,
`verl/experimental/reward_loop/reward_manager/naive.py`, `verl/trainer/ppo/reward.py`,
`verl/trainer/config/reward/reward.yaml`):

- `get_custom_reward_fn` loads `reward.custom_reward_function.path` by file path and wraps the function
  named `reward.custom_reward_function.name` in a `functools.partial` that merges
  `reward.custom_reward_function.reward_kwargs` into every call (they win over verl's own keywords).
- `RewardLoopManager.compute_rm_score` splits the batch across `reward.num_workers` Ray actors (8 by
  default; contiguous chunks, so a GRPO group may straddle two), each of which `asyncio.gather`s one
  `NaiveRewardManager.run_single` per sample; with the agent loop's streaming reward, each finished rollout
  goes to a random worker. `run_single` awaits a coroutine `compute_score` on the worker's loop and runs a
  synchronous one with `loop.run_in_executor(None, ...)`, i.e. on a thread pool, concurrently.
- It is called as `compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **kw)` with
  `ground_truth = reward_model["ground_truth"]` and `solution_str` the decoded response (special tokens
  skipped, the prompt not included). Only `score` is trained on; every other key of a returned dict becomes
  a `reward_extra_info` column (every sample must return the same keys). An exception ends the step.

So a failed judgment must become a number here: by default the mean reward of its group (the rollouts of
the same question and ground truth pooled with it, else judged by this worker in the last 10 minutes, else
everything this worker judged recently), flagged `judge_failed`. This module uses absolute imports only,
because verl loads the file by path rather than as a package member.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, Union

from debate_reward._adapt import URL_ENV, api_key_for, async_client
from debate_reward._chat import strip_chat_tokens, trace_opened_by, with_prompt_trace
from debate_reward._pool import BlockingPool, Item, Outcome, Pool
from debate_reward.aio import AsyncRewardClient
from debate_reward.client import Graph
from debate_reward.errors import JudgeFailedError, RewardUnavailableError

log = logging.getLogger("debate_reward.verl")

#: The keys of every dict `compute_score` returns, success or failure.
SCORE_KEYS = ("score", "judge_failed", "cached", "latency_s")

#: `failure_score`'s default: a failed judgment scores its group's mean (see the module docstring).
GROUP_MEAN = "group_mean"

ScoreFunc = Callable[..., Awaitable[Dict[str, Any]]]
FailureScore = Union[str, float, None]


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


def _check_failure_score(failure_score: Any) -> None:
    if failure_score == GROUP_MEAN or failure_score is None:
        return
    if isinstance(failure_score, bool) or not isinstance(failure_score, (int, float)):
        raise TypeError(f"failure_score must be {GROUP_MEAN!r}, a number or None")


class _Scorer:
    """What the async and blocking `compute_score` share: the item a sample is, and the dict it scores."""

    def __init__(
        self,
        pool: Pool,
        failure_score: FailureScore,
        on_unavailable: str,
        trace_opener: Optional[str],
        tokenizer: Any,
        chat_template_kwargs: Optional[Mapping[str, Any]],
    ) -> None:
        _check_failure_score(failure_score)
        if on_unavailable not in ("raise", "fail"):
            raise ValueError("on_unavailable must be 'raise' or 'fail'")
        self.pool = pool
        self.blocking = BlockingPool(pool)
        self.failure_score = failure_score
        self.on_unavailable = on_unavailable
        self.trace_opener = trace_opener
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._opener: Optional[Tuple[Optional[str]]] = None

    def opener(self) -> Optional[str]:
        """The trace opener the policy's generation prompt ends with: given, or rendered once from the
        policy's tokenizer (`apply_chat_template(..., add_generation_prompt=True)`)."""
        if self.trace_opener is not None or self.tokenizer is None:
            return self.trace_opener
        if self._opener is None:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "?"}], tokenize=False, add_generation_prompt=True,
                **self.chat_template_kwargs,
            )
            self._opener = (trace_opened_by(text) if isinstance(text, str) else None,)
        return self._opener[0]

    def item(self, solution_str: Any, ground_truth: Any, extra_info: Any) -> Item:
        question, truth = split_ground_truth(ground_truth, extra_info)
        if not isinstance(solution_str, str):
            raise TypeError("solution_str must be a str")
        return Item(question, truth, with_prompt_trace(strip_chat_tokens(solution_str), self.opener()))

    async def ascore(self, solution_str: Any, ground_truth: Any, extra_info: Any) -> Dict[str, Any]:
        """One sample on the caller's event loop, pooled with the samples of concurrent calls."""
        item = self.item(solution_str, ground_truth, extra_info)
        started = time.monotonic()
        try:
            [outcome] = await self.pool.score([item])
        except RewardUnavailableError as exc:
            return self.unavailable(item, exc, time.monotonic() - started)
        return self.scored(outcome, time.monotonic() - started)

    def score(self, solution_str: Any, ground_truth: Any, extra_info: Any) -> Dict[str, Any]:
        """One sample, blocking, pooled with the samples of calls made at the same time on other threads."""
        item = self.item(solution_str, ground_truth, extra_info)
        started = time.monotonic()
        try:
            [outcome] = self.blocking.score([item])
        except RewardUnavailableError as exc:
            return self.unavailable(item, exc, time.monotonic() - started)
        return self.scored(outcome, time.monotonic() - started)

    def scored(self, outcome: Outcome, latency_s: float) -> Dict[str, Any]:
        if outcome.reward is not None:
            return {"score": outcome.reward, "judge_failed": False, "cached": outcome.cached, "latency_s": latency_s}
        return self.failed(outcome.group_mean, outcome.pool_mean, outcome.failure_reward, outcome.error, latency_s)

    def unavailable(self, item: Item, exc: RewardUnavailableError, latency_s: float) -> Dict[str, Any]:
        if self.on_unavailable == "raise":
            raise exc
        group_mean, pool_mean = self.pool.recent_means(item.key)
        return self.failed(group_mean, pool_mean, None, f"server unavailable: {exc}", latency_s)

    def failed(
        self,
        group_mean: Optional[float],
        pool_mean: Optional[float],
        failure_reward: Optional[float],
        why: Optional[str],
        latency_s: float,
    ) -> Dict[str, Any]:
        if self.failure_score is None:
            raise JudgeFailedError(f"judgment failed ({why}) and failure_score is None", code="RW_JUDGE_FAILED")
        if self.failure_score == GROUP_MEAN:
            value = next((v for v in (group_mean, pool_mean, failure_reward) if v is not None), None)
            if value is None:
                raise JudgeFailedError(
                    f"judgment failed ({why}) and nothing was judged yet to be neutral about (no group mean, no "
                    "recent rewards, no FAILURE_REWARD on the server)",
                    code="RW_JUDGE_FAILED",
                )
        else:
            value = float(self.failure_score)  # type: ignore[arg-type]
        log.info("judgment failed (%s): score %.3f", why, value)
        return {"score": float(value), "judge_failed": True, "cached": False, "latency_s": latency_s}


def verl_compute_score(
    client: Any,
    *,
    failure_score: FailureScore = GROUP_MEAN,
    graph: Optional[Graph] = None,
    on_unavailable: str = "raise",
    trace_opener: Optional[str] = None,
    tokenizer: Any = None,
    chat_template_kwargs: Optional[Mapping[str, Any]] = None,
    api_key: Optional[str] = None,
    max_rounds: int = 2,
    linger_s: float = 0.05,
) -> ScoreFunc:
    """Build an async verl `compute_score`. The samples of calls that arrive within `linger_s` of each other
    (verl's reward loop gathers a worker's chunk at once) share `/v1/reward/batch` requests, grouped by
    (question, ground truth); failed judgments are sent again `max_rounds` times. Every call returns
    `{"score", "judge_failed", "cached", "latency_s"}`.

    - `client`: an `AsyncRewardClient`, a `RewardClient` or a base URL (then `api_key`, else the env var
      `DEBATE_REWARD_API_KEY`, is its key).
    - `failure_score`: what a judgment that still failed scores (flagged `judge_failed`): `"group_mean"`
      (default; the mean reward of its group: zero advantage under GRPO), a number (a fixed score you chose),
      or None (raise `JudgeFailedError`).
    - `on_unavailable="fail"` treats a server unreachable until the client's deadline (600 s by default)
      like a failed judgment; the default re-raises (the step ends).
    - `trace_opener` (e.g. `"<think>\\n"`) or `tokenizer` (the policy's, to render its generation prompt):
      when the policy's chat template opens the reasoning trace in the prompt, the opener is put back in
      front of `solution_str` so that a response cut off inside the trace scores 0 (`truncated_reasoning`).
    """
    pool = Pool(async_client(client, api_key=api_key), graph, max_rounds=max_rounds, linger_s=linger_s)
    scorer = _Scorer(pool, failure_score, on_unavailable, trace_opener, tokenizer, chat_template_kwargs)

    async def compute_score(
        data_source: Any = None,
        solution_str: str = "",
        ground_truth: Any = None,
        extra_info: Optional[Mapping[str, Any]] = None,
        **kw: Any,
    ) -> Dict[str, Any]:
        return await scorer.ascore(solution_str, ground_truth, extra_info)

    return compute_score


def verl_compute_score_sync(
    client: Any,
    *,
    failure_score: FailureScore = GROUP_MEAN,
    graph: Optional[Graph] = None,
    on_unavailable: str = "raise",
    trace_opener: Optional[str] = None,
    tokenizer: Any = None,
    chat_template_kwargs: Optional[Mapping[str, Any]] = None,
    api_key: Optional[str] = None,
    max_rounds: int = 2,
    linger_s: float = 0.05,
) -> Callable[..., Dict[str, Any]]:
    """Blocking twin of `verl_compute_score` (same arguments and answers), for a synchronous
    `compute_score`: verl runs it on a thread pool, one sample per call, and the samples of calls made at
    the same time from those threads share requests (one event loop on a daemon thread owns the pool)."""
    pool = Pool(async_client(client, api_key=api_key), graph, max_rounds=max_rounds, linger_s=linger_s)
    scorer = _Scorer(pool, failure_score, on_unavailable, trace_opener, tokenizer, chat_template_kwargs)

    def compute_score(
        data_source: Any = None,
        solution_str: str = "",
        ground_truth: Any = None,
        extra_info: Optional[Mapping[str, Any]] = None,
        **kw: Any,
    ) -> Dict[str, Any]:
        return scorer.score(solution_str, ground_truth, extra_info)

    return compute_score


# --- config-only entry points ------------------------------------------------------------------------
# reward.custom_reward_function.path=<this file>  reward.custom_reward_function.name=compute_score
# +reward.custom_reward_function.reward_kwargs.base_url=http://HOST:8080
# +reward.custom_reward_function.reward_kwargs.failure_score=...   (group_mean by default; a number; null raises)
# +reward.custom_reward_function.reward_kwargs.trace_opener='<think>\n'   (when the template opens the trace)
# or the env vars DEBATE_REWARD_URL, DEBATE_REWARD_FAILURE_SCORE, DEBATE_REWARD_API_KEY on the workers.

_shared: Dict[Tuple[Any, ...], _Scorer] = {}
_shared_lock = threading.Lock()
_UNSET = object()


def _env_failure_score(failure_score: Any) -> FailureScore:
    if failure_score is not _UNSET:
        return failure_score  # type: ignore[no-any-return]
    raw = (os.environ.get("DEBATE_REWARD_FAILURE_SCORE") or "").strip()
    if raw == "" or raw == GROUP_MEAN:
        return GROUP_MEAN
    if raw.lower() in ("none", "null", "raise"):
        return None
    return float(raw)


def _scorer_for(
    base_url: Optional[str], api_key: Optional[str], failure_score: Any, graph: Optional[Graph],
    trace_opener: Optional[str], max_rounds: int,
) -> _Scorer:
    url = base_url or os.environ.get(URL_ENV)
    if not url:
        raise ValueError(f"set reward.custom_reward_function.reward_kwargs.base_url or {URL_ENV}")
    key = api_key_for(api_key)
    fs = _env_failure_score(failure_score)
    _check_failure_score(fs)
    cache_key = (url, key, repr(fs), repr(graph), trace_opener, max_rounds)
    with _shared_lock:
        if cache_key not in _shared:
            pool = Pool(AsyncRewardClient(url, api_key=key), graph, linger_s=0.05, max_rounds=max_rounds)
            _shared[cache_key] = _Scorer(pool, fs, "raise", trace_opener, None, None)
        return _shared[cache_key]


async def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    failure_score: Any = _UNSET,
    graph: Optional[Graph] = None,
    trace_opener: Optional[str] = None,
    max_rounds: int = 2,
    **kw: Any,
) -> Dict[str, Any]:
    """Ready-made async `compute_score`, configured through verl's `reward_kwargs` (`base_url`, `api_key`,
    `failure_score`, `graph`, `trace_opener`, `max_rounds`) or the env vars `DEBATE_REWARD_URL`, `DEBATE_REWARD_API_KEY`,
    `DEBATE_REWARD_FAILURE_SCORE` (`group_mean`, the default; a number; `none` to raise). One pool per
    worker process and setting, shared by every call."""
    scorer = _scorer_for(base_url, api_key, failure_score, graph, trace_opener, max_rounds)
    return await scorer.ascore(solution_str, ground_truth, extra_info)


def compute_score_sync(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    failure_score: Any = _UNSET,
    graph: Optional[Graph] = None,
    trace_opener: Optional[str] = None,
    max_rounds: int = 2,
    **kw: Any,
) -> Dict[str, Any]:
    """Blocking twin of `compute_score` (pooled across the threads verl runs it on)."""
    scorer = _scorer_for(base_url, api_key, failure_score, graph, trace_opener, max_rounds)
    return scorer.score(solution_str, ground_truth, extra_info)


__all__ = [
    "GROUP_MEAN",
    "SCORE_KEYS",
    "compute_score",
    "compute_score_sync",
    "split_ground_truth",
    "verl_compute_score",
    "verl_compute_score_sync",
]
