"""The execution cache never changes what a page shows: a partly cached build equals a clean one."""

import re

import pytest

from tests._site import child_config, mkdocs_build

pytestmark = pytest.mark.build

PAGE = """# Cache

```python exec="1" session="c"
import torch
x = torch.rand(4)
```

```python exec="1" session="c"
print(f"sum {x.sum():.6f}")
```

```python exec="1" session="c"
print(f"{LAST}")
```
"""


def _outputs(site) -> list[str]:
    html = (site / "index.html").read_text(encoding="utf-8")
    return re.findall(r"<p>((?:sum|mean|max) [0-9.]+)</p>", html)


def test_exec_cache_partial_hit_equals_clean_build(tmp_path):
    def build(last: str, name: str, cache: bool):
        cfg = child_config(tmp_path / "proj", {"index.md": PAGE.replace("{LAST}", last)})
        result = mkdocs_build(tmp_path / name, config=cfg, cache=cache)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout + result.stderr

    build("mean {x.mean():.6f}", "cold", cache=True)
    log = build("max {x.max():.6f}", "warm", cache=True)
    # the first two blocks come from the cache; the third changed, so the session is rebuilt
    assert "executed blocks: 1 run here, 0 in a parallel fork, 2 from the cache" in log
    build("max {x.max():.6f}", "clean", cache=False)
    warm, clean = _outputs(tmp_path / "warm"), _outputs(tmp_path / "clean")
    assert len(clean) == 2 and warm == clean
