"""Nothing left behind: the strict build leaves its temporary directory empty."""

from __future__ import annotations

import pytest


@pytest.mark.build
def test_build_leaves_no_temporary_file(site):
    # tests/_site.py gives the shared build a TMPDIR of its own, beside the site
    temp = site.parent / f"{site.name}.tmp"
    if not temp.exists():
        pytest.skip("the site was not built by this test run (GRADFLOW_TEST_SITE)")
    assert not list(temp.iterdir()), f"the build left {sorted(p.name for p in temp.iterdir())}"
