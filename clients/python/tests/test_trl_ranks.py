"""Issue 39 item 6: TRL on several GPUs. TRL 1.9 flushes the metrics reward functions log through
`log_metric` once per step with one `accelerator.gather` per pending name (`sorted(_pending_metrics)`,
grpo_trainer.py 2766-2774). A collective matches calls by order: a rank that logged fewer names (the adapter
returned early on an outage with `on_unavailable="none"`) makes fewer calls, and the other ranks wait for it
until `ddp_timeout` kills the job; a rank that logged other names gets its values averaged with another
metric's. Each rank here is a thread running TRL's reward path (`tests/trainers.py`) against its own view of
the server, and the flush goes through a collective that matches calls by order, as NCCL does."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Dict, List

import pytest

from conftest import FAIL_MARKER, GROUND_TRUTH, MATCHING, QUESTION, UNRELATED, closed_port
from debate_reward import AsyncRewardClient
from debate_reward.trl import METRICS, trl_reward_func
from trainers import RankCollective, TRLGRPOTrainer, trl_flush_metrics


def rank_step(url: str, completions: List[str], rank: int, collective: RankCollective, out: Dict[int, Any]) -> None:
    client = AsyncRewardClient(url, deadline_s=1.5, backoff_base_s=0.05, max_retry_after_s=0.1)
    trainer = TRLGRPOTrainer([trl_reward_func(client, on_unavailable="none", max_rounds=0)], num_generations=4)
    try:
        trainer.step([{"prompt": QUESTION, "ground_truth": GROUND_TRUTH}] * 4, completions)
        rewards = [r[0] for r in trainer.rewards_per_func]
        pending = sorted(trainer.metrics)
        out[rank] = {"rewards": rewards, "names": pending, "logged": trl_flush_metrics(trainer, collective, rank)}
    except BaseException as exc:  # noqa: BLE001 - asserted by the test
        out[rank] = exc
    finally:
        trainer.close()
        client.close()


def run_ranks(views: List[tuple]) -> Dict[int, Any]:
    collective = RankCollective(len(views), timeout_s=10.0)
    out: Dict[int, Any] = {}
    threads = [threading.Thread(target=rank_step, args=(url, comps, rank, collective, out), daemon=True)
               for rank, (url, comps) in enumerate(views)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def group(tag: str) -> List[str]:
    return [f"{MATCHING} ({tag} 0)", UNRELATED + f" ({tag})", f"{MATCHING} {FAIL_MARKER} ({tag})", f"{MATCHING} ({tag} 3)"]


def test_a_rank_that_sees_an_outage_logs_the_same_metric_names_and_no_rank_hangs(marker_server):
    tag = uuid.uuid4().hex[:8]
    down = f"http://127.0.0.1:{closed_port()}"
    out = run_ranks([(marker_server.url, group(f"r0 {tag}")), (down, group(f"r1 {tag}"))])
    assert not any(isinstance(v, BaseException) for v in out.values()), out
    name = "debate_reward"
    expected = sorted(f"{name}/{m}" for m in METRICS)
    assert out[0]["names"] == out[1]["names"] == expected
    # Judged on rank 0 (the failure at its group's mean), unscored (None -> NaN) on rank 1.
    assert out[0]["rewards"] == [1.0, 0.0, pytest.approx(2 / 3), 1.0]
    assert all(r != r for r in out[1]["rewards"])
    # Each name averaged with the same name on the other rank: rank 0 1/4 failed, rank 1 all of it.
    assert out[0]["logged"] == out[1]["logged"] == {
        f"{name}/failed": pytest.approx((0.25 + 1.0) / 2),
        f"{name}/rejected": 0.0,
        f"{name}/unavailable": 0.5,
    }


def test_three_ranks_judged_failed_and_unreachable_make_the_same_collective_calls(marker_server, failing_server):
    tag = uuid.uuid4().hex[:8]
    down = f"http://127.0.0.1:{closed_port()}"
    out = run_ranks([(failing_server.url, group(f"f {tag}")), (marker_server.url, group(f"ok {tag}")),
                     (down, group(f"down {tag}"))])
    assert not any(isinstance(v, BaseException) for v in out.values()), out
    assert out[0]["names"] == out[1]["names"] == out[2]["names"]
    assert out[0]["logged"] == out[1]["logged"] == out[2]["logged"]
    assert out[0]["logged"]["debate_reward/unavailable"] == pytest.approx(1 / 3)


def test_the_collective_double_hangs_when_ranks_log_different_name_sets():
    """The double detects what the fix prevents: without it, the outage rank logged nothing."""
    collective = RankCollective(2, timeout_s=0.5)
    ranks = [TRLGRPOTrainer([], num_generations=1), TRLGRPOTrainer([], num_generations=1)]
    ranks[0].metrics = {"debate_reward/failed": [0.0], "debate_reward/rejected": [0.0]}
    errors: List[BaseException] = []

    def flush(rank: int) -> None:
        try:
            trl_flush_metrics(ranks[rank], collective, rank)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=flush, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert len(errors) == 1 and isinstance(errors[0], TimeoutError)
