"""Lighthouse scores of every page of the built site, served the way GitHub Pages serves it.

Run with `make lighthouse` (or `python -m tools.lighthouse [SITE_DIR]`, default site/).
Serves SITE_DIR locally with gzip and GitHub Pages' cache header (`max-age=600`), runs
Lighthouse (npm, pinned in tools/lighthouse/, installed there with `npm ci` on first use) with
its mobile profile against each page in Debian's chromium, `--runs` times (3), keeps each
page's median run by performance score, prints a table of the scores and metrics, and writes
it to results/lighthouse-mobile.json and each kept report to build/lighthouse/.

The mobile profile's simulated throttling multiplies the CPU time it measures on this machine
by 4, a factor Lighthouse sets for a host with a benchmark index near 1500: a faster host scores
better, a slower one worse. `--cpu-slowdown calibrated` measures the host's index first
and uses the factor Lighthouse's CPU-throttling calculator gives for it, so the score stands for
the same reference phone on any host (results/lighthouse-mobile-calibrated.json). A benchmark,
not a test: run it on a quiet machine. Exits 1 when a page's kept run scores below --min (95)
in performance, accessibility or best practices.
"""

from __future__ import annotations

import argparse
import email.utils
import gzip
import hashlib
import http.server
import json
import mimetypes
import os
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tools.browser import CHROMIUM, page_paths, serve

__all__ = ["serve_like_pages", "install", "run_page", "calibrated_slowdown", "main"]

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "lighthouse"
CLI = TOOL / "node_modules" / "lighthouse" / "cli" / "index.js"
CHROME_FLAGS = "--headless=new --no-sandbox"
# the reader's colour scheme: Material follows prefers-color-scheme, which this flag turns dark
SCHEME_FLAGS = {"light": "", "dark": " --force-dark-mode"}
CATEGORIES = ["performance", "accessibility", "best-practices", "seo"]
# what GitHub Pages compresses (it gzips text; images and fonts are sent as they are)
_COMPRESS = {
    "text/html",
    "text/css",
    "text/javascript",
    "application/javascript",
    "application/json",
    "image/svg+xml",
    "text/plain",
    "application/xml",
    "text/xml",
}


class _Gzipped:
    """File bytes and their gzip, read once per modification time (shared by server threads)."""

    def __init__(self):
        self._cache: dict[Path, tuple[float, bytes, bytes]] = {}
        self._lock = threading.Lock()

    def __call__(self, path: Path) -> tuple[bytes, bytes]:
        mtime = path.stat().st_mtime
        with self._lock:
            hit = self._cache.get(path)
            if hit is None or hit[0] != mtime:
                raw = path.read_bytes()
                hit = (mtime, raw, gzip.compress(raw, compresslevel=6, mtime=0))
                self._cache[path] = hit
        return hit[1], hit[2]


