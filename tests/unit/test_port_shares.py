"""Local ports for test clusters: each parallel worker picks from its own share of the range, so two workers
are never handed the same port between one's check and its node's bind."""

from __future__ import annotations

import pytest

from raftsched.cluster.app.local_cluster import PORT_RANGE_ENV, free_ports, pick_range, share_of_range

pytestmark = pytest.mark.unit


def _bounds(share: str) -> tuple[int, int]:
    first, end = share.split("-")
    return int(first), int(end)


def test_the_shares_of_the_range_do_not_overlap_and_stay_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PORT_RANGE_ENV, raising=False)
    whole = pick_range()
    shares = [_bounds(share_of_range(i, 3)) for i in range(3)]
    for (_first, end), (next_first, _end) in zip(shares, shares[1:]):
        assert end <= next_first
    assert whole[0] <= shares[0][0] and shares[-1][1] <= whole[1]
    assert all(end - first >= 1000 for first, end in shares)


def test_ports_come_from_the_range_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    first, end = _bounds(share_of_range(1, 3))
    monkeypatch.setenv(PORT_RANGE_ENV, f"{first}-{end}")
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(first <= p < end for p in ports), ports


@pytest.mark.parametrize("bad", ["20000", "a-b", "30000-20000", "80-90", "20000-70000"])
def test_a_bad_range_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, bad)
    with pytest.raises(ValueError, match=PORT_RANGE_ENV):
        free_ports(1)
