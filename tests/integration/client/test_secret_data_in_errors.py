"""A refused patch of a Secret says why without quoting the Secret's data.

kube-apiserver answers a patch whose result does not decode (a number where the kind
wants a string) with a 422 that quotes the whole patched object (a merge or JSON patch:
apiserver/pkg/endpoints/handlers/patch.go, ``field.Invalid(field.NewPath("patch"),
string(patchedObjJS), ...)``) or the patch itself (a strategic merge patch:
``fmt.Sprintf("%+v", patchMap)``), every data key of a Secret with it; envtest answers
alike. The error, and the controller's log line of a reconcile it failed, carried them.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime import Cluster, Manager, Request
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import Invalid
from mcruntime.providers.clusters import Provider as Clusters

pytestmark = pytest.mark.timeout(60)

DATA = base64.b64encode(b"s3cret-password").decode()
NEW = base64.b64encode(b"n3w-s3cret").decode()
CAUSE = "json: cannot unmarshal number into Go struct field Secret.data of type []uint8"


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer("secret-errors") as s:
        yield s


@pytest.fixture
def cluster(server: APIServer) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="c")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "default"},
        "data": {"password": DATA},
    }
    c.uncached_client.create(secret)
    yield c
    c.uncached_client.delete("v1/Secret", "db", "default")
    c.stop()


def _said(err: Invalid) -> str:
    return "\n".join((str(err), repr(err), err.message, repr(err.details)))


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        ("merge", {"data": {"port": 5432, "new": NEW}}),
        ("strategic", {"data": {"port": 5432, "new": NEW}}),
        ("json", [{"op": "add", "path": "/data/port", "value": 5432}]),
    ],
)
def test_a_patch_that_does_not_decode_is_refused_without_the_secrets_data(
    cluster: Cluster, patch_type: Any, patch: Any
) -> None:
    with pytest.raises(Invalid) as err:
        cluster.uncached_client.patch("v1/Secret", "db", patch, "default", type=patch_type)
    said = _said(err.value)
    for secret in (DATA, NEW, "s3cret"):
        assert secret not in said, said
    # what is wrong is still said, and where (the patch)
    assert "patch: Invalid value: " in err.value.message and CAUSE in err.value.message
    causes = (err.value.details or {}).get("causes") or []
    assert [(c.get("field"), c.get("reason")) for c in causes] == [("patch", "FieldValueInvalid")]
    assert CAUSE in causes[0]["message"]


def test_a_reconcile_that_such_a_patch_fails_logs_and_records_no_secret_data(
    server: APIServer, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # the log line of the failure, and its Event (``failure_events``), which whoever may
    # read Events in the namespace reads, not only who may read its Secrets
    caplog.set_level(logging.DEBUG)
    provider = Clusters()
    provider.add("c", Cluster.from_kubeconfig(server.kubeconfig(), name="c"))
    mgr = Manager(provider=provider)
    failed = threading.Event()

    def reconcile(req: Request) -> None:
        client = mgr.get_cluster(req.cluster_name).client
        try:
            client.patch("v1/Secret", req.name, {"data": {"port": 5432}}, req.namespace)
        finally:
            failed.set()

    (
        mcruntime.controller_managed_by(mgr)
        .named("secrets")
        .for_("v1/Secret")
        .with_options(failure_events=True)
        .complete(reconcile)
    )
    mgr.start()
    try:
        assert failed.wait(20)
        wait_for(lambda: "reconcile failed" in caplog.text, timeout=10, what="the failure logged")
        events = wait_for(
            lambda: [
                e
                for e in cluster.uncached_client.list("v1/Event", namespace="default")
                if e.get("reason") == "ReconcileError"
            ],
            timeout=10,
            what="the failure's Event",
        )
    finally:
        mgr.stop()
    assert CAUSE in caplog.text
    assert DATA not in caplog.text
    assert all(CAUSE in e["message"] and DATA not in e["message"] for e in events), events