class _PagesHandler(http.server.BaseHTTPRequestHandler):
    """Answers as GitHub Pages does; `site` and `load` (a _Gzipped) are set per server."""

    protocol_version = "HTTP/1.1"
    site: Path
    load: _Gzipped

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._respond(body=False)

    def do_GET(self):
        self._respond(body=True)

    def _target(self, path: str) -> tuple[Path | None, int]:
        """The file that answers `path` and its status; (None, 301) for a folder without /."""
        target = (self.site / path.lstrip("/")).resolve()
        if self.site not in (target, *target.parents):
            return self.site / "404.html", 404
        if target.is_dir():
            if not path.endswith("/"):
                return None, 301
            target = target / "index.html"
        if not target.is_file():
            return self.site / "404.html", 404
        return target, 200

    def _headers(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _respond(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        target, status = self._target(path)
        if target is None:
            self._headers(301, {"Location": path + "/", "Content-Length": "0"})
            return
        raw, packed = self.load(target)
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        etag = '"' + hashlib.sha1(raw).hexdigest()[:16] + '"'
        if status == 200 and self.headers.get("If-None-Match") == etag:
            self._headers(304, {"ETag": etag, "Cache-Control": "max-age=600"})
            return
        gz = ctype in _COMPRESS and "gzip" in self.headers.get("Accept-Encoding", "")
        data = packed if gz else raw
        charset = "; charset=utf-8" if ctype.startswith("text/") or "json" in ctype else ""
        headers = {
            "Content-Type": ctype + charset,
            "Content-Length": str(len(data)),
            "Cache-Control": "max-age=600",
            "ETag": etag,
            "Last-Modified": email.utils.formatdate(target.stat().st_mtime, usegmt=True),
            "Vary": "Accept-Encoding",
        }
        if gz:
            headers["Content-Encoding"] = "gzip"
        self._headers(status, headers)
        if body:
            self.wfile.write(data)


@contextmanager
def serve_like_pages(site: Path):
    """Serve `site` on a free local port as GitHub Pages would; yield the base URL.

    Text is gzipped when the client accepts it, every response carries `Cache-Control:
    max-age=600`, an ETag and Last-Modified; a folder without its slash redirects (301), a
    missing file gets the site's 404.html with status 404.
    """
    handler = type("Handler", (_PagesHandler,), {"site": site.resolve(), "load": _Gzipped()})
    with serve(handler=handler) as url:
        yield url


def install() -> Path:
    """Install the pinned Lighthouse into tools/lighthouse/ (npm ci) unless it is there."""
    if not CLI.exists():
        print("Installing Lighthouse into tools/lighthouse/ (npm ci) ...", flush=True)
        subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"],
            cwd=TOOL,
            check=True,
        )
    return CLI


def run_page(
    url: str,
    report: Path,
    cpu_slowdown: float | None = None,
    categories: list[str] = CATEGORIES,
    timeout: float = 240,
    scheme: str = "light",
) -> dict:
    """Run Lighthouse (mobile, simulated throttling) on `url`; save the report; return it.

    `cpu_slowdown` replaces the profile's CPU multiplier (4) when given; `scheme` "dark" makes
    the browser prefer a dark colour scheme (Material's slate palette).
    """
    report.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "node",
        str(CLI),
        url,
        "--output=json",
        f"--output-path={report}",
        f"--only-categories={','.join(categories)}",
        f"--chrome-flags={CHROME_FLAGS}{SCHEME_FLAGS[scheme]}",
        "--quiet",
    ]
    if cpu_slowdown is not None:
        cmd.append(f"--throttling.cpuSlowdownMultiplier={cpu_slowdown}")
    env = dict(os.environ, CHROME_PATH=CHROMIUM or "")
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0 or not report.exists():
        raise RuntimeError(f"lighthouse failed on {url}:\n{result.stderr[-2000:]}")
    return json.loads(report.read_text(encoding="utf-8"))


def calibrated_slowdown(benchmark_index: float) -> float:
    """Return the CPU slowdown that makes a host of `benchmark_index` stand for Lighthouse's
    reference phone, by Lighthouse's CPU-throttling calculator (linked from its throttling
    documentation): 4x at an index of 1533, 6x at 2000, 2x at 800, 1x at 150.

    Raises:
        ValueError: `benchmark_index` is not a positive number.
    """
    if not benchmark_index > 0:
        raise ValueError(
            f"calibrated_slowdown: `benchmark_index` must be positive, got {benchmark_index!r}."
        )
    if benchmark_index >= 1300:
        return 3 + (benchmark_index - 1300) / 233
    if benchmark_index >= 800:
        return 2 + (benchmark_index - 800) / 500
    # below 150 the host is slower than the phone: no slowdown at all
    return max(1.0, 1 + (benchmark_index - 150) / 650)


