"""gradflow_site.lab_html: slimmer lab pages."""

from __future__ import annotations

from gradflow_site.lab_html import (
    compress_images,
    describe_images,
    external_images,
    purge_css,
    size_images,
    slim,
)

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


LAB = (
    '<h2 id="setup">Setup</h2><p>x</p><h2 id="loss-curves">Loss curves</h2>'
    '<div><img alt="No description has been provided for this image" src="data:image/png;,"></div>'
)


def test_describe_images_gives_an_image_its_section_description():
    out, missing = describe_images(LAB, "demo", {"demo:loss_curves": 'Two "lines" & a cross'})
    assert missing == []
    assert '<img alt="Two &quot;lines&quot; &amp; a cross" src=' in out
    assert "No description" not in out


def test_describe_images_reports_an_undescribed_section():
    out, missing = describe_images(LAB, "demo", {"demo:setup": "not this one"})
    assert missing == ["demo:loss_curves"]
    assert out == LAB


def test_size_images_states_the_size_of_an_inline_png():
    import base64
    import struct
    import zlib

    def png(width, height):
        ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
        return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))

    data = base64.b64encode(png(960, 560)).decode()
    page = f'<p><img alt="a figure" src="data:image/png;base64,{data}"/></p>'
    out = size_images(page)
    sized = '<img loading="lazy" decoding="async" width="960" height="560" alt="a figure" '
    sized += 'src="data:image/png;base64,'
    assert out == f'<p>{sized}{data}"/></p>'
    assert size_images(out) == out  # an image with a width is left alone


def _plot_png(transparent: bool = False) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    for i in range(6):
        ax.plot([0, 1, 2, 3], [i, i + 1, i - 1, i], marker="o", label=f"run {i}")
    ax.legend()
    out = io.BytesIO()
    fig.savefig(out, format="png", transparent=transparent)
    plt.close(fig)
    return out.getvalue()


def test_compress_images_keeps_the_plot_in_fewer_bytes():
    import base64
    import io

    import numpy as np
    from PIL import Image

    raw = _plot_png()
    page = f'<img alt="a" src="data:image/png;base64,{base64.b64encode(raw).decode()}"/>'
    out = compress_images(page)
    new = base64.b64decode(out.split("base64,")[1].split('"')[0])
    assert len(new) < len(raw) / 2
    before = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"), dtype=float)
    after = np.asarray(Image.open(io.BytesIO(new)).convert("RGB"), dtype=float)
    assert before.shape == after.shape
    assert np.abs(before - after).mean() < 1.0  # of 255: the same picture


def test_compress_images_leaves_a_transparent_png_alone():
    import base64

    page = f'<img src="data:image/png;base64,{base64.b64encode(_plot_png(True)).decode()}"/>'
    assert compress_images(page) == page


def test_external_images_moves_each_inline_png_to_a_file_of_its_own():
    import base64

    first, second = _plot_png(), _plot_png(True)
    page = "".join(
        f'<img width="4" alt="{alt}" src="data:image/png;base64,{base64.b64encode(d).decode()}"/>'
        for alt, d in (("a", first), ("b", second))
    )
    out, files = external_images(page, "demo")
    assert out == (
        '<img width="4" alt="a" src="demo-figure-1.png"/>'
        '<img width="4" alt="b" src="demo-figure-2.png"/>'
    )
    assert files == {"demo-figure-1.png": first, "demo-figure-2.png": second}
    assert external_images(out, "demo") == (out, {})
