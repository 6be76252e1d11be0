"""TRL adapter: an async reward function for `GRPOTrainer(reward_funcs=[...])`.

Read against TRL 1.9.0 (`trl/trainer/grpo_trainer.py`, `trl/trainer/utils.py`,
`trl/experimental/async_grpo/async_rollout_worker.py`):

- `GRPOTrainer._calculate_rewards` runs every reward function for which `inspect.iscoroutinefunction` is
  true concurrently (`asyncio.gather` on its background loop, `.result()` in the training thread: an
  exception ends the step, and the run), as `func(prompts=..., completions=..., completion_ids=...,
  **dataset_columns, trainer_state=..., log_extra=..., log_metric=...)`, and turns None into NaN.
  Coroutine reward functions arrived with huggingface/trl#4567 (merged 18 Dec 2025), first released in
  TRL 0.27.0.
- Reward functions are combined per `multi_objective_aggregation`: `sum_then_normalize` (the default)
  `nansum`s the weighted rewards, so a NaN beside another function's value counts as 0, and masks only a
  row that is NaN everywhere; `normalize_then_sum` normalises each function per group with `nanmean` /
  `nanstd` first, so a NaN adds 0 (the group mean) to the sum. This adapter makes a failed judgment
  neutral under both by default (`on_failure="group_mean"`).
- Its name in the logs is `get_callable_name(func)`: a `functools.partial` is unwrapped to the wrapped
  function's `__name__`; anything else gives its own `__name__`. The function returned here is an object
  with its own `__name__` (default `debate_reward`, or `debate_reward_<graph>`), which TRL recognises as a
  coroutine function (Python >= 3.11) and which pickles (AsyncGRPOTrainer ships reward functions to a
  rollout worker process, which calls each with one group).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ._adapt import async_client
from ._chat import (
    completion_answer,
    question_from_prompt,
    strip_chat_tokens,
    trace_opened_by,
    with_prompt_trace,
)
from ._pool import Item, Outcome, Pool
from .client import Graph
from .errors import RewardUnavailableError

log = logging.getLogger("debate_reward.trl")

RewardFunc = Callable[..., Any]
"""`async (prompts, completions, **kwargs) -> list[float | None]` (or blocking with `sync=True`)."""

#: What TRL passes besides the dataset columns (not columns: never a question or a ground truth).
TRL_KWARGS = ("completion_ids", "trainer_state", "log_extra", "log_metric", "environments")

#: A completion message's parsed-out reasoning (transformers' `parse_response`): its trace was closed.
_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")

_names_in_use: Dict[str, int] = {}

#: The metrics every call logs through TRL's `log_metric`, as `<name>/<metric>` (fractions of the call).
METRICS = ("failed", "rejected", "unavailable")


def completion_text(completion: Any) -> str:
    """The idea a rollout proposes: the completion string, or for a chat completion its last message when
    that is the assistant's (even when empty: a real 0, `empty`); never a preamble before a tool call nor a
    tool's output (the server's `/verify` rule)."""
    return completion_answer(completion)


def prompt_text(prompt: Any) -> str:
    """The research question from a prompt: a chat-templated string's last user turn (else the string
    without control tokens), or a conversation's last user message (as the server's `/slime` reads it)."""
    if isinstance(prompt, (str, Sequence)):
        question = question_from_prompt(prompt)
        if question:
            return question
    raise TypeError("cannot find a question in the prompt; pass a question column instead")


def _column(kwargs: Mapping[str, Any], name: str, n: int) -> Optional[List[Any]]:
    if name not in kwargs:
        return None
    values = kwargs[name]
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        values = [values] * n  # a scalar broadcast to every completion
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


@dataclass(frozen=True)
class _Config:
    pool: Pool
    question_column: str
    ground_truth_column: str
    name: str
    on_unavailable: str
    on_failure: str
    trace_opener: Optional[str]
    chat_template: Any
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)


def _opener(cfg: _Config, prompt: Any, completion: Any, rendered: Dict[str, Optional[str]]) -> Optional[str]:
    """The trace opener the policy's prompt ended with: given, read off a string prompt, or off the chat
    template's rendering of a conversational prompt (`chat_template=` the policy's tokenizer). None when
    the completion's reasoning was already parsed out of it (its trace closed)."""
    if isinstance(completion, Sequence) and not isinstance(completion, str) and completion:
        last = completion[-1]
        if isinstance(last, Mapping) and any(last.get(k) for k in _REASONING_KEYS):
            return None
    if cfg.trace_opener is not None:
        return cfg.trace_opener
    if isinstance(prompt, str):
        return trace_opened_by(prompt)
    if cfg.chat_template is None:
        return None
    key = repr(prompt)
    if key not in rendered:
        text = cfg.chat_template.apply_chat_template(
            list(prompt), tokenize=False, add_generation_prompt=True, **dict(cfg.chat_template_kwargs)
        )
        rendered[key] = trace_opened_by(text) if isinstance(text, str) else None
    return rendered[key]


