"""slime reward functions for `--custom-rm-path`.

`slime_binary_rm`: the paper's binary rewards (one judgment per rollout), with or without `--group-rm`.
slime's own `remote_rm` posts one rollout per request through at most 64 connections; this sends the
rollouts slime hands over (one, a group, or a batch; calls that arrive together are pooled) as
`/v1/reward/batch` requests of up to MAX_CANDIDATES, so the server, not the client, sets the pace.

    # my_rm.py
    from debate_reward.slime import slime_binary_rm
    custom_rm = slime_binary_rm("http://HOST:8080")

    --custom-rm-path my_rm.custom_rm --label-key label            # optionally with --group-rm

`slime_group_rm`: one `/slime/rank` request per rollout group, graded rewards from a pairwise tournament
(Bradley-Terry scores in [0, 1]) instead of one binary judgment per rollout.

    group_rm = slime_group_rm("http://HOST:8080", schedule="circular")

    --group-rm --custom-rm-path my_rm.group_rm --label-key label

`SlimeReward`: per-sample (`/slime`) and group rewards whose requests carry a per-rollout tag, so that
slime's abort (over-sampling, partial rollouts) cancels the judgments still running instead of waiting for
them (slime's `abort` drains its pending generate-and-reward tasks):

    # my_rm.py
    from debate_reward.slime import SlimeReward, install_abort_hook
    reward = SlimeReward("http://HOST:8080")
    install_abort_hook(reward)          # wraps slime.rollout.sglang_rollout.abort
    rm = reward.rm                      # --custom-rm-path my_rm.rm

Each sample's `prompt` (text or chat messages), `response` and `label` (the abstract, or
`{"ground_truth", "question"}`) are read as `/slime` reads them. A rollout without a reward (a failed
judgment, or no successful comparison) fails the call after the client's retries, unless the server
sets FAILURE_REWARD.
"""

from __future__ import annotations

import functools
import logging
import uuid
from types import ModuleType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode

from ._adapt import async_client
from ._chat import label_parts, question_from_prompt, strip_chat_tokens, trace_opened_by, with_prompt_trace
from ._pool import Item, Pool
from .client import SCHEDULES, Graph
from .errors import JudgeFailedError, RewardProtocolError

log = logging.getLogger("debate_reward.slime")

#: How many times `slime_binary_rm` sends a failed judgment again by default (slime's `remote_rm` retries
#: `/slime`'s 503 up to 10 times).
DEFAULT_ROUNDS = 5


def _fields(sample: Any, i: int) -> Tuple[Any, Any, Any]:
    get = sample.get if isinstance(sample, dict) else (lambda k: getattr(sample, k, None))
    prompt, response, label = get("prompt"), get("response"), get("label")
    if response is None or label is None or prompt is None:
        raise TypeError(f"samples[{i}] needs prompt, response and label")
    return prompt, response, label


def group_body(samples: Sequence[Any]) -> Dict[str, Any]:
    """The `/slime/rank` body for slime `Sample` objects (or mappings with prompt / response / label)."""
    out: List[Dict[str, Any]] = []
    for i, s in enumerate(samples):
        prompt, response, label = _fields(s, i)
        out.append({"prompt": prompt, "response": response, "label": label})
    return {"samples": out}


