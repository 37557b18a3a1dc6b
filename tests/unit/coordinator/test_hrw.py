"""Weighted rendezvous hashing: proportional shares, minimal movement, stable answers; lease names."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mcruntime.manager.coordinator import Peer, hash01, lease_name, owner

pytestmark = pytest.mark.timeout(30)

CLUSTERS = [f"cluster-{i}" for i in range(3000)]


def shares(peers: list[Peer]) -> Counter[str | None]:
    return Counter(owner(c, peers) for c in CLUSTERS)


def test_hash01_is_stable_and_inside_the_open_unit_interval() -> None:
    values = [hash01("peer", c) for c in CLUSTERS]
    assert all(0.0 < v < 1.0 for v in values)
    assert hash01("peer", "cluster-1") == hash01("peer", "cluster-1")
    assert hash01("peer", "cluster-1") != hash01("peer", "cluster-2")
    # roughly uniform: each decile holds about a tenth
    deciles = Counter(int(v * 10) for v in values)
    assert all(abs(n - 300) < 90 for n in deciles.values()), deciles


def test_equal_weights_split_clusters_evenly() -> None:
    got = shares([Peer("a"), Peer("b"), Peer("c")])
    assert sum(got.values()) == 3000
    for peer in "abc":
        assert 900 <= got[peer] <= 1100, got


def test_weight_two_gets_about_twice_the_clusters_of_weight_one() -> None:
    got = shares([Peer("light"), Peer("heavy", weight=2)])
    assert 2000 * 0.9 <= got["heavy"] <= 2000 * 1.1, got
    assert 1000 * 0.9 <= got["light"] <= 1000 * 1.1, got


def test_shares_are_proportional_to_weights_with_many_peers() -> None:
    peers = [Peer("w1", 1), Peer("w2", 2), Peer("w3", 3), Peer("w4", 4)]
    got = shares(peers)
    for p in peers:
        expected = 3000 * p.weight / 10
        assert expected * 0.85 <= got[p.id] <= expected * 1.15, got


def test_a_joining_peer_takes_clusters_only_from_others_and_about_its_share() -> None:
    before = {c: owner(c, [Peer("a"), Peer("b"), Peer("c")]) for c in CLUSTERS}
    after = {c: owner(c, [Peer("a"), Peer("b"), Peer("c"), Peer("d")]) for c in CLUSTERS}
    moved = [c for c in CLUSTERS if before[c] != after[c]]
    assert all(after[c] == "d" for c in moved)
    assert 750 * 0.85 <= len(moved) <= 750 * 1.15


def test_a_leaving_peer_hands_off_only_its_own_clusters() -> None:
    before = {c: owner(c, [Peer("a"), Peer("b"), Peer("c")]) for c in CLUSTERS}
    after = {c: owner(c, [Peer("a"), Peer("b")]) for c in CLUSTERS}
    moved = [c for c in CLUSTERS if before[c] != after[c]]
    assert moved and all(before[c] == "c" for c in moved)
    assert len(moved) == sum(1 for c in CLUSTERS if before[c] == "c")


def test_owner_does_not_depend_on_peer_order_and_none_without_peers() -> None:
    peers = [Peer("a"), Peer("b", 2), Peer("c")]
    for c in CLUSTERS[:200]:
        assert owner(c, peers) == owner(c, list(reversed(peers)))
    assert owner("x", []) is None


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf")])
def test_peer_rejects_non_positive_weights(weight: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        Peer("a", weight)


_LEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def test_valid_cluster_names_become_prefix_plus_name() -> None:
    assert lease_name("mcr-shard-", "eu-1") == "mcr-shard-eu-1"


@pytest.mark.parametrize(
    "key",
    ["/tmp/x/kubeconfig+cluster-3", "EU_1", "a" * 300, "++", "é"],
)
def test_other_names_become_valid_lease_names(key: str) -> None:
    name = lease_name("mcr-shard-", key)
    assert _LEASE_NAME.fullmatch(name) and len(name) <= 253 and name.startswith("mcr-shard-")


def test_names_that_sanitize_alike_still_get_distinct_leases() -> None:
    names = {lease_name("p-", k) for k in ["a_b", "a-b", "A-B", "a+b", "a/b"]}
    assert len(names) == 5
