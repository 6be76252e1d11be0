"""The trainer snippets of README.md and clients/python/README.md, checked against the releases they name.

Each Python snippet runs (`HOST:8080` pointed at the real server) and its reward function goes through that
trainer's own reward path (`tests/trainers.py`); `trl.GRPOTrainer` / `GRPOConfig` are stand-ins that refuse
a keyword TRL 1.9.0 does not take. Every flag and config key of a shell snippet is looked up in what was
read from the named release (`tests/trainer_facts.json`: TRL's GRPOTrainer/GRPOConfig signatures, verl's
full generated config, slime's and OpenRLHF's argparse flags, each with the repository, tag and commit it
came from). A key written `+key` (Hydra: add a key) must be new under an existing parent.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import pytest

from conftest import GROUND_TRUTH, MATCHING, QUESTION, REPO, UNRELATED
from trainers import SlimeSample, TRLGRPOTrainer, VerlRewardLoop, slime_rollout

FACTS = json.loads((Path(__file__).parent / "trainer_facts.json").read_text())
NAMED = {"trl": "TRL 1.9", "verl": "verl 0.9", "slime": "slime 0.3.1", "openrlhf": "OpenRLHF 0.11"}
SECTIONS = [(REPO / "README.md", "## Trainer integration"), (REPO / "clients/python/README.md", "## Trainers")]


def section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else len(text)]


def blocks(text: str) -> List[Tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]


def trainer_of(lang: str, code: str) -> str:
    if lang == "python":
        for name in ("trl", "verl", "slime"):
            if re.search(rf"^from debate_reward\.{name} import", code, re.M):
                return name
        return ""
    if "custom_reward_function" in code or "verl.trainer" in code:
        return "verl"
    if "--reward.remote_url" in code or "--remote_rm_url" in code or "/get_reward" in code:
        return "openrlhf"
    if re.search(r"--(rm-|custom-rm-path|label-key|reward-key|group-rm)", code):
        return "slime"
    return ""


ALL = [(path.name, lang, code, trainer_of(lang, code)) for path, heading in SECTIONS
       for lang, code in blocks(section(path, heading))]
SNIPPETS = [s for s in ALL if s[3]]


def test_the_sections_name_the_releases_they_were_checked_against():
    for path, heading in SECTIONS:
        text = " ".join(section(path, heading).split())
        for name, named in NAMED.items():
            assert named in text, f"{path.name} {heading!r} does not name {named}"
            assert FACTS[name]["version"].startswith(named.split(" ")[1])
    assert {s[3] for s in SNIPPETS} == {"trl", "verl", "slime", "openrlhf"}


def _ids(snippets: List[Tuple[str, str, str, str]]) -> List[str]:
    return [f"{where}-{trainer}-{i}" for i, (where, _, _, trainer) in enumerate(snippets)]


SHELL = [s for s in SNIPPETS if s[1] != "python"]
PYTHON = [s for s in SNIPPETS if s[1] == "python"]


@pytest.mark.parametrize("where, lang, code, trainer", SHELL + [s for s in PYTHON if s[3] == "slime"],
                         ids=_ids(SHELL + [s for s in PYTHON if s[3] == "slime"]))
def test_every_flag_and_config_key_exists_in_the_named_release(where, lang, code, trainer):
    if lang == "python":  # the flags a slime snippet's comments tell you to pass
        code = "\n".join(line.split("#", 1)[1] for line in code.splitlines() if "#" in line)
    if trainer == "verl":
        keys = set(FACTS["verl"]["config_keys"])
        found = re.findall(r"(?:^|\s)(\+?[a-z_][a-z0-9_.]*)=", code)
        assert found
        for key in found:
            if key.startswith("+"):
                parent, leaf = key[1:].rsplit(".", 1)
                assert parent.rsplit(".", 1)[0] in keys and key[1:] not in keys, key
            else:
                assert key in keys, f"verl {FACTS['verl']['version']} has no config key {key}"
    else:
        flags = set(FACTS[trainer]["flags"])
        found = re.findall(r"(?<![\w/])--[a-z][a-z0-9_.-]*", code)
        assert found
        for flag in found:
            assert flag in flags, f"{trainer} {FACTS[trainer]['version']} has no flag {flag}"
    assert "use_reward_loop" not in code


def _trl_stub(captured: Dict[str, Any]) -> types.ModuleType:
    """`trl` with GRPOTrainer / GRPOConfig taking exactly TRL 1.9.0's keywords."""
    module = types.ModuleType("trl")
    trainer_params = set(FACTS["trl"]["GRPOTrainer.__init__"])
    config_fields = set(FACTS["trl"]["GRPOConfig"]) | set(FACTS["trl"]["GRPOConfig.inherited"])

    class GRPOConfig:
        def __init__(self, **kw: Any) -> None:
            unknown = set(kw) - config_fields
            assert not unknown, f"GRPOConfig in TRL 1.9.0 has no {sorted(unknown)}"
            self.__dict__.update(kw)

    class GRPOTrainer:
        def __init__(self, **kw: Any) -> None:
            unknown = set(kw) - trainer_params
            assert not unknown, f"GRPOTrainer in TRL 1.9.0 takes no {sorted(unknown)}"
            captured.update(kw)

    module.GRPOConfig, module.GRPOTrainer = GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]
    return module