def summary(lhr: dict) -> dict:
    """Return the scores (0-100), FCP/LCP/TBT (ms) and transfer size (bytes) of a report."""
    cats, audits = lhr["categories"], lhr["audits"]

    def score(name: str) -> int | None:
        value = cats.get(name, {}).get("score")
        return None if value is None else round(value * 100)

    failed = {
        name: [
            ref["id"]
            for ref in cat["auditRefs"]
            if ref["weight"] > 0 and audits[ref["id"]].get("score") not in (None, 1)
        ]
        for name, cat in cats.items()
    }
    return {
        "performance": score("performance"),
        "accessibility": score("accessibility"),
        "best-practices": score("best-practices"),
        "seo": score("seo"),
        "fcp_ms": round(audits["first-contentful-paint"]["numericValue"]),
        "lcp_ms": round(audits["largest-contentful-paint"]["numericValue"]),
        "tbt_ms": round(audits["total-blocking-time"]["numericValue"]),
        "cls": round(audits["cumulative-layout-shift"]["numericValue"], 3),
        "transfer_bytes": round(audits["total-byte-weight"]["numericValue"]),
        "benchmark_index": lhr.get("environment", {}).get("benchmarkIndex"),
        "failed_audits": {k: v for k, v in failed.items() if v},
    }


def _table(rows: dict[str, dict]) -> str:
    head = (
        f"{'page':<22} {'perf':>4} {'runs':>7} {'a11y':>4} {'BP':>4} {'SEO':>4} "
        f"{'FCP s':>6} {'LCP s':>6} {'TBT ms':>7} {'KiB':>5} {'index':>5}"
    )
    lines = [head, "-" * len(head)]
    for page, r in rows.items():
        runs = "-".join(str(s) for s in sorted({min(r["runs"]), max(r["runs"])}))
        lines.append(
            f"{'/' + page:<22} {r['performance']:>4} {runs:>7} {r['accessibility']:>4} "
            f"{r['best-practices']:>4} {r['seo']:>4} {r['fcp_ms'] / 1000:>6.2f} "
            f"{r['lcp_ms'] / 1000:>6.2f} {r['tbt_ms']:>7} {r['transfer_bytes'] / 1024:>5.0f} "
            f"{r['benchmark_index'] or 0:>5.0f}"
        )
    return "\n".join(lines)


def _slowdown(value: str) -> str | float:
    if value in ("stock", "calibrated"):
        return value
    try:
        factor = float(value)
    except ValueError:
        factor = float("nan")
    if not factor >= 1:
        raise argparse.ArgumentTypeError(
            f"must be stock, calibrated or a factor of at least 1, got {value!r}"
        )
    return factor


def calibrate(url: str, runs: int = 3) -> tuple[float, float]:
    """Measure this host's benchmark index (median of `runs` Lighthouse runs on `url`).

    Returns (index, the calibrated CPU slowdown for it).
    """
    indexes = []
    for i in range(runs):
        lhr = run_page(url, ROOT / "build" / "lighthouse" / f"calibrate-{i}.json", None, ["seo"])
        indexes.append(lhr["environment"]["benchmarkIndex"])
    index = statistics.median(indexes)
    return index, round(calibrated_slowdown(index), 1)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default="site", help="built site (default: site)")
    parser.add_argument("--pages", nargs="*", help="page paths, e.g. telephone/ (default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per page; the median is kept")
    parser.add_argument(
        "--cpu-slowdown",
        type=_slowdown,
        default="stock",
        help="stock (the mobile profile's 4x), calibrated (for this host), or a factor",
    )
    parser.add_argument(
        "--scheme",
        choices=sorted(SCHEME_FLAGS),
        default="light",
        help="the colour scheme the browser prefers: light (default) or dark (Material's slate)",
    )
    parser.add_argument("--min", type=int, default=95, help="lowest acceptable score")
    parser.add_argument("--out", help="JSON table (default: results/lighthouse-mobile*.json)")
    args = parser.parse_args(argv)
    args.site = Path(args.site)
    if not (args.site / "index.html").exists():
        parser.error(f"{args.site} is not a built site (run `make build` first)")
    if CHROMIUM is None:
        parser.error("no Chrome or Chromium found (set CHROME_PATH or install chromium)")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    return args


