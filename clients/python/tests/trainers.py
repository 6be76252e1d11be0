"""The trainers' own calling patterns, reproduced from their sources (none of them installs here: no PyPI,
no torch). Each double follows the cited function closely, keeps its control flow (what runs concurrently,
what is awaited, where an exception goes, what None/NaN become) and leaves out the rest (tensors, devices,
Ray, generation). Read from the release tags fetched from GitHub:

- TRL v1.9.0 (huggingface/trl): trl/trainer/grpo_trainer.py, trl/trainer/utils.py
- verl v0.8.0 (verl-project/verl): verl/experimental/reward_loop/reward_loop.py,
  verl/experimental/reward_loop/reward_manager/naive.py, verl/trainer/ppo/reward.py,
  verl/utils/import_utils.py
- slime v0.3.1 (THUDM/slime): slime/rollout/sglang_rollout.py, slime/rollout/rm_hub/__init__.py
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import math
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

NAN = float("nan")

# --- TRL v1.9.0 -------------------------------------------------------------------------------------------


def trl_get_callable_name(func: Callable[..., Any]) -> str:
    """trl/trainer/utils.py `get_callable_name` (line 224)."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def _nanmean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else NAN


def _nanstd(values: Sequence[float]) -> float:
    """trl/trainer/utils.py `nanstd`: the NaN-ignoring std with Bessel's correction (NaN below 2 values)."""
    kept = [v for v in values if not math.isnan(v)]
    if len(kept) < 2:
        return NAN
    mean = sum(kept) / len(kept)
    return math.sqrt(sum((v - mean) ** 2 for v in kept) / len(kept) * len(kept) / (len(kept) - 1))


def _nansum(values: Sequence[float]) -> float:
    return sum(v for v in values if not math.isnan(v))


