"""MkDocs hooks: the verification stamp, page names in execution errors, local-asset check.

Registered in mkdocs.yml under `hooks:`. With `strict: true`, every warning logged here fails
the build, so a broken page is never published.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.hooks.gradflow")

# One thread per numerical library, set before torch and numpy are imported (on_config): the
# printed numbers do not depend on the machine's cores, and the build has no thread but its own
# when gradflow_site/parallel.py and lab_runs.py fork it (a caller's own values win).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_current_page: str | None = None
_stamp: str = ""


def _git(root: Path, *args: str) -> str | None:
    """Return what `git ARGS` prints in `root`, stripped, or None outside a git checkout."""
    try:
        return subprocess.run(
            ["git", *args], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _commit(root: Path) -> str:
    """Return the short commit of the checkout, with "+dirty" for uncommitted changes."""
    sha = _git(root, "rev-parse", "--short=12", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    if sha is None or dirty is None:
        return "unknown (not a git checkout)"
    return sha + ("+dirty" if dirty else "")


def _commit_epoch(root: Path) -> str | None:
    """Return the last commit's time as seconds since the epoch, or None outside git."""
    out = _git(root, "log", "-1", "--format=%ct")
    return out if out and out.isdigit() else None


class _PageNameFilter(logging.Filter):
    """Prefix markdown-exec's execution errors with the page they come from."""

    def filter(self, record: logging.LogRecord) -> bool:
        from gradflow_site.errors import MARKER

        msg = str(record.msg)
        if MARKER in msg:
            # gradflow_site/errors.py already said where and what, in one message
            record.msg = msg[msg.index(MARKER) + len(MARKER) :].split("\n```")[0].strip()
            return True
        if _current_page and "Execution of" in msg[:60] and "docs/" not in msg[:80]:
            record.msg = f"docs/{_current_page}: {msg}"
        if msg.startswith("A 'dirty' build is being performed"):
            # `make serve` rebuilds dirty on purpose (on_files below keeps it correct), so this
            # notice must not count as a warning and stop the strict serve
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


_command = ""  # the mkdocs command running: "build", "serve" or "gh-deploy"
_dirty = False  # --dirty: only changed pages are rendered

# Garbage collection: the pages' sessions keep many small torch and matplotlib objects alive,
# none of them garbage: Python's default thresholds would walk them again and again through a
# build, and once more in a last full collection at exit. Collections become rarer for the whole
# build, and after a one-off `mkdocs build` everything left is frozen, so the exit does not walk
# it.
GC_THRESHOLD = (50_000, 20, 100)


def on_startup(command, dirty, **kwargs):
    import gc

    global _command, _dirty
    _command, _dirty = command, dirty
    gc.set_threshold(*GC_THRESHOLD)


def on_shutdown(**kwargs):
    import gc

    if _command != "serve":  # the process ends now; a server keeps collecting as usual
        gc.freeze()


def on_config(config, **kwargs):
    global _stamp
    import torch

    from gradflow_site import exec_cache

    # one intra-op thread: faster for the guide's tiny models on a shared machine, and the
    # printed numbers do not depend on how many cores the build machine has
    torch.set_num_threads(1)
    # read by the executed labs' setup cell (gradflow_site/labs.py): batch each cell's output
    os.environ["GRADFLOW_SITE_BUILD"] = "1"
    # torch's compiler cache (created when an optimizer first steps) goes under .cache/, not
    # into the temporary directory, where every build would leave a folder
    os.environ.setdefault(
        "TORCHINDUCTOR_CACHE_DIR",
        str(Path(config.config_file_path).parent / ".cache" / "torchinductor"),
    )
    exec_cache.install()
    # mkdocs-jupyter caches its rendering of a notebook by the notebook's bytes (outputs
    # included); the folder name adds the package versions, and tests and CI turn it off
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is not None:
        jupyter.config["cache"] = exec_cache.enabled()
        jupyter.config["cache_dir"] = str(
            Path(config.config_file_path).parent / ".cache" / "jupyter" / exec_cache.versions()
        )
    root = Path(config.config_file_path).parent
    commit = _commit(root)
    # reproducible on any day: pages and sitemap.xml carry the last commit's date, not today's
    # (MkDocs reads SOURCE_DATE_EPOCH; a caller's own value wins)
    if "SOURCE_DATE_EPOCH" not in os.environ:
        epoch = _commit_epoch(root)
        if epoch:
            os.environ["SOURCE_DATE_EPOCH"] = epoch
    _stamp = (
        '<p class="gf-stamp">{what}: torch '
        f"{torch.__version__}, Python {platform.python_version()}, commit <code>{commit}</code>."
        "</p>"
    )
    config.extra["verified"] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "commit": commit,
    }
    for handler in logging.getLogger("mkdocs").handlers:
        # by name: serve re-imports this module on every rebuild, with a new class object
        if not any(type(f).__name__ == "_PageNameFilter" for f in handler.filters):
            handler.addFilter(_PageNameFilter())
    return config


