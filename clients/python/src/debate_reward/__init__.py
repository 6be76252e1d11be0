"""Python client for the debate-reward server: binary rewards from a committee of LLM judges.

    from debate_reward import RewardClient
    client = RewardClient("http://127.0.0.1:8080")
    client.reward(question, ground_truth, candidates)   # -> [1.0, 0.0, None, ...]; None = judge failed

Standard library only. Trainer adapters: `debate_reward.trl.trl_reward_func`,
`debate_reward.verl.verl_compute_score`, `debate_reward.slime.slime_binary_rm`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ._http import RetryEvent, RetryPolicy
from .aio import AsyncRewardClient
from .client import RewardClient
from .errors import (
    BadRequestError,
    ForbiddenError,
    JudgeFailedError,
    NotFoundError,
    PayloadTooLargeError,
    RewardInternalError,
    RewardProtocolError,
    RewardRequestError,
    RewardServerError,
    RewardUnavailableError,
    UnauthorizedError,
)
from .results import FAILED_STATUSES, GroupResult, ItemResult, JudgeResult, group_stats

__all__ = [
    "AsyncRewardClient",
    "BadRequestError",
    "ForbiddenError",
    "FAILED_STATUSES",
    "GroupResult",
    "ItemResult",
    "JudgeFailedError",
    "JudgeResult",
    "NotFoundError",
    "PayloadTooLargeError",
    "RetryEvent",
    "RetryPolicy",
    "RewardClient",
    "RewardInternalError",
    "RewardProtocolError",
    "RewardRequestError",
    "RewardServerError",
    "RewardUnavailableError",
    "UnauthorizedError",
    "__version__",
    "group_stats",
]
