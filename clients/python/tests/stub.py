"""A scripted stdlib HTTP server for unit-testing the client's retry and error handling."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Union

# {"status": int, "headers": {...}, "json": obj} | {"status": int, "body": bytes} | {"drop": True}
Reply = Dict[str, Any]
# A step of the script: a reply, or a function of the request (as recorded in `requests`) that returns one.
Step = Union[Reply, Callable[[Dict[str, Any]], Reply]]


def reply(status: int, body: Any = None, **headers: str) -> Reply:
    return {"status": status, "json": body, "headers": {k.replace("_", "-"): v for k, v in headers.items()}}


def group_ok(rewards: List[Optional[float]], **extra: Any) -> Dict[str, Any]:
    """A contract-conforming /v1/reward body for the given rewards (None = judge_error)."""
    ok = [r for r in rewards if r is not None]
    mean = sum(ok) / len(ok) if ok else None
    results = []
    for r in rewards:
        if r is None:
            results.append({"reward": None, "verdict": None, "status": "judge_error", "score": None,
                            "error": "RW_JUDGE_UNAVAILABLE: fake"})
        else:
            results.append({"reward": r, "verdict": "match" if r else "no_match", "status": "ok",
                            "score": 0.9 if r else 0.1, "cached": False, "calls": 3, "latency_ms": 5,
                            "judgment_id": "j"})
    body = {
        "rewards": rewards,
        "scores": [res["score"] for res in results],
        "results": results,
        "group": {"mean": mean, "std": 0.0, "advantages": [None if r is None else r - mean for r in rewards],
                  "n_ok": len(ok), "n_failed": len(rewards) - len(ok)},
        "graph": {"name": "analysts-2", "hash": "0123456789abcdef"},
        "backend": "stub",
        "usage": {"calls": 3 * len(ok), "prompt_tokens": 0, "completion_tokens": 0},
    }
    body.update(extra)
    return body


class StubServer:
    def __init__(self, script: List[Step], fallback: Optional[Step] = None, port: int = 0) -> None:
        self.script = list(script)
        self.fallback = fallback or reply(500, {"code": "RW_INTERNAL", "message": "script exhausted"})
        self.requests: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; without this, Nagle + delayed ACK add 40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = {
                    "method": self.command, "path": self.path, "headers": dict(self.headers),
                    "body": json.loads(raw) if raw else None,
                }
                with stub._lock:
                    stub.requests.append(request)
                    step = stub.script.pop(0) if stub.script else stub.fallback
                if callable(step):
                    step = step(request)
                if step.get("drop"):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if "json" in step:
                    data = json.dumps(step["json"]).encode("utf-8")
                else:
                    data = step.get("body", b"")
                self.send_response(step["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in step.get("headers", {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = _handle
            do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "StubServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Step", "StubServer", "group_ok", "reply"]
