"""Developer tools: tools.lighthouse's CPU slowdown calibrated to the host (the benchmark itself
runs by `make lighthouse`, not in the tests), and tools.browser finding a Chrome or Chromium."""

from __future__ import annotations

import pytest

from tools.browser import find_chrome
from tools.lighthouse import calibrated_slowdown, main


@pytest.mark.parametrize(
    ("index", "factor"),
    [(150, 1.0), (800, 2.0), (1300, 3.0), (1533, 4.0), (1766, 5.0), (2000, 6.0)],
)
def test_calibrated_slowdown_matches_lighthouse_calculator(index, factor):
    assert calibrated_slowdown(index) == pytest.approx(factor, abs=0.01)


def test_calibrated_slowdown_never_speeds_a_slow_host_up():
    assert calibrated_slowdown(60) == 1.0


def test_calibrated_slowdown_rises_with_the_index():
    factors = [calibrated_slowdown(i) for i in range(100, 4000, 50)]
    assert factors == sorted(factors)


@pytest.mark.parametrize("index", [0, -5, float("nan")])
def test_calibrated_slowdown_rejects_a_non_positive_index(index):
    with pytest.raises(ValueError, match="benchmark_index"):
        calibrated_slowdown(index)


@pytest.mark.parametrize("value", ["0.5", "fast", "nan"])
def test_main_rejects_a_bad_cpu_slowdown(value, capsys):
    with pytest.raises(SystemExit):
        main(["site", "--cpu-slowdown", value])
    assert "--cpu-slowdown" in capsys.readouterr().err


def _executable(path, text):
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_find_chrome_takes_chrome_path_first(tmp_path):
    mine = _executable(tmp_path / "my-chrome", '#!/bin/sh\nexec /opt/chrome/chrome "$@"\n')
    other = _executable(tmp_path / "chromium", "#!/bin/sh\n")
    assert find_chrome({"CHROME_PATH": mine}, which=lambda name: other) == mine
    assert find_chrome({"CHROME_BIN": mine}, which=lambda name: None) == mine


def test_find_chrome_takes_a_headless_shell_first_only_when_asked(tmp_path):
    mine = _executable(tmp_path / "my-chrome", "#!/bin/sh\n")
    shell = _executable(tmp_path / "chromium-headless-shell", "#!/bin/sh\n")
    full = _executable(tmp_path / "chromium", "#!/bin/sh\n")
    found = {"chromium-headless-shell": shell, "chromium": full}
    assert find_chrome({}, which=found.get, shell=True) == shell
    assert find_chrome({}, which=found.get) == full  # Lighthouse and screenshots: a full browser
    assert find_chrome({"CHROME_PATH": mine}, which=found.get, shell=True) == mine
    assert find_chrome({}, which={"chromium": full}.get, shell=True) == full


def test_find_chrome_skips_snap_wrappers_and_missing_paths(tmp_path):
    # Ubuntu's apt chromium-browser: a script that only starts the snap
    snap = _executable(tmp_path / "chromium-browser", '#!/bin/sh\nexec /snap/bin/chromium "$@"\n')
    debian = _executable(tmp_path / "chromium", "#!/bin/sh\nexec /usr/lib/chromium/chromium\n")
    found = {"chromium-browser": snap, "chromium": debian}
    assert find_chrome({"CHROME_PATH": snap}, which=found.get) == debian
    assert find_chrome({"CHROME_PATH": str(tmp_path / "absent")}, which=found.get) == debian
    assert find_chrome({}, which={"chromium-browser": snap}.get) is None
    assert find_chrome({}, which=lambda name: None) is None


def test_serve_like_pages_answers_as_github_pages(tmp_path):
    import gzip
    import http.client
    from urllib.parse import urlsplit

    from tools.lighthouse import serve_like_pages

    (tmp_path / "index.html").write_text("<p>home</p>" * 50)
    (tmp_path / "404.html").write_text("missing")
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text("<p>guide</p>")
    with serve_like_pages(tmp_path) as url:
        conn = http.client.HTTPConnection(urlsplit(url).netloc)

        def get(path, **headers):
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            return response, response.read()

        r, body = get("/", **{"Accept-Encoding": "gzip"})
        assert r.status == 200 and r.getheader("Content-Encoding") == "gzip"
        assert gzip.decompress(body) == (tmp_path / "index.html").read_bytes()
        assert r.getheader("Cache-Control") == "max-age=600"
        r, _ = get("/", **{"If-None-Match": r.getheader("ETag")})
        assert r.status == 304
        r, _ = get("/guide")
        assert r.status == 301 and r.getheader("Location") == "/guide/"
        r, body = get("/guide/")
        assert r.status == 200 and body == b"<p>guide</p>"
        r, body = get("/nowhere/../../etc/passwd")
        assert r.status == 404 and body == b"missing"
        conn.close()
