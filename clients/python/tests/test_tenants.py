"""Issue 30: one reward server, several training runs, a key per run (REWARD_KEYS). The client and every
trainer path (TRL, verl, slime) send the key they are given, so each run's requests and spend are counted
under its own tenant; a key without a route's scope gets `ForbiddenError` (403 RW_FORBIDDEN, never
retried); a run cannot cancel another run's step."""
from __future__ import annotations

import asyncio
import hashlib
import json
import re
import urllib.request
from types import SimpleNamespace

import pytest

from conftest import GROUND_TRUTH, MATCHING, QUESTION
from debate_reward import ForbiddenError, RewardClient, UnauthorizedError
from debate_reward.slime import slime_binary_rm
from debate_reward.trl import trl_reward_func
from debate_reward.verl import verl_compute_score

KEYS = {"run-a": "key-of-run-a", "run-b": "key-of-run-b", "ops": "key-of-ops"}
SCOPES = {"run-a": ["reward", "cancel"], "run-b": ["reward"], "ops": ["metrics", "admin"]}


@pytest.fixture(scope="module")
def tenants_server(server_factory, tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.json"
    path.write_text(json.dumps({"keys": [
        {"name": n, "sha256": hashlib.sha256(k.encode()).hexdigest(), "scopes": SCOPES[n]} for n, k in KEYS.items()
    ]}))
    return server_factory({"REWARD_KEYS": str(path)})


def tenant_requests(server, tenant: str) -> float:
    """`reward_tenant_requests_total{tenant=...}` summed over routes and codes (read with the ops key)."""
    req = urllib.request.Request(server.url + "/metrics", headers={"Authorization": f"Bearer {KEYS['ops']}"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        text = resp.read().decode("utf-8")
    pattern = re.compile(r'^reward_tenant_requests_total\{[^}]*tenant="' + re.escape(tenant) + r'"[^}]*\} (\S+)$')
    return sum(float(m.group(1)) for line in text.splitlines() if (m := pattern.match(line)))


def test_each_trainer_path_sends_its_runs_key(tenants_server, monkeypatch):
    monkeypatch.delenv("DEBATE_REWARD_API_KEY", raising=False)
    url = tenants_server.url

    def counted(tenant: str, call) -> None:
        before = {t: tenant_requests(tenants_server, t) for t in ("run-a", "run-b")}
        call()
        after = {t: tenant_requests(tenants_server, t) for t in ("run-a", "run-b")}
        other = "run-b" if tenant == "run-a" else "run-a"
        assert after[tenant] > before[tenant] and after[other] == before[other], (tenant, before, after)

    def client_path(tenant: str):
        with RewardClient(url, api_key=KEYS[tenant]) as client:
            assert client.reward(QUESTION, GROUND_TRUTH, [MATCHING]) == [1.0]

    def trl_path(tenant: str):
        func = trl_reward_func(url, api_key=KEYS[tenant])
        assert asyncio.run(func(prompts=[QUESTION], completions=[MATCHING], ground_truth=[GROUND_TRUTH])) == [1.0]

    def verl_path(tenant: str):
        score = verl_compute_score(url, api_key=KEYS[tenant])
        out = asyncio.run(score(solution_str=MATCHING, ground_truth=GROUND_TRUTH, extra_info={"question": QUESTION}))
        assert out["score"] == 1.0

    def slime_path(tenant: str):
        rm = slime_binary_rm(url, api_key=KEYS[tenant])
        sample = SimpleNamespace(prompt=QUESTION, response=MATCHING, label=GROUND_TRUTH)
        assert asyncio.run(rm(SimpleNamespace(), sample)) == 1.0

    for path in (client_path, trl_path, verl_path, slime_path):
        for tenant in ("run-a", "run-b"):
            counted(tenant, lambda: path(tenant))


def test_a_key_without_the_scope_is_forbidden_and_a_cancel_stays_in_its_run(tenants_server):
    with RewardClient(tenants_server.url, api_key=KEYS["run-b"]) as run_b:
        with pytest.raises(ForbiddenError) as info:
            run_b.cancel(tag="step-1")
        assert (info.value.status, info.value.code, info.value.details["scope"]) == (403, "RW_FORBIDDEN", "cancel")
        assert info.value.attempts == 1  # never retried
    with RewardClient(tenants_server.url, api_key="not-a-key") as stranger, pytest.raises(UnauthorizedError):
        stranger.reward(QUESTION, GROUND_TRUTH, [MATCHING])
    # run-a may cancel, its own tag only; naming run-b needs `admin`.
    with RewardClient(tenants_server.url, api_key=KEYS["run-a"]) as run_a:
        assert run_a.cancel(tag="step-1") == {"cancelled_judgments": 0, "cancelled_requests": 0}