def on_pre_build(config, **kwargs):
    from gradflow_site import exec_cache

    exec_cache.start_build(Path(config.config_file_path).parent)


_labs: dict[str, str] = {}


def _nav_targets(nav) -> list[str]:
    out = []
    for entry in nav or []:
        for target in entry.values() if isinstance(entry, dict) else [entry]:
            out += _nav_targets(target) if isinstance(target, list) else [target]
    return out


@event_priority(100)  # before mkdocs-jupyter's on_files turns the executed labs into pages
def on_files(files, config, **kwargs):
    """Generate a lab notebook per chapter (gradflow_site/labs.py) and add it to the site.

    labs/<name>.ipynb is a download for every chapter; labs/run/<name>.ipynb, for the labs the
    nav lists there, starts executing in the background now (gradflow_site/lab_runs.py) and
    mkdocs-jupyter renders the executed copy when the build reaches that page.
    """
    import shutil

    from mkdocs.structure.files import File

    from gradflow_site import exec_cache, lab_runs, labs, parallel

    root = Path(config.config_file_path).parent
    out = root / "build" / "labs-src"
    _labs.clear()
    _labs.update(labs.chapters(config.nav or []))
    written = labs.write_all(out / "labs", _labs)
    rendered = [t for t in _nav_targets(config.nav) if t.startswith("labs/run/")]
    (out / "labs" / "run").mkdir(exist_ok=True)
    for target in rendered:
        source = out / "labs" / Path(target).name
        if source in written and (
            not (out / target).exists() or (out / target).read_bytes() != source.read_bytes()
        ):
            tmp = out / f"{target}.{os.getpid()}.tmp"
            shutil.copyfile(source, tmp)
            tmp.replace(out / target)
    _mark_stale_pages(files, root)
    chapters = [f for f in files.documentation_pages() if f.src_uri.endswith(".md")]
    if _command != "serve" and not _dirty and parallel.enabled() and len(chapters) > 1:
        # a fork of this process renders chapters from the last one back (gradflow_site/parallel.py)
        parallel.start(chapters, files, config)
    cache_root = root / ".cache" / "labs" if exec_cache.enabled() else None
    for uri in [f"labs/{name}.ipynb" for name in sorted(_labs)] + rendered:
        if not (out / uri).exists():
            continue
        src_dir = out
        if uri in rendered:
            src_dir = lab_runs.start(uri, out / uri, cache_root, exec_cache.versions()).src_dir
        files.append(
            File(
                uri,
                src_dir=str(src_dir),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


@event_priority(100)  # before mkdocs-jupyter reads the notebook
def on_pre_page(page, config, files, **kwargs):
    from mkdocs.exceptions import PluginError

    from gradflow_site import exec_cache, lab_runs, parallel

    if page.file.src_uri.endswith(".md"):
        handed = parallel.take(page.file.src_uri)  # the fork rendered it: take its outputs
        if handed is not None:
            exec_cache.hand_over(handed)
            _forked_seconds[page.file.src_uri] = handed["seconds"]
    if page.file.src_uri.startswith("labs/run/"):
        try:
            lab_runs.wait(page.file.src_uri)
        except RuntimeError as err:
            raise PluginError(f"docs/{page.file.src_uri}: {err}") from None
    return page


def _mark_stale_pages(files, root: Path) -> None:
    """Under `mkdocs serve --dirty`, rebuild every page when code it may execute has changed.

    A dirty rebuild re-renders only pages whose Markdown is newer than their HTML, which makes
    a prose edit show in about a second. A page also depends on the snippets it includes and
    the modules and config they use; when one of those is newer than a page's HTML, treat the
    page as modified too, so an edited snippet never leaves a stale page.
    """
    if "serve" not in sys.argv or "--dirty" not in sys.argv:
        return
    watched = [root / "mkdocs.yml"]
    for folder in ("snippets", "gradflow_ref", "gradflow_site"):
        watched += (root / folder).rglob("*.py")
    newest = max(p.stat().st_mtime for p in watched if p.exists())
    for file in files.documentation_pages():
        dest = Path(file.abs_dest_path)
        if dest.exists() and dest.stat().st_mtime < newest:
            file.is_modified = lambda: True


_page_started: dict[str, float] = {}
_shown_from: dict[str, int] = {}  # page -> index of its first shown block in exec_cache
shown_by_page: dict[str, list] = {}  # page -> [(session, code, output)] of blocks shown
page_seconds: dict[str, float] = {}
_forked_seconds: dict[str, float] = {}  # pages the parallel fork rendered: its time


def _front_matter_lines(page, markdown: str) -> int:
    """Return how many lines of the source file precede `markdown` (its front matter)."""
    try:
        source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    except (OSError, TypeError):
        return 0
    return source[: len(source) - len(markdown)].count("\n") if source.endswith(markdown) else 0


def on_page_markdown(markdown, page, **kwargs):
    global _current_page
    import time

    from gradflow_site import exec_cache, inline

    _current_page = page.file.src_uri
    exec_cache.set_page(page.file.src_uri)
    _page_started[page.file.src_uri] = time.perf_counter()
    _shown_from[page.file.src_uri] = len(exec_cache.shown_blocks())
    if page.file.src_uri.endswith(".md"):
        from gradflow_site import errors

        offset = _front_matter_lines(page, markdown)
        markdown, problems = errors.check_includes(markdown, f"docs/{page.file.src_uri}", offset)
        for problem in problems:
            log.warning(problem)
        errors.register_page(markdown, f"docs/{page.file.src_uri}", offset)
        markdown, problems = inline.transform(markdown, f"docs/{page.file.src_uri}", offset)
        for problem in problems:
            log.warning(problem)
    name = Path(page.file.src_uri).stem
    if page.file.src_uri.endswith(".md") and name in _labs:
        # a download button under the chapter's title
        button = (
            f"[:material-download: Download this chapter as a notebook](labs/{name}.ipynb)"
            "{ .md-button download }\n"
        )
        markdown = re.sub(
            r"^(# .+\n)", lambda m: m.group(1) + "\n" + button, markdown, count=1, flags=re.M
        )
    return markdown


_MD_LINK = re.compile(r'href="(?![a-z][a-z0-9+.-]*:|/|#)([^"#?]+\.md)((?:#[^"]*)?)"')


def _rewrite_md_links(html: str, page, files) -> str:
    """Point links to .md files in executed output at the built pages.

    MkDocs rewrites the links it sees in the Markdown source, but markdown-exec renders printed
    Markdown separately, so a link printed by a block would still say `loss_scaling.md`.
    """
    import posixpath

    def fix(match: re.Match) -> str:
        target, anchor = match.group(1), match.group(2)
        src = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), target))
        file = files.get_file_from_path(src)
        if file is None:
            log.warning(
                f"docs/{page.file.src_uri}: executed output links to '{target}', "
                "which is not a page of the site. Fix the link in the code block."
            )
            return match.group(0)
        return f'href="{file.url_relative_to(page.file)}{anchor}"'

    return _MD_LINK.sub(fix, html)