def _run(code: str, url: str, namespace: Dict[str, Any]) -> Dict[str, Any]:
    host = url.split("://", 1)[1]
    exec(compile(code.replace("HOST:8080", host), "<README snippet>", "exec"), namespace)
    return namespace


def format_reward(completions, **kw):
    """Any other reward function of the user's, beside the debate reward."""
    return [1.0 for _ in completions]


@pytest.mark.parametrize("where, lang, code, trainer", PYTHON, ids=_ids(PYTHON))
def test_every_python_snippet_runs_through_its_trainer(where, lang, code, trainer, offline_server, tmp_path, monkeypatch):
    if trainer == "trl":
        captured: Dict[str, Any] = {}
        monkeypatch.setitem(sys.modules, "trl", _trl_stub(captured))
        dataset = [{"prompt": [{"role": "user", "content": QUESTION}], "ground_truth": GROUND_TRUTH}] * 2
        _run(code, offline_server.url, {"dataset": dataset, "format_reward": format_reward})
        trainer_double = TRLGRPOTrainer(captured["reward_funcs"], num_generations=2)
        try:
            trainer_double.step(dataset, [[{"role": "assistant", "content": c}] for c in (MATCHING, UNRELATED)])
        finally:
            trainer_double.close()
        assert [r[0] for r in trainer_double.rewards_per_func] == [1.0, 0.0]
    elif trainer == "verl":
        path = tmp_path / "my_reward.py"
        path.write_text(code.replace("HOST:8080", offline_server.url.split("://", 1)[1]))
        gt = {"ground_truth": GROUND_TRUTH, "question": QUESTION}
        batch = [{"data_source": "ideas", "response_str": c, "reward_model": {"ground_truth": gt}} for c in (MATCHING, UNRELATED)]
        names = [n for n in ("compute_score", "compute_score_sync") if re.search(rf"^{n} =", code, re.M)]
        assert names
        for name in names:
            loop = VerlRewardLoop(str(path), name, num_workers=1)
            try:
                assert loop.compute_rm_score(batch)["scores"] == [1.0, 0.0]
            finally:
                loop.close()
    elif trainer == "slime":
        # `install_abort_hook` wraps slime.rollout.sglang_rollout.abort (slime 0.3.1): a stand-in module.
        sglang_rollout = types.ModuleType("slime.rollout.sglang_rollout")

        async def abort(args: Any, rollout_id: int) -> list:
            return []

        sglang_rollout.abort = abort  # type: ignore[attr-defined]
        for name in ("slime", "slime.rollout"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "slime.rollout.sglang_rollout", sglang_rollout)
        ns = _run(code, offline_server.url, {})
        functions = [v for k, v in ns.items() if k in ("custom_rm", "rm", "group_rm") and callable(v)]
        assert functions
        group = [SlimeSample(QUESTION, MATCHING, GROUND_TRUTH), SlimeSample(QUESTION, UNRELATED, GROUND_TRUTH)]
        for fn in functions:
            group_rm = fn is ns.get("group_rm")
            [out] = slime_rollout(SimpleNamespace(rm_function=fn, group_rm=group_rm), [group])
            rewards = [s.reward for s in out]
            assert rewards[0] > rewards[1] if group_rm else rewards == [1.0, 0.0]
