"""What TRL's `AsyncGRPOTrainer` scoring one group at a time costs against an LLM judge (issue 39 item 6).

TRL 1.9 `trl/experimental/async_grpo/async_rollout_worker.py`: `_score_loop` takes one finished group from
`_groups_to_score` and awaits `_score_group(group)` (every reward function gathered over that group) before
it takes the next: one group's judgments in flight at a time, however many groups are waiting. The built
server in front of the fake judge (`test/fakes/openai-server.ts`, `--latency-ms`, 2 s per call by default;
the default graph's judgment is two calls one after the other) scores `--groups` groups of
`--generations` rollouts through `trl_reward_func`, called as `_score_group` calls it, with

- `serial`: one group at a time (AsyncGRPOTrainer's `_score_loop`);
- `inflight-K`: K groups at a time (what a step of `GRPOTrainer` does: its whole generation batch in one
  reward call; or an async scorer keeping K groups in flight).

Each mode gets a fresh server (no cache carried over) and its own rollout texts.

    python3 clients/python/bench/trl_async_groups.py                      # serial vs 8 and 32 in flight
    python3 clients/python/bench/trl_async_groups.py --groups 16 --latency-ms 500 --inflight 4,16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

from conftest import GROUND_TRUTH, QUESTION, REPO, FakeBackend, ServerProcess  # noqa: E402
from debate_reward.trl import trl_reward_func  # noqa: E402


def group_kwargs(g: int, n: int, tag: str) -> Dict[str, Any]:
    """`_score_group`'s keyword arguments for group g: prompts, completions, completion_ids and the
    dataset columns, one value per rollout."""
    question = f"{QUESTION} (prompt {g})"
    return {
        "prompts": [question] * n,
        "completions": [f"Idea {tag}-{g}-{k}: route tokens to experts with a learned bias per expert, adjusted "
                        f"after each step from the observed load, variant {k}." for k in range(n)],
        "completion_ids": [[0]] * n,
        "ground_truth": [GROUND_TRUTH] * n,
        "question": [question] * n,
    }


def run_mode(mode: str, groups: int, n: int, fake: FakeBackend) -> Dict[str, Any]:
    server = ServerProcess({"JUDGE_BASE_URL": fake.base_url, "JUDGE_API_KEY": "bench", "JUDGE_MODEL": "fake"})
    inflight = 1 if mode == "serial" else int(mode.split("-")[1])
    func = trl_reward_func(server.url)
    work = [group_kwargs(g, n, mode) for g in range(groups)]

    async def scorer(queue: "asyncio.Queue[Dict[str, Any]]", out: List[List[Optional[float]]]) -> None:
        while not queue.empty():
            out.append(await func(**queue.get_nowait()))

    async def step() -> List[List[Optional[float]]]:
        queue: "asyncio.Queue[Dict[str, Any]]" = asyncio.Queue()
        for kwargs in work:
            queue.put_nowait(kwargs)
        out: List[List[Optional[float]]] = []
        await asyncio.gather(*(scorer(queue, out) for _ in range(inflight)))
        return out

    try:
        started = time.monotonic()
        scored = asyncio.run(step())
        wall = time.monotonic() - started
    finally:
        server.stop()
        server.remove_log()
    return {"mode": mode, "groups": groups, "generations": n, "groups_in_flight": inflight,
            "rewards": sum(len(g) for g in scored), "unscored": sum(r is None for g in scored for r in g),
            "wall_s": round(wall, 1), "groups_per_min": round(60 * groups / wall, 1)}


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=32)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--latency-ms", type=int, default=2000)
    p.add_argument("--inflight", default="8,32", help="comma-separated K for the inflight-K modes")
    opts = p.parse_args(argv)
    subprocess.run(["node", "--import", "tsx", "test/support/dist.ts"], cwd=str(REPO), check=True)
    fake = FakeBackend(latency_ms=opts.latency_ms, reply="alternate")
    try:
        for mode in ["serial", *(f"inflight-{k}" for k in opts.inflight.split(","))]:
            print(json.dumps(run_mode(mode, opts.groups, opts.generations, fake)), flush=True)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
