"""Screenshot every interactive widget of a built site in both colour schemes, for review.

Usage: python -m tools.screenshots [SITE_DIR] [OUT_DIR]   (`make screenshots`)
Writes OUT_DIR/<page>--<widget>-<n>--<scheme>.png (desktop width) and a phone-width copy of
each in the light scheme, then prints the list. Needs chromium and Playwright.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.browser import ARGS, CHROMIUM, mounted, serve, widget_pages

__all__ = ["main"]


def shoot(site: Path, out: Path) -> list[Path]:
    """Write the screenshots of every widget of `site` into `out`; return their paths."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise SystemExit("screenshots: chromium is not installed (apt-get install chromium).")
    pages = widget_pages(site)
    if not pages:
        raise SystemExit(f"screenshots: no widget found in {site}; build the site first.")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve(site) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        shots = [(s, w) for s in ("default", "slate") for w in (1100,)] + [("default", 390)]
        for path, names in pages.items():
            for scheme, width in shots:
                context = browser.new_context(
                    viewport={"width": width, "height": 900}, device_scale_factor=1
                )
                page = context.new_page()
                page.goto(f"{url}/{path}", wait_until="load")
                page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
                page.wait_for_function(mounted)
                # the sticky header would cover the top of a widget scrolled into view
                page.add_style_tag(content=".md-header, .md-tabs { position: static !important; }")
                figures = page.locator("[data-gf-widget]")
                for i, name in enumerate(names):
                    stem = path.strip("/") or "home"
                    suffix = scheme if width > 600 else "phone"
                    target = out / f"{stem}--{name}-{i + 1}--{suffix}.png"
                    figures.nth(i).screenshot(path=str(target), animations="disabled")
                    written.append(target)
                context.close()
        browser.close()
    return written


def main(argv: list[str]) -> None:
    site = Path(argv[0] if argv else "site")
    out = Path(argv[1] if len(argv) > 1 else "build/screenshots")
    for path in shoot(site, out):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