def _median_run(url: str, page: str, runs: int, slowdown, scheme: str = "light") -> dict:
    """Run Lighthouse `runs` times on `page`; keep the median report; return its summary."""
    name = page.strip("/").replace("/", "-") or "index"
    done = []
    for i in range(runs):
        report = ROOT / "build" / "lighthouse" / f"{name}-{i}.json"
        lhr = run_page(
            f"{url}/{page}", report, None if slowdown == "stock" else slowdown, scheme=scheme
        )
        done.append((summary(lhr), report))
    done.sort(key=lambda r: r[0]["performance"] or 0)
    kept, report = done[len(done) // 2]
    report.replace(ROOT / "build" / "lighthouse" / f"{name}.json")
    for _, other in done:
        other.unlink(missing_ok=True)
    scores = [r["performance"] for r, _ in done]
    print(f"  /{page}: performance {scores}", flush=True)
    return {**kept, "runs": scores}


def _misses(rows: dict[str, dict], least: int) -> list[str]:
    """Print each page's failed audits; return the scores below `least`."""
    for page, r in rows.items():
        for cat, ids in r["failed_audits"].items():
            print(f"/{page} {cat}: {', '.join(ids)}")
    return [
        f"/{page} {cat} {r[cat]}"
        for page, r in rows.items()
        for cat in ("performance", "accessibility", "best-practices")
        if r[cat] is None or r[cat] < least
    ]


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    install()
    pages = args.pages or [p for p in page_paths(args.site) if not p.startswith("404")]
    version = json.loads((CLI.parents[1] / "package.json").read_text())["version"]
    browser = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout
    started = time.perf_counter()
    with serve_like_pages(args.site) as url:
        slowdown, host_index = args.cpu_slowdown, None
        if slowdown == "calibrated":
            host_index, slowdown = calibrate(f"{url}/")
            print(f"host benchmark index {host_index:.0f}: CPU slowdown {slowdown}x", flush=True)
        factor = 4.0 if slowdown == "stock" else slowdown
        print(
            f"Lighthouse {version}, mobile profile, CPU slowdown {factor}x"
            f"{' (stock)' if slowdown == 'stock' else ''}, {args.scheme} scheme, "
            f"{browser.strip()}, {CHROME_FLAGS + SCHEME_FLAGS[args.scheme]!r}; "
            f"{len(pages)} pages of {args.site} x {args.runs} runs, served with gzip and "
            "max-age=600",
            flush=True,
        )
        rows = {
            page or "": _median_run(url, page, args.runs, slowdown, args.scheme) for page in pages
        }
    print(_table(rows))
    misses = _misses(rows, args.min)
    print(f"{time.perf_counter() - started:.0f} s; below {args.min}: {', '.join(misses) or 'none'}")
    suffix = ("" if slowdown == "stock" else "-calibrated") + (
        "-dark" if args.scheme == "dark" else ""
    )
    out = Path(args.out or ROOT / "results" / f"lighthouse-mobile{suffix}.json")
    source = (
        "the mobile profile"
        if slowdown == "stock"
        else f"host benchmark index {host_index:.0f}"
        if host_index
        else "--cpu-slowdown"
    )
    table = {
        "lighthouse": version,
        "browser": browser.strip(),
        "chrome_flags": CHROME_FLAGS + SCHEME_FLAGS[args.scheme],
        "scheme": args.scheme,
        "profile": "mobile, simulated throttling",
        "cpu_slowdown": factor,
        "cpu_slowdown_from": source,
        "runs_per_page": args.runs,
        "kept": "median run by performance score",
        "server": "gzip, Cache-Control: max-age=600 (as GitHub Pages)",
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "pages": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"written: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
