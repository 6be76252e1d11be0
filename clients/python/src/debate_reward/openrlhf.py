"""OpenRLHF adapter: `reward_func` for `--reward.remote_url /path/to/debate_reward/openrlhf.py`.

Read against OpenRLHF 0.11.0 (OpenRLHF/OpenRLHF, tag v0.11.0, `openrlhf/utils/agent.py`):

- `SingleTurnAgentExecutor.__init__` (191-200): a `--reward.remote_url` ending in `.py` is loaded with
  `importlib.util.spec_from_file_location("reward_func", path)` (so this file uses absolute imports only)
  and its `reward_func` is kept.
- `execute` decodes prompt + response with `skip_special_tokens=False` as the query and
  `_fetch_rewards_via_func` (308-320) calls `reward_func([query], [prompt], [label])` through
  `asyncio.to_thread`: ONE rollout per call, every rollout of every vLLM engine at once, so no call sees
  its group. It reads the dict's `rewards` (`scores`, else `rewards`, for dynamic filtering;
  `extra_logs`), and `samples_generator.py` makes `torch.tensor([value])` of each. An exception is logged
  and leaves the reward `None`, which crashes at `torch.cat` in the experience maker.
- Its built-in HTTP path (`_fetch_rewards_via_http`) sends no headers (no key), gives up after 5 tries 1 s
  apart and raises (the same `None`): use this file instead.

So `reward_func` never raises and never returns None: a judged rollout scores 1 / 0, a failed judgment its
own group's mean as the server saw it from every engine (`debate_reward._group`: the same rule as verl),
flagged in `extra_logs`. Configured by env vars on the engines: `DEBATE_REWARD_URL` (required),
`DEBATE_REWARD_API_KEY` or `DEBATE_REWARD_API_KEY_FILE`, `DEBATE_REWARD_GRAPH`, `DEBATE_REWARD_GROUP_WAIT_S`.
The client's deadline (600 s, retries with backoff) covers a server restart.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import unicodedata
from typing import Any, Dict, List, Optional, Sequence

from debate_reward._adapt import URL_ENV, key_from_env
from debate_reward._chat import (  # noqa: I001 - _HEADER_RE/_TOKEN_RE: the one list of control tokens
    _HEADER_RE,
    _TOKEN_RE,
    final_assistant_text,
    label_parts,
    question_from_prompt,
    strip_chat_tokens,
    trace_opened_by,
    with_prompt_trace,
)
from debate_reward._group import Settled, StreamPolicy, run_on, score_streamed
from debate_reward._pool import BlockingPool, Item, Pool
from debate_reward.aio import AsyncRewardClient

log = logging.getLogger("debate_reward.openrlhf")

#: `extra_logs` keys, one number per query (OpenRLHF logs each as a per-sample metric).
LOG_KEYS = ("judge_failed", "group_unjudged", "cached")

_state: Dict[str, Any] = {}
_lock = threading.Lock()

# Control tokens and role headers (a header with its role word first), as `_chat` knows them.
_CONTROL = re.compile(f"{_HEADER_RE.pattern}|{_TOKEN_RE.pattern}")


def _scorer() -> "tuple[BlockingPool, StreamPolicy]":
    with _lock:
        if "pool" not in _state:
            url = os.environ.get(URL_ENV)
            if not url:
                raise ValueError(f"set {URL_ENV} (the debate-reward server) on every vLLM engine")
            graph = os.environ.get("DEBATE_REWARD_GRAPH") or None
            pool = Pool(AsyncRewardClient(url, api_key=key_from_env()), graph, linger_s=0.05)
            _state["pool"] = BlockingPool(pool)
            _state["policy"] = StreamPolicy(group_wait_s=float(os.environ.get("DEBATE_REWARD_GROUP_WAIT_S") or 600))
        return _state["pool"], _state["policy"]


def _spans(text: str) -> Dict[int, int]:
    return {m.start(): m.end() for m in _CONTROL.finditer(text) if m.end() > m.start()}


def response_after_prompt(query: str, prompt: str) -> Optional[str]:
    """The response part of a query (prompt and response decoded together, control tokens kept), found
    despite control tokens and whitespace the two decodes differ by (a port of the server's
    `responseAfterPrompt`); None when the query does not start with the prompt."""
    wanted = [c for c in unicodedata.normalize("NFKC", strip_chat_tokens(prompt)) if not c.isspace()]
    spans = _spans(query)

    def skip(qi: int) -> int:
        while qi < len(query) and (qi in spans or query[qi].isspace()):
            qi = spans.get(qi, qi + 1)
        return qi

    qi = 0
    for want in wanted:
        qi = skip(qi)
        if qi >= len(query) or unicodedata.normalize("NFKC", query[qi]) != want:
            return None
        qi += 1
    # The prompt's own ending (`<|im_end|>\n<|im_start|>assistant\n`): as many control tokens as it has.
    tail_spans = _spans(prompt)
    last = max((i for i, c in enumerate(prompt) if not c.isspace() and not any(s <= i < e for s, e in tail_spans.items())),
               default=-1)
    for _ in range(len(_spans(prompt[last + 1:]))):
        at = qi
        while at < len(query) and query[at].isspace():
            at += 1
        if at not in spans:
            break
        qi = spans[at]
    return query[qi:]


def _item(query: str, prompt: Any, label: Any) -> Item:
    truth, question = label_parts(label)
    if not isinstance(truth, str):
        raise ValueError("a label is the ground truth or {ground_truth, question?}")
    if not isinstance(question, str) or not question.strip():
        question = question_from_prompt(prompt) if prompt is not None else ""
    response = response_after_prompt(query, prompt) if isinstance(prompt, str) else None
    if response is None:
        log.warning("the query does not start with its prompt; judging the text after its last assistant header")
        response = query
    answer = final_assistant_text(response)
    return Item(question, truth, with_prompt_trace(answer, trace_opened_by(prompt)))


def _logs(settled: Sequence[Settled]) -> Dict[str, List[float]]:
    return {
        "judge_failed": [float(s.judge_failed) for s in settled],
        "group_unjudged": [float(s.group_unjudged) for s in settled],
        "cached": [float(s.cached) for s in settled],
    }


def reward_func(queries: Sequence[str], prompts: Sequence[Any], labels: Sequence[Any], **kwargs: Any) -> Dict[str, Any]:
    """OpenRLHF's `reward_func`: `{"rewards": [...], "scores": [...], "extra_logs": {...}}`, one number per
    query. Never raises for a judge failure or an outage (OpenRLHF would train on `None` and crash)."""
    blocking, policy = _scorer()
    items = [_item(q, p, lab) for q, p, lab in zip(queries, prompts, labels)]
    settled: List[Settled] = [run_on(blocking._running_loop(), score_streamed(blocking.pool, it, policy))
                              for it in items]
    rewards = [float(s.score) for s in settled]
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": _logs(settled)}


__all__ = ["LOG_KEYS", "reward_func", "response_after_prompt"]
