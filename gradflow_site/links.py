"""The links and assets of built pages: links to .md files in executed output, missing files.

MkDocs rewrites the links it sees in a page's Markdown, but markdown-exec renders what a block
prints separately, so a link printed by a block would still say `loss_scaling.md`:
`rewrite_md_links` points it at the built page. `missing_assets` finds every script,
stylesheet, image and font a built page or stylesheet references that the site lacks, which the
strict build does not check.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["missing_assets", "rewrite_md_links"]

_MD_LINK = re.compile(r'href="(?![a-z][a-z0-9+.-]*:|/|#)([^"#?]+\.md)((?:#[^"]*)?)"')


def rewrite_md_links(
    page_html: str, uri: str, url_of: Callable[[str], str | None]
) -> tuple[str, list[str]]:
    """Point links to .md files in `page_html`, the page docs/`uri`, at the built pages.

    Args:
        page_html: the rendered page.
        uri: the page's path under docs/; relative links resolve against it.
        url_of: the URL of a page (its path under docs/) relative to this page, or None for a
            file that is not a page of the site.

    Returns:
        (HTML, problems): a link to a file that is not a page is left as it is, and named.
    """
    problems = []

    def fix(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2)
        url = url_of(posixpath.normpath(posixpath.join(posixpath.dirname(uri), target)))
        if url is None:
            problems.append(
                f"docs/{uri}: executed output links to '{target}', "
                "which is not a page of the site. Fix the link in the code block."
            )
            return match.group(0)
        return f'href="{url}{anchor}"'

    return _MD_LINK.sub(fix, page_html), problems


_ASSET_TAG = re.compile(r"<(script|link|img|source|audio|video|embed|object)\b([^>]*)>", re.I)
_ATTR = re.compile(r"""([a-zA-Z_:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def _asset_refs(text: str) -> list[str]:
    """Return local-asset candidates: script src, stylesheet href, img/source/media src.

    A regular expression over the tags, not an HTML parser: the check runs after every serve
    rebuild, which parsing every page would hold up.
    """
    refs = []
    for tag, attrs in _ASSET_TAG.findall(text):
        a = {m[0].lower(): unescape(m[1] or m[2] or m[3]) for m in _ATTR.findall(attrs)}
        tag = tag.lower()
        if tag == "link":
            if a.get("href") and a.get("rel") not in ("canonical", "alternate"):
                refs.append(a["href"])
        elif tag == "object":
            if a.get("data"):
                refs.append(a["data"])
        elif a.get("src"):
            refs.append(a["src"])
    return refs


_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)")


def _is_local(ref: str) -> bool:
    parts = urlsplit(ref)
    return not (parts.scheme or parts.netloc or ref.startswith(("#", "data:")))


def missing_assets(site_dir: Path, base_path: str = "/") -> list[tuple[str, str]]:
    """Return (referring file, reference) for every local asset that the built site lacks.

    Checks script, stylesheet, image and media references in every HTML page and `url(...)`
    references (fonts, images) in every stylesheet. The strict build does not check these.
    Absolute references (the 404 page uses them) are resolved against `base_path`, the path
    of `site_url`.
    """
    base_path = "/" + base_path.strip("/") + "/" if base_path.strip("/") else "/"
    missing = []
    for page in sorted(site_dir.rglob("*.html")):
        for ref in _asset_refs(page.read_text(encoding="utf-8")):
            if not _is_local(ref):
                continue
            path = unquote(urlsplit(ref).path)
            if path.startswith("/"):
                rel = path[len(base_path) :] if path.startswith(base_path) else path.lstrip("/")
                target = site_dir / rel
            else:
                target = page.parent / path
            if not target.exists():
                missing.append((str(page.relative_to(site_dir)), ref))
    for css in sorted(site_dir.rglob("*.css")):
        for ref in _CSS_URL.findall(css.read_text(encoding="utf-8", errors="replace")):
            if not _is_local(ref):
                continue
            if not (css.parent / unquote(urlsplit(ref).path)).exists():
                missing.append((str(css.relative_to(site_dir)), ref))
    return missing
