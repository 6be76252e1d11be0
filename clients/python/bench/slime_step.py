"""Wall time of one slime GRPO step's rewards (6 144 rollouts: 384 prompts x 16) against the built server
in front of the fake judge (`test/fakes/openai-server.ts`, 1 s per call), for

- `remote_rm`: slime's own `--rm-type remote_rm` pattern (slime/rollout/rm_hub, current main): one POST
  /slime per rollout, all gathered at once over one shared session with at most 64 connections
  (aiohttp `TCPConnector(limit=64)`, 120 s per try, 10 tries). aiohttp is not installed here, so the
  pool is reproduced with asyncio streams: 64 keep-alive HTTP/1.1 connections, a request waits for a
  free one;
- `binary`: `slime_binary_rm` called as slime calls `--custom-rm-path` without `--group-rm` (one Sample
  per call, all gathered);
- `binary-group`: the same under `--group-rm` (one call per group of 16, all gathered).

Each mode gets a fresh server (no cache carried over) and its own rollout texts.

    python3 clients/python/bench/slime_step.py                  # all three modes; builds dist/ first
    python3 clients/python/bench/slime_step.py --modes binary --rollouts 1024
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

from conftest import GROUND_TRUTH, QUESTION, REPO, FakeBackend, ServerProcess  # noqa: E402
from debate_reward.slime import slime_binary_rm  # noqa: E402

GROUP = 16
ROUTES = ("/slime", "/v1/reward/batch")


def rollouts(n: int, tag: str) -> List[SimpleNamespace]:
    prompt = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    return [
        SimpleNamespace(
            prompt=prompt,
            response=f"Idea {tag}-{k}: route tokens to experts with a learned bias per expert, adjusted "
            f"after each step from the observed load, variant {k} of group {k // GROUP}.",
            # One label per prompt group: the groups are distinct prompts of the step.
            label=json.dumps({"ground_truth": GROUND_TRUTH, "question": f"{QUESTION} (prompt {k // GROUP})"}),
        )
        for k in range(n)
    ]


class Pool:
    """At most `limit` keep-alive HTTP/1.1 connections to one host, shared by every request (what an
    aiohttp session with TCPConnector(limit=limit) does)."""

    def __init__(self, url: str, limit: int) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.slots = asyncio.Semaphore(limit)
        self.idle: List[Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, payload: Any, timeout_s: float) -> Tuple[int, bytes]:
        async with self.slots:
            conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
            try:
                status, body = await asyncio.wait_for(self._exchange(conn, path, payload), timeout_s)
            except BaseException:
                conn[1].close()
                raise
            self.idle.append(conn)
            return status, body

    async def _exchange(self, conn, path: str, payload: Any) -> Tuple[int, bytes]:
        reader, writer = conn
        data = json.dumps(payload).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n".encode() + data
        )
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        length = 0
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        return status, await reader.readexactly(length)

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def remote_rm(pool: Pool, sample: SimpleNamespace, max_retries: int = 10) -> float:
    payload = {"prompt": sample.prompt, "response": sample.response, "label": sample.label}
    for attempt in range(max_retries):
        try:
            status, body = await pool.post("/slime", payload, 120)
            if status >= 400:
                raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
            return float(json.loads(body)["reward"])  # --reward-key reward
        except Exception:
            if attempt + 1 >= max_retries:
                raise
            await asyncio.sleep(min(2**attempt, 30) + random.random())
    raise AssertionError("unreachable")


def counter(text: str, name: str, labels: str = "") -> float:
    total = 0.0
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        if labels in m.group(1):
            total += float(m.group(2))
    return total


def run_mode(mode: str, n: int, fake: FakeBackend, latency_s: float) -> Dict[str, Any]:
    server = ServerProcess({"JUDGE_BASE_URL": fake.base_url, "JUDGE_API_KEY": "bench", "JUDGE_MODEL": "fake"})
    samples = rollouts(n, mode)
    args = SimpleNamespace(rm_url=server.url + "/slime", group_rm=mode == "binary-group")

    async def step() -> List[float]:
        if mode == "remote_rm":
            pool = Pool(server.url, 64)
            try:
                return list(await asyncio.gather(*(remote_rm(pool, s) for s in samples)))
            finally:
                pool.close()
        rm = slime_binary_rm(server.url)
        if mode == "binary":
            return list(await asyncio.gather(*(rm(args, s) for s in samples)))
        groups = [samples[k:k + GROUP] for k in range(0, n, GROUP)]
        return [r for g in await asyncio.gather(*(rm(args, g) for g in groups)) for r in g]

    try:
        started = time.monotonic()
        rewards = asyncio.run(step())
        wall = time.monotonic() - started
        metrics = server.metrics()
    finally:
        server.stop()
        server.remove_log()
    calls = counter(metrics, "reward_llm_calls_total")
    return {
        "mode": mode,
        "rollouts": n,
        "rewards": len(rewards),
        "wall_s": round(wall, 1),
        "requests": int(sum(counter(metrics, "reward_requests_total", f'route="{r}"') for r in ROUTES)),
        "refused_503": int(counter(metrics, "reward_requests_total", 'code="503"')),
        "llm_calls": int(calls),
        # Every call's latency through JUDGE_MAX_INFLIGHT = 256 calls at once (and a judgment's two
        # stages one after the other): the server's own floor.
        "backend_floor_s": round(max(calls * latency_s / 256, 2 * latency_s), 1),
    }


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=6144)
    p.add_argument("--modes", default="remote_rm,binary,binary-group")
    p.add_argument("--latency-ms", type=int, default=1000)
    opts = p.parse_args(argv)
    subprocess.run(["node", "--import", "tsx", "test/support/dist.ts"], cwd=str(REPO), check=True)
    fake = FakeBackend(latency_ms=opts.latency_ms, reply="alternate")
    try:
        for mode in opts.modes.split(","):
            print(json.dumps(run_mode(mode, opts.rollouts, fake, opts.latency_ms / 1000)), flush=True)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
