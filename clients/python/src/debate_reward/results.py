"""Typed views of the server's responses (DESIGN §5), checked against the contract on the way in.

A failed judgment (status `judge_error`, `timeout` or `overloaded`) has `reward is None` — never 0. The
parser refuses a response that attaches a number to a failed judgment (RewardProtocolError), so a server
regression that turns failures into zeros stops a training run instead of silently teaching it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .errors import RewardProtocolError

#: Judgment statuses that carry no reward.
FAILED_STATUSES = frozenset({"judge_error", "timeout", "overloaded", "cancelled"})
#: Judgment statuses that carry a reward (`rejected_input` is a real 0: degenerate or too-long idea).
OK_STATUSES = frozenset({"ok", "rejected_input"})


@dataclass(frozen=True)
class ItemResult:
    """One candidate's judgment, as listed in `results`."""

    reward: Optional[float]
    status: str
    verdict: Optional[str] = None
    score: Optional[float] = None
    cached: bool = False
    calls: Optional[int] = None
    latency_ms: Optional[float] = None
    judgment_id: Optional[str] = None
    error: Optional[str] = None
    """Why the judgment failed (message), for failed items."""
    error_code: Optional[str] = None
    """The `RW_*` code of the failure, e.g. `RW_JUDGE_UNAVAILABLE`."""
    reason: Optional[str] = None
    """Why a candidate was rejected without an LLM call (`rejected_input`), e.g. `too_short`."""
    reasoning_chars: Optional[int] = None
    """Length of the candidate's reasoning trace (never judged; only the answer after it is), 0 without one."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    votes: List[Mapping[str, Any]] = field(default_factory=list)
    """Each member's position: `{node, role, round, stance, confidence}` (also for cached results)."""

    @property
    def failed(self) -> bool:
        return self.reward is None


@dataclass(frozen=True)
class GroupResult:
    """The answer to one `POST /v1/reward` (one GRPO group)."""

    rewards: List[Optional[float]]
    scores: List[Optional[float]]
    results: List[ItemResult]
    mean: Optional[float]
    std: Optional[float]
    advantages: List[Optional[float]]
    """Dr. GRPO style: reward minus the mean over the non-failed items; None for failed items."""
    n_ok: int
    n_failed: int
    graph: Mapping[str, Any]
    backend: Optional[str]
    usage: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False)
    judge_model: Any = None
    """The model id(s) the judge backend reported (a list when a committee mixes models)."""
    prompt_version: Optional[str] = None
    graph_hash: Optional[str] = None


@dataclass(frozen=True)
class JudgeResult:
    """The answer to one `POST /v1/judge`: a single judgment with its debate transcript."""

    reward: Optional[float]
    status: str
    verdict: Optional[str]
    score: Optional[float]
    transcript: List[Mapping[str, Any]]
    """One message per node answer and round (role, stance, confidence, validated output, tokens...)."""
    graph: Mapping[str, Any]
    backend: Optional[str]
    cached: bool
    error: Optional[str]
    error_code: Optional[str]
    reason: Optional[str]
    rounds: Optional[int]
    stop_reason: Optional[str]
    usage: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False)
    votes: List[Mapping[str, Any]] = field(default_factory=list)
    judge_model: Any = None
    prompt_version: Optional[str] = None
    graph_hash: Optional[str] = None

    @property
    def failed(self) -> bool:
        return self.reward is None


def group_stats(rewards: Sequence[Optional[float]]) -> Dict[str, Any]:
    """Mean, population std and Dr. GRPO advantages over the non-failed rewards (None when all failed)."""
    ok = [r for r in rewards if r is not None]
    if not ok:
        return {"mean": None, "std": None, "advantages": [None] * len(rewards)}
    mean = sum(ok) / len(ok)
    std = math.sqrt(sum((r - mean) ** 2 for r in ok) / len(ok))
    return {"mean": mean, "std": std, "advantages": [None if r is None else r - mean for r in rewards]}


def _fail(message: str, attempts: int) -> RewardProtocolError:
    return RewardProtocolError(f"response breaks the API contract: {message}", status=200, attempts=attempts)


def _number(value: Any, what: str, attempts: int) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(f"{what} is {value!r}, expected a number or null", attempts)
    return float(value)


