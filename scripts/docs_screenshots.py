"""Screenshots of the built documentation site as a reader sees it (1,400 x 1,000, Chromium).

    make docs && .venv/bin/python scripts/docs_screenshots.py [--out docs/figures/site]

Serves ``site/`` on a local port (nothing leaves the machine: the site's assets are local) and
saves the home page, getting started, one API page and one executed notebook as PNG; the
development page shows them.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: page (relative to the site's root) -> file name of its screenshot
PAGES = {
    "": "home.png",
    "getting-started/": "getting-started.png",
    "reference/workbench/backends/": "api-backends.png",
    "notebooks/00_quickstart/": "notebook-quickstart.png",
}
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--no-first-run")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", default=str(ROOT / "site"), help="the built site (make docs)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "figures" / "site"))
    args = ap.parse_args(argv)
    site, out = Path(args.site), Path(args.out)
    if not (site / "index.html").is_file():
        print(f"error: no built site at {site}: run make docs first", file=sys.stderr)
        return 2
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: no chromium (scripts/system_deps.sh installs it)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(site)
    )  # quiet: log_message below
    handler.func.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            outside: list[str] = []
            page.on(
                "request",
                lambda r: outside.append(r.url) if not r.url.startswith(url) else None,
            )
            for path, name in PAGES.items():
                page.goto(url + path, wait_until="networkidle")
                page.screenshot(path=str(out / name))
                print(f"{url + path} -> {out / name}")
            browser.close()
    finally:
        server.shutdown()
    if outside:
        print(f"error: the pages asked for {len(outside)} outside addresses: {outside[:3]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
