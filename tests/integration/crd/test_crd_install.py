"""install_crds against an embedded API server: create, update, serve at once, deadline, cancel."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from mcruntime.client import Model, Resource
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import Condition
from mcruntime.crd import (
    CRDError,
    CRDNotEstablished,
    CRDOptions,
    PrinterColumn,
    generate_crd,
    install_crds,
)
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import NoKindMatch, NotFound
from tests._blocked import ended_at_once
from tests._logs import logged

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


def test_installing_again_keeps_the_conversion_webhook_the_crd_has(cluster: Cluster) -> None:
    """What a replica or an upgrade starting does while a WebhookServer(install=True) has
    pointed the CRD at its conversion webhook: the generated CRD sets no conversion."""
    (crd,) = install_crds(cluster, [GadgetV1, GadgetV2], timeout=10)
    webhook = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/convert-install-example-com-gadget"},
        },
    }
    cluster.uncached_client.update({**crd, "spec": {**crd["spec"], "conversion": webhook}})
    (again,) = install_crds(cluster, [GadgetV1, GadgetV2], timeout=10)
    assert again["spec"]["conversion"] == webhook
    manifest = generate_crd(GadgetV1, GadgetV2)
    manifest["spec"]["conversion"] = {"strategy": "None"}  # said: it is replaced
    (said,) = install_crds(cluster, [manifest], timeout=10)
    assert said["spec"]["conversion"] == {"strategy": "None"}


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


def test_a_stop_set_while_a_request_hangs_ends_the_install_at_once(
    make_envtest_server: Callable[..., APIServer],
) -> None:
    # a CLI's Ctrl-C while the cluster hangs: the request in flight is cut, the install is
    # not left waiting for its 60 s deadline
    server = make_envtest_server("hung-install")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="hung-install")
    stop = threading.Event()
    server.freeze()
    try:
        raised = ended_at_once(
            lambda: install_crds(cluster, [Gadget], stop=stop), stop.set, "test-install"
        )
    finally:
        server.thaw()
        cluster.stop()
    assert isinstance(raised, CRDError), raised
    assert str(raised) == "installing CRD gadgets.install.example.com cancelled"


def test_what_is_not_a_crd_is_refused_before_any_request(cluster: Cluster) -> None:
    with pytest.raises(CRDError, match="takes CustomResourceDefinition objects"):
        install_crds(cluster, [{"kind": "ConfigMap", "metadata": {"name": "x"}}])
    with pytest.raises(
        CRDError, match="cannot install a int: pass CRD dicts, Resource classes or paths"
    ):
        install_crds(cluster, [42])  # type: ignore[list-item]
    with pytest.raises(
        CRDError, match="cannot install CRDs from 'gadgets': no such file or directory"
    ):
        install_crds(cluster, ["gadgets"])


def test_crds_are_read_from_files_and_directories_as_envtest_reads_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    # envtest.Environment{CRDDirectoryPaths: []string{"config/crd/bases"}}
    bases = tmp_path / "config" / "crd" / "bases"
    bases.mkdir(parents=True)
    v1 = generate_crd(Gadget)
    (bases / "install.example.com_gadgets.yaml").write_text(
        yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Namespace"}, v1])
    )
    (bases / "kustomization.yaml").write_text("resources: [install.example.com_gadgets.yaml]\n")
    (bases / "README.md").write_text("not read")
    (crd,) = install_crds(cluster, [bases], timeout=10)
    assert crd["metadata"]["name"] == "gadgets.install.example.com"
    assert cluster.client.mapping(Gadget).namespaced
    (again,) = install_crds(cluster, [str(bases / "install.example.com_gadgets.yaml")], timeout=10)
    assert again["metadata"]["name"] == crd["metadata"]["name"]
    with pytest.raises(CRDError, match="no CustomResourceDefinition in"):
        install_crds(cluster, [bases / "kustomization.yaml"])
    (bases / "broken.yaml").write_text("kind: [unclosed\n")
    with pytest.raises(CRDError, match="cannot read CRDs from .*broken.yaml"):
        install_crds(cluster, [bases])


def test_one_path_or_crd_not_in_a_list_is_installed_not_read_a_character_at_a_time(
    cluster: Cluster, tmp_path: Path
) -> None:
    # install_crds(cluster, "config/crd/bases"): a str is iterable, one path per character
    # ("no such file 'c'"); a dict is iterable, one path per key ("no such file 'apiVersion'")
    crd = generate_crd(Gadget)
    (tmp_path / "gadgets.yaml").write_text(yaml.safe_dump(crd))
    (from_dir,) = install_crds(cluster, str(tmp_path), timeout=10)
    assert from_dir["metadata"]["name"] == "gadgets.install.example.com"
    (from_file,) = install_crds(cluster, tmp_path / "gadgets.yaml", timeout=10)
    (from_dict,) = install_crds(cluster, crd, timeout=10)
    (from_class,) = install_crds(cluster, Gadget, timeout=10)
    names = {c["metadata"]["name"] for c in (from_file, from_dict, from_class)}
    assert names == {"gadgets.install.example.com"}


def test_an_informer_whose_crd_is_deleted_names_the_kind_not_served_and_recovers_once_it_is_back(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # its watch and list are answered 404 "the server could not find the requested
    # resource": the warning says which kind is no longer served, and what to check
    install_crds(cluster, [Gadget], timeout=10)
    cluster.start()
    inf = cluster.cache.get_informer(Gadget)
    assert inf.wait_for_sync(10)
    with caplog.at_level(logging.INFO, logger="mcruntime.cache"):
        cluster.uncached_client.delete(CRD_KIND, "gadgets.install.example.com")
        wait_for(lambda: isinstance(inf.last_error, NoKindMatch), timeout=10, what="404 noticed")
        (warning,) = logged(caplog, logging.WARNING, logger="mcruntime.cache")
        assert (
            "no kind 'install.example.com/v1/Gadget' is served by cluster crds: is its "
            "CustomResourceDefinition installed (and Established)?"
        ) in warning, warning
        install_crds(cluster, [Gadget], timeout=10)
        cluster.uncached_client.create(
            {
                "apiVersion": "install.example.com/v1",
                "kind": "Gadget",
                "metadata": {"name": "back", "namespace": "default"},
                "spec": {"color": "blue"},
            }
        )
        wait_for(
            lambda: inf.store.get("default/back") is not None, timeout=15, what="the kind back"
        )
    assert inf.last_error is None


class LampStatus(Model):
    conditions: list[Condition] = []


class Lamp(Resource):
    api_version: ClassVar[str] = "install.example.com/v1"
    kind: ClassVar[str] = "Lamp"
    status: LampStatus | None = None


def test_two_controllers_apply_their_own_conditions_without_a_conflict(cluster: Cluster) -> None:
    # a list of conditions is a map keyed by type, as kubebuilder marks []metav1.Condition:
    # each controller owns its own condition under server-side apply, not the whole list
    (crd,) = install_crds(cluster, [Lamp], timeout=10)
    conditions = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "properties"
    ]["conditions"]
    assert (conditions["x-kubernetes-list-type"], conditions["x-kubernetes-list-map-keys"]) == (
        "map",
        ["type"],
    )
    api = cluster.uncached_client
    meta = {"name": "l", "namespace": "default"}
    api.create({"apiVersion": Lamp.api_version, "kind": "Lamp", "metadata": meta})
    for manager, kind in (("ctrl-a", "Ready"), ("ctrl-b", "Healthy")):
        condition = Condition(type=kind, status="True", reason="Fine")
        api.apply_status(
            Lamp(metadata=meta, status=LampStatus(conditions=[condition])), field_manager=manager
        )
    lamp = api.get(Lamp, "l", "default")
    assert lamp.status is not None
    assert [c.type for c in lamp.status.conditions] == ["Ready", "Healthy"]


def test_a_crd_whose_names_another_crd_has_is_not_established_and_says_why(
    cluster: Cluster,
) -> None:
    install_crds(cluster, [Gadget], timeout=10)
    manifest = generate_crd(Gadget)
    manifest["metadata"]["name"] = "othergadgets.install.example.com"
    manifest["spec"]["names"] = {"plural": "othergadgets", "kind": "Gadget"}
    with pytest.raises(CRDNotEstablished) as info:
        install_crds(cluster, [manifest], timeout=10)
    assert str(info.value) == (
        "CRD othergadgets.install.example.com: names not accepted: ListKindConflict: "
        '"GadgetList" is already in use'
    )
    assert info.value.crd_name == "othergadgets.install.example.com"