def slime_group_rm(
    client: Any,
    *,
    schedule: str = "all_pairs",
    criterion: str = "match",
    reward_mode: str = "graded",
    top_k: Optional[int] = None,
    judges: int = 1,
) -> Callable[[Any, Sequence[Any]], Awaitable[List[float]]]:
    """An async `custom_rm(args, samples) -> list[float]` for slime's `--group-rm`.

    `client` is an `AsyncRewardClient` or a base URL. Rewards come back in sample order.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}")
    aclient = async_client(client)
    query: Dict[str, Any] = {"schedule": schedule, "criterion": criterion, "reward_mode": reward_mode, "judges": judges}
    if top_k is not None:
        query["top_k"] = top_k
    path = f"/slime/rank?{urlencode(query)}"

    async def group_rm(args: Any, samples: Sequence[Any]) -> List[float]:
        data, _ = await aclient._request("POST", path, group_body(samples))
        rewards = data.get("rewards") if isinstance(data, dict) else None
        if not isinstance(rewards, list) or len(rewards) != len(samples):
            raise RewardProtocolError(f"/slime/rank answered {len(rewards or [])} rewards for {len(samples)} samples")
        return [float(r) for r in rewards]

    return group_rm


def _sample_body(s: Any) -> Dict[str, Any]:
    return group_body([s])["samples"][0]


def _mark_aborted(sample: Any) -> None:
    """A slime `Sample` whose reward was cancelled is marked `ABORTED` (when its class has that status), so
    that a partial rollout puts it back and judges it later instead of keeping a completed sample with no
    reward (slime asserts a completed sample has one)."""
    aborted = getattr(getattr(type(sample), "Status", None), "ABORTED", None)
    if aborted is not None and hasattr(sample, "status"):
        try:
            sample.status = aborted
        except (AttributeError, TypeError):
            pass


class SlimeReward:
    """Rewards for slime whose requests carry the current rollout's tag (`x-reward-tag`).

    `rm(args, sample)` is a `--custom-rm-path` function (`/slime`, the binary reward; None when the
    judgment was cancelled), `group_rm(args, samples)` a `--group-rm` one (`/slime/rank`). `cancel()`
    cancels every judgment of the current rollout that no other request waits for (the server answers
    those requests at once with status `cancelled`); `next_rollout()` moves to a fresh tag.
    `install_abort_hook` calls both around slime's own abort.
    """

    def __init__(
        self,
        client: Any,
        *,
        graph: Optional[str] = None,
        tag_prefix: str = "slime",
        schedule: str = "all_pairs",
    ) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}")
        self.client = async_client(client)
        self._query = "" if graph is None else f"?{urlencode({'graph': graph})}"
        self._rank_query = f"?{urlencode({'schedule': schedule})}"
        # A run-unique prefix: two trainers on one server never cancel each other's rollouts.
        self._prefix = f"{tag_prefix}:{uuid.uuid4().hex[:12]}"
        self._rollout = 0
        # Every request through this client carries the current rollout's tag, also those of
        # `slime_binary_rm(reward.client)` (whose cancelled items come back None, not retried).
        self.client.sync.tag = self.tag

    @property
    def tag(self) -> str:
        """The tag of the current rollout's reward requests."""
        return f"{self._prefix}:{self._rollout}"

    def next_rollout(self) -> str:
        self._rollout += 1
        self.client.sync.tag = self.tag
        return self.tag

    async def rm(self, args: Any, sample: Any, **kwargs: Any) -> Optional[float]:
        data, _ = await self.client._request("POST", f"/slime{self._query}", _sample_body(sample), tag=self.tag)
        if not isinstance(data, dict) or "reward" not in data:
            raise RewardProtocolError("/slime answered no reward")
        reward = data["reward"]
        if reward is None and data.get("status") == "cancelled":
            _mark_aborted(sample)
        return None if reward is None else float(reward)

    async def group_rm(self, args: Any, samples: Sequence[Any], **kwargs: Any) -> List[Optional[float]]:
        path = f"/slime/rank{self._rank_query}"
        data, _ = await self.client._request("POST", path, group_body(samples), tag=self.tag)
        rewards = data.get("rewards") if isinstance(data, dict) else None
        if not isinstance(rewards, list) or len(rewards) != len(samples):
            raise RewardProtocolError(f"/slime/rank answered {len(rewards or [])} rewards for {len(samples)} samples")
        return [None if r is None else float(r) for r in rewards]

    async def cancel(self) -> Dict[str, Any]:
        """Cancels the current rollout's judgments; `{"cancelled_judgments", "cancelled_requests"}`."""
        return await self.client.cancel(tag=self.tag)


def install_abort_hook(reward: SlimeReward, module: Optional[ModuleType] = None) -> Callable[..., Any]:
    """Wraps `module.abort` (default: `slime.rollout.sglang_rollout`, whose `generate_rollout_async` calls
    it by name) so that an abort first cancels the rollout's reward requests, then runs slime's own abort
    (which waits for its pending tasks: they now return at once), then moves to a fresh tag. Requests a
    pending task sends during the abort carry the cancelled tag and are answered `cancelled` at once.
    Returns the original `abort`."""
    if module is None:
        import importlib

        module = importlib.import_module("slime.rollout.sglang_rollout")
    original = getattr(module, "abort")

    @functools.wraps(original)
    async def abort(*a: Any, **kw: Any) -> Any:
        try:
            await reward.cancel()
        except Exception:  # noqa: BLE001 - a failed cancel must not break slime's own abort
            pass
        try:
            return await original(*a, **kw)
        finally:
            reward.next_rollout()

    setattr(module, "abort", abort)
    return original


