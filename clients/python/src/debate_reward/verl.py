"""verl adapter: `reward.custom_reward_function` for the debate-reward server.

Read against verl 0.9.0 (verl-project/verl, tag v0.9.0; the same in 0.8.0):

- `get_custom_reward_fn` (`verl/trainer/ppo/reward.py`) loads `reward.custom_reward_function.path` by file
  path and wraps the function named `reward.custom_reward_function.name` in a `functools.partial` that
  merges `reward.custom_reward_function.reward_kwargs` into every call (they win over verl's own keywords).
- The default path STREAMS. With a custom reward function and no reward model, the agent loop scores each
  finished rollout alone (`AgentLoopWorker._compute_score`, `experimental/agent_loop/agent_loop.py` ~1019:
  `random.choice(self.reward_loop_worker_handles).compute_score.remote(data)`), in the V1 trainer (the
  default, `trainer.use_v1: true`: `trainer/ppo/v1/agent_loop_tq.py`) and the legacy one
  (`trainer/ppo/ray_trainer.py` ~949). No worker sees a whole group; `RewardLoopManager.compute_rm_score`
  (contiguous chunks over `reward.num_workers`) is the non-streaming path only.
- `NaiveRewardManager.run_single` decodes the response with `skip_special_tokens=True` (for a multi-turn
  `ToolAgentLoop` rollout: every turn, tool responses included, `tool_agent_loop.py` ~177), awaits a
  coroutine `compute_score` on the worker's loop and runs a synchronous one with `run_in_executor`. It is
  called as `compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **kw)` with
  `ground_truth = reward_model["ground_truth"]`. Only `score` is trained on; every other key of a returned
  dict becomes a `reward_extra_info` entry (every sample must return the same keys).
- An exception: the legacy trainer ends the step; the V1 trainer drops that rollout (the group is trained
  on the others; a group with none left stops a sync run unless `trainer.v1.sampler.sync_refill_failed_groups`).

So a failed judgment becomes a number here, from its own group: the server's mean of the group's judged
rollouts from every worker (`debate_reward._group`), flagged `judge_failed`; never another prompt's mean,
never an exception by default. Only the final assistant turn is judged. This module uses absolute imports
only, because verl loads the file by path rather than as a package member.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, Union

from debate_reward._adapt import URL_ENV, api_key_for, async_client, key_from_env
from debate_reward._chat import final_assistant_text, strip_chat_tokens, trace_opened_by, with_prompt_trace
from debate_reward._group import Settled, StreamPolicy, run_on, settle
from debate_reward._pool import BlockingPool, Item, Pool
from debate_reward.aio import AsyncRewardClient
from debate_reward.client import Graph
from debate_reward.errors import JudgeFailedError, RewardUnavailableError

log = logging.getLogger("debate_reward.verl")

#: The keys of every dict `compute_score` returns, success or failure.
SCORE_KEYS = ("score", "judge_failed", "group_unjudged", "cached", "latency_s")

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
        policy: Optional[StreamPolicy] = None,
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
        self.policy = policy or StreamPolicy()
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
        """The sample as the server judges it: the final assistant turn only (a multi-turn rollout is decoded
        whole, tool responses included), without chat tokens, the prompt's trace opener put back."""
        question, truth = split_ground_truth(ground_truth, extra_info)
        if not isinstance(solution_str, str):
            raise TypeError("solution_str must be a str")
        answer = strip_chat_tokens(final_assistant_text(solution_str))
        return Item(question, truth, with_prompt_trace(answer, self.opener()))

    async def ascore(self, solution_str: Any, ground_truth: Any, extra_info: Any) -> Dict[str, Any]:
        """One sample on the caller's event loop, pooled with the samples of concurrent calls."""
        item = self.item(solution_str, ground_truth, extra_info)
        started = time.monotonic()
        settled = await self._settled(item)
        return self.answer(settled, time.monotonic() - started)

    def score(self, solution_str: Any, ground_truth: Any, extra_info: Any) -> Dict[str, Any]:
        """One sample, blocking, pooled with the samples of calls made at the same time on other threads."""
        item = self.item(solution_str, ground_truth, extra_info)
        started = time.monotonic()
        settled = run_on(self.blocking._running_loop(), self._settled(item))
        return self.answer(settled, time.monotonic() - started)

    async def _settled(self, item: Item) -> Settled:
        try:
            [outcome] = await self.pool.score([item])
        except RewardUnavailableError:
            if self.on_unavailable == "raise":
                raise
            outcome = None
        if outcome is not None and outcome.reward is not None:
            return Settled(outcome.reward, False, cached=outcome.cached)
        why = "server unavailable" if outcome is None else outcome.error
        if self.failure_score is None:
            raise JudgeFailedError(f"judgment failed ({why}) and failure_score is None", code="RW_JUDGE_FAILED")
        if self.failure_score != GROUP_MEAN:
            return Settled(float(self.failure_score), True, source="failure_score")  # type: ignore[arg-type]
        return await settle(self.pool, item, outcome, self.policy)

    @staticmethod
    def answer(settled: Settled, latency_s: float) -> Dict[str, Any]:
        return {
            "score": float(settled.score),
            "judge_failed": settled.judge_failed,
            "group_unjudged": settled.group_unjudged,
            "cached": settled.cached,
            "latency_s": latency_s,
        }


