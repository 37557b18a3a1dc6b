"""A kubeconfig's CA, client certificate and key are read when it is loaded, as kubectl reads them.

Every key kubectl uses (RSA in PKCS #1 or #8, ECDSA P-256 and P-384, Ed25519) logs in to
envtest; what kubectl refuses before it connects (an encrypted key, an RSA-PSS key, a key
of another certificate, a file that is not there) is a `ConfigError` at load naming the user
or cluster and the field, never the content. Before, each was "TLS handshake failed" at the
first call, and a provider engaged the cluster and retried it as if its server were down.
"""

from __future__ import annotations

import base64
import copy
import datetime
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from mcruntime import Cluster
from mcruntime._certs import CertificateAuthority
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import ConfigError, Unauthorized, Unreachable
from tests._client_keys import PASSPHRASE, client_certificate, pem, rsa_pss
from tests._connections import established_to

pytestmark = pytest.mark.timeout(60)


def with_pair(server: APIServer, cert: bytes, key: bytes) -> dict[str, Any]:
    doc = copy.deepcopy(server.kubeconfig(auth="certificate"))
    doc["users"][0]["user"].update(
        {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        }
    )
    return doc


def load_error(kubeconfig: dict[str, Any] | str) -> str:
    with pytest.raises(ConfigError) as err:
        Cluster.from_kubeconfig(kubeconfig, name="c").stop()
    return str(err.value)


@pytest.mark.parametrize(
    ("make", "form"),
    [
        (lambda: ec.generate_private_key(ec.SECP256R1()), "traditional"),
        (lambda: ec.generate_private_key(ec.SECP384R1()), "pkcs8"),
        (ed25519.Ed25519PrivateKey.generate, "pkcs8"),
        (lambda: rsa.generate_private_key(65537, 2048), "traditional"),
        (lambda: rsa.generate_private_key(65537, 2048), "pkcs8"),
    ],
    ids=["ec-p256-sec1", "ec-p384-pkcs8", "ed25519", "rsa-pkcs1", "rsa-pkcs8"],
)
def test_every_key_kubectl_uses_logs_in(envtest_server: APIServer, make: Any, form: str) -> None:
    key = make()
    cluster = Cluster.from_kubeconfig(
        with_pair(envtest_server, client_certificate(key), pem(key, form)), name="c"
    )
    try:
        review = cluster.client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    finally:
        cluster.stop()
    assert review["status"]["userInfo"]["username"] == "kubernetes-admin"


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(65537, 2048)


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("encrypted-pkcs8", "is encrypted with a passphrase, which kubectl cannot use either"),
        ("encrypted-pkcs1", "is encrypted with a passphrase, which kubectl cannot use either"),
        ("rsa-pss", "is an RSA-PSS key, which kubectl cannot use either"),
        ("secp256k1", "is an ECDSA key on the curve secp256k1, which kubectl cannot use either"),
        ("another-key", "does not match its client-certificate"),
        ("a-certificate", "holds a certificate rather than a key"),
    ],
)
def test_a_client_key_kubectl_refuses_is_refused_at_load_naming_the_user(
    envtest_server: APIServer, case: str, why: str
) -> None:
    key: Any = _rsa() if case in ("encrypted-pkcs1", "rsa-pss") else None
    if case == "secp256k1":
        key = ec.generate_private_key(ec.SECP256K1())
    key = key or ec.generate_private_key(ec.SECP256R1())
    cert = client_certificate(key)
    key_pem = {
        "encrypted-pkcs8": lambda: pem(key, "pkcs8", PASSPHRASE),
        "encrypted-pkcs1": lambda: pem(key, "traditional", PASSPHRASE),
        "rsa-pss": lambda: rsa_pss(key),
        "secp256k1": lambda: pem(key),
        "another-key": lambda: pem(ec.generate_private_key(ec.SECP256R1())),
        "a-certificate": lambda: cert,
    }[case]()
    doc = with_pair(envtest_server, cert, key_pem)
    message = load_error(doc)
    assert message.startswith(
        f"user {doc['users'][0]['name']!r} of context {doc['current-context']!r} in kubeconfig "
        f"<kubeconfig dict>: its client-key-data {why}"
    )
    for secret in (doc["users"][0]["user"]["client-key-data"], "PRIVATE KEY", PASSPHRASE.decode()):
        assert secret not in message


def test_a_client_certificate_that_is_not_pem_is_refused_at_load(
    envtest_server: APIServer,
) -> None:
    garbled = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    key = ec.generate_private_key(ec.SECP256R1())
    message = load_error(with_pair(envtest_server, garbled, pem(key)))
    assert message.endswith("its client-certificate-data holds a PEM block that is no certificate")