def _items(cfg: _Config, prompts: Sequence[Any], completions: Sequence[Any], kwargs: Mapping[str, Any]) -> List[Item]:
    n = len(completions)
    truths = _column(kwargs, cfg.ground_truth_column, n)
    if truths is None:
        available = sorted(k for k in kwargs if k not in TRL_KWARGS)
        raise KeyError(
            f"reward function {cfg.name!r} needs dataset column {cfg.ground_truth_column!r}; "
            f"got columns {available}"
        )
    questions = _column(kwargs, cfg.question_column, n)
    rendered: Dict[str, Optional[str]] = {}
    items = []
    for i, completion in enumerate(completions):
        truth = truths[i]
        question = questions[i] if questions is not None else None
        if isinstance(truth, Mapping):
            question = truth.get("question", question)
            truth = truth.get("ground_truth")
        if question is None:
            question = prompt_text(prompts[i])
        if not isinstance(truth, str) or not isinstance(question, str):
            raise TypeError(f"row {i}: question and ground truth must be strings")
        opener = _opener(cfg, prompts[i] if i < len(prompts) else None, completion, rendered)
        candidate = with_prompt_trace(strip_chat_tokens(completion_answer(completion)), opener)
        items.append(Item(question, truth, candidate))
    return items


def _value(cfg: _Config, outcome: Outcome) -> Optional[float]:
    if outcome.reward is not None or not outcome.failed:
        return outcome.reward
    if cfg.on_failure == "group_mean":
        return outcome.group_mean  # None when the whole group failed: NaN in every row of it
    return None