@event_priority(100)  # before Material's search plugin reads the page
def on_page_context(context, page, **kwargs):
    """Keep the executed labs out of the search index.

    They repeat the chapters' code, so search would list every hit twice, and they would make
    up much of the index that every page downloads.
    """
    if page.file.src_uri.startswith("labs/"):
        page.meta.setdefault("search", {})["exclude"] = True
    return context


def on_page_content(html, page, config, files, **kwargs):
    global _current_page
    import time

    from gradflow_site import lab_html, mathml

    _current_page = None
    started = _page_started.pop(page.file.src_uri, None)
    if started is not None:
        page_seconds[page.file.src_uri] = _forked_seconds.pop(
            page.file.src_uri, time.perf_counter() - started
        )
        log.debug(f"docs/{page.file.src_uri}: rendered in {page_seconds[page.file.src_uri]:.2f} s")
    if page.file.src_uri.endswith(".md"):
        from gradflow_site import exec_cache, inline

        first = _shown_from.pop(page.file.src_uri, None)
        if first is not None:
            shown_by_page[page.file.src_uri] = exec_cache.shown_blocks()[first:]
        where = f"docs/{page.file.src_uri}"
        html, problems = inline.substitute(html, page.markdown or "", where)
        if exec_cache.failed_sessions():
            # a block raised: its own message is enough, not one per value it left unset
            problems = [p for p in problems if "was never evaluated" not in p]
        html, more = inline.attach_captions(html, where)
        for problem in problems + more:
            log.warning(problem)
    _check_widget_data(html, page)
    if page.file.src_uri.endswith(".ipynb"):
        from gradflow_site import lab_page

        html = lab_html.slim(html)  # drop the unused JupyterLab CSS mkdocs-jupyter inlines
        lab = Path(page.file.src_uri).stem
        html, setup_code = lab_page.fold_setup(html, lab)
        html = lab_page.add_links(html, lab, config.extra.get("repository", ""))
        html = lab_html.compress_images(html)  # a third of the bytes, the same plot
        html = lab_html.size_images(html)  # no layout shift when an output image decodes
        html, images = lab_html.external_images(html, lab)  # fetched when near, not with the HTML
        # files beside the page: the setup code as text, the output images
        beside = dict(images)
        if setup_code:
            beside[lab_page.setup_file(lab)] = setup_code.encode("utf-8")
        folder = Path(config.site_dir) / Path(page.file.dest_uri).parent
        for name, data in beside.items():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        html, undescribed = lab_html.describe_images(html, Path(page.file.src_uri).stem)
        for key in undescribed:
            log.warning(
                f"docs/{page.file.src_uri}: the image that section '{key}' draws has no text "
                "alternative. Add a description under that key to FIGURE_ALT in "
                "gradflow_site/render.py."
            )
    html = mathml.typeset(html, f"docs/{page.file.src_uri}")  # TeX to MathML: no math JS
    return _rewrite_md_links(html, page, files) + _stamp.replace("{what}", _stamp_text(html))


