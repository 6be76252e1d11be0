"""Fixtures: the real built server (`node dist/server/main.js`) on free loopback ports, one process per
backend flavour, each stopped by PID at the end of the session."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

PY_ROOT = Path(__file__).resolve().parents[1]
REPO = PY_ROOT.parents[1]
SERVER_JS = REPO / "dist" / "server" / "main.js"
FAKE_SERVER_TS = REPO / "test" / "fakes" / "openai-server.ts"

sys.path.insert(0, str(PY_ROOT / "src"))

# Variables the server reads (ENGINE_API.md); scrubbed from the inherited environment so a developer's
# shell cannot change what the tests exercise.
SERVER_ENV_PREFIXES = ("JUDGE_", "REWARD_", "MAX_", "MIN_", "REQUEST_", "FAILURE_", "TRANSCRIPTS_", "CACHE_")
SERVER_ENV_NAMES = {"PORT", "HOST", "LOG_LEVEL", "METRICS_PUBLIC", "DEFAULT_GRAPH", "BODY_LIMIT_BYTES",
                    "SHUTDOWN_GRACE_MS", "RECENT_WINDOW"}


def pytest_addoption(parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (e.g. a real 30 s reward-server restart)")


def pytest_collection_modifyitems(config, items) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (bash clients/python/run-tests.sh --run-slow -m slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    return free_port()


def _clean_env(overrides: Dict[str, str]) -> Dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SERVER_ENV_NAMES and not k.startswith(SERVER_ENV_PREFIXES)
    }
    env.update({"HOST": "127.0.0.1", "LOG_LEVEL": "warn"})
    env.update(overrides)
    return env


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


class ServerProcess:
    """`node dist/server/main.js` with the given environment, on a free port; `.url` once /healthz is 200.
    Its output goes to a temporary log file, deleted by `remove_log()` (quoted in the error if start fails)."""

    def __init__(
        self, env: Optional[Dict[str, str]] = None, start_timeout_s: float = 20.0, port: Optional[int] = None
    ) -> None:
        self.overrides = dict(env or {})
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.start_timeout_s = start_timeout_s
        self._start(port)

    def _start(self, fixed_port: Optional[int]) -> None:
        start_timeout_s = self.start_timeout_s
        last_error = ""
        for _ in range(3):  # a free port can be taken between probe and bind; try another
            self.log = tempfile.NamedTemporaryFile(prefix="debate-reward-server-", suffix=".log", delete=False)
            port = fixed_port if fixed_port is not None else free_port()
            self.proc = subprocess.Popen(
                ["node", str(SERVER_JS)],
                cwd=str(REPO),
                env=_clean_env({**self.overrides, "PORT": str(port)}),
                stdout=self.log,
                stderr=subprocess.STDOUT,
            )
            self.url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + start_timeout_s
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if _get(self.url + "/healthz", timeout=0.5) == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.05)
            last_error = self.read_log()[-3000:]
            self.stop()
            self.remove_log()
        raise RuntimeError(f"server did not become healthy; env={self.overrides}\n{last_error}")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL to this PID (an OOM kill): in-flight requests lose their connection."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()

    def start_again(self) -> None:
        """A new process on the same port and environment (the restarted pod behind the same address)."""
        self.remove_log()
        self._start(self.port)

    def read_log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(encoding="utf-8", errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            return resp.read().decode("utf-8")

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()  # SIGTERM to this PID only: graceful shutdown
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.log.close()

    def remove_log(self) -> None:
        Path(self.log.name).unlink(missing_ok=True)


class FakeBackend:
    """The fake OpenAI-compatible backend, standalone (`test/fakes/openai-server.ts`)."""

    def __init__(
        self, latency_ms: int = 0, reply: str = "match", start_timeout_s: float = 60.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        # `node --import tsx` rather than `npx tsx`: one process, so terminating this PID stops the fake
        # (npx and the tsx CLI are wrappers whose child outlives a SIGTERM to the parent).
        self.proc = subprocess.Popen(
            ["node", "--import", "tsx", str(FAKE_SERVER_TS), "--port", "0",
             "--latency-ms", str(latency_ms), "--reply", reply, *extra_args],
            cwd=str(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        seen: List[str] = []
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if line.startswith("LISTENING "):
                self.base_url = line.split(" ", 1)[1].strip()
                return
        self.stop()
        raise RuntimeError("fake backend did not start:\n" + "".join(seen)[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture(scope="session")
def built() -> Path:
    """The built server; builds once when dist/ is missing (run-tests.sh always builds first)."""
    if not SERVER_JS.exists():
        result = subprocess.run(["npm", "run", "build"], cwd=str(REPO), capture_output=True, text=True)
        if result.returncode != 0 or not SERVER_JS.exists():
            pytest.fail(f"npm run build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return SERVER_JS


@pytest.fixture(scope="session")
def server_factory(built: Path) -> Iterator:
    started: List[ServerProcess] = []

    def start(env: Optional[Dict[str, str]] = None) -> ServerProcess:
        server = ServerProcess(env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        server.remove_log()


@pytest.fixture(scope="session")
def offline_server(server_factory) -> ServerProcess:
    """No JUDGE_BASE_URL: the embedded deterministic offline backend."""
    return server_factory()


@pytest.fixture(scope="session")
def failing_server(server_factory) -> ServerProcess:
    """Every LLM call fails at once (judge on a closed loopback port, no retries): every judgment that
    needs an LLM ends `judge_error`."""
    return server_factory(
        {
            "JUDGE_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1",
            "JUDGE_API_KEY": "test",
            "JUDGE_MODEL": "unreachable-judge",
            "JUDGE_MAX_RETRIES": "0",
        }
    )


@pytest.fixture(scope="session")
def auth_server(server_factory) -> ServerProcess:
    return server_factory({"REWARD_API_KEY": "s3cret-key"})


@pytest.fixture(scope="session")
def fake_backend(built: Path) -> Iterator[FakeBackend]:
    backend = FakeBackend(latency_ms=300, reply="match")
    yield backend
    backend.stop()


@pytest.fixture(scope="session")
def tiny_server(server_factory, fake_backend: FakeBackend) -> ServerProcess:
    """A server in front of a slow (300 ms per call) judge with room for one running and one queued
    judgment: concurrent requests overflow and get 503 + Retry-After."""
    return server_factory(
        {
            "JUDGE_BASE_URL": fake_backend.base_url,
            "JUDGE_API_KEY": "test",
            "JUDGE_MODEL": "fake-judge",
            "MAX_CONCURRENT_JUDGMENTS": "1",
            "MAX_QUEUED_JUDGMENTS": "1",
        }
    )


#: In a rollout, makes the marker judge (below) fail every call about it; `MATCHING` is judged a match
#: because it holds `MATCH_MARKER` (the ground truth does not), anything else no match.
FAIL_MARKER = "JUDGEFAIL"
MATCH_MARKER = "per-expert bias"


@pytest.fixture(scope="session")
def marker_backend(built: Path) -> Iterator[FakeBackend]:
    backend = FakeBackend(latency_ms=0, extra_args=("--match-marker", MATCH_MARKER, "--fail-marker", FAIL_MARKER))
    yield backend
    backend.stop()


@pytest.fixture(scope="session")
def slow_marker_backend(built: Path) -> Iterator[FakeBackend]:
    """The marker judge at 300 ms a call: a step's rollouts are still in flight when a test restarts the server."""
    backend = FakeBackend(latency_ms=300, extra_args=("--match-marker", MATCH_MARKER, "--fail-marker", FAIL_MARKER))
    yield backend
    backend.stop()