async def _score_rollouts(
    cfg: _Config, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> List[Optional[float]]:
    items = _items(cfg, prompts, completions, kwargs)
    try:
        outcomes = await cfg.pool.score(items)
    except RewardUnavailableError as exc:
        if cfg.on_unavailable == "raise":
            raise
        log.warning("%s: reward server unavailable, scoring %d rollouts None: %s", cfg.name, len(items), exc)
        _log_metrics(cfg, kwargs, failed=1.0, rejected=0.0, unavailable=1.0)
        return [None] * len(items)
    values = [_value(cfg, o) for o in outcomes]
    failed = sum(1 for o in outcomes if o.failed)
    if failed:
        log.warning(
            "%s: %d of %d judgments failed; %s", cfg.name, failed, len(outcomes),
            "given their group's mean" if cfg.on_failure == "group_mean" else "scored None",
        )
    n = max(len(outcomes), 1)
    rejected = sum(1 for o in outcomes if o.status == "rejected_input")
    _log_metrics(cfg, kwargs, failed=failed / n, rejected=rejected / n, unavailable=0.0)
    return values


def _log_metrics(cfg: _Config, kwargs: Mapping[str, Any], **fractions: float) -> None:
    """`<name>/failed`, `<name>/rejected` and `<name>/unavailable` through TRL's `log_metric`, the same three
    names on every path (judged, failed, unreachable server, an empty call): TRL >= 1.x gathers each pending
    metric name across ranks once per step (`accelerator.gather` per name in `sorted(_pending_metrics)`), so
    a rank that logged fewer names would make fewer collective calls than the others and hang them."""
    log_metric = kwargs.get("log_metric")
    if not callable(log_metric):
        return
    for what in METRICS:
        log_metric(f"{cfg.name}/{what}", float(fractions[what]))


def _score_rollouts_blocking(
    cfg: _Config, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> List[Optional[float]]:
    return asyncio.run(_score_rollouts(cfg, prompts, completions, **kwargs))


async def _reward_function(prompts: Any = None, completions: Any = None, **kwargs: Any) -> List[Optional[float]]:
    """The signature TRL sees (`inspect.signature` of a `RewardFunction`); never called itself."""
    raise NotImplementedError


def _blocking_reward_function(prompts: Any = None, completions: Any = None, **kwargs: Any) -> List[Optional[float]]:
    """As `_reward_function`, for `sync=True`."""
    raise NotImplementedError


class RewardFunction:
    """A named, picklable TRL reward function. `inspect.iscoroutinefunction` reads a function-like object
    through `__code__` (Python >= 3.11) and the coroutine mark (>= 3.12), so TRL awaits it; `__name__` is
    what TRL logs it as (`rewards/<name>/mean`)."""

    def __init__(self, cfg: _Config, name: str, blocking: bool = False) -> None:
        self.cfg = cfg
        self.blocking = blocking
        self.__name__ = name
        self.__qualname__ = name
        if not blocking and hasattr(inspect, "markcoroutinefunction"):
            inspect.markcoroutinefunction(self)

    @property
    def _entry(self) -> Callable[..., Any]:
        return _blocking_reward_function if self.blocking else _reward_function

    @property
    def __code__(self) -> Any:  # noqa: D401 - read by inspect
        return self._entry.__code__

    @property
    def __defaults__(self) -> Any:
        return self._entry.__defaults__

    @property
    def __kwdefaults__(self) -> Any:
        return self._entry.__kwdefaults__

    @property
    def __annotations__(self) -> Any:  # type: ignore[override]
        return self._entry.__annotations__

    def __call__(self, prompts: Sequence[Any] = (), completions: Sequence[Any] = (), **kwargs: Any) -> Any:
        if self.blocking:
            return _score_rollouts_blocking(self.cfg, prompts, completions, **kwargs)
        return _score_rollouts(self.cfg, prompts, completions, **kwargs)

    def __repr__(self) -> str:
        return f"<debate_reward TRL reward function {self.__name__!r}>"


def trl_reward_func(
    client: Any,
    question_column: str = "question",
    ground_truth_column: str = "ground_truth",
    *,
    graph: Optional[Graph] = None,
    name: Optional[str] = None,
    on_unavailable: str = "raise",
    on_failure: str = "group_mean",
    trace_opener: Optional[str] = None,
    chat_template: Any = None,
    chat_template_kwargs: Optional[Mapping[str, Any]] = None,
    api_key: Optional[str] = None,
    max_rounds: int = 2,
    sync: bool = False,
) -> RewardFunc:
    """Build an async TRL reward function `(prompts, completions, **kwargs) -> list[float | None]`.

    - `client`: an `AsyncRewardClient`, a `RewardClient` or a base URL (then `api_key`, else the env var
      `DEBATE_REWARD_API_KEY`, is its key).
    - The dataset needs a `ground_truth_column` (the paper abstract; a value may also be a mapping
      `{"ground_truth": ..., "question": ...}`). The question comes from `question_column` when the
      dataset has it, else from the prompt (a chat-templated string's last user turn, or a conversation's
      last user message).
    - The judged text is the completion string, or a chat completion's last message when it is the
      assistant's (an empty one is a real 0; a preamble before a tool call or a tool's output never is).
    - A prompt whose template opened a reasoning trace (`<think>` at the end of a string prompt; for a
      conversational prompt pass `chat_template=` the policy's tokenizer, or `trace_opener="<think>\\n"`)
      has the opener put back in front of the completion, so a completion cut off inside its trace is
      `truncated_reasoning` (a real 0) instead of judged as an idea.
    - The rollouts of a call go in `/v1/reward/batch` requests grouped by (question, ground truth); exactly
      `len(completions)` values come back, in order. Failed judgments are sent again `max_rounds` times.
    - `on_failure="group_mean"` (default): a judgment that still failed gets the mean reward of its group's
      judged rollouts in the same call, so its advantage is 0 whatever else TRL sums with it (a second reward
      function, `reward_weights`, either `multi_objective_aggregation`); a group that failed entirely stays
      None (NaN: constant in its group, no signal). `"none"`: None (NaN), which TRL's default aggregation
      counts as 0 beside another reward function.
    - `on_unavailable="raise"` (default) lets `RewardUnavailableError` (the server unreachable until the
      client's deadline, 600 s by default: a restart or a reschedule is waited out) stop training; `"none"`
      logs it and scores the call None. A 400 because of some rollouts scores those 0 and judges the rest;
      other 4xx raise (configuration bugs).
    - `name`: what TRL logs it as; default `debate_reward`, or `debate_reward_<graph>` for a preset graph.
    - `sync=True`: a blocking function instead, for TRL < 0.27 (it runs its own event loop per call, so do
      not call it from inside a running loop).
    """
    if on_unavailable not in ("raise", "none"):
        raise ValueError("on_unavailable must be 'raise' or 'none'")
    if on_failure not in ("none", "group_mean"):
        raise ValueError("on_failure must be 'group_mean' or 'none'")
    aclient = async_client(client, api_key=api_key)
    if name is None:
        name = f"debate_reward_{graph}" if isinstance(graph, str) else "debate_reward"
    if _names_in_use.get(name):
        log.warning(
            "a second TRL reward function named %r: TRL logs both under rewards/%s; pass name=...", name, name
        )
    _names_in_use[name] = _names_in_use.get(name, 0) + 1
    pool = Pool(aclient, graph, max_rounds=max_rounds, linger_s=0.0)
    cfg = _Config(
        pool, question_column, ground_truth_column, name, on_unavailable, on_failure, trace_opener,
        chat_template, dict(chat_template_kwargs or {}),
    )
    func = RewardFunction(cfg, name, blocking=sync)
    if not sync and not inspect.iscoroutinefunction(func):
        # Python < 3.11 reads only real functions: a partial, which TRL >= 1.x logs as `_score_rollouts`.
        log.warning("Python < 3.11: TRL will log %r as '_score_rollouts'", name)
        partial = functools.partial(_score_rollouts, cfg)
        partial.__name__ = name  # type: ignore[attr-defined]  # what TRL < 1.x read
        return partial
    return func


__all__ = ["RewardFunction", "TRL_KWARGS", "completion_text", "prompt_text", "trl_reward_func"]