def test_a_certificate_authority_without_a_certificate_is_refused_at_load(
    envtest_server: APIServer,
) -> None:
    doc = copy.deepcopy(envtest_server.kubeconfig())
    not_pem = base64.b64encode(b"not a certificate").decode()
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = not_pem
    assert load_error(doc) == (
        f"cluster {doc['clusters'][0]['name']!r} of context {doc['current-context']!r} in "
        "kubeconfig <kubeconfig dict>: its certificate-authority-data holds no PEM certificate"
    )


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
def test_a_file_that_is_not_there_is_named_with_its_path_at_load(
    envtest_server: APIServer, tmp_path: Path, field: str
) -> None:
    doc = copy.deepcopy(envtest_server.kubeconfig(auth="certificate"))
    entry = doc["clusters" if field == "certificate-authority" else "users"][0]
    fields = entry["cluster" if field == "certificate-authority" else "user"]
    fields[field] = "missing.pem"  # relative: beside the kubeconfig
    del fields[f"{field}-data"]
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    assert load_error(str(path)).endswith(
        f"its {field} missing.pem cannot be read: No such file or directory"
    )


def test_a_ca_bundle_of_the_old_and_the_new_ca_is_trusted_in_either_order(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    # during a CA rotation the kubeconfig trusts both; kubectl connects with either order
    old, new = CertificateAuthority("old-ca").cert_pem, envtest_server.ca_data
    assert new is not None
    for bundle in (old + new, new + old):
        (tmp_path / "ca.crt").write_bytes(bundle)
        doc = copy.deepcopy(envtest_server.kubeconfig())
        cluster = doc["clusters"][0]["cluster"]
        del cluster["certificate-authority-data"]
        cluster["certificate-authority"] = str(tmp_path / "ca.crt")
        connected = Cluster.from_kubeconfig(doc, name="c")
        try:
            assert connected.rest.request("GET", "/api", timeout=10)
        finally:
            connected.stop()


@pytest.mark.parametrize(
    ("not_before", "until", "says"),
    [
        (2, -1, "the kubeconfig's client certificate expired at "),
        (-1, 2, "the kubeconfig's client certificate is not valid until "),
    ],
    ids=["expired", "not-yet-valid"],
)
def test_a_401_for_a_client_certificate_out_of_its_dates_says_so(
    envtest_server: APIServer, not_before: int, until: int, says: str
) -> None:
    # kube-apiserver (and envtest) answer it with a bare 401; kubectl says "You must be
    # logged in to the server (Unauthorized)". It loads: a certificate may be renewed on disk
    key = ec.generate_private_key(ec.SECP256R1())
    cert = client_certificate(
        key, datetime.timedelta(hours=not_before), datetime.timedelta(hours=until)
    )
    cluster = Cluster.from_kubeconfig(with_pair(envtest_server, cert, pem(key)), name="c")
    try:
        with pytest.raises(Unauthorized) as err:
            cluster.rest.request("GET", "/api", timeout=10)
    finally:
        cluster.stop()
    assert str(err.value).startswith(f"[cluster c] Unauthorized: {says}20")
    assert err.value.status == 401


@pytest.mark.parametrize("opens", ["a request", "a watch"])
def test_a_client_certificate_renewed_on_disk_is_presented_and_not_said_to_have_expired(
    envtest_server: APIServer, tmp_path: Path, opens: str
) -> None:
    # client-go closes its connections when the file is rotated; here the 401 of a connection
    # kept alive with the expired certificate closes them, and the call is sent again
    key = ec.generate_private_key(ec.SECP256R1())
    hour = datetime.timedelta(hours=1)
    (tmp_path / "client.key").write_bytes(pem(key))
    (tmp_path / "client.crt").write_bytes(client_certificate(key, 2 * hour, -hour))
    doc = copy.deepcopy(envtest_server.kubeconfig(auth="certificate"))
    doc["users"][0]["user"] = {"client-certificate": "client.crt", "client-key": "client.key"}
    (tmp_path / "config").write_text(yaml.safe_dump(doc))

    def renew(cert: bytes) -> None:  # as cert-manager or a kubelet replaces it
        (tmp_path / "client.crt.new").write_bytes(cert)
        os.replace(tmp_path / "client.crt.new", tmp_path / "client.crt")

    cluster = Cluster.from_kubeconfig(str(tmp_path / "config"), name="c")
    try:
        with pytest.raises(Unauthorized, match="client certificate expired at "):
            cluster.rest.request("GET", "/api", timeout=10)
        if opens == "a watch":  # on the pooled connection that presented the expired one
            renew(client_certificate(key))
            cluster.rest.watch("/api/v1/namespaces/default/configmaps").close()
            return
        # renewed by a CA the server does not trust: presented at once (not the pooled
        # connection's expired one), and the failure is not blamed on the old dates
        renew(client_certificate(key, ca=CertificateAuthority("another-ca")))
        with pytest.raises(Unreachable) as err:
            cluster.rest.request("GET", "/api", timeout=10)
        assert str(err.value).startswith(
            f"[cluster c] cannot reach 127.0.0.1:{envtest_server.port}"
        )
        assert "expired" not in str(err.value)
        renew(client_certificate(key))
        assert cluster.rest.request("GET", "/api", timeout=10)
    finally:
        cluster.stop()


def test_a_renewal_on_disk_closes_the_idle_connection_that_presented_the_old_one_while_a_watch_is_open(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    # the watch holds its pool: the idle connection beside it, presenting the certificate
    # before, stayed open (urllib3 2's PoolManager.clear forgets pools, closes none)
    key = ec.generate_private_key(ec.SECP256R1())
    lasts = datetime.timedelta(seconds=2)
    expires = datetime.datetime.now(datetime.UTC) + lasts
    short = client_certificate(key, datetime.timedelta(minutes=5), lasts)
    config = _files_kubeconfig(envtest_server, tmp_path, short, pem(key))
    cluster = Cluster.from_kubeconfig(config, name="c")
    try:
        stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps")
        assert cluster.rest.request("GET", "/api", timeout=10)  # (its connection stays pooled)
        before = established_to(envtest_server.port)
        (tmp_path / "client.crt.new").write_bytes(client_certificate(key))
        os.replace(tmp_path / "client.crt.new", tmp_path / "client.crt")
        wait_for(lambda: datetime.datetime.now(datetime.UTC) > expires, timeout=10)
        # sent on the pooled connection, refused (401): the pools are closed, and it is sent
        # again on a new connection presenting the renewed one
        assert cluster.rest.request("GET", "/api", timeout=10)
        print("COUNTS", before, established_to(envtest_server.port), cluster.rest.request_counts())
        assert established_to(envtest_server.port) == before  # the watch's and the new one
        assert not stream.closed
        stream.close()
    finally:
        cluster.stop()


def _files_kubeconfig(server: APIServer, tmp_path: Path, cert: bytes, key: bytes) -> str:
    (tmp_path / "client.key").write_bytes(key)
    (tmp_path / "client.crt").write_bytes(cert)
    doc = copy.deepcopy(server.kubeconfig(auth="certificate"))
    doc["users"][0]["user"] = {"client-certificate": "client.crt", "client-key": "client.key"}
    (tmp_path / "config").write_text(yaml.safe_dump(doc))
    return str(tmp_path / "config")


def _whoami(cluster: Cluster) -> str:
    cluster.rest.cut_calls("the test wants a new connection")  # a new handshake
    review = cluster.client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    return str(review["status"]["userInfo"]["username"])


@pytest.mark.parametrize(
    ("caught", "says"),
    [
        ("between its files", "client-key {dir}/client.key does not match its client-certificate"),
        ("half written", "client-certificate {dir}/client.crt holds no PEM certificate"),
        ("with a file missing", "{dir}/client.crt cannot be read: No such file or directory"),
    ],
)
def test_a_renewal_on_disk_caught_half_done_leaves_the_last_good_pair_presented(
    envtest_server: APIServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    caught: str,
    says: str,
) -> None:
    # client-go keeps its last good pair when the files do not load; before, every new
    # connection failed ("the kubeconfig's client-key does not match its client-certificate")
    # until the writer was done
    old, new = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    config = _files_kubeconfig(
        envtest_server, tmp_path, client_certificate(old, user="old"), pem(old)
    )
    cluster = Cluster.from_kubeconfig(config, name="c")
    try:
        assert _whoami(cluster) == "old"
        if caught == "between its files":
            (tmp_path / "client.key").write_bytes(pem(new))
        elif caught == "half written":
            (tmp_path / "client.crt").write_bytes(client_certificate(new, user="new")[:40])
        else:
            (tmp_path / "client.crt").unlink()
        with caplog.at_level(logging.INFO, logger="mcruntime.client"):
            assert _whoami(cluster) == "old"
            assert _whoami(cluster) == "old"  # said once
            (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert warning.getMessage() == (
                "cluster=c the client certificate on disk cannot be used: "
                + says.format(dir=tmp_path)
                + " (a renewal being written?); new connections present the last pair that "
                "could be until it can"
            )
            (tmp_path / "client.key").write_bytes(pem(new))
            (tmp_path / "client.crt").write_bytes(client_certificate(new, user="new"))
            assert _whoami(cluster) == "new"  # presented as soon as it can be
            assert (
                "cluster=c the client certificate and key files can be used again; new "
                "connections present them"
            ) in caplog.messages
    finally:
        cluster.stop()
    assert "BEGIN" not in caplog.text


def test_a_401_for_the_last_good_pair_says_the_renewal_on_disk_cannot_be_used(
    envtest_server: APIServer, tmp_path: Path
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    hour = datetime.timedelta(hours=1)
    expired = client_certificate(key, 2 * hour, -hour)
    cluster = Cluster.from_kubeconfig(
        _files_kubeconfig(envtest_server, tmp_path, expired, pem(key)), name="c"
    )
    try:
        with pytest.raises(Unauthorized, match="client certificate expired at "):
            cluster.rest.request("GET", "/api", timeout=10)
        renewed = ec.generate_private_key(ec.SECP256R1())
        (tmp_path / "client.key").write_bytes(pem(renewed))  # and its certificate never came
        cluster.rest.cut_calls("the test wants a new connection")
        with pytest.raises(Unauthorized) as err:
            cluster.rest.request("GET", "/api", timeout=10)
    finally:
        cluster.stop()
    assert str(err.value) == (
        f"[cluster c] Unauthorized: the client certificate on disk cannot be used (client-key "
        f"{tmp_path}/client.key does not match its client-certificate), and the last pair that "
        "could was presented"
    )
