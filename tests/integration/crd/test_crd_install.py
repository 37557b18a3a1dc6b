"""install_crds against an embedded API server: create, update, serve at once, deadline, cancel."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import ClassVar

import pytest

from mcruntime.client import Model, Resource
from mcruntime.cluster import Cluster
from mcruntime.crd import (
    CRDError,
    CRDNotEstablished,
    CRDOptions,
    PrinterColumn,
    generate_crd,
    install_crds,
)
from mcruntime.envtest import APIServer
from mcruntime.errors import NoKindMatch, NotFound

pytestmark = pytest.mark.timeout(30)

CRD_KIND = "apiextensions.k8s.io/v1/CustomResourceDefinition"


class GadgetSpec(Model):
    size: int = 1
    color: str


class GadgetStatus(Model):
    ready: bool = False


class Gadget(Resource):
    api_version: ClassVar[str] = "install.example.com/v1"
    kind: ClassVar[str] = "Gadget"
    spec: GadgetSpec
    status: GadgetStatus | None = None


class GadgetV1(Gadget):
    crd_options: ClassVar[CRDOptions] = CRDOptions(storage=False)


class GadgetV2(Gadget):
    api_version: ClassVar[str] = "install.example.com/v2"
    crd_options: ClassVar[CRDOptions] = CRDOptions(
        storage=True,
        printer_columns=(PrinterColumn(name="Size", json_path=".spec.size"),),
    )


@pytest.fixture
def cluster(make_envtest_server: Callable[..., APIServer]) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(make_envtest_server("crds").kubeconfig(), name="crds")
    yield c
    c.stop()


def test_installed_kind_is_served_to_typed_clients_at_once(cluster: Cluster) -> None:
    with pytest.raises(NoKindMatch):
        cluster.client.mapping(Gadget)  # discovery now remembers the group lacks the kind
    (crd,) = install_crds(cluster, [Gadget], timeout=10)
    assert crd["metadata"]["name"] == "gadgets.install.example.com"
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    created = cluster.client.create(
        Gadget.model_validate(
            {"metadata": {"name": "g1", "namespace": "default"}, "spec": {"color": "red"}}
        )
    )
    assert isinstance(created, Gadget)
    assert (created.spec.color, created.spec.size) == ("red", 1)
    assert created.metadata.uid


def test_installing_again_updates_the_existing_crd(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcruntime.crd")
    install_crds(cluster, [generate_crd(Gadget)], timeout=10)
    first = cluster.api_reader.get(CRD_KIND, "gadgets.install.example.com")
    (again,) = install_crds(cluster, [generate_crd(Gadget)], timeout=10)
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]

    (updated,) = install_crds(cluster, [GadgetV1, GadgetV2], timeout=10)
    versions = {v["name"]: v for v in updated["spec"]["versions"]}
    assert (versions["v1"]["storage"], versions["v2"]["storage"]) == (False, True)
    assert versions["v2"]["additionalPrinterColumns"][0]["jsonPath"] == ".spec.size"
    assert updated["status"]["storedVersions"] == ["v1", "v2"]
    assert cluster.client.mapping("install.example.com/v2/Gadget").resource == "gadgets"
    assert [r.getMessage() for r in caplog.records] == [
        "cluster=crds: created CRD gadgets.install.example.com",
        "cluster=crds: updated CRD gadgets.install.example.com",
    ]


def test_the_deadline_bounds_every_request_and_names_the_crd(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    slow = make_envtest_server("slow", latency=0.2)
    cluster = Cluster.from_kubeconfig(slow.kubeconfig(), name="slow")
    try:
        start = time.monotonic()
        with pytest.raises(CRDNotEstablished, match=r"CRD gadgets.install.example.com not") as info:
            install_crds(cluster, [Gadget], timeout=0.3)
        assert time.monotonic() - start < 0.3 + 0.2  # the last request got what was left
        assert info.value.crd_name == "gadgets.install.example.com"
        assert isinstance(info.value, TimeoutError)
    finally:
        cluster.stop()


def test_a_set_stop_event_cancels_before_any_write(cluster: Cluster) -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(CRDError, match="installing CRD gadgets.install.example.com cancelled"):
        install_crds(cluster, [Gadget], stop=stop)
    with pytest.raises(NotFound):
        cluster.api_reader.get(CRD_KIND, "gadgets.install.example.com")


def test_what_is_not_a_crd_is_refused_before_any_request(cluster: Cluster) -> None:
    with pytest.raises(CRDError, match="takes CustomResourceDefinition objects"):
        install_crds(cluster, [{"kind": "ConfigMap", "metadata": {"name": "x"}}])
    with pytest.raises(CRDError, match="cannot install a str"):
        install_crds(cluster, ["gadgets"])  # type: ignore[list-item]