def _stamp_text(html: str) -> str:
    """Say what on the page was computed at build, honestly for pages that show committed runs."""
    if "results/" in html:
        # the page names the committed file each such figure comes from
        return (
            "Every snippet on this page ran when the site was built; figures labelled as read "
            "from <code>results/</code> come from the committed run they name"
        )
    return "Every snippet, number and figure on this page was computed when the site was built"


_WIDGET_DATA = re.compile(r'data-gf-data="([^"]*)"')


def _check_widget_data(html: str, page) -> None:
    """Warn (so a strict build fails) when a page's widget data exceed the per-page budget."""
    from html import unescape

    from gradflow_site.widgets import DATA_BUDGET

    total = sum(len(unescape(m)) for m in _WIDGET_DATA.findall(html))
    if total > DATA_BUDGET:
        log.warning(
            f"docs/{page.file.src_uri}: widget data total {total / 1024:.0f} KiB, over the "
            f"{DATA_BUDGET // 1024} KiB page budget; sample the widgets' grids more coarsely."
        )


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


def on_post_page(output, page, config, **kwargs):
    from gradflow_site import speed

    # paint before the scripts run; copy buttons in the HTML, not mounted per block on load;
    # the preferred colour scheme set as the page is parsed, not restyled after it has loaded
    palettes = config.theme.get("palette") or []
    palettes = [palettes] if isinstance(palettes, dict) else palettes
    return speed.early_palette(speed.code_blocks(speed.defer_scripts(output)), palettes)


def on_post_build(config, **kwargs):
    from gradflow_site import exec_cache, lab_runs, parallel

    lab_runs.cleanup()  # the executed labs' temporary copies have been rendered
    parallel.finish()

    shown_path = os.environ.get("GRADFLOW_SHOWN_BLOCKS")
    if shown_path:
        # for tests/test_copy_run.py: what every shown block printed in this build
        import json

        Path(shown_path).write_text(
            json.dumps(
                {
                    page: [{"session": s, "code": c, "output": o} for s, c, o in blocks]
                    for page, blocks in sorted(shown_by_page.items())
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    hits, misses = exec_cache.stats()
    log.info(
        f"executed blocks: {misses} run here, {exec_cache.forked()} in a parallel fork, "
        f"{hits} from the cache (.cache/exec)"
    )
    blocks, seconds = exec_cache.widget_stats()
    log.info(f"widget data: {seconds:.1f} s in {blocks} blocks run")
    slowest = sorted(page_seconds.items(), key=lambda kv: -kv[1])
    log.info("page render seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in slowest))
    blocks = exec_cache.slowest_blocks(int(os.environ.get("GRADFLOW_SLOWEST_BLOCKS", "8")))
    log.info("slowest blocks: " + "; ".join(f"{p} {s:.1f} s `{line}`" for s, p, line in blocks))
    site_dir = Path(config.site_dir)
    base_path = urlsplit(config.site_url or "/").path
    for where, ref in missing_assets(site_dir, base_path):
        log.warning(
            f"{where}: references the local asset '{ref}', which the built site lacks. "
            "Add the file under docs/ or fix the reference."
        )
