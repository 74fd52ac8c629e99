"""A durable cache of endpoint responses, keyed by everything that determines the answer.

A resumed run (or a re-run of a finished one) asks the same requests again; answering them from
this cache means it never pays twice. The key is a hash of the endpoint URL, its path and the
request body (model, messages or prompt, sampling settings, seed): never of the API key, which
is not stored anywhere. SQLite in WAL mode: each response is committed as it arrives, so a run
killed mid-way keeps every answer it had received, and threads share one connection safely.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path


def request_key(url: str, body: dict) -> str:
    """A stable hash of a request (URL and JSON body; headers, where the key lives, excluded)."""
    blob = json.dumps({"url": url.rstrip("/"), "body": body}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """``get``/``put`` of JSON responses by request key, in one SQLite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, body TEXT NOT NULL)"
            )
            self._db.commit()

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, response: dict) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?)",
                (key, json.dumps(response, ensure_ascii=False)),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
