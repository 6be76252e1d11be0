"""examples/grpo_group.py end to end against the real server."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import PY_ROOT, closed_port

EXAMPLE = PY_ROOT / "examples" / "grpo_group.py"


def run_example(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PY_ROOT / "src")}
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_example_prints_rewards_and_advantages(offline_server):
    result = run_example("--url", offline_server.url)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "rewards [1.0, 0.0, 1.0, 0.0]" in out
    assert "advantages [0.5, -0.5, 0.5, -0.5]" in out
    assert "backend offline" in out and "master_key_filler" in out


def test_example_reports_failed_judgments(failing_server):
    result = run_example("--url", failing_server.url)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "rewards [None, None, None, 0.0]" in result.stdout and "failed" in result.stdout


def test_example_exits_1_when_the_server_is_down():
    result = run_example("--url", f"http://127.0.0.1:{closed_port()}", "--max-retries", "0")
    assert result.returncode == 1 and "reward server error" in result.stderr
