"""gradflow_site.lab_html: slimmer lab pages."""

from __future__ import annotations

from gradflow_site.lab_html import purge_css, slim

CSS = """
@charset "UTF-8";
.w{--used: red;--chained: var(--used);--unused: blue}
.w .a{color:var(--chained)}
.w .b, .w .a:hover{color:green}
@media (max-width: 10px){.w .b{margin:0}.w .a{padding:0}}
@keyframes spin{to{transform:rotate(1turn)}}
@keyframes idle{to{opacity:0}}
.w .a::after{content:"a;b";animation:spin 1s}
"""


def test_purge_css_keeps_rules_whose_classes_occur():
    out = purge_css(CSS, {"w", "a"})
    assert ".w .a{color:var(--chained)}" in out
    assert ".w .a:hover{color:green}" in out and ".w .b" not in out
    assert "@media (max-width: 10px){.w .a{padding:0}}" in out


def test_purge_css_keeps_only_custom_properties_and_keyframes_in_use():
    out = purge_css(CSS, {"w", "a"})
    assert "--used: red" in out and "--chained: var(--used)" in out
    assert "--unused" not in out
    assert '.w .a::after{content:"a;b";animation:spin 1s}' in out
    assert "@keyframes spin" in out and "@keyframes idle" not in out


def test_slim_replaces_inline_css_and_drops_mathjax_and_mermaid():
    page = (
        "<style>.jupyter-wrapper .a{color:red}.a .zzz{color:blue}</style>\n"
        '<!-- Load mathjax -->\n<script src=""> </script>\n'
        '<!-- MathJax configuration -->\n<script type="text/x-mathjax-config">x</script>\n'
        "<!-- End of mathjax configuration -->"
        '<script type="module">\n  document.addEventListener("DOMContentLoaded", f)</script>\n'
        "<!-- End of mermaid configuration -->"
        '<div class="jupyter-wrapper"><div class="a"><pre>'
        '<span class="s2">"x</span><span class="se">\\n</span><span class="s2">y"</span>'
        '<span class="w"> </span></pre></div></div>'
        "<style>\n['pre { line-height: 125%; }']</style>"
    )
    out = slim(page)
    assert out.startswith(
        "<!-- End of mermaid configuration --><style>.jupyter-wrapper .a{color:red}</style>"
    )
    assert "zzz" not in out and "mathjax" not in out.lower() and "<script" not in out
    assert '<span class="s2">"x\\ny"</span> </pre>' in out
    assert "line-height: 125%" not in out
