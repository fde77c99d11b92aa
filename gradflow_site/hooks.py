"""MkDocs hooks: each build event handed to the gradflow_site module that does that job.

Registered in mkdocs.yml under `hooks:`, after reproducible.py. The modules take and return
Markdown, HTML and files and know nothing of MkDocs; what they find wrong comes back as
messages, logged here as warnings, so with `strict: true` a broken page is never published.
MkDocs loads this file before the checkout is on sys.path (reproducible.py puts it there), so
gradflow_site is imported inside the hooks.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.hooks.gradflow")

# One thread per numerical library, set before torch and numpy are imported: the printed
# numbers do not depend on the machine's cores, and the build has no thread but its own when
# gradflow_site/parallel.py and lab_runs.py fork it (a caller's own values win).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_command = ""  # the mkdocs command running: "build", "serve" or "gh-deploy"
_dirty = False  # --dirty: only changed pages are rendered
_labs: dict[str, str] = {}  # chapter name -> title, for every chapter that has a lab
_verified: dict[str, str] = {}  # what computed the pages (provenance.verified)


def _warn(problems: list[str]) -> None:
    for problem in problems:
        log.warning(problem)


def on_startup(command, dirty, **kwargs):
    from gradflow_site import process

    global _command, _dirty
    _command, _dirty = command, dirty
    process.collect_rarely()


def on_shutdown(**kwargs):
    from gradflow_site import process

    if _command != "serve":  # the process ends now; a server keeps collecting as usual
        process.freeze()


def on_config(config, **kwargs):
    from gradflow_site import errors, exec_cache, process, provenance

    global _verified
    root = Path(config.config_file_path).parent
    process.configure(root)
    provenance.use_commit_date(root)
    exec_cache.install()
    # mkdocs-jupyter caches its rendering of a notebook by the notebook's bytes (outputs
    # included); the folder name adds the package versions, and tests and CI turn it off
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is not None:
        jupyter.config["cache"] = exec_cache.enabled()
        jupyter.config["cache_dir"] = str(root / ".cache" / "jupyter" / exec_cache.versions())
    _verified = config.extra["verified"] = provenance.verified(root)
    errors.install_log_filter(logging.getLogger("mkdocs"))
    return config


def on_pre_build(config, **kwargs):
    from gradflow_site import exec_cache, report

    exec_cache.start_build(Path(config.config_file_path).parent)
    report.start()


@event_priority(100)  # before mkdocs-jupyter's on_files turns the executed labs into pages
def on_files(files, config, **kwargs):
    """Add every chapter's lab (gradflow_site/labs.py) to the site, and start the slow work.

    labs/<name>.ipynb is a download for every chapter; labs/run/<name>.ipynb, for the labs the
    nav lists there, starts executing in the background now (gradflow_site/lab_runs.py) and
    mkdocs-jupyter renders the executed copy when the build reaches that page. A fork of this
    process renders chapters from the last one back (gradflow_site/parallel.py).
    """
    from mkdocs.structure.files import File, Files

    from gradflow_site import exec_cache, lab_runs, labs, parallel

    # the build renders pages in this order and the fork from the end (gradflow_site/parallel.py):
    # first the ones only the build renders, last the ones that leave gloo's threads behind,
    # the slowest of the rest just before them
    order = [parallel.RANK_PAGES, (), parallel.SLOW_PAGES, parallel.LAST_PAGES]

    def place(f):
        group = next((i for i, g in enumerate(order) if f.src_uri in g), 1)
        return group, order[group].index(f.src_uri) if group != 1 else 0

    files = Files(sorted(files, key=place))
    root = Path(config.config_file_path).parent
    out = root / "build" / "labs-src"
    _labs.clear()
    _labs.update(labs.chapters(config.nav or []))
    downloads, executed = labs.write_site(out, _labs, config.nav)
    _mark_stale_pages(files, root)
    chapters = [f for f in files.documentation_pages() if f.src_uri.endswith(".md")]
    if _command != "serve" and not _dirty and parallel.enabled() and len(chapters) > 1:
        parallel.start([f.src_uri for f in chapters], _renderer(files, config))
    cache_root = root / ".cache" / "labs" if exec_cache.enabled() else None
    for uri in downloads + executed:
        src_dir = out
        if uri in executed:
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


def _renderer(files, config):
    """Return a function that renders one chapter (its path under docs/) as the build does."""
    by_uri = {f.src_uri: f for f in files.documentation_pages()}

    def render(uri: str) -> None:
        from mkdocs.commands.build import _populate_page
        from mkdocs.structure.pages import Page

        _populate_page(Page(None, by_uri[uri], config), config, files)

    return render


def _mark_stale_pages(files, root: Path) -> None:
    """Under `mkdocs serve --dirty`, rebuild every page when code it may execute has changed.

    A dirty rebuild re-renders only pages whose Markdown is newer than their HTML, which makes
    a prose edit show at once. A page also depends on the snippets it includes and the modules
    and config they use; when one of those is newer than a page's HTML, treat the page as
    modified too, so an edited snippet never leaves a stale page.
    """
    from gradflow_site import exec_cache

    if "serve" not in sys.argv or "--dirty" not in sys.argv:
        return
    newest = exec_cache.newest_code(root)
    for file in files.documentation_pages():
        dest = Path(file.abs_dest_path)
        if dest.exists() and dest.stat().st_mtime < newest:
            file.is_modified = lambda: True


@event_priority(100)  # before mkdocs-jupyter reads the notebook
def on_pre_page(page, config, files, **kwargs):
    from mkdocs.exceptions import PluginError

    from gradflow_site import exec_cache, lab_runs, parallel, report

    uri = page.file.src_uri
    if uri.endswith(".md"):
        handed = parallel.take(uri)  # the fork rendered it: take its outputs
        if handed is not None:
            exec_cache.hand_over(handed)
            report.page_forked(uri, handed["seconds"])
    if uri.startswith("labs/run/"):
        try:
            lab_runs.wait(uri)
        except RuntimeError as err:
            raise PluginError(f"docs/{uri}: {err}") from None
    return page


def on_page_markdown(markdown, page, **kwargs):
    from gradflow_site import chapter, errors, report

    uri = page.file.src_uri
    errors.set_page(uri)
    report.page_started(uri)
    if uri.endswith(".md"):
        offset = chapter.front_matter_lines(page.file.abs_src_path, markdown)
        lab = Path(uri).stem if Path(uri).stem in _labs else None
        markdown, problems = chapter.prepare(markdown, f"docs/{uri}", offset, lab)
        _warn(problems)
    return markdown


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
    from gradflow_site import (
        chapter,
        errors,
        exec_cache,
        lab_page,
        links,
        mathml,
        provenance,
        report,
        widgets,
    )

    uri, where = page.file.src_uri, f"docs/{page.file.src_uri}"
    errors.set_page(None)
    seconds = report.page_rendered(uri)
    if seconds is not None:
        log.debug(f"{where}: rendered in {seconds:.2f} s")
    if uri.endswith(".md"):
        failed = bool(exec_cache.failed_sessions())
        html, problems = chapter.finish(html, page.markdown or "", where, failed)
        _warn(problems)
    _warn(widgets.data_problems(html, where))
    if uri.endswith(".ipynb"):
        html, beside, problems = lab_page.finish(html, where, config.extra.get("repository", ""))
        folder = Path(config.site_dir) / Path(page.file.dest_uri).parent
        for name, data in beside.items():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        _warn(problems)
    html = mathml.typeset(html, where)  # TeX to MathML: no math JS
    stamp = provenance.stamp(html, _verified)

    def url_of(src: str) -> str | None:
        file = files.get_file_from_path(src)
        return None if file is None else file.url_relative_to(page.file)

    html, problems = links.rewrite_md_links(html, uri, url_of)
    _warn(problems)
    return html + stamp


def on_post_page(output, page, config, **kwargs):
    from gradflow_site import speed

    # paint before the scripts run; copy buttons in the HTML, not mounted per block on load;
    # the preferred colour scheme set as the page is parsed, not restyled after it has loaded
    return speed.faster(output, config.theme.get("palette"))


def on_post_build(config, **kwargs):
    from urllib.parse import urlsplit

    from gradflow_site import lab_runs, links, parallel, report

    lab_runs.cleanup()  # the executed labs' temporary copies have been rendered
    parallel.finish()
    shown = os.environ.get("GRADFLOW_SHOWN_BLOCKS")
    if shown:  # for tests/test_copy_run.py: what every shown block printed in this build
        report.write_shown(Path(shown))
    for line in report.summary():
        log.info(line)
    base_path = urlsplit(config.site_url or "/").path
    for where, ref in links.missing_assets(Path(config.site_dir), base_path):
        log.warning(
            f"{where}: references the local asset '{ref}', which the built site lacks. "
            "Add the file under docs/ or fix the reference."
        )
