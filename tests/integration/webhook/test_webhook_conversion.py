"""``with_converter`` on a single cluster: the manager points the CRD at its webhook and leaves it so at
stop (no data of another version lost meanwhile); what a conversion that fails says, to the API server
and in the log."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.webhook import Converter, WebhookServer, WebhookServerOptions
from tests._logs import logged
from tests._webhooks import versioned_crd, webhook_conversion

pytestmark = pytest.mark.timeout(60)

GROUP = "convert.mcruntime.io"


class V1:
    """The v1 spoke: ``spec.replicas`` is ``spec.scale.replicas`` in the hub (v2)."""

    def to_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"] = {"scale": {"replicas": obj.get("spec", {}).get("replicas", 1)}}
        return obj

    def from_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"] = {"replicas": obj.get("spec", {}).get("scale", {}).get("replicas", 1)}
        return obj


def apps_crd(conversion: dict[str, Any] | None = None) -> dict[str, Any]:
    """The App CRD: ``v1`` and ``v2`` (stored), converted as ``conversion`` says."""
    return versioned_crd(GROUP, "apps", "App", conversion=conversion)


def _installing(srv: Any, crd: dict[str, Any]) -> tuple[WebhookServer, mcruntime.Manager]:
    """``crd`` created in ``srv``, and a manager that installs its converter (``V1``) there."""
    api = config.new_client_from_config_dict(srv.kubeconfig())
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
    )
    mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v2/App").with_converter(
        "v2", {"v1": V1()}
    ).complete()
    return server, mgr


def test_the_crd_converts_through_the_managers_webhook_while_it_runs(
    make_envtest_server: Any,
) -> None:
    srv = make_envtest_server("local")
    api = config.new_client_from_config_dict(srv.kubeconfig())
    ext = client.ApiextensionsV1Api(api)
    server, mgr = _installing(srv, apps_crd())
    custom = client.CustomObjectsApi(api)
    with mgr:
        wait_for(
            lambda: server.installed_clusters() == [""], timeout=15, what="conversion installed"
        )
        conv = ext.read_custom_resource_definition(f"apps.{GROUP}").spec.conversion
        assert conv.strategy == "Webhook"
        assert conv.webhook.client_config.url == server.url_for("/convert-convert-mcruntime-io-app")
        custom.create_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "apps",
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "App",
                "metadata": {"name": "a"},
                "spec": {"replicas": 3},
            },
        )
        hub = custom.get_namespaced_custom_object(GROUP, "v2", "default", "apps", "a")
        assert hub["spec"] == {"scale": {"replicas": 3}}
        assert custom.get_namespaced_custom_object(GROUP, "v1", "default", "apps", "a")["spec"] == {
            "replicas": 3
        }
    # left calling the webhook: see the next test
    assert (
        ext.read_custom_resource_definition(f"apps.{GROUP}").spec.conversion.strategy == "Webhook"
    )


def test_no_write_through_another_version_loses_data_while_the_manager_is_stopped(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # a one-replica rolling update: the old manager stops before the new one installs.
    # Were the conversion set back to None, a client writing an App through v1 meanwhile
    # (a controller of v1, an old manifest) would store it pruned to v1's schema: v2's
    # spec.scale lost. It fails instead until a converter serves v1 again
    srv = make_envtest_server("local")
    crd = apps_crd()
    for version, spec in zip(crd["spec"]["versions"], V1_V2_SPECS, strict=True):
        version["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}
    server, mgr = _installing(srv, crd)
    custom = client.CustomObjectsApi(config.new_client_from_config_dict(srv.kubeconfig()))
    app = {"apiVersion": f"{GROUP}/v1", "kind": "App", "metadata": {"name": "a"}}
    with caplog.at_level(logging.INFO, logger="mcruntime.webhook"), mgr:
        wait_for(lambda: server.installed_clusters() == [""], timeout=15, what="installed")
        custom.create_namespaced_custom_object(
            GROUP, "v1", "default", "apps", {**app, "spec": {"replicas": 3}}
        )
    with pytest.raises(client.ApiException) as err:
        custom.patch_namespaced_custom_object(
            GROUP, "v1", "default", "apps", "a", {"metadata": {"labels": {"touched": "yes"}}}
        )
    assert err.value.status == 500
    assert "conversion webhook for" in json.loads(err.value.body)["message"]
    stored = custom.get_namespaced_custom_object(GROUP, "v2", "default", "apps", "a")
    assert stored["spec"] == {"scale": {"replicas": 3}}
    assert logged(caplog, logging.INFO, containing=f"conversion of CRD apps.{GROUP} is left")


#: the spec of v1 (``replicas``) and of v2 (``scale.replicas``), as structural schemas
V1_V2_SPECS = (
    {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    {
        "type": "object",
        "properties": {
            "scale": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
        },
    },
)


class Failing(V1):
    """The v1 spoke, failing (a bug of the handler's) on an object labelled ``broken``."""

    def from_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        if (obj["metadata"].get("labels") or {}).get("broken"):
            raise KeyError("size")
        return super().from_hub(obj)


def test_a_failing_conversion_names_its_object_and_is_logged_once_per_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with _converted_by(Failing(), make_envtest_server("local")) as custom:
        for name, labels in (("good", {}), ("bad", {"broken": "yes"})):
            meta = {"name": name, "labels": labels}
            app = {"apiVersion": f"{GROUP}/v2", "kind": "App", "metadata": meta, "spec": {}}
            custom.create_namespaced_custom_object(GROUP, "v2", "default", "apps", app)
        caplog.set_level(logging.DEBUG, logger="mcruntime.webhook")
        for _ in range(3):  # as an informer lists again and again
            with pytest.raises(client.ApiException) as err:
                custom.list_namespaced_custom_object(GROUP, "v1", "default", "apps")
            assert (
                f"failed: converting App default/bad from {GROUP}/v2 to {GROUP}/v1: KeyError: 'size'"
                in json.loads(err.value.body)["message"]
            )
        (first,) = logged(
            caplog, logging.WARNING, starting="cluster=local webhook: /convert: conversion failed: "
        )
        assert "converting App default/bad" in first
        assert "further failures are logged at debug level" in first
        (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert record.exc_info is not None, "the handler's traceback is shown once"
        assert len(logged(caplog, logging.DEBUG, containing="still failing")) == 2
        custom.get_namespaced_custom_object(GROUP, "v1", "default", "apps", "good")
        assert logged(caplog, logging.INFO, containing="works again after 3 failed attempts")


@contextlib.contextmanager
def _converted_by(spoke: V1, srv: Any) -> Iterator[client.CustomObjectsApi]:
    """A client of ``srv`` whose App CRD converts v1 to and from v2 by ``spoke``, served by a
    webhook server of its own while the block runs."""
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    server.register("/convert", converter=Converter(GROUP, "App", "v2", {"v1": spoke}))
    server.start()
    try:
        api = config.new_client_from_config_dict(srv.kubeconfig())
        crd = apps_crd(webhook_conversion(server, "/convert"))
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        custom = client.CustomObjectsApi(api)
        wait_for(lambda: _served(custom), timeout=10, what="apps served")
        yield custom
    finally:
        server.stop()


def _served(custom: client.CustomObjectsApi) -> bool:
    try:
        custom.list_namespaced_custom_object(GROUP, "v2", "default", "apps")
        return True
    except client.ApiException:
        return False


def test_a_list_whose_conversion_review_is_over_the_admission_limit_is_converted(
    make_envtest_server: Any,
) -> None:
    # kube-apiserver sends a whole page of a list (an informer's 500 objects) in one
    # ConversionReview: 36 objects of 256 KiB are 9 MiB, more than an admission request
    with _converted_by(V1(), make_envtest_server("local")) as custom:
        blob = "x" * (256 << 10)
        for i in range(36):
            meta = {"name": f"a{i}"}
            spec = {"blob": blob}
            app = {"apiVersion": f"{GROUP}/v2", "kind": "App", "metadata": meta, "spec": spec}
            custom.create_namespaced_custom_object(GROUP, "v2", "default", "apps", app)
        listed = custom.list_namespaced_custom_object(GROUP, "v1", "default", "apps")
        assert len(listed["items"]) == 36
        assert {o["spec"]["replicas"] for o in listed["items"]} == {1}
