"""A CA rotated on disk (cert-manager rewrites ``ca.crt``, ``tls.crt`` and ``tls.key``)
reaches the ``caBundle`` of the installed configurations within seconds, not at a restart:
admission calls, refused by TLS while the old bundle is installed, succeed again.

The installation is checked once a minute (``install_resync=60``): what changes within
seconds changed because the CA file was seen to change.
"""

from __future__ import annotations

import base64
import datetime
import logging
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

import mcruntime
import mcruntime.webhook._server as server_module
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.webhook import (
    AdmissionResponse,
    WebhookServer,
    WebhookServerOptions,
    generate_certificates,
)
from tests._logs import logged

pytestmark = pytest.mark.timeout(60)

NAME = "mcruntime-webhooks"
RULES = [
    {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["configmaps"],
    }
]


def _create(core: client.CoreV1Api, name: str) -> str:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    try:
        core.create_namespaced_config_map("default", body)
    except ApiException as exc:
        return f"{exc.status}: {exc.body}"
    return "created"


def _serving(
    envtest_server: Any, options: WebhookServerOptions
) -> tuple[WebhookServer, client.CoreV1Api, Callable[[], bytes]]:
    """A webhook server denying ConfigMaps named ``forbidden``, the core API of
    ``envtest_server`` and a reader of the ``caBundle`` installed there."""
    ws = WebhookServer(options)
    ws.register(
        "/validate",
        lambda req: AdmissionResponse(req.name != "forbidden", "name forbidden"),
        rules=RULES,
    )
    api = config.new_client_from_config_dict(envtest_server.kubeconfig())
    adm = client.AdmissionregistrationV1Api(api)

    def installed_ca() -> bytes:
        got = adm.read_validating_webhook_configuration(NAME)
        return base64.b64decode(got.webhooks[0].client_config.ca_bundle)

    return ws, client.CoreV1Api(api), installed_ca


def test_a_ca_rotated_on_disk_is_installed_and_admission_calls_succeed_again(
    envtest_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hosts = ["127.0.0.1", "localhost"]
    first = generate_certificates(hosts)
    first.write(tmp_path)
    ws, core, installed_ca = _serving(
        envtest_server,
        WebhookServerOptions(
            host="127.0.0.1", port=0, cert_dir=str(tmp_path), install=True, install_resync=60
        ),
    )

    mgr = mcruntime.Manager(envtest_server.kubeconfig(), options=ManagerOptions(webhook_server=ws))
    mgr.start()
    try:
        wait_for(ws.installed_clusters, 10, "the configuration installed")
        assert installed_ca() == first.ca_pem
        assert "denied" in _create(core, "forbidden")
        assert _create(core, "a") == "created"

        caplog.set_level(logging.INFO, "mcruntime.webhook")
        second = generate_certificates(hosts)
        second.write(tmp_path)  # what cert-manager does: a new CA and a pair it signed
        wait_for(lambda: installed_ca() == second.ca_pem, 10, "the new caBundle installed")
        wait_for(lambda: _create(core, "b") == "created", 10, "admission calls succeed")
        assert "denied" in _create(core, "forbidden")
        changed = logged(caplog, logging.INFO, containing="CA bundle")
        assert len(changed) == 1, changed
        # a new bundle written is no configuration "put back" (nobody else changed it)
        assert not logged(caplog, logging.INFO, containing="put back"), caplog.messages
        assert ws.ca_bundle == second.ca_pem
    finally:
        mgr.stop()


def test_generated_certificates_are_renewed_before_they_expire_and_their_ca_installed(
    envtest_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # generated certificates (no cert_dir) lived in memory a year and were never renewed:
    # at the year's end every webhook call failed TLS. Here they are valid 12 s: renewed
    # at 8 s, the new CA installed beside the old one, then its certificate served
    monkeypatch.setattr(
        server_module, "_GENERATED_VALIDITY", datetime.timedelta(seconds=12), raising=False
    )
    caplog.set_level(logging.INFO, "mcruntime.webhook")
    ws, core, installed_ca = _serving(
        envtest_server,
        WebhookServerOptions(host="127.0.0.1", port=0, install=True, install_resync=60),
    )

    def served() -> str:
        return ssl.get_server_certificate(("127.0.0.1", ws.port))

    mgr = mcruntime.Manager(envtest_server.kubeconfig(), options=ManagerOptions(webhook_server=ws))
    began = time.monotonic()
    mgr.start()
    try:
        wait_for(ws.installed_clusters, 10, "the configuration installed")
        first_ca, first_cert = installed_ca(), served()
        assert first_ca == ws.ca_bundle
        assert "denied" in _create(core, "forbidden")
        wait_for(lambda: served() != first_cert, 20, "the renewed certificate served")
        wait_for(
            lambda: installed_ca() == ws.ca_bundle and first_ca not in ws.ca_bundle,
            10,
            "the new CA alone installed",
        )
        trusted = ssl.create_default_context(cadata=installed_ca().decode())
        with (
            socket.create_connection(("127.0.0.1", ws.port), timeout=5) as sock,
            trusted.wrap_socket(sock, server_hostname="127.0.0.1"),
        ):
            pass  # the certificate served is trusted by the caBundle installed
        # past the first certificate's end: the webhooks still answer, through TLS
        time.sleep(max(0.0, began + 13 - time.monotonic()))
        wait_for(lambda: _create(core, "after") == "created", 10, "admission calls succeed")
        assert "denied" in _create(core, "forbidden")
        assert logged(caplog, logging.INFO, containing="generated certificates renewed")
        assert not logged(caplog, logging.INFO, containing="put back"), caplog.messages
    finally:
        mgr.stop()


def test_a_certificate_without_a_ca_file_is_installed_for_the_api_servers_trust_roots(
    envtest_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a certificate from a CA the API servers trust (a public one, as cert-manager's ACME
    # issuer writes it: no ca.crt): installed without caBundle, as kube-apiserver then
    # verifies it with its system trust roots; the CA file that appears later is installed
    pair = generate_certificates(["127.0.0.1", "localhost"])
    pair.write(tmp_path / "certs")
    (tmp_path / "certs" / "ca.crt").unlink()
    roots = tmp_path / "roots.pem"  # the API server's system trust roots
    roots.write_bytes(pair.ca_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(roots))
    caplog.set_level(logging.INFO, "mcruntime.webhook")
    options = WebhookServerOptions(
        host="127.0.0.1", port=0, cert_dir=str(tmp_path / "certs"), install=True
    )
    ws, core, _ = _serving(envtest_server, options)
    adm = client.AdmissionregistrationV1Api(
        config.new_client_from_config_dict(envtest_server.kubeconfig())
    )
    mgr = mcruntime.Manager(envtest_server.kubeconfig(), options=ManagerOptions(webhook_server=ws))
    mgr.start()
    try:
        wait_for(ws.installed_clusters, 10, "the configuration installed")
        hook = adm.read_validating_webhook_configuration(NAME).webhooks[0]
        assert hook.client_config.ca_bundle is None
        assert "denied" in _create(core, "forbidden")
        assert _create(core, "a") == "created"
        assert logged(caplog, logging.INFO, containing="installed without caBundle")
        (tmp_path / "certs" / "ca.crt").write_bytes(pair.ca_pem)
        wanted = base64.b64encode(pair.ca_pem).decode()

        def bundle() -> str | None:
            got: str | None = (
                adm.read_validating_webhook_configuration(NAME).webhooks[0].client_config.ca_bundle
            )
            return got

        wait_for(bundle, 10, "the CA file installed", equals=wanted)
    finally:
        mgr.stop()