@pytest.fixture(scope="session")
def marker_server(server_factory, marker_backend: FakeBackend) -> ServerProcess:
    """A judge that decides by marker: `MATCHING` 1, other ideas 0, a rollout holding `FAIL_MARKER` fails
    (HTTP 500 from the judge, no judge retries): one group can hold all three."""
    return server_factory({"JUDGE_BASE_URL": marker_backend.base_url, "JUDGE_API_KEY": "test",
                           "JUDGE_MODEL": "marker-judge", "JUDGE_MAX_RETRIES": "0"})


# --- test data (written for these tests) -----------------------------------------------------------------

QUESTION = "How can sparse mixture-of-experts language models keep expert load balanced during training?"
GROUND_TRUTH = (
    "We propose an auxiliary-loss-free load balancing strategy for mixture-of-experts language models. "
    "Each expert receives a bias term that is added to its routing score before top-k selection. After "
    "every training step the bias is decreased for overloaded experts and increased for underloaded "
    "experts, which balances expert load without an auxiliary loss whose gradient interferes with "
    "language modeling."
)
MATCHING = (
    "Balance expert load in mixture-of-experts language models without an auxiliary loss: add a "
    "per-expert bias term to the routing score before top-k selection, and after each training step "
    "decrease the bias of overloaded experts and increase the bias of underloaded experts."
)
UNRELATED = (
    "Distill a large dense transformer into a small recurrent student by matching hidden states on "
    "synthetic dialogue transcripts collected from crowd workers, then prune attention heads."
)
DEGENERATE = ":"


def post_json(url: str, body: object, headers: Optional[Dict[str, str]] = None, timeout: float = 60):
    """Raw stdlib POST, for checking the wire format independently of the client. -> (status, json)."""
    data = json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8")), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw = exc.read().decode("utf-8")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return exc.code, parsed, dict(exc.headers)


def requests_total(server: ServerProcess, route: str) -> float:
    """`reward_requests_total{route=...}` summed over status codes, from the server's /metrics."""
    total = 0.0
    for line in server.metrics().splitlines():
        if line.startswith(f'reward_requests_total{{route="{route}",'):
            total += float(line.rsplit(" ", 1)[1])
    return total
