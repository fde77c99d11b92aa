"""gradflow_site.speed: deferred scripts, copy buttons and colour scheme written into the HTML."""

from __future__ import annotations

import re

from gradflow_site.speed import code_blocks, defer_scripts, early_palette

BLOCK = '<div class="language-python highlight"><pre><span></span><code>x = 1\n</code></pre></div>'


def test_defer_scripts_defers_external_scripts_only():
    html = '<script src="a.js"></script><script>inline()</script><script src="b.js" async></script>'
    assert defer_scripts(html) == (
        '<script src="a.js" defer></script><script>inline()</script>'
        '<script src="b.js" async></script>'
    )


def test_code_blocks_give_each_block_a_button_that_targets_its_own_code():
    out = code_blocks(BLOCK + "<p>text</p>" + BLOCK.replace("python", "text"))
    ids = re.findall(r'<div class="language-\w+ highlight" id="([\w-]+)"', out)
    targets = re.findall(r'data-clipboard-target="#([\w-]+) code"', out)
    assert ids == targets == ["gf-code-0", "gf-code-1"]
    # Material's markup: the button sits in a nav inside the pre, before the code
    assert '<pre><span></span><nav class="md-code__nav"><button class="md-code__button"' in out
    assert out.count('data-md-type="copy"') == 2 and out.count("<code>x = 1") == 2


def test_code_blocks_leave_other_html_alone():
    html = '<pre><code>plain</code></pre><div class="highlight-ipynb"><pre>y</pre></div>'
    assert code_blocks(html) == html


def test_code_blocks_size_each_block_by_its_lines_while_off_screen():
    three = BLOCK.replace("x = 1\n", "a = 1\nb = 2\nc = 3\n")
    unterminated = BLOCK.replace("x = 1\n", "a = 1\nb = 2")
    heights = re.findall(
        r"contain-intrinsic-block-size: auto calc\((\d+) \* ",
        code_blocks(BLOCK + three + unterminated),
    )
    assert heights == ["1", "3", "2"]


PALETTES = [
    {"media": "(prefers-color-scheme: light)", "scheme": "default", "accent": "deep orange"},
    {"media": "(prefers-color-scheme: dark)", "scheme": "slate", "accent": "deep orange"},
]
MATERIAL = '<body><script>var palette=__md_get("__palette");if(palette){}</script><p>x</p>'


def test_early_palette_follows_materials_palette_script():
    html = early_palette(MATERIAL, PALETTES)
    first, ours = html.split("</script>")[:2]
    assert first.endswith("if(palette){}")
    # transitions off from the start: Material's bundle, which sets the same, restyles nothing
    assert ours.startswith(
        '<script>document.body.setAttribute("data-md-color-switching","");__md_get("__palette")||'
    )
    assert '"media":"(prefers-color-scheme: dark)","scheme":"slate"' in ours
    assert '"accent":"deep-orange"' in ours  # as Material writes it on <body>
    # the page's colour scheme as Material's stylesheet sets it: dark for slate only
    assert 'm.name="color-scheme";m.content=["slate"].indexOf(' in ours
    assert html.endswith("<p>x</p>")


def test_early_palette_leaves_pages_without_a_media_palette_alone():
    assert early_palette(MATERIAL, [{"scheme": "slate"}]) == MATERIAL
    assert early_palette("<body><p>x</p>", PALETTES) == "<body><p>x</p>"
