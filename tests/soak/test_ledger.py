"""The soak's checks catch what they are for: a lost event, a stale reconcile, an overlap, a secret."""

from __future__ import annotations

import logging

from tests.soak._ledger import DELETED, Ledger, Overlaps
from tests.soak._logscan import SecretScanner

KEY = ("c1", "soak-a", "cm-0")


def test_a_write_not_reconciled_is_a_divergence_naming_both_states() -> None:
    ledger = Ledger()
    cluster = object()
    ledger.engaged("r0", "c1", cluster)
    ledger.wrote(KEY, "1")
    ledger.saw("r0", cluster, KEY, "1")
    assert ledger.divergences() == []
    ledger.wrote(KEY, "2")
    [d] = ledger.divergences()
    assert (d.cluster, d.namespace, d.name, d.written, d.reconciled) == (
        "c1",
        "soak-a",
        "cm-0",
        "2",
        "1",
    )
    assert "written=2 reconciled=1" in str(d)


def test_a_lost_deletion_is_a_divergence_and_a_missing_record_counts_as_deleted() -> None:
    ledger = Ledger()
    cluster = object()
    ledger.engaged("r0", "c1", cluster)
    ledger.wrote(KEY, "1")
    ledger.saw("r0", cluster, KEY, "1")
    ledger.wrote(KEY, DELETED)
    assert [d.reconciled for d in ledger.divergences()] == ["1"]
    ledger.saw("r0", cluster, KEY, DELETED)
    assert ledger.divergences() == []
    ledger.wrote(("c1", "soak-a", "cm-1"), DELETED)  # created and deleted, never seen
    assert ledger.divergences() == []


def test_a_reconcile_of_a_cluster_that_left_the_replica_records_nothing() -> None:
    ledger = Ledger()
    old, new = object(), object()
    ledger.engaged("r0", "c1", old)
    ledger.engaged("r0", "c1", None)
    ledger.forget("c1")
    ledger.engaged("r0", "c1", new)
    ledger.saw("r0", old, KEY, "7")  # a stale cache of the old engagement
    assert ledger.reconciled_state(KEY) == DELETED
    ledger.saw("r0", new, KEY, "8")
    assert ledger.reconciled_state(KEY) == "8"


def test_with_sharded_replicas_each_cluster_is_judged_by_its_own_owner() -> None:
    ledger = Ledger()
    c1, c2 = object(), object()
    other = ("c2", "soak-a", "cm-0")
    for replica in ("r0", "r1"):
        ledger.engaged(replica, "c1", c1)
        ledger.engaged(replica, "c2", c2)
    ledger.wrote(KEY, "1")
    ledger.wrote(other, "1")
    ledger.saw("r0", c1, KEY, "1")  # r0 owns c1
    ledger.saw("r1", c2, other, "1")  # r1 owns c2: r0 never saw it, and need not
    assert ledger.divergences() == []
    ledger.wrote(other, "2")
    ledger.saw("r0", c2, other, "2")  # c2 moved to r0, whose view of it is now the one judged
    assert ledger.owner_changes == 1 and ledger.divergences() == []
    ledger.wrote(other, "3")
    [d] = ledger.divergences()
    assert (d.cluster, d.replica, d.reconciled, d.others) == ("c2", "r0", "2", {"r1": "1"})


def test_a_cluster_a_replica_let_go_of_is_forgotten_with_the_reconciles_begun_before() -> None:
    ledger = Ledger()
    cluster = object()
    ledger.engaged("r0", "c1", cluster)
    ledger.wrote(KEY, "1")
    ledger.saw("r0", cluster, KEY, "1")
    began = ledger.generation("r0", "c1")
    ledger.disengaged("r0", "c1")  # moved to another replica, which saw the deletion
    ledger.wrote(KEY, DELETED)
    ledger.saw("r0", cluster, KEY, "1", began)  # a stale reconcile finishing late
    assert ledger.reconciled_state(KEY, "r0") == DELETED
    ledger.wrote(("c1", "soak-a", "cm-1"), "2")
    ledger.saw("r0", cluster, ("c1", "soak-a", "cm-1"), "2", ledger.generation("r0", "c1"))
    assert ledger.divergences() == []  # back at r0, which never saw the deleted object again


def test_overlaps_on_one_object_or_one_cluster_across_replicas_are_found() -> None:
    o = Overlaps()
    o.enter("r0", KEY)
    o.enter("r0", ("c1", "soak-a", "cm-1"))  # one replica, two objects of a cluster: fine
    assert o.found == []
    o.enter("r1", ("c1", "soak-b", "cm-2"))  # another replica in the same cluster
    assert len(o.found) == 1 and "c1" in o.found[0]
    o.exit("r1", ("c1", "soak-b", "cm-2"))
    o.enter("r0", KEY)  # the same object twice at once
    assert len(o.found) == 2
    o.exit("r0", KEY)
    o.exit("r0", KEY)
    o.exit("r0", ("c1", "soak-a", "cm-1"))
    assert o.in_flight("c1") == 0


def test_the_scanner_finds_secrets_without_repeating_them() -> None:
    scanner = SecretScanner(["s3cr3t-token-value"])
    log = logging.getLogger("soak.test.scanner")
    log.addHandler(scanner)
    log.setLevel(logging.DEBUG)
    try:
        log.debug("fine: cluster=%s answers", "c1")
        log.info("token %s", "s3cr3t-token-value")
        log.warning("config %s", {"client-key-data": "LS0tLS1CRUdJTiBFQyBQUklWQVRF"})
        log.error("header Authorization: Bearer abcdefghijklmnop")
    finally:
        log.removeHandler(scanner)
    assert scanner.records == 4
    assert len(scanner.findings) == 3
    assert not any("s3cr3t-token-value" in f or "LS0tLS1" in f for f in scanner.findings)


def test_a_copy_is_as_new_as_a_write_when_it_holds_that_write_or_a_later_one() -> None:
    ledger = Ledger()
    source = ("hub", "soak-hub", "src-0")
    ledger.wrote(source, "5", 5)
    ledger.wrote(source, DELETED, 7)
    assert ledger.numbers([source]) == {source: 7}
    assert ledger.as_new(source, 7, DELETED)
    assert not ledger.as_new(source, 7, "5")  # a copy of the value the deletion replaced
    ledger.wrote(source, "9", 9)
    assert ledger.as_new(source, 7, "9")  # created again since
    assert ledger.as_new(source, 9, "9") and not ledger.as_new(source, 9, DELETED)
    ledger.lost_track(source, 11)  # perhaps a deletion
    assert ledger.as_new(source, 9, DELETED)
