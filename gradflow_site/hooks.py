"""MkDocs hooks (mkdocs.yml `hooks:`): what the build does beyond rendering Markdown.

- `on_config`: the build is dated by the last commit (SOURCE_DATE_EPOCH, which MkDocs reads),
  so two builds of one commit are byte for byte the same; the page footer's stamp names the
  torch, Python and commit that computed the pages (`config.extra.verified`, read by
  overrides/main.html).
- `on_files`: every chapter's code starts running at once, in a process pool
  (gradflow_site/run.py), and MkDocs renders the pages as their runs finish; an executed lab
  (labs/run/<name>.ipynb in the nav) is added as a page for mkdocs-jupyter to render.
- `on_env`: once every page is read, the files go back to the docs' order, so the sitemap and
  the search index list them the same in every build.
- `on_pre_page`: an executed lab is written from its chapter's run before mkdocs-jupyter reads
  it (gradflow_site/labs.py), so a chapter's code runs once per build.
- `on_page_context`: an executed lab stays out of the search index (it repeats its chapter).
- `on_post_build`: where the build's time went.

Without these hooks (Zensical runs Markdown extensions, not hooks) every page still renders
with every value: the chapters run as each page is rendered, one after the other.
"""

from __future__ import annotations

import logging
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.hooks.gradflow")
ROOT = Path(__file__).resolve().parents[1]
_docs_order: list[str] = []  # the files as MkDocs found them (on_files), for on_env


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def on_config(config, **kwargs):
    epoch = _git("log", "-1", "--format=%ct")
    if epoch and "SOURCE_DATE_EPOCH" not in os.environ:
        os.environ["SOURCE_DATE_EPOCH"] = epoch  # a caller's own date wins
    sha, dirty = _git("rev-parse", "--short=12", "HEAD"), _git("status", "--porcelain", "-uno")
    commit = "unknown (not a git checkout)" if sha is None else sha + ("+dirty" if dirty else "")
    config.extra["verified"] = {
        "torch": metadata.version("torch"),
        "python": platform.python_version(),
        "commit": commit,
    }
    return config


@event_priority(100)  # before mkdocs-jupyter's on_files makes the executed labs pages
def on_files(files, config, **kwargs):
    import markdown
    from mkdocs.structure.files import File, Files

    from gradflow_site import cells, labs, run

    snippets = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={"pymdownx.snippets": config.mdx_configs.get("pymdownx.snippets", {})},
    ).preprocessors["snippet"]
    pages, problems = {}, []
    for file in files.documentation_pages():
        if file.src_uri.endswith(".md"):
            path = f"{Path(config.docs_dir).name}/{file.src_uri}"
            text = Path(file.abs_src_path).read_text(encoding="utf-8")
            try:
                pages[path] = cells.page_cells(text, path, snippets.run)
            except ValueError as err:  # a broken snippet include, named with its page and line
                problems.append(str(err))
    if problems:
        raise PluginError("\n".join(problems))
    # MkDocs renders the pages in the order of `files`: the order their runs finish, so that it
    # renders each while the workers run the next ones
    order = {path.split("/", 1)[1]: n for n, path in enumerate(run.start(pages))}
    _docs_order[:] = [f.src_uri for f in files]  # on_env puts them back for the sitemap and search
    files = Files(sorted(files, key=lambda f: order.get(f.src_uri, -1)))
    for uri in labs.executed(config.nav):
        folder = ROOT / "build" / "labs-run"
        (folder / uri).parent.mkdir(parents=True, exist_ok=True)
        (folder / uri).touch()
        files.append(File(uri, str(folder), config.site_dir, config.use_directory_urls))
    return files


def on_env(env, config, files, **kwargs):
    # every page is read: the site lists them (sitemap, search index) in the docs' order, not in
    # the order this build's runs finished, so that two builds write the same bytes
    rank = {uri: n for n, uri in enumerate(_docs_order)}
    for file in sorted(files, key=lambda f: rank.get(f.src_uri, len(rank))):
        files.remove(file)
        files.append(file)
    return env


@event_priority(100)  # before mkdocs-jupyter reads the notebook
def on_pre_page(page, config, **kwargs):
    from gradflow_site import labs

    uri = page.file.src_uri
    if uri.startswith("labs/run/"):
        Path(page.file.abs_src_path).write_text(labs.executed_copy(uri, config), encoding="utf-8")
    return page


@event_priority(100)  # before the search plugin indexes the page
def on_page_context(context, page, **kwargs):
    if page.file.src_uri.startswith("labs/run/"):
        page.meta.setdefault("search", {})["exclude"] = True  # it repeats its chapter
    return context


def on_post_build(config, **kwargs):
    from gradflow_site import run

    ran = run.summary()
    if ran:
        log.info(ran)
