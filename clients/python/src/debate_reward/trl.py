"""TRL adapter: an async reward function for `GRPOTrainer(reward_funcs=[...])`.

TRL (since huggingface/trl#4567, TRL >= 0.26 and every 1.x release) detects coroutine reward functions
with `asyncio.iscoroutinefunction`, runs them on a background event loop with `asyncio.gather`, calls
them as `func(prompts=..., completions=..., completion_ids=..., **dataset_columns)` and turns `None`
into NaN (an unscored sample, not a zero). That is exactly the contract implemented here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .aio import AsyncRewardClient
from .client import Graph, RewardClient
from .errors import RewardUnavailableError

log = logging.getLogger("debate_reward.trl")

RewardFunc = Callable[..., Any]
"""`async (prompts, completions, **kwargs) -> list[float | None]` (or blocking with `sync=True`)."""


def _message_text(message: Any) -> str:
    if not isinstance(message, Mapping):
        return str(message)
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # multimodal parts: [{"type": "text", "text": ...}, ...]
        return "".join(
            part.get("text", "") if isinstance(part, Mapping) else str(part)
            for part in content
            if not isinstance(part, Mapping) or part.get("type", "text") == "text"
        )
    return str(content)


def completion_text(completion: Any) -> str:
    """The idea a rollout proposes: the completion string, or for conversational completions (a list
    of messages) the content of the last assistant message (tool calls and tool results before it are
    the path, not the answer)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _message_text(completion)
    if isinstance(completion, Sequence):
        messages = list(completion)
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == "assistant" and _message_text(message):
                return _message_text(message)
        return _message_text(messages[-1]) if messages else ""
    raise TypeError(f"unsupported completion type {type(completion).__name__}")


def prompt_text(prompt: Any) -> str:
    """The research question from a prompt: the string itself, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(list(prompt)):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return _message_text(message)
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
    client: AsyncRewardClient
    question_column: str
    ground_truth_column: str
    graph: Optional[Graph]
    name: str
    on_unavailable: str
    on_failure: str


async def _score_rollouts(
    cfg: _Config, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> List[Optional[float]]:
    n = len(completions)
    truths = _column(kwargs, cfg.ground_truth_column, n)
    if truths is None:
        available = sorted(k for k in kwargs if k not in ("completion_ids", "trainer_state"))
        raise KeyError(
            f"reward function {cfg.name!r} needs dataset column {cfg.ground_truth_column!r}; "
            f"got columns {available}"
        )
    questions = _column(kwargs, cfg.question_column, n)

    groups: Dict[Tuple[str, str], List[int]] = {}
    texts: List[str] = []
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
        groups.setdefault((question, truth), []).append(i)
        texts.append(completion_text(completion))

    async def score(key: Tuple[str, str], indices: List[int]) -> List[Optional[float]]:
        try:
            rewards = await cfg.client.reward(key[0], key[1], [texts[i] for i in indices], graph=cfg.graph)
        except RewardUnavailableError as exc:
            if cfg.on_unavailable == "raise":
                raise
            log.warning("reward server unavailable, scoring %d rollouts None: %s", len(indices), exc)
            return [None] * len(indices)
        if cfg.on_failure == "group_mean":
            ok = [r for r in rewards if r is not None]
            if ok and len(ok) < len(rewards):
                mean = sum(ok) / len(ok)
                rewards = [mean if r is None else r for r in rewards]
        return rewards

    out: List[Optional[float]] = [None] * n
    scored = await asyncio.gather(*(score(key, idx) for key, idx in groups.items()))
    for indices, rewards in zip(groups.values(), scored):
        for i, reward in zip(indices, rewards):
            out[i] = reward
    return out


def _score_rollouts_blocking(
    cfg: _Config, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> List[Optional[float]]:
    return asyncio.run(_score_rollouts(cfg, prompts, completions, **kwargs))


def trl_reward_func(
    client: Union[AsyncRewardClient, RewardClient, str],
    question_column: str = "question",
    ground_truth_column: str = "ground_truth",
    *,
    graph: Optional[Graph] = None,
    name: str = "debate_reward",
    on_unavailable: str = "raise",
    on_failure: str = "none",
    sync: bool = False,
) -> RewardFunc:
    """Build an async TRL reward function `(prompts, completions, **kwargs) -> list[float | None]`.

    - The dataset needs a `ground_truth_column` (the paper abstract). A value may also be a mapping
      `{"ground_truth": ..., "question": ...}`.
    - The question comes from `question_column` when the dataset has it, else from the prompt (the
      prompt string, or the last user message of a conversational prompt).
    - Completions may be plain strings or conversational message lists.
    - Rollouts are grouped by (question, ground truth): one `/v1/reward` call per group, all groups in
      flight concurrently; a group split across two calls is simply two smaller groups. Exactly
      `len(completions)` values come back, in order; None marks a failed judgment (TRL: NaN, skipped).
    - `on_unavailable="raise"` (default) lets `RewardUnavailableError` (server down or overloaded
      through every retry) stop training; `"none"` logs it and scores the affected group None.
      4xx errors always raise: they are configuration bugs.
    - `on_failure="none"` (default) returns None for a failed judgment. Beware: GRPOTrainer sums the
      reward functions with `nansum`, so a rollout for which *every* reward function returned None
      ends up with reward 0 (TRL logs a warning) and a negative advantage next to successful peers.
      `on_failure="group_mean"` returns the mean of the group's successful rewards instead, which
      gives a failed rollout zero advantage (exactly under Dr. GRPO; the group std shrinks slightly
      under std-scaled GRPO). A group that failed entirely stays None (all 0 in TRL: no signal).
    - `sync=True` returns a blocking function instead, for TRL releases without async reward
      functions (it runs its own event loop per call, so do not call it from inside a running loop).

    The result is a `functools.partial` of a module-level function (named `name` for TRL's logs), so
    it pickles: TRL's AsyncGRPOTrainer (1.6+) ships reward functions to a rollout worker process.
    """
    if on_unavailable not in ("raise", "none"):
        raise ValueError("on_unavailable must be 'raise' or 'none'")
    if on_failure not in ("none", "group_mean"):
        raise ValueError("on_failure must be 'none' or 'group_mean'")
    if isinstance(client, str):
        aclient = AsyncRewardClient(client)
    elif isinstance(client, RewardClient):
        aclient = AsyncRewardClient.from_client(client)
    elif isinstance(client, AsyncRewardClient):
        aclient = client
    else:
        raise TypeError("client must be an AsyncRewardClient, a RewardClient or a base URL")
    cfg = _Config(aclient, question_column, ground_truth_column, graph, name, on_unavailable, on_failure)
    func = functools.partial(_score_rollouts_blocking if sync else _score_rollouts, cfg)
    # TRL names the logged reward column after __name__ (partial objects take attributes).
    func.__name__ = name  # type: ignore[attr-defined]
    func.__qualname__ = name  # type: ignore[attr-defined]
    return func
