"""slime reward functions.

`slime_group_rm`: slime `--group-rm`, one `/slime/rank` request per rollout group, graded rewards from a
pairwise tournament (Bradley-Terry scores in [0, 1]) instead of one binary judgment per rollout.

`SlimeReward`: per-sample (`/slime`) and group rewards whose requests carry a per-rollout tag, so that
slime's abort (over-sampling, partial rollouts) cancels the judgments still running instead of waiting for
them (slime's `abort` drains its pending generate-and-reward tasks):

    # my_rm.py
    from debate_reward.slime import SlimeReward, install_abort_hook
    reward = SlimeReward("http://HOST:8080")
    install_abort_hook(reward)          # wraps slime.rollout.sglang_rollout.abort
    rm = reward.rm                      # --custom-rm-path my_rm.rm

    # my_rm.py
    from debate_reward.slime import slime_group_rm
    group_rm = slime_group_rm("http://HOST:8080", schedule="circular")

    --group-rm --custom-rm-path my_rm.group_rm --label-key label

Each sample's `prompt` (text or chat messages), `response` and `label` (the abstract, or
`{"ground_truth", "question"}`) are sent as they are. A rollout left without any successful comparison has
no reward: the server answers 503 (retried by the client), unless it sets FAILURE_REWARD.
"""

from __future__ import annotations

import functools
import uuid
from types import ModuleType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence
from urllib.parse import urlencode

from .aio import AsyncRewardClient
from .client import SCHEDULES
from .errors import RewardProtocolError


def group_body(samples: Sequence[Any]) -> Dict[str, Any]:
    """The `/slime/rank` body for slime `Sample` objects (or mappings with prompt / response / label)."""
    out: List[Dict[str, Any]] = []
    for i, s in enumerate(samples):
        get = s.get if isinstance(s, dict) else (lambda k, _s=s: getattr(_s, k, None))
        prompt, response, label = get("prompt"), get("response"), get("label")
        if response is None or label is None or prompt is None:
            raise TypeError(f"samples[{i}] needs prompt, response and label")
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
    aclient = client if isinstance(client, AsyncRewardClient) else AsyncRewardClient(str(client))
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
        self.client = client if isinstance(client, AsyncRewardClient) else AsyncRewardClient(str(client))
        self._query = "" if graph is None else f"?{urlencode({'graph': graph})}"
        self._rank_query = f"?{urlencode({'schedule': schedule})}"
        # A run-unique prefix: two trainers on one server never cancel each other's rollouts.
        self._prefix = f"{tag_prefix}:{uuid.uuid4().hex[:12]}"
        self._rollout = 0

    @property
    def tag(self) -> str:
        """The tag of the current rollout's reward requests."""
        return f"{self._prefix}:{self._rollout}"

    def next_rollout(self) -> str:
        self._rollout += 1
        return self.tag

    async def rm(self, args: Any, sample: Any) -> Optional[float]:
        data, _ = await self.client._request("POST", f"/slime{self._query}", _sample_body(sample), tag=self.tag)
        if not isinstance(data, dict) or "reward" not in data:
            raise RewardProtocolError("/slime answered no reward")
        reward = data["reward"]
        return None if reward is None else float(reward)

    async def group_rm(self, args: Any, samples: Sequence[Any]) -> List[Optional[float]]:
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