class TRLGRPOTrainer:
    """`GRPOTrainer`'s reward path in TRL 1.9.0:

    - `__init__` (grpo_trainer.py 505-536): `reward_func_names` by `get_callable_name`, `reward_weights`
      (ones by default); `_has_async_funcs` (704) starts a daemon event loop for coroutine reward functions.
    - `_calculate_rewards` (1612-1703): every column but prompt/completion/completion_ids as a keyword list,
      plus `trainer_state`, `log_extra`, `log_metric`; sync functions called in turn, coroutine functions
      (`inspect.iscoroutinefunction`) gathered on that loop with `run_coroutine_threadsafe(...).result()`;
      None -> NaN; a warning when a row is NaN for every function.
    - the aggregation in `_generate_and_score_completions` (2673-2735) for both
      `multi_objective_aggregation`s and the three `scale_rewards`, then `nan_to_num(advantages, 0)`.
    """

    def __init__(
        self,
        reward_funcs: List[Callable[..., Any]],
        *,
        num_generations: int,
        reward_weights: Optional[List[float]] = None,
        multi_objective_aggregation: str = "sum_then_normalize",
        scale_rewards: str = "group",
    ) -> None:
        self.reward_funcs = reward_funcs
        self.reward_func_names = [trl_get_callable_name(f) for f in reward_funcs]
        self.reward_weights = list(reward_weights) if reward_weights is not None else [1.0] * len(reward_funcs)
        self.num_generations = num_generations
        self.multi_objective_aggregation = multi_objective_aggregation
        self.scale_rewards = scale_rewards
        self.metrics: Dict[str, List[float]] = {}
        self.warnings: List[str] = []
        self._has_async_funcs = any(inspect.iscoroutinefunction(f) for f in reward_funcs)
        self.async_loop: Optional[asyncio.AbstractEventLoop] = None
        if self._has_async_funcs:  # start_event_loop_in_daemon
            self.async_loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self.async_loop.run_forever, daemon=True)
            self._thread.start()

    def close(self) -> None:
        if self.async_loop is not None:
            self.async_loop.call_soon_threadsafe(self.async_loop.stop)
            self._thread.join(timeout=5)
            self.async_loop.close()

    def _log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def calculate_rewards(self, inputs: List[Dict[str, Any]], prompts: list, completions: list, completion_ids: list) -> List[List[float]]:
        rows = [[0.0] * len(self.reward_funcs) for _ in prompts]
        keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
        reward_kwargs: Dict[str, Any] = {key: [example[key] for example in inputs] for key in keys}
        reward_kwargs["trainer_state"] = object()
        reward_kwargs["log_extra"] = lambda column, values: None
        reward_kwargs["log_metric"] = self._log_metric
        async_funcs_info = []
        for i, reward_func in enumerate(self.reward_funcs):
            if inspect.iscoroutinefunction(reward_func):
                async_funcs_info.append((i, reward_func))
            else:
                output = reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids, **reward_kwargs)
                output = [r if r is not None else NAN for r in output]
                for row, r in zip(rows, output):
                    row[i] = float(r)
        if async_funcs_info:

            async def _invoke_async(index: int, func: Callable[..., Any]) -> Any:
                output = await func(prompts=prompts, completions=completions, completion_ids=completion_ids, **reward_kwargs)
                return index, [r if r is not None else NAN for r in output]

            async def _run_async_funcs() -> Any:
                return await asyncio.gather(*[_invoke_async(i, f) for i, f in async_funcs_info])

            assert self.async_loop is not None
            results = asyncio.run_coroutine_threadsafe(_run_async_funcs(), self.async_loop).result()
            for idx, output in results:
                for row, r in zip(rows, output):
                    row[idx] = float(r)
        if any(all(math.isnan(v) for v in row) for row in rows):
            self.warnings.append("All reward functions returned None")
        return rows

    def advantages(self, rewards_per_func: List[List[float]]) -> List[float]:
        g, w = self.num_generations, self.reward_weights
        unscorable = [all(math.isnan(v) for v in row) for row in rewards_per_func]
        if self.multi_objective_aggregation == "sum_then_normalize":
            rewards = [NAN if u else _nansum([v * wk for v, wk in zip(row, w)]) for row, u in zip(rewards_per_func, unscorable)]
            groups = [rewards[k:k + g] for k in range(0, len(rewards), g)]
            means = [m for grp in groups for m in [_nanmean(grp)] * g]
            if self.scale_rewards in ("group", "none"):
                stds = [s for grp in groups for s in [_nanstd(grp)] * g]
            else:  # "batch"
                stds = [_nanstd(rewards)] * len(rewards)
            adv = [r - m for r, m in zip(rewards, means)]
            if self.scale_rewards != "none":
                adv = [a / (s + 1e-4) for a, s in zip(adv, stds)]
        elif self.multi_objective_aggregation == "normalize_then_sum":
            n_funcs = len(self.reward_funcs)
            normalised = [[NAN] * n_funcs for _ in rewards_per_func]
            for k in range(0, len(rewards_per_func), g):
                for j in range(n_funcs):
                    column = [rewards_per_func[i][j] for i in range(k, k + g)]
                    mean, std = _nanmean(column), _nanstd(column) if g > 1 else 0.0
                    for i in range(k, k + g):
                        normalised[i][j] = (rewards_per_func[i][j] - mean) / (std + 1e-4)
            rewards = [NAN if u else _nansum([v * wk for v, wk in zip(row, w)]) for row, u in zip(normalised, unscorable)]
            std = _nanstd(rewards)
            adv = [(r - _nanmean(rewards)) / (std + 1e-4) for r in rewards]
        else:
            raise ValueError(self.multi_objective_aggregation)
        return [0.0 if math.isnan(a) else a for a in adv]  # torch.nan_to_num(advantages, nan=0.0)

    def step(self, inputs: List[Dict[str, Any]], completions: list) -> List[float]:
        """One step's rewards and advantages for `inputs` (the dataset rows, each repeated
        `num_generations` times in a row, as RepeatSampler yields them) and their completions."""
        prompts = [x["prompt"] for x in inputs]
        self.rewards_per_func = self.calculate_rewards(inputs, prompts, completions, [[0] for _ in completions])
        return self.advantages(self.rewards_per_func)


class RankCollective:
    """`accelerator.gather` across `world` ranks (threads here, processes under TRL): the k-th call of every
    rank meets the k-th call of the others, whatever each rank meant by it (a collective matches calls by
    order, not by name). A rank whose peers stop calling waits `timeout_s`, then raises `TimeoutError` (NCCL
    would wait out `ddp_timeout`, 1800 s, and kill the job)."""

    def __init__(self, world: int, timeout_s: float = 5.0) -> None:
        self.world, self.timeout_s = world, timeout_s
        self._cond = threading.Condition()
        self._rounds: Dict[int, Dict[int, float]] = {}
        self._calls = [0] * world

    def gather(self, rank: int, value: float) -> List[float]:
        with self._cond:
            k = self._calls[rank]
            self._calls[rank] += 1
            self._rounds.setdefault(k, {})[rank] = value
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: len(self._rounds[k]) == self.world, timeout=self.timeout_s):
                raise TimeoutError(f"rank {rank}: collective call {k} never met the other ranks'")
            return [self._rounds[k][r] for r in range(self.world)]


def trl_flush_metrics(trainer: TRLGRPOTrainer, collective: RankCollective, rank: int) -> Dict[str, float]:
    """`_generate_and_score_completions` (grpo_trainer.py 2766-2774): the step's `log_metric` values, each
    name's local mean gathered across ranks (one `accelerator.gather` per name, in sorted order) and
    averaged; then the pending metrics are cleared. Returns {name: global mean} as this rank logs it."""
    logged: Dict[str, float] = {}
    for name in sorted(trainer.metrics):
        values = trainer.metrics[name]
        local_mean = sum(values) / len(values)
        gathered = collective.gather(rank, local_mean)
        logged[name] = sum(gathered) / len(gathered)
    trainer.metrics.clear()
    return logged


