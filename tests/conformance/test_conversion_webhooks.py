"""The API server converts custom resources between versions by calling the CRD's conversion webhook.

``v1`` has ``spec.size`` (an integer, in Gi); ``v2`` (the storage version, the
hub) has ``spec.size: {value, unit}``. The webhook runs on loopback (see
test_admission_webhooks for what a real API server needs to reach it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from mcruntime.envtest.pytest_plugin import KubeBackend
from mcruntime.webhook import Converter, WebhookServer, WebhookServerOptions
from tests._webhooks import versioned_crd, webhook_conversion

from ._support import raw, unique, wait_for

pytestmark = pytest.mark.timeout(60)

GROUP = "conversion.mcruntime.io"


#: the size of a disk the webhook converts to v2 under another name (which the API server refuses)
RENAMED = 13
#: the size of a disk whose metadata the webhook rebuilds (both ways): its name, namespace, uid
#: and a label of its own, nothing else (the API server keeps the rest as it was sent)
SLIM = 17
#: the size of a disk the webhook gives a label the API server refuses
BAD_LABEL = 19


def _metadata(obj: dict[str, Any], size: int) -> None:
    """The metadata the webhook returns for a disk of ``size``."""
    meta = obj["metadata"]
    if size == RENAMED:
        meta["name"] += "-renamed"
    if size == SLIM:
        kept = {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}
        obj["metadata"] = {**kept, "labels": {"converted": "yes"}, "finalizers": ["x.io/y"]}
    if size == BAD_LABEL:
        meta["labels"] = {"bad key!": "x"}


def v1_to_hub(obj: dict[str, Any]) -> dict[str, Any]:
    size = obj.get("spec", {}).get("size", 0)
    if size < 0:
        raise ValueError("a disk cannot be smaller than nothing")
    _metadata(obj, size)
    obj["spec"] = {"size": {"value": size, "unit": "Gi"}}
    return obj


def hub_to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    # ``unit`` is not in v1's schema: the API server prunes it from what the webhook returns
    size = obj.get("spec", {}).get("size", {})
    _metadata(obj, size.get("value", 0))
    obj["spec"] = {"size": size.get("value", 0), "unit": size.get("unit")}
    return obj


#: v1's schema: ``spec.size`` alone (v2's keeps what it is given)
V1_SCHEMA = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
}


@pytest.fixture
def disks(kube_backend: KubeBackend, kube_api_client: Any) -> Iterator[client.CustomObjectsApi]:
    if kube_backend.name == "k3s":
        pytest.skip("k3s runs in Docker: its API server cannot reach a webhook on this loopback")
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    server.register(
        "/convert", converter=Converter(GROUP, "Disk", "v2", {"v1": (v1_to_hub, hub_to_v1)})
    )
    server.start()
    ext = client.ApiextensionsV1Api(kube_api_client)
    crd = versioned_crd(GROUP, "disks", "Disk", conversion=webhook_conversion(server, "/convert"))
    for version, path in zip(
        crd["spec"]["versions"], (".spec.size", ".spec.size.value"), strict=True
    ):
        version["additionalPrinterColumns"] = [
            {"name": "Size", "type": "integer", "jsonPath": path}
        ]
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": V1_SCHEMA}
    ext.create_custom_resource_definition(crd)
    custom = client.CustomObjectsApi(kube_api_client)
    try:
        wait_for(lambda: _served(custom), what="the disks CRD served")
        yield custom
    finally:
        ext.delete_custom_resource_definition(f"disks.{GROUP}")
        server.stop()


def _served(custom: client.CustomObjectsApi) -> bool:
    try:
        custom.list_cluster_custom_object(GROUP, "v2", "disks")
        return True
    except client.ApiException:
        return False


def disk(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Disk",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


def test_an_object_written_in_v1_is_stored_in_v2_and_read_back_in_both(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    name = unique("disk")
    made = disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", disk(name, 5))
    assert (made["apiVersion"], made["spec"]) == (f"{GROUP}/v1", {"size": 5})
    hub = disks.get_namespaced_custom_object(GROUP, "v2", ns, "disks", name)
    assert (hub["apiVersion"], hub["spec"]) == (f"{GROUP}/v2", {"size": {"value": 5, "unit": "Gi"}})
    spoke = disks.get_namespaced_custom_object(GROUP, "v1", ns, "disks", name)
    assert (spoke["apiVersion"], spoke["spec"]) == (f"{GROUP}/v1", {"size": 5})


def test_lists_and_patches_in_a_spoke_version_are_converted(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    names = [unique("disk") for _ in range(3)]
    for i, n in enumerate(names):
        disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", disk(n, i))
    listed = disks.list_namespaced_custom_object(GROUP, "v1", ns, "disks")["items"]
    assert sorted((o["metadata"]["name"], o["spec"]["size"]) for o in listed) == sorted(
        (n, i) for i, n in enumerate(names)
    )
    assert {o["apiVersion"] for o in listed} == {f"{GROUP}/v1"}
    patched = disks.patch_namespaced_custom_object(
        GROUP, "v1", ns, "disks", names[0], {"spec": {"size": 9}}
    )
    assert patched["spec"] == {"size": 9}
    hub = disks.get_namespaced_custom_object(GROUP, "v2", ns, "disks", names[0])
    assert hub["spec"] == {"size": {"value": 9, "unit": "Gi"}}


def test_watch_events_in_a_spoke_version_are_converted(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    name = unique("disk")
    hub = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Disk",
        "metadata": {"name": name},
        "spec": {"size": {"value": 7, "unit": "Gi"}},
    }
    disks.create_namespaced_custom_object(GROUP, "v2", ns, "disks", hub)
    w = watch.Watch()
    seen = []
    for event in w.stream(
        disks.list_namespaced_custom_object, GROUP, "v1", ns, "disks", timeout_seconds=5
    ):
        seen.append((event["type"], event["object"]["apiVersion"], event["object"]["spec"]))
        if len(seen) == 1:
            disks.patch_namespaced_custom_object(
                GROUP, "v2", ns, "disks", name, {"spec": {"size": {"value": 8}}}
            )
        if len(seen) == 2:
            w.stop()
    assert seen == [
        ("ADDED", f"{GROUP}/v1", {"size": 7}),
        ("MODIFIED", f"{GROUP}/v1", {"size": 8}),
    ]


def _failed_conversion(disks: client.CustomObjectsApi, ns: str, name: str, size: int) -> str:
    """The message of the refusal to create a v1 disk of ``size``, which must fail to convert.
    The converter's error is no Status: kube-apiserver answers a 500 without a reason."""
    with pytest.raises(client.ApiException) as err:
        disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", disk(name, size))
    status = json.loads(err.value.body)
    assert (err.value.status, status["status"], status.get("reason", "")) == (500, "Failure", "")
    message: str = status["message"]
    return message


