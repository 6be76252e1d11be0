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
`{"ground_truth", "question"}`) are read as `/slime` reads them (a multi-turn response: its final assistant
turn). A rollout without a judgment (failed, cancelled, no successful comparison, the server unreachable
until the client's deadline) gets a float, its group's judged mean, and slime's per-sample loss mask
(`remove_sample`), never an exception (slime ends the run on one) nor a changed status.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import replace
from types import ModuleType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode

from ._adapt import async_client
from ._chat import (
    label_parts,
    question_from_prompt,
    split_final_assistant,
    strip_chat_tokens,
    trace_opened_by,
    with_prompt_trace,
)
from ._pool import Item, Outcome, Pool
from .client import SCHEDULES, Graph
from .errors import JudgeFailedError, RewardProtocolError, RewardServerError, RewardUnavailableError

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


async def _rank_rewards(
    aclient: Any, path: str, samples: Sequence[Any], group_fill: GroupFill, tag: Optional[str] = None
) -> List[float]:
    """`/slime/rank` for one group: a float per sample; a sample without a reward (no successful comparison,
    a cancel, the server unreachable until the deadline) is masked at the group's mean (`_fill`)."""
    items = [_item(s, i) for i, s in enumerate(samples)]
    try:
        kw = {} if tag is None else {"tag": tag}
        data, _ = await aclient._request("POST", path, group_body(samples), **kw)
    except (RewardUnavailableError, JudgeFailedError) as exc:
        return _fill(group_fill, samples, items, [_unavailable(exc)] * len(samples))
    rewards = data.get("rewards") if isinstance(data, dict) else None
    if not isinstance(rewards, list) or len(rewards) != len(samples):
        raise RewardProtocolError(f"/slime/rank answered {len(rewards or [])} rewards for {len(samples)} samples")
    results = data.get("results")
    if not isinstance(results, list) or len(results) != len(rewards):
        results = [{"status": "ok" if r is not None else "judge_error"} for r in rewards]
    outcomes = [_answer_outcome(r, res.get("status") if isinstance(res, dict) else None)
                for r, res in zip(rewards, results)]
    return _fill(group_fill, samples, items, outcomes)


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

    group_fill = GroupFill()

    async def group_rm(args: Any, samples: Sequence[Any], **kwargs: Any) -> List[float]:
        return await _rank_rewards(aclient, path, samples, group_fill)

    return group_rm


def _sample_body(s: Any) -> Dict[str, Any]:
    return group_body([s])["samples"][0]


#: Where a masked sample says why (`sample.metadata[METADATA_KEY]`): `{"status", "error", "masked": True}`.
METADATA_KEY = "debate_reward"


def _set(sample: Any, name: str, value: Any) -> None:
    if isinstance(sample, dict):
        sample[name] = value
        return
    try:
        setattr(sample, name, value)
    except (AttributeError, TypeError):
        pass


def _metadata(sample: Any) -> Optional[Dict[str, Any]]:
    meta = sample.get("metadata") if isinstance(sample, dict) else getattr(sample, "metadata", None)
    if meta is None:
        _set(sample, "metadata", {})
        meta = sample.get("metadata") if isinstance(sample, dict) else getattr(sample, "metadata", None)
    return meta if isinstance(meta, dict) else None


def _mask(sample: Any, status: str, error: Optional[str]) -> None:
    """slime >= 0.3.1's per-sample loss mask: `remove_sample = True` zeroes the sample's loss mask
    (`RolloutManager._convert_samples_to_train_data`). Its status is never touched: a completed sample marked
    ABORTED would be generated again past its stop token under `--partial-rollout` (`generate` takes
    PENDING or ABORTED samples and appends to their response)."""
    _set(sample, "remove_sample", True)
    meta = _metadata(sample)
    if meta is not None:
        meta[METADATA_KEY] = {"status": status, "error": error, "masked": True}


def _unmask(sample: Any) -> None:
    """A sample this adapter masked and now judged (slime re-scores a `--group-rm` group it put back)."""
    meta = _metadata(sample)
    if meta is not None and isinstance(meta.get(METADATA_KEY), dict) and meta[METADATA_KEY].get("masked"):
        del meta[METADATA_KEY]
        _set(sample, "remove_sample", False)


GroupKey = Tuple[Any, str, str]


def _group_key(sample: Any, item: Item) -> GroupKey:
    """A rollout group: slime's `group_index` (the prompt's index in the rollout), and its question and
    ground truth (a data source without group indices: one group per prompt)."""
    index = sample.get("group_index") if isinstance(sample, dict) else getattr(sample, "group_index", None)
    return (index, item.question, item.ground_truth)


class _Group:
    __slots__ = ("judged", "masked", "at")

    def __init__(self, at: float) -> None:
        self.judged: List[float] = []
        self.masked: List[Tuple[Any, float]] = []
        self.at = at


class GroupFill:
    """The value a masked sample carries: the mean of its group's judged rewards, kept current as the
    group's other samples are judged (slime rewards a group's samples one by one without `--group-rm`, and
    gathers them all before it uses any). slime puts every reward of a group, masked or not, into the group
    normalisation (`_post_process_rewards`), so the judged mean leaves the others' advantages where their own
    rewards put them; a 0 or a constant would move them. Bounded: `max_groups` groups, each kept `window_s`."""

    def __init__(self, max_groups: int = 8192, window_s: float = 3600.0) -> None:
        self.max_groups, self.window_s = max_groups, window_s
        self._groups: "OrderedDict[GroupKey, _Group]" = OrderedDict()
        self._lock = threading.Lock()

    def _group(self, key: GroupKey) -> _Group:
        now = time.monotonic()
        group = self._groups.get(key)
        if group is None or now - group.at > self.window_s:
            group = self._groups[key] = _Group(now)
        self._groups.move_to_end(key)
        while len(self._groups) > self.max_groups:
            self._groups.popitem(last=False)
        return group

    def judged(self, key: GroupKey, sample: Any, reward: float) -> None:
        with self._lock:
            group = self._group(key)
            group.judged.append(reward)
            group.masked = [(s, f) for s, f in group.masked if s is not sample]
            mean = sum(group.judged) / len(group.judged)
            for other, _ in group.masked:
                _set(other, "reward", mean)
        _unmask(sample)

    def masked(self, key: GroupKey, sample: Any, fallback: float) -> float:
        """Records `sample` as masked in its group; returns the value it carries now (the group's judged mean,
        else `fallback`), which later judgments in its group update in place."""
        with self._lock:
            group = self._group(key)
            if not any(s is sample for s, _ in group.masked):
                group.masked.append((sample, fallback))
            return sum(group.judged) / len(group.judged) if group.judged else fallback


def _fill(group_fill: GroupFill, samples: Sequence[Any], items: Sequence[Item], outcomes: Sequence[Outcome]) -> List[float]:
    """Every sample's float: its reward when judged (or rejected: a real 0), else — failed, cancelled, the
    server unreachable — masked (`_mask`) at its group's judged mean (`GroupFill`; the pool's recent mean of
    the same prompt, then the server's FAILURE_REWARD, then 0 while nothing of it was judged)."""
    keys = [_group_key(s, item) for s, item in zip(samples, items)]
    for sample, key, outcome in zip(samples, keys, outcomes):
        if outcome.reward is not None:
            group_fill.judged(key, sample, outcome.reward)
    rewards: List[float] = []
    for sample, key, outcome in zip(samples, keys, outcomes):
        if outcome.reward is not None:
            rewards.append(outcome.reward)
            continue
        _mask(sample, outcome.status, outcome.error)
        fallback = next((v for v in (outcome.group_mean, outcome.failure_reward) if v is not None), 0.0)
        rewards.append(float(group_fill.masked(key, sample, fallback)))
    masked = sum(1 for o in outcomes if o.reward is None)
    if masked:
        log.warning("%d of %d rollouts have no judgment (%s); masked (remove_sample) at their group's mean",
                    masked, len(outcomes), ", ".join(sorted({o.status for o in outcomes if o.reward is None})))
    return rewards


def _answer_outcome(reward: Any, status: Any, error: Any = None) -> Outcome:
    """An adapter route's answer as an outcome: judged (`ok`) or rejected (a real 0) keep their reward; any
    other status (a failure answered with FAILURE_REWARD, a cancel) has none."""
    if status in ("ok", "rejected_input") and reward is not None:
        return Outcome(float(reward), str(status))
    fixed = None if reward is None or status == "cancelled" else float(reward)  # the server's FAILURE_REWARD
    return Outcome(None, str(status or "judge_error"), error=None if error is None else str(error),
                   failure_reward=fixed)


def _unavailable(exc: RewardServerError) -> Outcome:
    return Outcome(None, "unavailable" if isinstance(exc, RewardUnavailableError) else "judge_error",
                   error=f"{exc.code or type(exc).__name__}: {exc.message}")


class SlimeReward:
    """Rewards for slime whose requests carry the current rollout's tag (`x-reward-tag`).

    `rm(args, sample)` is a `--custom-rm-path` function (`/slime`, the binary reward; a failed or cancelled
    judgment is masked, `_fill`), `group_rm(args, samples)` a `--group-rm` one (`/slime/rank`). `cancel()`
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
        #: The masked samples' values (their group's judged mean), shared by `rm` and `group_rm`.
        self.group_fill = GroupFill()

    @property
    def tag(self) -> str:
        """The tag of the current rollout's reward requests."""
        return f"{self._prefix}:{self._rollout}"

    def next_rollout(self) -> str:
        self._rollout += 1
        self.client.sync.tag = self.tag
        return self.tag

    async def rm(self, args: Any, sample: Any, **kwargs: Any) -> float:
        item = _item(sample, 0)
        try:
            data, _ = await self.client._request("POST", f"/slime{self._query}", _sample_body(sample), tag=self.tag)
        except (RewardUnavailableError, JudgeFailedError) as exc:
            # /slime's 503 RW_JUDGE_FAILED retried until the client's deadline, or the server gone that long.
            return _fill(self.group_fill, [sample], [item], [_unavailable(exc)])[0]
        if not isinstance(data, dict) or "reward" not in data:
            raise RewardProtocolError("/slime answered no reward")
        outcome = _answer_outcome(data["reward"], data.get("status"), data.get("error"))
        return _fill(self.group_fill, [sample], [item], [outcome])[0]

    async def group_rm(self, args: Any, samples: Sequence[Any], **kwargs: Any) -> List[float]:
        return await _rank_rewards(self.client, f"/slime/rank{self._rank_query}", samples, self.group_fill, self.tag)

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
    DeepSeek-R1 template), so a rollout cut off inside its trace is `truncated_reasoning`, a real 0. A
    multi-turn response (tool calls and their outputs decoded into it) is judged on its final assistant
    turn only (`split_final_assistant`, the rule of every adapter)."""
    prompt, response, label = _fields(sample, i)
    ground_truth, question = label_parts(label)
    if question is None:
        question = question_from_prompt(prompt)
    if not isinstance(ground_truth, str) or not isinstance(question, str) or not isinstance(response, str):
        raise TypeError(f"samples[{i}]: the label's ground truth and question, and the response, must be strings")
    answer, turns = split_final_assistant(response)
    opener = None if turns else trace_opened_by(prompt)
    return Item(question, ground_truth, with_prompt_trace(strip_chat_tokens(answer), opener))


class _BinaryRM:
    def __init__(self, pool: Pool, on_failure: str) -> None:
        self.pool = pool
        self.on_failure = on_failure
        self.group_fill = GroupFill()

    async def __call__(self, args: Any, samples: Any) -> Union[float, List[float]]:
        one = not isinstance(samples, (list, tuple))
        batch = [samples] if one else list(samples)
        items = [_item(s, i) for i, s in enumerate(batch)]  # refuses a bad sample before sending any
        try:
            outcomes = await self.pool.score(items)
        except RewardUnavailableError as exc:
            if self.on_failure == "raise":
                raise
            log.warning("reward server unreachable until the client's deadline; masking %d rollouts: %s",
                        len(items), exc)
            outcomes = [replace(_unavailable(exc), group_mean=self.pool.recent_means(item.key)[0]) for item in items]
        if self.on_failure == "raise":
            self._raise_on_failure(outcomes)
        rewards = _fill(self.group_fill, batch, items, outcomes)
        return rewards[0] if one else rewards

    def _raise_on_failure(self, outcomes: Sequence[Outcome]) -> None:
        """`on_failure="raise"`: a failed judgment (not a cancel) raises, unless the server's FAILURE_REWARD
        answers it (then masked like any failure)."""
        failed = [o for o in outcomes if o.failed and o.failure_reward is None]
        if failed:
            raise JudgeFailedError(
                f"{len(failed)} of {len(outcomes)} judgments failed after {self.pool.max_rounds + 1} tries",
                code="RW_JUDGE_FAILED",
                details={"failed": [{"status": o.status, "error": o.error} for o in failed][:50]},
                attempts=self.pool.max_rounds + 1,
            )


def slime_binary_rm(
    client: Any,
    graph: Optional[Graph] = None,
    *,
    max_candidates: int = 1024,
    max_body_bytes: int = 4_000_000,
    linger_s: float = 0.02,
    max_rounds: Optional[int] = None,
    api_key: Optional[str] = None,
    on_failure: str = "mask",
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
    `max_retries` when it sets one), 1 s apart plus jitter. A server that is down is waited for until the
    client's deadline (600 s by default).

    `on_failure="mask"` (default): a rollout still without a judgment (failed, cancelled, the server
    unreachable until the deadline) gets a float — its group's judged mean, updated in place as its siblings
    are judged — and `sample.remove_sample = True` (slime >= 0.3.1's per-sample loss mask; why in
    `sample.metadata["debate_reward"]`); its status is never changed. slime ends the run on an exception
    from a reward function (`task.result()`), and its fully-async rollout drops the group and its prompt.
    `"raise"`: the old behaviour, `JudgeFailedError` / `RewardUnavailableError` (unless the server sets
    FAILURE_REWARD). A rollout the server refuses (an older server's 400 for a NUL byte) scores 0; a sample
    whose label it refuses fails only its own call (a configuration bug).
    """
    if on_failure not in ("mask", "raise"):
        raise ValueError("on_failure must be 'mask' or 'raise'")
    aclient = async_client(client, api_key=api_key)
    if max_rounds is None:
        max_rounds = DEFAULT_ROUNDS if aclient.sync.retry.max_retries is None else aclient.sync.retry.max_retries
    pool = Pool(
        aclient, graph, max_candidates=max_candidates, max_body_bytes=max_body_bytes, linger_s=linger_s,
        max_rounds=max_rounds,
    )
    rm = _BinaryRM(pool, on_failure)

    async def custom_rm(args: Any, samples: Any, **kwargs: Any) -> Union[float, List[float]]:
        # slime forwards its own keyword arguments to a custom rm (`rm_function(args, sample, **kwargs)`).
        return await rm(args, samples)

    return custom_rm
