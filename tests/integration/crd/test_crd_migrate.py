"""migrate_storage against an embedded API server: objects stored anew, the old version
dropped afterwards, a deadline that bounds it and names what was left."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.cluster import Cluster
from mcruntime.crd import CRDError, StorageMigration, install_crds, migrate_storage
from mcruntime.envtest import APIServer
from mcruntime.errors import Invalid
from tests._blocked import ended_at_once

pytestmark = pytest.mark.timeout(60)

NAME = "things.migrate.example.com"
CRD_KIND = "apiextensions.k8s.io/v1/CustomResourceDefinition"
SCHEMA = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
}


def crd(*versions: str, storage: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "migrate.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [
                {"name": v, "served": True, "storage": v == storage, "schema": SCHEMA}
                for v in versions
            ],
        },
    }


@pytest.fixture
def server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    return make_envtest_server("migrate")


@pytest.fixture
def cluster(server: APIServer) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="migrate")
    yield c
    c.stop()


def stored_in_v1_then_v2(cluster: Cluster, count: int) -> None:
    """``count`` Things written while v1 was the storage version, which is v2 now."""
    install_crds(cluster, [crd("v1", "v2", storage="v1")], timeout=10)
    client = cluster.uncached_client
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for i in range(count):
        client.create(
            {
                "apiVersion": "migrate.example.com/v1",
                "kind": "Thing",
                "metadata": {"name": f"t{i}", "namespace": ("default", "other")[i % 2]},
                "spec": {"i": i},
            }
        )
    install_crds(cluster, [crd("v1", "v2", storage="v2")], timeout=10)


def stored_versions(cluster: Cluster) -> list[str]:
    return list(cluster.uncached_client.get(CRD_KIND, NAME)["status"]["storedVersions"])


def test_every_object_is_stored_anew_and_then_the_old_version_may_leave(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcruntime.crd import _migrate

    monkeypatch.setattr(_migrate, "_PAGE", 2)  # three pages
    stored_in_v1_then_v2(cluster, 5)
    assert stored_versions(cluster) == ["v1", "v2"]
    with pytest.raises(Invalid, match="was previously a storage version"):
        install_crds(cluster, [crd("v2", storage="v2")], timeout=10)

    done = migrate_storage(cluster, NAME, timeout=20)

    assert done == StorageMigration(NAME, "v2", ("v1", "v2"), rewritten=5)
    assert stored_versions(cluster) == ["v2"]
    install_crds(cluster, [crd("v2", storage="v2")], timeout=10)  # v1 may leave now
    things = cluster.uncached_client.list("migrate.example.com/v2/Thing")
    assert sorted(t["spec"]["i"] for t in things) == [0, 1, 2, 3, 4]
    # nothing is stored elsewhere any more: the CRD is left as it is
    assert migrate_storage(cluster, NAME, timeout=20) == StorageMigration(NAME, "v2", ("v2",))


def test_objects_stored_in_the_storage_version_already_are_not_stored_again(
    cluster: Cluster,
) -> None:
    install_crds(cluster, [crd("v1", storage="v1")], timeout=10)
    cluster.uncached_client.create(
        {
            "apiVersion": "migrate.example.com/v1",
            "kind": "Thing",
            "metadata": {"name": "old", "namespace": "default"},
        }
    )
    install_crds(cluster, [crd("v1", "v2", storage="v2")], timeout=10)
    cluster.uncached_client.create(
        {
            "apiVersion": "migrate.example.com/v2",
            "kind": "Thing",
            "metadata": {"name": "new", "namespace": "default"},
        }
    )
    done = migrate_storage(cluster, NAME, timeout=20)
    assert (done.rewritten, done.unchanged, done.raced) == (1, 1, 0)


def test_a_migration_of_a_hung_cluster_ends_by_its_deadline_naming_the_crd_and_cluster(
    cluster: Cluster, server: APIServer
) -> None:
    stored_in_v1_then_v2(cluster, 3)
    server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(CRDError) as err:
            migrate_storage(cluster, NAME, timeout=1.0)
        took = time.monotonic() - began
    finally:
        server.thaw()
    assert took < 2.0, f"took {took:.1f}s"
    message = str(err.value)
    assert message.startswith(
        f"migrating the storage of CRD {NAME} in cluster migrate: not done within 1s: "
    ), message
    assert message.endswith(
        "(0 objects written back so far; status.storedVersions left as it was)"
    ), message
    assert stored_versions(cluster) == ["v1", "v2"]
    # run again, it finishes
    assert migrate_storage(cluster, NAME, timeout=20).rewritten == 3


def test_a_cancelled_migration_sends_nothing_more(cluster: Cluster) -> None:
    stored_in_v1_then_v2(cluster, 1)
    stop = threading.Event()
    stop.set()
    with pytest.raises(CRDError, match=f"CRD {NAME} in cluster migrate: cancelled"):
        migrate_storage(cluster, NAME, stop=stop)
    assert stored_versions(cluster) == ["v1", "v2"]


def test_a_stop_set_while_a_request_hangs_ends_the_migration_at_once(
    server: APIServer, cluster: Cluster
) -> None:
    stored_in_v1_then_v2(cluster, 1)
    stop = threading.Event()
    server.freeze()
    try:
        raised = ended_at_once(
            lambda: migrate_storage(cluster, NAME, stop=stop), stop.set, "test-migrate"
        )
    finally:
        server.thaw()
    assert isinstance(raised, CRDError), raised
    assert str(raised).startswith(
        f"migrating the storage of CRD {NAME} in cluster migrate: cancelled"
    )
    assert stored_versions(cluster) == ["v1", "v2"]


def test_an_object_another_writer_changes_meanwhile_keeps_that_change_and_counts_as_raced(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the write back carries the resourceVersion it read: a write in between wins (and
    # stored the object in the storage version), the migration's conflicts and moves on
    from mcruntime.crd import _migrate

    stored_in_v1_then_v2(cluster, 2)
    write_back = _migrate._Migration.write_back

    def another_writer_first(self: Any, path: str, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "t0":
            cluster.uncached_client.patch(
                "migrate.example.com/v2/Thing", "t0", {"spec": {"i": 10}}, "default"
            )
        write_back(self, path, obj)

    monkeypatch.setattr(_migrate._Migration, "write_back", another_writer_first)
    done = migrate_storage(cluster, NAME, timeout=20)
    assert (done.rewritten, done.unchanged, done.raced) == (1, 0, 1)
    assert stored_versions(cluster) == ["v2"]
    t0 = cluster.uncached_client.get("migrate.example.com/v2/Thing", "t0", "default")
    assert t0["spec"] == {"i": 10}