def _opt_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _error_text(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        code, message = value.get("code"), value.get("message")
        return ": ".join(str(p) for p in (code, message) if p) or None
    return None


def _item(reward: Optional[float], raw: Mapping[str, Any], where: str, attempts: int) -> ItemResult:
    status = raw.get("status")
    if not isinstance(status, str):
        raise _fail(f"{where}.status is {status!r}", attempts)
    if "reward" in raw and _number(raw.get("reward"), f"{where}.reward", attempts) != reward:
        raise _fail(f"{where}.reward {raw.get('reward')!r} differs from rewards entry {reward!r}", attempts)
    if status in FAILED_STATUSES and reward is not None:
        raise _fail(
            f"{where} failed ({status}) but carries reward {reward!r}; failures must be null", attempts
        )
    if status in OK_STATUSES and reward is None:
        raise _fail(f"{where} has status {status} but a null reward", attempts)
    calls = raw.get("calls")
    return ItemResult(
        reward=reward,
        status=status,
        verdict=_opt_str(raw.get("verdict")),
        score=_number(raw.get("score"), f"{where}.score", attempts),
        cached=raw.get("cached") is True,
        calls=calls if isinstance(calls, int) and not isinstance(calls, bool) else None,
        latency_ms=_number(raw.get("latency_ms"), f"{where}.latency_ms", attempts),
        judgment_id=_opt_str(raw.get("judgment_id")),
        error=_error_text(raw.get("error")),
        error_code=_opt_str(raw.get("error_code"))
        or (_opt_str(raw["error"].get("code")) if isinstance(raw.get("error"), Mapping) else None),
        reason=_opt_str(raw.get("reason")),
        reasoning_chars=_opt_int(raw.get("reasoning_chars")),
        raw=raw,
        votes=[v for v in raw.get("votes", []) if isinstance(v, Mapping)] if isinstance(raw.get("votes"), list) else [],
    )


def parse_group(data: Any, n_candidates: int, attempts: int = 1, where: str = "response") -> GroupResult:
    if not isinstance(data, Mapping):
        raise _fail(f"{where} is {type(data).__name__}, expected an object", attempts)
    rewards_raw = data.get("rewards")
    if not isinstance(rewards_raw, list) or len(rewards_raw) != n_candidates:
        raise _fail(f"{where}.rewards should be a list of {n_candidates}, got {rewards_raw!r}", attempts)
    rewards = [_number(v, f"{where}.rewards[{i}]", attempts) for i, v in enumerate(rewards_raw)]

    results_raw = data.get("results")
    if not isinstance(results_raw, list) or len(results_raw) != n_candidates:
        raise _fail(f"{where}.results should be a list of {n_candidates}", attempts)
    results = []
    for i, (reward, raw) in enumerate(zip(rewards, results_raw)):
        if not isinstance(raw, Mapping):
            raise _fail(f"{where}.results[{i}] is not an object", attempts)
        results.append(_item(reward, raw, f"{where}.results[{i}]", attempts))

    scores_raw = data.get("scores")
    if isinstance(scores_raw, list) and len(scores_raw) == n_candidates:
        scores = [_number(v, f"{where}.scores[{i}]", attempts) for i, v in enumerate(scores_raw)]
    else:
        scores = [r.score for r in results]

    local = group_stats(rewards)
    group = data.get("group")
    if isinstance(group, Mapping):
        advantages_raw = group.get("advantages")
        if not isinstance(advantages_raw, list) or len(advantages_raw) != n_candidates:
            raise _fail(f"{where}.group.advantages should be a list of {n_candidates}", attempts)
        advantages = [
            _number(v, f"{where}.group.advantages[{i}]", attempts) for i, v in enumerate(advantages_raw)
        ]
        for i, (adv, reward) in enumerate(zip(advantages, rewards)):
            if (adv is None) != (reward is None):
                raise _fail(f"{where}.group.advantages[{i}] is {adv!r} for reward {reward!r}", attempts)
        mean = _number(group.get("mean"), f"{where}.group.mean", attempts)
        std = _number(group.get("std"), f"{where}.group.std", attempts)
    else:
        advantages, mean, std = local["advantages"], local["mean"], local["std"]

    n_failed = sum(1 for r in rewards if r is None)
    graph = data.get("graph")
    usage = data.get("usage")
    return GroupResult(
        rewards=rewards,
        scores=scores,
        results=results,
        mean=mean,
        std=std,
        advantages=advantages,
        n_ok=n_candidates - n_failed,
        n_failed=n_failed,
        graph=graph if isinstance(graph, Mapping) else {},
        backend=_opt_str(data.get("backend")),
        usage=usage if isinstance(usage, Mapping) else {},
        raw=data,
        judge_model=data.get("judge_model"),
        prompt_version=_opt_str(data.get("prompt_version")),
        graph_hash=_opt_str(data.get("graph_hash")),
    )


def parse_batch(data: Any, sizes: Sequence[int], attempts: int = 1) -> List[GroupResult]:
    if not isinstance(data, Mapping):
        raise _fail(f"batch response is {type(data).__name__}, expected an object", attempts)
    groups = data.get("groups")
    if not isinstance(groups, list) or len(groups) != len(sizes):
        raise _fail(f"batch response.groups should be a list of {len(sizes)}", attempts)
    return [parse_group(g, n, attempts, f"groups[{i}]") for i, (g, n) in enumerate(zip(groups, sizes))]


def parse_judgment(data: Any, attempts: int = 1) -> JudgeResult:
    if not isinstance(data, Mapping):
        raise _fail(f"judge response is {type(data).__name__}, expected an object", attempts)
    # Accept both a flat judgment and one nested under "result" (the transcript may sit at either level).
    inner = data.get("result") if isinstance(data.get("result"), Mapping) else data
    reward = _number(inner.get("reward"), "reward", attempts)
    item = _item(reward, inner, "judgment", attempts)
    transcript = inner.get("transcript", data.get("transcript"))
    if not isinstance(transcript, list):
        raise _fail("judge response has no transcript list", attempts)
    graph = inner.get("graph", data.get("graph"))
    usage = inner.get("usage", data.get("usage"))
    rounds = inner.get("rounds")
    return JudgeResult(
        reward=reward,
        status=item.status,
        verdict=item.verdict,
        score=item.score,
        transcript=[m for m in transcript if isinstance(m, Mapping)],
        graph=graph if isinstance(graph, Mapping) else {},
        backend=_opt_str(inner.get("backend", data.get("backend"))),
        cached=item.cached,
        error=item.error,
        error_code=item.error_code,
        reason=item.reason,
        rounds=rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None,
        stop_reason=_opt_str(inner.get("stop_reason")),
        usage=usage if isinstance(usage, Mapping) else {},
        votes=item.votes,
        judge_model=data.get("judge_model"),
        prompt_version=_opt_str(data.get("prompt_version")),
        graph_hash=_opt_str(data.get("graph_hash")),
        raw=data,
    )
