"""One kubeconfig, two clients: mcruntime connects where kubectl does and refuses where it refuses.

Each case writes a kubeconfig file for the module's envtest server and runs it through the
real ``kubectl`` (the newest and 1.27, ``get --raw /api``) and through
`Cluster.from_kubeconfig` (one request). A refusal by mcruntime is an error naming the
cluster, user or context, that carries no token, key or passphrase.
"""

from __future__ import annotations

import base64
import copy
import datetime
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from mcruntime import Cluster
from mcruntime._certs import CertificateAuthority
from mcruntime.envtest import APIServer
from mcruntime.errors import MCRuntimeError
from tests._client_keys import PASSPHRASE, client_certificate, pem, rsa_pss
from tests._proxy import PRIVATE_HOST, ConnectProxy

from .conftest import Kubectl, kubectl_binary

pytestmark = pytest.mark.timeout(120)

Case = Callable[[APIServer, ConnectProxy, Path], dict[str, Any]]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _cluster(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["clusters"][0]["cluster"]  # type: ignore[no-any-return]


def _pair(server: APIServer, key: Any, key_pem: bytes, **dates: Any) -> dict[str, Any]:
    doc = copy.deepcopy(server.kubeconfig(auth="certificate"))
    doc["users"][0]["user"] = {
        "client-certificate-data": _b64(client_certificate(key, **dates)),
        "client-key-data": _b64(key_pem),
    }
    return doc


def ca_bundle(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    doc = server.kubeconfig()
    assert server.ca_data is not None
    (folder / "ca.crt").write_bytes(CertificateAuthority("old").cert_pem + server.ca_data)
    del _cluster(doc)["certificate-authority-data"]
    _cluster(doc)["certificate-authority"] = "ca.crt"  # relative: beside the kubeconfig
    return doc


def tls_server_name(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    doc = server.kubeconfig()
    _cluster(doc)["tls-server-name"] = "localhost"
    return doc


def wrong_tls_server_name(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    doc = server.kubeconfig()
    _cluster(doc)["tls-server-name"] = "api.example.com"
    return doc


def socks5_by_name(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    doc = server.kubeconfig()  # a name only the proxy resolves
    _cluster(doc).update(
        server=f"https://{PRIVATE_HOST}:{server.port}",
        **{"tls-server-name": "localhost", "proxy-url": f"socks5://127.0.0.1:{proxy.port}"},
    )
    return doc


def ftp_proxy(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    doc = server.kubeconfig()
    _cluster(doc)["proxy-url"] = f"ftp://127.0.0.1:{proxy.port}"
    return doc


def encrypted_key(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    return _pair(server, key, pem(key, "pkcs8", PASSPHRASE))


def rsa_pss_key(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    key = rsa.generate_private_key(65537, 2048)
    return _pair(server, key, rsa_pss(key))


def another_certificates_key(
    server: APIServer, proxy: ConnectProxy, folder: Path
) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    return _pair(server, key, pem(ec.generate_private_key(ec.SECP256R1())))


def expired_client_certificate(
    server: APIServer, proxy: ConnectProxy, folder: Path
) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP384R1())
    hours = datetime.timedelta(hours=1)
    return _pair(server, key, pem(key), not_before=2 * hours, duration=-hours)


def ed25519_key(server: APIServer, proxy: ConnectProxy, folder: Path) -> dict[str, Any]:
    key = ed25519.Ed25519PrivateKey.generate()
    return _pair(server, key, pem(key))


#: (case, kubectl connects, the file's name)
CASES: list[tuple[Case, bool, str]] = [
    (ca_bundle, True, "config"),
    (tls_server_name, True, "config"),
    (socks5_by_name, True, "config"),
    (ed25519_key, True, "config"),
    (ca_bundle, True, f"prod{os.pathsep}eu-1.yaml"),
    (wrong_tls_server_name, False, "config"),
    (ftp_proxy, False, "config"),
    (encrypted_key, False, "config"),
    (rsa_pss_key, False, "config"),
    (another_certificates_key, False, "config"),
    (expired_client_certificate, False, "config"),
]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ConnectProxy]:
    p = ConnectProxy()
    yield p
    p.close()


@pytest.mark.parametrize("binary", ["kubectl", "kubectl.1.27"])
@pytest.mark.parametrize(
    ("case", "connects", "file_name"),
    CASES,
    ids=[f"{c.__name__}{'-named-with-separator' if n != 'config' else ''}" for c, _, n in CASES],
)
def test_mcruntime_connects_where_kubectl_does_and_refuses_where_it_refuses(
    envtest: APIServer,
    proxy: ConnectProxy,
    tmp_path: Path,
    binary: str,
    case: Case,
    connects: bool,
    file_name: str,
) -> None:
    doc = case(envtest, proxy, tmp_path)
    path = tmp_path / file_name
    path.write_text(yaml.safe_dump(doc))
    ran = Kubectl(kubectl_binary(binary), path).run(
        "get", "--raw", "/api", "--request-timeout=10s", check=False
    )
    assert (ran.returncode == 0) is connects, ran.stderr

    try:
        cluster = Cluster.from_kubeconfig(str(path), name="c")
        try:
            cluster.rest.request("GET", "/api", timeout=10)
        finally:
            cluster.stop()
    except MCRuntimeError as exc:
        assert not connects, f"kubectl connects, mcruntime: {exc}"
        message = str(exc)
        assert "[cluster c]" in message or f"of context {doc['current-context']!r}" in message
        user = doc["users"][0]["user"]
        for secret in (user.get("token"), user.get("client-key-data"), PASSPHRASE.decode()):
            assert not secret or secret not in message
    else:
        assert connects, f"kubectl refuses it ({ran.stderr.strip()}), mcruntime connects"
