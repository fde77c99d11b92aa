"""The order tests/conftest.py gives the tests for its xdist workers (`_schedule`)."""

from __future__ import annotations

import pytest

from tests.conftest import _schedule


class Item:
    def __init__(self, name: str, fixtures=(), seconds: float = 0):
        self.name, self.fixturenames = name, tuple(fixtures)
        self.mark = pytest.mark.long(seconds=seconds).mark if seconds else None

    def get_closest_marker(self, name):
        return self.mark if name == "long" else None

    def __repr__(self):
        return self.name


def items():
    free = [Item(f"free{n}") for n in range(600)]
    long_free = [Item("notebook", seconds=2), Item("leftover", seconds=5)]
    site = [Item(f"widget{n}", ["site"]) for n in range(100)]
    long_site = [Item(n, ["site"], s) for n, s in (("visits", 30), ("toc", 22), ("tab", 10))]
    serial = [Item("reproducible", ["site", "serial_site"])]
    return serial + site + long_site + free + long_free


def shares(order: list, workers: int) -> list[list]:
    """Cut `order` as xdist's worksteal cuts it (each idle worker: what is left // workers left)."""
    out, left = [], list(order)
    for n in range(workers):
        size = len(left) // (workers - n)
        out.append(left[:size])
        left = left[size:]
    return out


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_share_runs_its_free_tests_then_its_long_ones(workers):
    order = _schedule(items(), workers)
    assert sorted(map(repr, order)) == sorted(map(repr, items()))  # nothing lost or doubled
    assert repr(order[-1]) == "reproducible"
    cut = shares(order, workers)
    long_site = {"visits", "toc", "tab"}
    for share in cut:
        site = [k for k, i in enumerate(share) if "site" in i.fixturenames]
        assert site and site[0] > 0, f"a share starts with a test of the built site: {share}"
        # after its first test of the built site, a share runs no short free test but the (at
        # most two) that the edge between shares lets over
        after = [i for i in share[site[0] :] if not i.fixturenames and not i.mark]
        assert len(after) <= 2, share
        # its long tests of the built site before its short ones
        kinds = [repr(share[k]) in long_site for k in site]
        assert kinds == sorted(kinds, reverse=True), share
    # every worker starts a long test of the built site (there are three of them)
    starts = [{repr(i) for i in share} & long_site for share in cut]
    assert all(starts), starts
    if workers == 2:  # longest first, each to the share with the fewest seconds so far
        assert starts == [{"visits"}, {"toc", "tab"}]
