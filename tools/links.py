"""Check the external links of a built site (needs the internet; not part of the test suite).

Usage: `make linkcheck` (builds the site first) or `python -m tools.links SITE_DIR`.
Internal links and anchors are checked offline by tests/test_site.py; this command covers the
rest: every http(s) link on every page is requested once (HEAD, then GET where HEAD is refused)
and each failure is printed with the pages that contain it. Exit status 1 when any fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import sys
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

_HREF = re.compile(r'<a\b[^>]*\bhref="(https?://[^"]+)"')


def external_links(site_dir: Path) -> dict[str, list[str]]:
    """Return {url: [pages linking to it]} for every external link in the built site."""
    found: dict[str, list[str]] = defaultdict(list)
    for page in sorted(site_dir.rglob("*.html")):
        for url in sorted(set(_HREF.findall(page.read_text(encoding="utf-8")))):
            found[url.replace("&amp;", "&")].append(str(page.relative_to(site_dir)))
    return dict(found)


def check(url: str, timeout: float = 15.0) -> str | None:
    """Return None when `url` answers with a success status, else a short reason."""
    headers = {"User-Agent": "gradient-flow-linkcheck/1.0"}
    for method in ("HEAD", "GET"):
        try:
            request = urllib.request.Request(url, method=method, headers=headers)
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if response.status < 400:
                    return None
                reason = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            reason = f"HTTP {error.code}"
            if method == "HEAD" and error.code in (403, 405, 501):
                continue
        except (urllib.error.URLError, OSError) as error:
            reason = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
        return reason
    return reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site_dir", nargs="?", default="site", type=Path)
    args = parser.parse_args(argv)
    if not (args.site_dir / "index.html").exists():
        sys.exit(f"linkcheck: {args.site_dir} holds no built site; run `make build` first.")
    links = external_links(args.site_dir)
    print(f"checking {len(links)} external links from {args.site_dir}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(links, pool.map(check, links)))
    failures = {url: why for url, why in results.items() if why}
    for url, why in sorted(failures.items()):
        print(f"BROKEN {url}  ({why})  on {', '.join(links[url])}")
    print(f"{len(links) - len(failures)} ok, {len(failures)} broken")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
