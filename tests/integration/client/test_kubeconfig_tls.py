"""A kubeconfig's TLS settings read as client-go and kubectl read them, against a real HTTPS server.

The `kubernetes` loader is lenient where kubectl is not: what kubectl refuses to load is a
`ConfigError` naming the cluster and the field, raised before any connection, never a
connection made with weaker checks than the kubeconfig's author meant.
"""

from __future__ import annotations

import base64
import copy
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime import Cluster
from mcruntime._certs import CertificateAuthority
from mcruntime.envtest import APIServer
from mcruntime.errors import ConfigError

pytestmark = pytest.mark.timeout(60)


def with_cluster(kubeconfig: dict[str, Any], **fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(kubeconfig)
    doc["clusters"][0]["cluster"].update(fields)
    return doc


def load_error(kubeconfig: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        Cluster.from_kubeconfig(kubeconfig, name="c").stop()
    return str(err.value)


def test_a_quoted_false_for_insecure_skip_tls_verify_is_refused_not_read_as_true(
    envtest_server: APIServer,
) -> None:
    # a CA that did not sign the server's certificate: with verification on, no connection
    other = base64.b64encode(CertificateAuthority("another-ca").cert_pem).decode()
    doc = with_cluster(
        envtest_server.kubeconfig(),
        **{"certificate-authority-data": other, "insecure-skip-tls-verify": "false"},
    )
    message = load_error(doc)
    assert "insecure-skip-tls-verify must be true or false (a boolean, unquoted), not a str" in (
        message
    )
    assert message.startswith(f"cluster {doc['clusters'][0]['name']!r} of context ")
    assert other not in message


def test_insecure_skip_tls_verify_beside_a_ca_is_refused_as_kubectl_refuses_it(
    envtest_server: APIServer,
) -> None:
    doc = with_cluster(envtest_server.kubeconfig(), **{"insecure-skip-tls-verify": True})
    ca = doc["clusters"][0]["cluster"]["certificate-authority-data"]
    message = load_error(doc)
    assert "specifying a root certificates file with the insecure flag is not allowed" in message
    assert ca not in message


def with_files(kubeconfig: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``kubeconfig`` with its CA, client certificate and key in files of ``folder``, named by
    paths relative to it."""
    doc = copy.deepcopy(kubeconfig)
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    for entry, data, field, name in (
        (cluster, "certificate-authority-data", "certificate-authority", "ca.crt"),
        (user, "client-certificate-data", "client-certificate", "client.crt"),
        (user, "client-key-data", "client-key", "client.key"),
    ):
        (folder / name).write_bytes(base64.b64decode(entry.pop(data)))
        entry[field] = name
    return doc


def test_relative_paths_of_a_later_kubeconfig_in_a_list_are_read_beside_it(
    envtest_server: APIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "config").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config"}))
    with_paths = with_files(envtest_server.kubeconfig(auth="certificate"), second)
    (second / "config").write_text(yaml.safe_dump(with_paths))
    monkeypatch.chdir(tmp_path)  # neither beside the first file nor the second
    cluster = Cluster.from_kubeconfig(
        f"{first / 'config'}{os.pathsep}{second / 'config'}", name="c"
    )
    try:  # the client certificate is the only credential: the request is its login
        assert cluster.rest.request("GET", "/api/v1/namespaces/default", timeout=10)
    finally:
        cluster.stop()


def test_relative_paths_are_read_beside_a_linked_kubeconfig_not_where_the_link_leads(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    home, store = tmp_path / "home", tmp_path / "store"
    home.mkdir()
    store.mkdir()
    with_paths = with_files(envtest_server.kubeconfig(auth="certificate"), home)
    (store / "config").write_text(yaml.safe_dump(with_paths))
    (home / "config").symlink_to(store / "config")  # ~/.kube/config -> a dotfiles folder
    cluster = Cluster.from_kubeconfig(str(home / "config"), name="c")
    try:
        assert cluster.rest.request("GET", "/api/v1/namespaces/default", timeout=10)
    finally:
        cluster.stop()


def test_a_client_certificate_without_its_key_is_refused_when_loaded(
    envtest_server: APIServer,
) -> None:
    doc = envtest_server.kubeconfig(auth="certificate")
    certificate = doc["users"][0]["user"]["client-certificate-data"]
    del doc["users"][0]["user"]["client-key-data"]
    message = load_error(doc)
    assert message.startswith(f"user {doc['users'][0]['name']!r} of context ")
    assert message.endswith(
        "has a client certificate and no key: set client-key-data or client-key beside "
        "client-certificate(-data)"
    )
    assert certificate not in message


def unverified(envtest_server: APIServer) -> dict[str, Any]:
    """The server's kubeconfig with insecure-skip-tls-verify instead of its CA."""
    doc = copy.deepcopy(envtest_server.kubeconfig())
    cluster = doc["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["insecure-skip-tls-verify"] = True
    return doc


def test_an_unverified_cluster_is_said_once_by_name_in_the_log_not_by_urllib3(
    envtest_server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    doc = unverified(envtest_server)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with caplog.at_level(logging.WARNING, logger="mcruntime.cluster"):
            c = Cluster.from_kubeconfig(doc, name="lab")
            try:
                for _ in range(3):
                    c.uncached_client.get("v1/Namespace", "default")
            finally:
                c.stop()
    # urllib3's InsecureRequestWarning goes to stderr, once per call, naming no cluster
    assert [str(w.message) for w in seen if "Unverified HTTPS" in str(w.message)] == []
    said = [r.getMessage() for r in caplog.records if r.name == "mcruntime.cluster"]
    assert said == [
        "cluster=lab: the API server's certificate is not verified (insecure-skip-tls-verify): "
        f"whoever is on the path to 127.0.0.1:{envtest_server.port} can read and change this "
        "cluster's traffic"
    ]


def test_an_unverified_cluster_is_said_once_not_again_by_each_clone(
    envtest_server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    # the Sharded coordinator engages a clone of the provider's cluster each time it takes
    # the cluster's fence, and reads it for a webhook handler through another clone
    caplog.set_level(logging.WARNING, logger="mcruntime.cluster")
    c = Cluster.from_kubeconfig(unverified(envtest_server), name="lab")
    other = Cluster.from_config(c.config, name="lab-2")  # the same config, another cluster
    clones = [c.clone() for _ in range(3)]
    try:
        for clone in clones:
            clone.api_reader.get("v1/Namespace", "default")
    finally:
        for each in (c, other, *clones):
            each.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "mcruntime.cluster"]
    assert [m.split(":")[0] for m in said] == ["cluster=lab", "cluster=lab-2"]
