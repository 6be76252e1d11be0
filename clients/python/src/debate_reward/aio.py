"""asyncio twin of `RewardClient`: each HTTP attempt runs on a thread pool (stdlib only, no aiohttp);
backoff between attempts is an `asyncio.sleep`, so waiting for a retry never holds a thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._http import (
    Attempts,
    ConnectionFailure,
    Response,
    control_headers,
    decode_json,
    dumps,
    idempotency_headers,
)
from .client import (
    Graph,
    GroupInput,
    RewardClient,
    batch_body,
    best_of_n_body,
    cancel_body,
    judge_body,
    rank_body,
    reward_body,
    with_priority,
)
from .results import GroupResult, JudgeResult, parse_batch, parse_group, parse_judgment


class AsyncRewardClient:
    """Same constructor arguments as `RewardClient`, plus `max_concurrency`: the most HTTP requests in
    flight at once (thread-pool size; also the keep-alive pool size). Usable from any event loop,
    including TRL's background reward loop and verl's reward workers.

    Cancelling a call stops waiting at once; an HTTP attempt already on the wire finishes in its
    thread and its answer is dropped.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        timeout_s: float = 120.0,
        max_retries: Optional[int] = None,
        graph: Optional[Graph] = None,
        *,
        max_concurrency: int = 64,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("pool_size", max_concurrency)
        client = RewardClient(base_url, api_key, timeout_s, max_retries, graph, **kwargs)
        self._init(client, max_concurrency, True)

    @classmethod
    def from_client(cls, client: RewardClient, max_concurrency: int = 64) -> "AsyncRewardClient":
        """Wrap an existing sync client (same connection pool, retry policy and defaults)."""
        self = cls.__new__(cls)
        self._init(client, max_concurrency, False)
        return self

    def _init(self, client: RewardClient, max_concurrency: int, owns_client: bool) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.sync = client
        self._owns_client = owns_client
        self._max_concurrency = max_concurrency
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="debate-reward")
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def base_url(self) -> str:
        return self.sync.base_url

    @property
    def graph(self) -> Optional[Graph]:
        return self.sync.graph

    async def _request(
        self, method: str, path: str, payload: Any = None, tag: Optional[str] = None
    ) -> Tuple[Any, int]:
        loop = asyncio.get_running_loop()
        body = None if payload is None else dumps(payload)
        headers = idempotency_headers(method)
        client = self.sync
        tag = tag if tag is not None else client.tag
        give_up_at = client._clock() + client.deadline_s
        attempts = Attempts(method, path, client.retry, client._rng, client.on_retry, give_up_at, client._clock)
        while True:
            outcome: Union[Response, ConnectionFailure]
            headers.update(control_headers(method, give_up_at - client._clock(), tag))
            try:
                outcome = await loop.run_in_executor(
                    self._executor, client._transport.request, method, path, body, headers
                )
            except ConnectionFailure as exc:
                outcome = exc
            delay = attempts.next_delay(outcome)
            if delay is None:
                assert isinstance(outcome, Response)
                return decode_json(outcome, attempts.attempt), attempts.attempt
            await self._sleep(delay)

    async def reward(
        self,
        question: str,
        ground_truth: str,
        candidates: Sequence[str],
        *,
        graph: Optional[Graph] = None,
        request_id: Optional[str] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[Optional[float]]:
        """Rewards for one group, in order: 1.0 / 0.0, or None where the judgment failed (or was cancelled)."""
        result = await self.reward_details(
            question,
            ground_truth,
            candidates,
            graph=graph,
            request_id=request_id,
            tag=tag,
            priority=priority,
        )
        return result.rewards

    async def reward_details(
        self,
        question: str,
        ground_truth: str,
        candidates: Sequence[str],
        *,
        graph: Optional[Graph] = None,
        include_transcripts: bool = False,
        request_id: Optional[str] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> GroupResult:
        body = with_priority(
            reward_body(
                question,
                ground_truth,
                candidates,
                graph if graph is not None else self.graph,
                include_transcripts,
                request_id,
            ),
            priority,
        )
        data, attempts = await self._request("POST", "/v1/reward", body, tag=tag)
        return parse_group(data, len(body["candidates"]), attempts)

    async def reward_batch(
        self,
        groups: Iterable[GroupInput],
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[List[Optional[float]]]:
        details = await self.reward_batch_details(groups, graph=graph, tag=tag, priority=priority)
        return [g.rewards for g in details]

    async def reward_batch_details(
        self,
        groups: Iterable[GroupInput],
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> List[GroupResult]:
        body = with_priority(batch_body(groups, graph if graph is not None else self.graph), priority)
        data, attempts = await self._request("POST", "/v1/reward/batch", body, tag=tag)
        return parse_batch(data, [len(g["candidates"]) for g in body["groups"]], attempts)

    async def judge(
        self,
        question: str,
        ground_truth: str,
        candidate: str,
        *,
        graph: Optional[Graph] = None,
        tag: Optional[str] = None,
        priority: Optional[str] = None,
    ) -> JudgeResult:
        body = with_priority(
            judge_body(question, ground_truth, candidate, graph if graph is not None else self.graph), priority
        )
        data, attempts = await self._request("POST", "/v1/judge", body, tag=tag)
        return parse_judgment(data, attempts)

    async def cancel(
        self, request_ids: Optional[Sequence[str]] = None, tag: Optional[str] = None
    ) -> Dict[str, Any]:
        """`POST /v1/cancel` (see `RewardClient.cancel`)."""
        return (await self._request("POST", "/v1/cancel", cancel_body(request_ids, tag)))[0]

    async def rank(self, question: str, candidates: Sequence[str], **options: Any) -> Dict[str, Any]:
        """`POST /v1/rank` (see `RewardClient.rank`)."""
        return (await self._request("POST", "/v1/rank", rank_body(question, candidates, **options)))[0]

    async def best_of_n(
        self, question: str, candidates: Sequence[str], criterion: Optional[str] = None, **options: Any
    ) -> Dict[str, Any]:
        """`POST /v1/best-of-n` (see `RewardClient.best_of_n`)."""
        body = best_of_n_body(question, candidates, criterion, **options)
        return (await self._request("POST", "/v1/best-of-n", body))[0]

    async def graphs(self) -> Any:
        return (await self._request("GET", "/v1/graphs"))[0]

    async def health(self) -> bool:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.sync.health)

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        if self._owns_client:
            self.sync.close()

    def __getstate__(self) -> Dict[str, Any]:
        return {"client": self.sync, "max_concurrency": self._max_concurrency}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._init(state["client"], state["max_concurrency"], True)

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncRewardClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AsyncRewardClient({self.base_url!r}, graph={self.graph!r})"