def _item(sample: Any, i: int) -> Item:
    """One rollout as `/slime` would judge it: the label's (or the prompt's) question, and the response
    without control tokens behind the trace opener a string prompt ends with (`<think>` from a Qwen3 or
    DeepSeek-R1 template), so a rollout cut off inside its trace is `truncated_reasoning`, a real 0."""
    prompt, response, label = _fields(sample, i)
    ground_truth, question = label_parts(label)
    if question is None:
        question = question_from_prompt(prompt)
    if not isinstance(ground_truth, str) or not isinstance(question, str) or not isinstance(response, str):
        raise TypeError(f"samples[{i}]: the label's ground truth and question, and the response, must be strings")
    return Item(question, ground_truth, with_prompt_trace(strip_chat_tokens(response), trace_opened_by(prompt)))


class _BinaryRM:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    async def __call__(self, args: Any, samples: Any) -> Union[Optional[float], List[Optional[float]]]:
        one = not isinstance(samples, (list, tuple))
        batch = [samples] if one else list(samples)
        items = [_item(s, i) for i, s in enumerate(batch)]  # refuses a bad sample before sending any
        outcomes = await self.pool.score(items)
        failed = [o for o in outcomes if o.failed and o.failure_reward is None]
        if failed:
            raise JudgeFailedError(
                f"{len(failed)} of {len(outcomes)} judgments failed after {self.pool.max_rounds + 1} tries (no "
                "reward to give; set FAILURE_REWARD on the server to answer a fixed reward instead)",
                code="RW_JUDGE_FAILED",
                details={"failed": [{"status": o.status, "error": o.error} for o in failed][:50]},
                attempts=self.pool.max_rounds + 1,
            )
        rewards: List[Optional[float]] = []
        for sample, outcome in zip(batch, outcomes):
            if outcome.status == "cancelled":
                _mark_aborted(sample)  # POST /v1/cancel (SlimeReward's abort hook): no reward, no retry
                rewards.append(None)
            else:
                rewards.append(outcome.reward if outcome.reward is not None else outcome.failure_reward)
        return rewards[0] if one else rewards


def slime_binary_rm(
    client: Any,
    graph: Optional[Graph] = None,
    *,
    max_candidates: int = 1024,
    max_body_bytes: int = 4_000_000,
    linger_s: float = 0.02,
    max_rounds: Optional[int] = None,
    api_key: Optional[str] = None,
) -> Callable[..., Awaitable[Union[float, List[float]]]]:
    """An async `custom_rm(args, samples)` for slime's `--custom-rm-path`, binary rewards (1.0 / 0.0).

    slime calls it with one `Sample` (-> a float) or, under `--group-rm` or a fanned-out rollout, a list
    (-> a list of floats, in order). Rollouts from calls that arrive within `linger_s` of each other are
    sent together, grouped by (question, ground truth), in `/v1/reward/batch` requests of at most
    `max_candidates` rollouts (the server's MAX_CANDIDATES, default 1024) and about `max_body_bytes`.

    `client` is an `AsyncRewardClient`, a `RewardClient` or a base URL (then `api_key`, else the env var
    `DEBATE_REWARD_API_KEY`, is its key); `graph` a preset name or inline spec (None: the server's
    DEFAULT_GRAPH). Each rollout is read as `/slime` reads it, the trace opener a string prompt ends with
    included. A failed judgment is sent again up to `max_rounds` times (default: 5, or the client's
    `max_retries` when it sets one), 1 s apart plus jitter, then the call raises `JudgeFailedError` (as
    `/slime` answers 503 and slime's `remote_rm` retries, then raises) — unless the server sets
    FAILURE_REWARD, whose value it then returns. A server that is down is waited for until the client's
    deadline (600 s by default), then the call raises `RewardUnavailableError`. A rollout the server
    refuses (an older server's 400 for a NUL byte) scores 0; a sample whose label it refuses fails only
    its own call.
    """
    aclient = async_client(client, api_key=api_key)
    if max_rounds is None:
        max_rounds = DEFAULT_ROUNDS if aclient.sync.retry.max_retries is None else aclient.sync.retry.max_retries
    pool = Pool(
        aclient, graph, max_candidates=max_candidates, max_body_bytes=max_body_bytes, linger_s=linger_s,
        max_rounds=max_rounds,
    )
    rm = _BinaryRM(pool)

    async def custom_rm(args: Any, samples: Any, **kwargs: Any) -> Union[float, List[float]]:
        # slime forwards its own keyword arguments to a custom rm (`rm_function(args, sample, **kwargs)`).
        return await rm(args, samples)

    return custom_rm
