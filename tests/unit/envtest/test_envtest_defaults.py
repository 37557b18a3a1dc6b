"""What a fresh cluster holds: its four namespaces, a default ServiceAccount per namespace, the root CA."""

from __future__ import annotations

import pytest
from kubernetes import client, config

from mcruntime.envtest import APIServer

pytestmark = pytest.mark.timeout(30)


def test_a_cluster_starts_with_the_four_namespaces_of_a_real_one(core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert names == {"default", "kube-system", "kube-public", "kube-node-lease"}


def test_every_namespace_gets_the_default_service_account(core: client.CoreV1Api) -> None:
    for ns in ("default", "kube-system"):
        assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    core.create_namespace({"metadata": {"name": "team-a"}})
    accounts = core.list_namespaced_service_account("team-a").items
    assert [a.metadata.name for a in accounts] == ["default"]


def test_root_ca_configmap_carries_the_servers_ca_bundle() -> None:
    srv = APIServer("rootca", root_ca_configmap=True).start()
    try:
        with config.new_client_from_config_dict(srv.kubeconfig()) as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "team-b"}})
            for ns in ("default", "kube-node-lease", "team-b"):
                cm = core.read_namespaced_config_map("kube-root-ca.crt", ns)
                assert srv.ca_data is not None
                assert cm.data == {"ca.crt": srv.ca_data.decode()}
                assert "kubernetes.io/description" in cm.metadata.annotations
    finally:
        srv.close()


def test_namespace_deletion_takes_its_default_content_along(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "gone"}})
    core.delete_namespace("gone")
    assert "gone" not in {n.metadata.name for n in core.list_namespace().items}
    assert (
        core.list_service_account_for_all_namespaces(field_selector="metadata.namespace=gone").items
        == []
    )


def test_the_default_service_account_and_root_ca_come_back_when_deleted() -> None:
    # as kube-controller-manager's service-account controller and root-CA publisher do:
    # `kubectl delete cm,sa --all -n team-c` leaves a namespace pods can still run in
    srv = APIServer("rootca-back", root_ca_configmap=True).start()
    try:
        with config.new_client_from_config_dict(srv.kubeconfig()) as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "team-c"}})
            cm = core.read_namespaced_config_map("kube-root-ca.crt", "team-c")
            sa = core.read_namespaced_service_account("default", "team-c")
            core.delete_collection_namespaced_config_map("team-c")
            core.delete_namespaced_service_account("default", "team-c")
            again = core.read_namespaced_config_map("kube-root-ca.crt", "team-c")
            assert again.metadata.uid != cm.metadata.uid and again.data == cm.data
            back = core.read_namespaced_service_account("default", "team-c")
            assert back.metadata.uid != sa.metadata.uid
            core.delete_namespace("team-c")  # emptied for good: nothing put back
            assert "team-c" not in {n.metadata.name for n in core.list_namespace().items}
            left = core.list_config_map_for_all_namespaces(
                field_selector="metadata.namespace=team-c"
            )
            assert left.items == []
    finally:
        srv.close()