# --- verl v0.8.0 ------------------------------------------------------------------------------------------


def verl_load_extern_object(module_path: str, object_name: str) -> Any:
    """verl/utils/import_utils.py `load_module` + `load_extern_object` for a file path: a fresh module per
    load (spec name from the path's hash; not put in sys.modules)."""
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(module_path))}", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, object_name)


async def _verl_call_with_kwargs_async(raw_fn: Callable[..., Any], extra_kwargs: Dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    return await raw_fn(*args, **{**kwargs, **extra_kwargs})


def _verl_call_with_kwargs(raw_fn: Callable[..., Any], extra_kwargs: Dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def verl_get_custom_reward_fn(path: str, name: str, reward_kwargs: Optional[Dict[str, Any]] = None) -> Callable[..., Any]:
    """verl/trainer/ppo/reward.py `get_custom_reward_fn`: reward_kwargs merged into every call (they win)."""
    raw_fn = verl_load_extern_object(path, name)
    kwargs = dict(reward_kwargs or {})
    if not inspect.iscoroutinefunction(raw_fn):
        return functools.partial(_verl_call_with_kwargs, raw_fn, kwargs)
    return functools.partial(_verl_call_with_kwargs_async, raw_fn, kwargs)


class VerlNaiveRewardManager:
    """verl/experimental/reward_loop/reward_manager/naive.py `NaiveRewardManager.run_single` for one sample:
    a coroutine `compute_score` is awaited on the worker's loop, a plain one runs in
    `loop.run_in_executor(None, ...)`; a dict's `score` is the reward, every key goes to reward_extra_info."""

    def __init__(self, compute_score: Callable[..., Any], loop: asyncio.AbstractEventLoop) -> None:
        self.compute_score = compute_score
        self.is_async_reward_score = inspect.iscoroutinefunction(compute_score)
        self.loop = loop

    async def run_single(self, sample: Dict[str, Any]) -> Dict[str, Any]:
        extra_info = dict(sample.get("extra_info", {}))
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        kwargs = dict(
            data_source=sample["data_source"], solution_str=sample["response_str"],
            ground_truth=sample["reward_model"]["ground_truth"], extra_info=extra_info,
        )
        if self.is_async_reward_score:
            result = await self.compute_score(**kwargs)
        else:
            result = await self.loop.run_in_executor(None, lambda: self.compute_score(**kwargs))
        if isinstance(result, dict):
            return {"reward_score": result["score"], "reward_extra_info": dict(result)}
        return {"reward_score": result, "reward_extra_info": {"acc": result}}


class VerlRewardLoop:
    """`RewardLoopManager.compute_rm_score` (reward_loop.py 323-350): the batch cut into `num_workers`
    contiguous chunks, one `RewardLoopWorker` each (a Ray actor, i.e. a process: here a thread with its own
    event loop and its own load of the custom function), each `asyncio.gather`ing `run_single` over its
    chunk (`compute_score_batch`); an exception in any sample fails the step (`ray.get`)."""

    def __init__(self, path: str, name: str, reward_kwargs: Optional[Dict[str, Any]] = None, num_workers: int = 2) -> None:
        self.workers = []
        for _ in range(num_workers):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, daemon=True)
            thread.start()
            fn = verl_get_custom_reward_fn(path, name, reward_kwargs)
            self.workers.append((loop, thread, VerlNaiveRewardManager(fn, loop)))

    def compute_rm_score(self, batch: List[Dict[str, Any]]) -> Dict[str, Any]:
        n = len(self.workers)
        assert len(batch) % n == 0, "only support equal chunk"
        size = len(batch) // n
        futures = []
        for k, (loop, _, manager) in enumerate(self.workers):
            chunk = batch[k * size:(k + 1) * size]

            async def compute_score_batch(chunk: List[Dict[str, Any]] = chunk, manager: VerlNaiveRewardManager = manager) -> Any:
                tasks = [asyncio.create_task(manager.run_single(s)) for s in chunk]
                return await asyncio.gather(*tasks)

            futures.append(asyncio.run_coroutine_threadsafe(compute_score_batch(), loop))
        outputs = [item for f in futures for item in f.result()]  # ray.get: the first exception is raised
        keys = list(outputs[0]["reward_extra_info"].keys())
        return {
            "scores": [o["reward_score"] for o in outputs],
            "reward_extra_info": {k: [o["reward_extra_info"][k] for o in outputs] for k in keys},
        }

    def close(self) -> None:
        for loop, thread, _ in self.workers:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


# --- slime v0.3.1 -----------------------------------------------------------------------------------------


class SlimeSample:
    """The fields of slime's `Sample` a reward function reads (slime/utils/types.py)."""

    class Status:
        PENDING = "pending"
        COMPLETED = "completed"
        ABORTED = "aborted"

    def __init__(self, prompt: Any, response: str, label: Any, group_index: Optional[int] = None) -> None:
        self.prompt, self.response, self.label = prompt, response, label
        self.group_index = group_index
        self.reward: Any = None
        self.status = SlimeSample.Status.COMPLETED
        self.metadata: Dict[str, Any] = {}
        self.remove_sample = False  # slime >= 0.3.1 (624b824): zeroes the sample's loss mask


async def slime_async_rm(args: Any, sample: Any, **kwargs: Any) -> Any:
    """rm_hub/__init__.py `async_rm` with `--custom-rm-path`: `await rm_function(args, sample, **kwargs)`."""
    return await args.rm_function(args, sample, **kwargs)


async def slime_batched_async_rm(args: Any, samples: List[Any], **kwargs: Any) -> Any:
    """rm_hub/__init__.py `batched_async_rm` with `--custom-rm-path`: the whole list in one call."""
    return await args.rm_function(args, samples, **kwargs)


async def slime_generate_and_rm_group(args: Any, group: List[Any]) -> List[Any]:
    """sglang_rollout.py `generate_and_rm_group` (generation left out): without `--group-rm` every sample
    is rewarded by its own task (`generate_and_rm` -> `async_rm`), all gathered; with it, the group in one
    `batched_async_rm` call after the gather."""

    async def generate_and_rm(sample: Any) -> Any:
        if args.group_rm:
            return sample
        sample.reward = await slime_async_rm(args, sample)
        return sample

    group = list(await asyncio.gather(*[asyncio.create_task(generate_and_rm(s)) for s in group]))
    if args.group_rm:
        rewards = await slime_batched_async_rm(args, group)
        for sample, reward in zip(group, rewards):
            sample.reward = reward
    return group


def slime_rollout(args: Any, groups: List[List[Any]]) -> List[List[Any]]:
    """`generate_rollout_async`: the groups' tasks run at once and each is read with `task.result()` (an
    exception in a reward function ends the rollout, and the run)."""

    async def main() -> List[List[Any]]:
        tasks = [asyncio.create_task(slime_generate_and_rm_group(args, g)) for g in groups]
        await asyncio.wait(tasks)
        return [task.result() for task in tasks]

    return asyncio.run(main())


def slime_fully_async(args: Any, groups: List[List[Any]]) -> Dict[str, List[List[Any]]]:
    """fully_async_rollout.py (624b824) `AsyncRolloutWorker`: each group's `generate_and_rm_group` task on
    the worker's own loop, read in its done-callback `_make_done_cb`: an exception is logged and the group
    dropped (its prompt already consumed from the data buffer); a group with an ABORTED sample goes back to
    the buffer; the rest to the output queue."""
    out: Dict[str, List[List[Any]]] = {"trained": [], "requeued": [], "dropped": []}

    async def main() -> None:
        tasks = []
        for group in groups:
            task = asyncio.create_task(slime_generate_and_rm_group(args, group))

            def done(t: "asyncio.Task[Any]", group: List[Any] = group) -> None:
                if t.exception() is not None:
                    out["dropped"].append(group)
                elif any(getattr(s, "status", None) == SlimeSample.Status.ABORTED for s in t.result()):
                    out["requeued"].append(t.result())
                else:
                    out["trained"].append(t.result())

            task.add_done_callback(done)
            tasks.append(task)
        await asyncio.wait(tasks)
        await asyncio.sleep(0)  # the done-callbacks run

    asyncio.run(main())
    return out


def slime_train_data(groups: List[List[Any]]) -> Dict[str, List[Any]]:
    """RolloutManager `_post_process_rewards` (grpo, rewards_normalization, no std) and the loss masks of
    `_convert_samples_to_train_data`: every sample's reward, masked or not, in its group's mean; a
    `remove_sample` sample's loss mask all zeros. A reward that is not a number fails `torch.tensor`."""
    advantages: List[float] = []
    for group in groups:
        raw = [s.reward for s in group]
        if any(isinstance(r, bool) or not isinstance(r, (int, float)) for r in raw):
            raise TypeError(f"torch.tensor(raw_rewards): {raw!r}")
        mean = sum(raw) / len(raw)
        advantages.extend(r - mean for r in raw)
    samples = [s for g in groups for s in g]
    return {"advantages": advantages, "trained": [not s.remove_sample for s in samples],
            "rewards": [s.reward for s in samples]}