def test_a_conversion_the_webhook_fails_is_a_500_without_reason_quoting_it(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    """kube-apiserver names what it converted (the object sent, in v1) and quotes the webhook,
    mcruntime's, which names the object it could not convert."""
    name = unique("d")
    assert _failed_conversion(disks, ns, name, -1) == (
        f"conversion webhook for {GROUP}/v1, Kind=Disk failed: converting Disk {name} from "
        f"{GROUP}/v1 to {GROUP}/v2: ValueError: a disk cannot be smaller than nothing"
    )


@pytest.mark.parametrize(
    ("size", "why"),
    [
        (RENAMED, "invalid object: must have the same name: {name} != {name}-renamed"),
        (
            BAD_LABEL,
            'invalid metadata: metadata.labels: Invalid value: "bad key!": name part must '
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ],
)
def test_a_converted_object_the_api_server_would_not_keep_is_refused_saying_why(
    disks: client.CustomObjectsApi, ns: str, size: int, why: str
) -> None:
    """kube-apiserver checks what the webhook returns: the same kind, name, namespace and
    uid; labels and annotations (the metadata it keeps of it) valid ones."""
    name = unique("d")
    assert _failed_conversion(disks, ns, name, size) == (
        f"conversion webhook for {GROUP}/v1, Kind=Disk returned " + why.format(name=name)
    )


def test_a_converted_object_keeps_its_metadata_but_the_labels_and_annotations_returned(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    """kube-apiserver restores the metadata it sent (``restoreObjectMeta``): a webhook that
    rebuilds it changes only the labels and annotations; the object can be updated as read."""
    name = unique("disk")
    sent = disk(name, SLIM)
    sent["metadata"].update(labels={"team": "a"}, annotations={"note": "kept?"})
    made = disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", sent)
    for obj in (made, disks.get_namespaced_custom_object(GROUP, "v1", ns, "disks", name)):
        meta = obj["metadata"]
        assert meta["labels"] == {"converted": "yes"}
        assert "annotations" not in meta  # the webhook returned none
        assert "finalizers" not in meta
        assert meta["resourceVersion"] and meta["creationTimestamp"] and meta["uid"]
    # (written back as read: its resourceVersion is the one stored)
    updated = disks.replace_namespaced_custom_object(GROUP, "v1", ns, "disks", name, obj)
    assert updated["metadata"]["uid"] == obj["metadata"]["uid"]


def test_a_table_in_a_spoke_version_has_that_version_s_columns_of_converted_objects(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    """``kubectl get disks.v1.<group>``: the v1 columns, filled from the objects converted to v1."""
    name = unique("disk")
    disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", disk(name, 5))
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/disks"
    for got in (
        raw(disks.api_client, "GET", path, accept=table).json(),
        raw(disks.api_client, "GET", f"{path}/{name}", accept=table).json(),
    ):
        assert got["kind"] == "Table"
        assert [c["name"] for c in got["columnDefinitions"]] == ["Name", "Size"]
        (row,) = got["rows"]
        assert row["cells"] == [name, 5]
        assert row["object"]["metadata"]["name"] == name


def test_a_watch_of_table_rows_in_a_spoke_version_has_that_version_s_columns(
    disks: client.CustomObjectsApi, ns: str
) -> None:
    """``kubectl get disks.v1.<group> -w``: rows of the objects converted to v1."""
    name = unique("disk")
    disks.create_namespaced_custom_object(GROUP, "v1", ns, "disks", disk(name, 6))
    got = raw(
        disks.api_client,
        "GET",
        f"/apis/{GROUP}/v1/namespaces/{ns}/disks",
        query=[("watch", "1"), ("timeoutSeconds", "1")],
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    (event,) = [json.loads(line) for line in got.data.splitlines() if line.strip()]
    table = event["object"]
    assert (event["type"], table["kind"]) == ("ADDED", "Table")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size"]
    assert [row["cells"] for row in table["rows"]] == [[name, 6]]


def test_a_default_added_to_the_storage_version_reaches_the_webhook_and_spoke_reads(
    disks: client.CustomObjectsApi, kube_api_client: Any, ns: str
) -> None:
    """An object stored before its storage version's schema had a default is decoded with it,
    before the webhook converts it: a v1 read sees the converted default."""
    name = unique("disk")
    hub = {
        "apiVersion": f"{GROUP}/v2",
        "kind": "Disk",
        "metadata": {"name": name},
        "spec": {"size": {"unit": "Gi"}},
    }
    disks.create_namespaced_custom_object(GROUP, "v2", ns, "disks", hub)
    ext = client.ApiextensionsV1Api(kube_api_client)
    crd = kube_api_client.sanitize_for_serialization(
        ext.read_custom_resource_definition(f"disks.{GROUP}")
    )
    (v2,) = (v for v in crd["spec"]["versions"] if v["name"] == "v2")
    v2["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"value": {"type": "integer", "default": 8}},
                    }
                },
            }
        },
    }
    ext.replace_custom_resource_definition(f"disks.{GROUP}", crd)

    def spoke() -> dict[str, Any] | None:
        got: dict[str, Any] = disks.get_namespaced_custom_object(GROUP, "v1", ns, "disks", name)
        return got if got["spec"] == {"size": 8} else None

    wait_for(spoke, 20, "the v2 default in the v1 read")
    (listed,) = disks.list_namespaced_custom_object(GROUP, "v1", ns, "disks")["items"]
    assert listed["spec"] == {"size": 8}
    events = watch.Watch().stream(
        disks.list_namespaced_custom_object, GROUP, "v1", ns, "disks", timeout_seconds=5
    )
    first = next(iter(events))
    assert (first["type"], first["object"]["spec"]) == ("ADDED", {"size": 8})
