"""`ManagerOptions.field_manager`: every cluster's writes name the program in managedFields,
as controller-runtime's ``client.Options.FieldOwner`` on a manager's client."""

from __future__ import annotations

from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from tests.integration.multicluster._mc_helpers import cluster_of, configmap, running

pytestmark = pytest.mark.timeout(60)


def _managers(obj: dict[str, Any]) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or []}


def test_every_clusters_writes_go_out_under_the_managers_field_manager(
    make_envtest_server: Any,
) -> None:
    local_server = make_envtest_server("local")
    provider = clusters.Provider()
    mgr = mcruntime.Manager(
        local_server.kubeconfig(),
        provider=provider,
        options=ManagerOptions(field_manager="fleet-operator"),
    )
    # the local cluster writes under it from the start, before the manager runs (a field to
    # manage in each object: empty maps are not stored, so they leave no managedFields entry)
    made = mgr.get_cluster("").client.create(configmap("local-cm", x="1"))
    assert _managers(made) == {"fleet-operator"}

    plain = cluster_of(make_envtest_server("plain"), "plain")
    own = cluster_of(make_envtest_server("own"), "own")
    own.client.field_manager = "own-writer"  # a cluster built with its own keeps it
    provider.add("plain", plain)
    provider.add("own", own)
    with running(mgr):
        wait_for(lambda: set(mgr.engaged_clusters()) == {"plain", "own"})
        plain_client = mgr.get_cluster("plain").client
        assert _managers(plain_client.create(configmap("a", a="1"))) == {"fleet-operator"}
        own_made = mgr.get_cluster("own").client.create(configmap("b", b="1"))
        assert _managers(own_made) == {"own-writer"}
        # a call's own field manager, and a client's with_field_manager(), win
        patched = plain_client.patch("v1/ConfigMap", "a", {"data": {"x": "1"}}, "default",
                                     field_manager="one-off")  # fmt: skip
        assert _managers(patched) == {"fleet-operator", "one-off"}
        named = plain_client.with_field_manager("reconciler-a")
        assert _managers(named.create(configmap("c", c="1"))) == {"reconciler-a"}
        # server-side apply needs no field_manager= on such a cluster
        applied = plain_client.apply(configmap("d"))
        assert [(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]] == [
            ("fleet-operator", "Apply")
        ]


def test_the_namespace_providers_confined_clients_take_it_too(make_envtest_server: Any) -> None:
    from mcruntime.providers import namespace

    host = make_envtest_server("host")
    admin = cluster_of(host, "admin")
    try:
        admin.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t1"}})
        provider = namespace.Provider(cluster_of(host, "host"))
        mgr = mcruntime.Manager(
            provider=provider, options=ManagerOptions(field_manager="tenant-op")
        )
        with running(mgr):
            wait_for(lambda: "t1" in mgr.engaged_clusters())
            client = mgr.get_cluster("t1").client
            assert client.field_manager == "tenant-op"
            assert _managers(client.create(configmap("x", "t1", a="1"))) == {"tenant-op"}
    finally:
        admin.stop()