def verl_compute_score(
    client: Any,
    *,
    failure_score: FailureScore = GROUP_MEAN,
    graph: Optional[Graph] = None,
    on_unavailable: str = "fail",
    trace_opener: Optional[str] = None,
    tokenizer: Any = None,
    chat_template_kwargs: Optional[Mapping[str, Any]] = None,
    api_key: Optional[str] = None,
    max_rounds: int = 2,
    linger_s: float = 0.05,
    group_wait_s: float = 600.0,
    poll_s: float = 2.0,
    unjudged_score: float = 0.5,
) -> ScoreFunc:
    """Build an async verl `compute_score`. verl streams: each finished rollout is scored alone, on a random
    reward worker; calls that arrive within `linger_s` of each other share `/v1/reward/batch` requests,
    and failed judgments are sent again `max_rounds` times. Every call returns `SCORE_KEYS`.

    - `client`: an `AsyncRewardClient`, a `RewardClient` or a base URL (then `api_key`, else
      `DEBATE_REWARD_API_KEY`, else the file `DEBATE_REWARD_API_KEY_FILE` names, is its key).
    - `failure_score`: what a judgment that still failed scores (flagged `judge_failed`): `"group_mean"`
      (default: its own group's mean as the server saw it from every worker; see `debate_reward._group`:
      it waits up to `group_wait_s` for a sibling to be judged, and a group none of whose rollouts could be
      judged scores `unjudged_score` for all, flagged `group_unjudged`), a number you chose, or None (raise
      `JudgeFailedError`: verl's V1 trainer then drops the rollout, its legacy trainer ends the step).
    - `on_unavailable`: `"fail"` (default) settles a server unreachable until the client's deadline (600 s)
      like a failed judgment; `"raise"` re-raises.
    - `trace_opener` (e.g. `"<think>\\n"`) or `tokenizer` (the policy's, to render its generation prompt):
      when the policy's chat template opens the reasoning trace in the prompt, the opener is put back in
      front of `solution_str` so that a response cut off inside the trace scores 0 (`truncated_reasoning`).
    """
    pool = Pool(async_client(client, api_key=api_key), graph, max_rounds=max_rounds, linger_s=linger_s)
    policy = StreamPolicy(group_wait_s, poll_s, unjudged_score)
    scorer = _Scorer(pool, failure_score, on_unavailable, trace_opener, tokenizer, chat_template_kwargs, policy)

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
    on_unavailable: str = "fail",
    trace_opener: Optional[str] = None,
    tokenizer: Any = None,
    chat_template_kwargs: Optional[Mapping[str, Any]] = None,
    api_key: Optional[str] = None,
    max_rounds: int = 2,
    linger_s: float = 0.05,
    group_wait_s: float = 600.0,
    poll_s: float = 2.0,
    unjudged_score: float = 0.5,
) -> Callable[..., Dict[str, Any]]:
    """Blocking twin of `verl_compute_score` (same arguments and answers), for a synchronous
    `compute_score`: verl runs it on a thread pool, one sample per call, and the samples of calls made at
    the same time from those threads share requests (one event loop on a daemon thread owns the pool)."""
    pool = Pool(async_client(client, api_key=api_key), graph, max_rounds=max_rounds, linger_s=linger_s)
    policy = StreamPolicy(group_wait_s, poll_s, unjudged_score)
    scorer = _Scorer(pool, failure_score, on_unavailable, trace_opener, tokenizer, chat_template_kwargs, policy)

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
# The key NEVER goes in reward_kwargs (verl prints its config and sends it to wandb): DEBATE_REWARD_API_KEY
# or DEBATE_REWARD_API_KEY_FILE on the workers. Env vars: DEBATE_REWARD_URL, DEBATE_REWARD_FAILURE_SCORE.

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
    base_url: Optional[str], failure_score: Any, graph: Optional[Graph], trace_opener: Optional[str],
    max_rounds: int, on_unavailable: str, kw: Mapping[str, Any],
) -> _Scorer:
    if "api_key" in kw:
        raise ValueError(
            "reward_kwargs.api_key is refused: verl prints its config and sends it to wandb. Set "
            "DEBATE_REWARD_API_KEY (or DEBATE_REWARD_API_KEY_FILE, a file holding the key) on the workers"
        )
    url = base_url or os.environ.get(URL_ENV)
    if not url:
        raise ValueError(f"set reward.custom_reward_function.reward_kwargs.base_url or {URL_ENV}")
    key = key_from_env()
    fs = _env_failure_score(failure_score)
    _check_failure_score(fs)
    cache_key = (url, key, repr(fs), repr(graph), trace_opener, max_rounds, on_unavailable)
    with _shared_lock:
        if cache_key not in _shared:
            pool = Pool(AsyncRewardClient(url, api_key=key), graph, linger_s=0.05, max_rounds=max_rounds)
            _shared[cache_key] = _Scorer(pool, fs, on_unavailable, trace_opener, None, None)
        return _shared[cache_key]


