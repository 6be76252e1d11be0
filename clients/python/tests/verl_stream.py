"""verl 0.9.0's default reward path, reproduced with processes (verl does not install here).

With a custom reward function and no reward model, every finished rollout is scored alone:
`AgentLoopWorker._compute_score` (verl/experimental/agent_loop/agent_loop.py ~1019) does
`random.choice(self.reward_loop_worker_handles).compute_score.remote(data)` for ONE rollout, and each
`RewardLoopWorker` (a Ray actor: a process of its own, `reward.num_workers` of them, 8 by default) runs
`NaiveRewardManager.run_single` on its event loop, concurrently for every call it receives
(verl/experimental/reward_loop/reward_loop.py `compute_score`; reward_manager/naive.py). So here: each
worker is a `multiprocessing` process (spawn: nothing shared with the test) that loads the custom function
with `verl_get_custom_reward_fn` and runs each call as its own task on its loop; the driver sends each
rollout to one worker and collects what `run_single` returned, or the exception it raised (which verl's
legacy trainer would re-raise, ending the step, and its V1 trainer would turn into a dropped rollout).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from trainers import VerlNaiveRewardManager, verl_get_custom_reward_fn


def _worker_main(src: str, path: str, name: str, reward_kwargs: Dict[str, Any], env: Dict[str, str],
                 requests: "mp.Queue[Any]", results: "mp.Queue[Any]") -> None:
    sys.path.insert(0, src)
    os.environ.update(env)
    fn = verl_get_custom_reward_fn(path, name, reward_kwargs)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    manager = VerlNaiveRewardManager(fn, loop)
    results.put(("ready", os.getpid()))
    while True:
        msg = requests.get()
        if msg is None:
            break
        rid, sample = msg

        def done(future: Any, rid: int = rid) -> None:
            exc = future.exception()
            results.put((rid, ("error", f"{type(exc).__name__}: {exc}") if exc is not None else ("ok", future.result())))

        asyncio.run_coroutine_threadsafe(manager.run_single(sample), loop).add_done_callback(done)


class VerlRewardWorkers:
    """`reward.num_workers` reward-loop workers, each a process, fed one rollout per call."""

    def __init__(self, src: str, path: str, name: str, reward_kwargs: Optional[Dict[str, Any]] = None,
                 num_workers: int = 3, env: Optional[Dict[str, str]] = None) -> None:
        ctx = mp.get_context("spawn")
        self.results: "mp.Queue[Any]" = ctx.Queue()
        self.inboxes: List["mp.Queue[Any]"] = []
        self.procs = []
        for _ in range(num_workers):
            inbox: "mp.Queue[Any]" = ctx.Queue()
            proc = ctx.Process(target=_worker_main, daemon=True,
                               args=(src, path, name, dict(reward_kwargs or {}), dict(env or {}), inbox, self.results))
            proc.start()
            self.inboxes.append(inbox)
            self.procs.append(proc)
        self.pids = [self.results.get(timeout=60)[1] for _ in range(num_workers)]

    def stream(self, samples: List[Dict[str, Any]], choose: Callable[[int], int],
               send_at: Optional[List[float]] = None, timeout_s: float = 300.0) -> List[Tuple[str, Any]]:
        """Each sample to worker `choose(i)`, at `send_at[i]` seconds from now (as rollouts finish at different
        times); every answer, in sample order: ("ok", run_single's dict) or ("error", message)."""
        started = time.monotonic()
        for i, sample in sorted(enumerate(samples), key=lambda p: (send_at or [0.0] * len(samples))[p[0]]):
            if send_at is not None:
                time.sleep(max(0.0, started + send_at[i] - time.monotonic()))
            self.inboxes[choose(i)].put((i, sample))
        out: Dict[int, Tuple[str, Any]] = {}
        give_up = time.monotonic() + timeout_s
        while len(out) < len(samples):
            try:
                rid, answer = self.results.get(timeout=max(0.1, give_up - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"{len(samples) - len(out)} rollouts unanswered after {timeout_s} s") from None
            out[rid] = answer
        return [out[i] for i in range(len(samples))]

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()  # this process only (we started it)
                proc.join(timeout=5)
