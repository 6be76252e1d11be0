"""slime `--group-rm` reward function: one `/slime/rank` request per rollout group, graded rewards from a
pairwise tournament (Bradley-Terry scores in [0, 1]) instead of one binary judgment per rollout.

    # my_rm.py
    from debate_reward.slime import slime_group_rm
    group_rm = slime_group_rm("http://HOST:8080", schedule="circular")

    --group-rm --custom-rm-path my_rm.group_rm --label-key label

Each sample's `prompt` (text or chat messages), `response` and `label` (the abstract, or
`{"ground_truth", "question"}`) are sent as they are. A rollout left without any successful comparison has
no reward: the server answers 503 (retried by the client), unless it sets FAILURE_REWARD.
"""

from __future__ import annotations

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