async def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    failure_score: Any = _UNSET,
    graph: Optional[Graph] = None,
    trace_opener: Optional[str] = None,
    max_rounds: int = 2,
    on_unavailable: str = "fail",
    **kw: Any,
) -> Dict[str, Any]:
    """Ready-made async `compute_score`, configured through verl's `reward_kwargs` (`base_url`,
    `failure_score`, `graph`, `trace_opener`, `max_rounds`, `on_unavailable`) or the env vars
    `DEBATE_REWARD_URL`, `DEBATE_REWARD_FAILURE_SCORE` (`group_mean`, the default; a number; `none` to
    raise). The key comes from `DEBATE_REWARD_API_KEY` or `DEBATE_REWARD_API_KEY_FILE`, never from
    `reward_kwargs` (refused). One pool per worker process and setting, shared by every call."""
    scorer = _scorer_for(base_url, failure_score, graph, trace_opener, max_rounds, on_unavailable, kw)
    return await scorer.ascore(solution_str, ground_truth, extra_info)


def compute_score_sync(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    *,
    base_url: Optional[str] = None,
    failure_score: Any = _UNSET,
    graph: Optional[Graph] = None,
    trace_opener: Optional[str] = None,
    max_rounds: int = 2,
    on_unavailable: str = "fail",
    **kw: Any,
) -> Dict[str, Any]:
    """Blocking twin of `compute_score` (pooled across the threads verl runs it on)."""
    scorer = _scorer_for(base_url, failure_score, graph, trace_opener, max_rounds, on_unavailable, kw)
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
