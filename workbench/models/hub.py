"""Whether a Hugging Face hub id can be loaded, found out once and fast.

Left to itself, a load of a hub id with no network retries for about 50 seconds before it
fails (and one under vLLM fails with a traceback). :func:`hub_snapshot` asks first: the local
cache when ``HF_HUB_OFFLINE`` is set, else the hub, once, with a short timeout and no retries.
A hub that cannot be reached is not fatal when the model is cached: the load then reads the
cached snapshot without touching the network. Everything else (not cached and offline, an
unreachable hub, an id the hub does not have) is one :class:`ModelLoadError` line.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import ModelLoadError

#: Seconds to wait for the hub to answer (connecting, then the answer): one try, no retries.
HUB_TIMEOUT = (5.0, 10.0)


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def offline() -> bool:
    """Whether the environment forbids the hub (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    return _true(os.environ.get("HF_HUB_OFFLINE")) or _true(os.environ.get("TRANSFORMERS_OFFLINE"))


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The local cache's snapshot of ``repo_id`` at ``revision`` (None: not cached); never
    touches the network."""
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            repo_id,
            revision=revision,
            local_files_only=True,
            cache_dir=os.environ.get("HF_HUB_CACHE") or None,
        )
    except Exception:  # LocalEntryNotFoundError and friends: not (wholly) in the cache
        return None
    return Path(path) if (Path(path) / "config.json").is_file() else None


def ask_hub(repo_id: str, revision: str | None = None) -> tuple[int | None, str]:
    """(HTTP status, "") of the hub's page for ``repo_id``, or (None, why) when the hub could
    not be reached: one request, :data:`HUB_TIMEOUT`, no retries."""
    import httpx

    url = f"{hub_endpoint()}/api/models/{repo_id}"
    if revision:
        url += f"/revision/{revision}"
    headers = {}
    try:
        from huggingface_hub import get_token

        token = get_token()
        if token:
            headers["authorization"] = f"Bearer {token}"
    except Exception:
        pass
    connect, read = HUB_TIMEOUT
    try:
        r = httpx.head(
            url,
            headers=headers,
            follow_redirects=True,
            timeout=httpx.Timeout(read, connect=connect),
        )
    except httpx.HTTPError as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, reason
    return r.status_code, ""


def hub_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """Where to load ``repo_id`` from: None when the hub answers and has it (load it the usual
    way), its cached snapshot when the hub cannot be asked; else a one-line ModelLoadError."""
    what = f"could not load model {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
    cached = cached_snapshot(repo_id, revision)
    if offline():
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"{what}: it is not in the local Hugging Face cache, and HF_HUB_OFFLINE is set "
            "(unset it to download, or use a registered name or a local directory)"
        )
    status, why = ask_hub(repo_id, revision)
    if status is None:
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"{what}: it is not in the local Hugging Face cache and the hub "
            f"({hub_endpoint()}) cannot be reached: {why}"
        )
    if status in (401, 403, 404):
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"{what}: the hub has no model of that id (HTTP {status}); check the spelling, "
            "or log in (hf auth login) if it is gated or private"
        )
    return None
