"""What every trainer adapter shares: how a client is built from what the user passed (a URL, a client),
so that an adapter built from a URL string reads the API key the way every other one does."""

from __future__ import annotations

import os
from typing import Any, Optional

from .aio import AsyncRewardClient
from .client import RewardClient

#: The environment variables the adapters read when they are given a URL (or, for verl's config-only entry
#: point, nothing): the server's address and its `REWARD_API_KEY`.
URL_ENV = "DEBATE_REWARD_URL"
API_KEY_ENV = "DEBATE_REWARD_API_KEY"
#: A file holding the key (e.g. a mounted secret), read when `DEBATE_REWARD_API_KEY` is not set.
API_KEY_FILE_ENV = "DEBATE_REWARD_API_KEY_FILE"


def key_from_env() -> Optional[str]:
    """`DEBATE_REWARD_API_KEY`, else the first line of the file `DEBATE_REWARD_API_KEY_FILE` names, else None.
    Never a trainer's config: verl and OpenRLHF print theirs and send it to wandb."""
    key = os.environ.get(API_KEY_ENV)
    if key:
        return key
    path = os.environ.get(API_KEY_FILE_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return f.readline().strip() or None


def api_key_for(api_key: Optional[str]) -> Optional[str]:
    """The key to send: the one given, else `DEBATE_REWARD_API_KEY` (None when neither is set)."""
    if api_key is not None:
        return api_key
    return key_from_env()


def async_client(client: Any, *, api_key: Optional[str] = None) -> AsyncRewardClient:
    """An `AsyncRewardClient` from a base URL (with `api_key`, else `DEBATE_REWARD_API_KEY`), a
    `RewardClient` (wrapped: same pool, retry policy and key) or an `AsyncRewardClient` (as it is). A key
    given with a client is an error: the client already carries its own."""
    if isinstance(client, str):
        return AsyncRewardClient(client, api_key=api_key_for(api_key))
    if api_key is not None:
        raise TypeError("api_key goes with a base URL; a client carries its own (RewardClient(url, api_key=...))")
    if isinstance(client, AsyncRewardClient):
        return client
    if isinstance(client, RewardClient):
        return AsyncRewardClient.from_client(client)
    raise TypeError("client must be an AsyncRewardClient, a RewardClient or a base URL")


def sync_client(client: Any, *, api_key: Optional[str] = None) -> RewardClient:
    """A `RewardClient` from the same inputs as `async_client` (an `AsyncRewardClient` gives its own)."""
    if isinstance(client, str):
        return RewardClient(client, api_key=api_key_for(api_key))
    if api_key is not None:
        raise TypeError("api_key goes with a base URL; a client carries its own (RewardClient(url, api_key=...))")
    if isinstance(client, RewardClient):
        return client
    if isinstance(client, AsyncRewardClient):
        return client.sync
    raise TypeError("client must be a RewardClient, an AsyncRewardClient or a base URL")
