"""A real OpenAI-compatible server for the HTTP back end's tests, and a proxy that misbehaves.

``serve_vllm`` starts vLLM's server on the embedded model from .venv-vllm. ``FaultyProxy``
forwards requests to it and, on the schedule a test sets, answers some with 429 (rate limit,
``Retry-After: 0``) or 500 instead, or goes down altogether; it counts the requests that
reached the server and records the Authorization headers it saw.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

from workbench.backends.serve import free_port, start_vllm_server

ROOT = Path(__file__).resolve().parents[1]
VLLM_ENV = ROOT / os.environ.get("WORKBENCH_VLLM_VENV", ".venv-vllm")


def serve_vllm(model_dir: Path, name: str, log: Path, timeout: float = 600):
    """vLLM's OpenAI-compatible server on ``model_dir`` in fp32; (process, base URL). Eager:
    what is tested is the HTTP back end against a real server, and compiling the model for
    CUDA-graph-free CPU execution took 154 of the server's 166 s start on 2 cores."""
    return start_vllm_server(
        str(model_dir),
        name,
        dtype="float32",
        max_model_len=1024,
        log=log,
        timeout=timeout,
        extra=["--enforce-eager"],
    )


class FaultyProxy:
    """Forward to ``upstream``; ``fail`` maps the n-th request (1-based) to a status to answer
    instead; ``down`` answers 503 to everything."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.fail: dict[int, int] = {}
        self.down = False
        self.down_after: int | None = None  # go down once this many requests were forwarded
        self.seen = 0
        self.forwarded = 0
        self.auth: set[str] = set()
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, body: bytes, headers: dict | None = None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method: str):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    proxy.seen += 1
                    n = proxy.seen
                    proxy.auth.add(self.headers.get("Authorization", ""))
                    if proxy.down_after is not None and proxy.forwarded >= proxy.down_after:
                        proxy.down = True
                    status = 503 if proxy.down else proxy.fail.get(n)
                if status:
                    err = json.dumps(
                        {"error": {"message": f"injected {status}", "type": "test"}}
                    ).encode()
                    return self._reply(
                        status, err, {"Content-Type": "application/json", "Retry-After": "0"}
                    )
                req = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=body or None,
                    method=method,
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=300) as r:
                        data, code = r.read(), r.status
                except urllib.error.HTTPError as e:
                    data, code = e.read(), e.code
                with proxy._lock:
                    proxy.forwarded += 1
                self._reply(code, data, {"Content-Type": "application/json"})

            def do_POST(self):
                self._handle("POST")

            def do_GET(self):
                self._handle("GET")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
