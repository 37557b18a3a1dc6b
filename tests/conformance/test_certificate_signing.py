"""CertificateSigningRequests: kube-apiserver's checks, approval, and the signers.

Written to pass on a real cluster too: there kube-controller-manager's signers
issue ``kubernetes.io/kube-apiserver-client``, ``kubernetes.io/kube-apiserver-client-kubelet``
and ``kubernetes.io/kubelet-serving`` certificates, as envtest does (a real cluster's
kube-controller-manager may also approve a node's client request by itself).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config
from kubernetes.client import ApiClient

from mcruntime.envtest import wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._rbac import SETTLE, as_token, delete_cluster_scoped, token_of, whoami
from ._support import assert_status, raw, retry_on_conflict, unique

pytestmark = pytest.mark.timeout(60)

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
NODES = "system:nodes"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def _request(
    cn: str, orgs: tuple[str, ...] = (), sans: tuple[x509.GeneralName, ...] = ()
) -> tuple[bytes, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    subject = x509.Name([*names, x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    csr = builder.sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM), key


def _csr(name: str, pem: bytes, signer: str = CLIENT_SIGNER, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": signer,
            "usages": ["client auth"],
            **spec,
        },
    }


class _CSRs:
    """The typed client, and the CSRs a test created (deleted after it: they are cluster-scoped)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = client.CertificatesV1Api(api)
        self.made: list[str] = []

    def create(self, body: dict[str, Any]) -> Any:
        self.made.append(body["metadata"]["name"])
        return self.api.create_certificate_signing_request(body)


@pytest.fixture
def csrs(api: ApiClient) -> Iterator[_CSRs]:
    made = _CSRs(api)
    yield made
    delete_cluster_scoped(made.api.delete_certificate_signing_request, *made.made)


def _message(e: client.ApiException) -> str:
    return str(json.loads(e.body)["message"])


def _approve(
    certs: client.CertificatesV1Api,
    name: str,
    type_: str = "Approved",
    *,
    once: bool = False,
    **options: Any,
) -> Any:
    csr = certs.read_certificate_signing_request(name)
    if once and type_ in _types(csr):
        return csr
    csr.status.conditions = [
        *(csr.status.conditions or []),
        client.V1CertificateSigningRequestCondition(
            type=type_, status="True", reason="ConformanceTest", message="by the test"
        ),
    ]
    return certs.replace_certificate_signing_request_approval(name, csr, **options)


def _issued(certs: client.CertificatesV1Api, name: str) -> Any:
    def done() -> Any:
        csr = certs.read_certificate_signing_request(name)
        return csr if csr.status.certificate or _types(csr) & {"Failed"} else None

    return wait_for(done, timeout=SETTLE, what=f"the signer's answer to {name}")


def _types(csr: Any) -> set[str]:
    return {c.type for c in csr.status.conditions or ()}


def _cert_client(backend: KubeBackend, cert: bytes, key: ec.EllipticCurvePrivateKey) -> ApiClient:
    kubeconfig = backend.kubeconfig()
    if not kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://"):
        pytest.skip("client certificates need a backend served over TLS")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    kubeconfig["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert).decode(),
        "client-key-data": base64.b64encode(key_pem).decode(),
    }
    return config.new_client_from_config_dict(kubeconfig)


def test_a_request_records_who_made_it_and_starts_pending(api: ApiClient, csrs: _CSRs) -> None:
    me = whoami(api).json()["status"]["userInfo"]
    pem, _ = _request("someone")
    body = _csr(unique("csr"), pem, expirationSeconds=3600)
    body["spec"].update(username="mallory", groups=["system:masters"])
    body["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    created = csrs.create(body)
    assert created.spec.username == me["username"]
    assert set(created.spec.groups or ()) == set(me.get("groups") or ())
    assert not created.status.conditions and not created.status.certificate
    assert created.spec.expiration_seconds == 3600


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"request": base64.b64encode(b"not a request").decode()}, "spec.request", ""),
        ({"usages": []}, "spec.usages", "Required value"),
        (
            {"usages": ["client auth", "telepathy"]},
            "spec.usages[1]",
            'Unsupported value: "telepathy"',
        ),
        ({"usages": ["client auth", "client auth"]}, "spec.usages[1]", "Duplicate value"),
        ({"signerName": ""}, "spec.signerName", "Required value"),
        ({"signerName": "no-domain"}, "spec.signerName", "Invalid value"),
        ({"expirationSeconds": 300}, "spec.expirationSeconds", "less than 600 seconds"),
    ],
    ids=[
        "request",
        "no-usages",
        "unknown-usage",
        "duplicate-usage",
        "no-signer",
        "bad-signer",
        "short",
    ],
)
def test_a_request_is_checked(
    api: ApiClient, change: dict[str, Any], field: str, text: str
) -> None:
    pem, _ = _request("someone")
    body = _csr(unique("csr"), pem)
    body["spec"].update(change)
    status = assert_status(raw(api, "POST", CSRS, body=body), 422, "Invalid")
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert field in causes, causes
    assert text in causes[field], causes


def _tampered(key: Any) -> bytes:
    """A request signed by ``key`` whose signature no longer verifies (its last byte flipped)."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    der = bytearray(csr.public_bytes(serialization.Encoding.DER))
    der[-1] ^= 0x01
    return x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        (ec.generate_private_key(ec.SECP256R1()), "x509: ECDSA verification failure"),
        (rsa.generate_private_key(65537, 2048), "crypto/rsa: verification error"),
    ],
    ids=["ecdsa", "rsa"],
)
def test_a_request_whose_signature_does_not_verify_is_refused_in_gos_words(
    api: ApiClient, key: Any, text: str
) -> None:
    body = _csr(unique("csr"), _tampered(key))
    status = assert_status(raw(api, "POST", CSRS, body=body), 422, "Invalid")
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert causes.get("spec.request", "").endswith(text), causes


def test_a_client_certificate_for_system_masters_is_not_requested_this_way(api: ApiClient) -> None:
    pem, _ = _request("root", ("system:masters",))
    status = assert_status(raw(api, "POST", CSRS, body=_csr(unique("csr"), pem)), 403, "Forbidden")
    assert "with system:masters group is not allowed" in status["message"]


def test_an_approved_client_request_is_signed_and_its_certificate_authenticates(
    kube_backend: KubeBackend, csrs: _CSRs
) -> None:
    name = unique("csr")
    pem, key = _request(f"conformance-{name}", ("conformance-devs",))
    csrs.create(_csr(name, pem, expirationSeconds=3600))
    approved = _approve(csrs.api, name)
    (condition,) = approved.status.conditions
    assert (condition.type, condition.reason) == ("Approved", "ConformanceTest")
    assert condition.last_update_time is not None
    issued = _issued(csrs.api, name)
    cert_pem = base64.b64decode(issued.status.certificate)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert (
        cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"conformance-{name}"
    )
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert 3600 <= lifetime.total_seconds() <= 3600 + 3600  # a backdated start, at most an hour
    with _cert_client(kube_backend, cert_pem, key) as as_cert:
        info = whoami(as_cert).json()["status"]["userInfo"]
    assert info["username"] == f"conformance-{name}"
    assert "conformance-devs" in info["groups"]


def test_a_client_request_with_a_server_usage_fails(
    csrs: _CSRs,
) -> None:
    name = unique("csr")
    pem, _ = _request("server")
    csrs.create(_csr(name, pem, usages=["client auth", "server auth"]))
    _approve(csrs.api, name)
    failed = _issued(csrs.api, name)
    assert not failed.status.certificate
    (condition,) = [c for c in failed.status.conditions if c.type == "Failed"]
    assert condition.reason == "SignerValidationFailure"
    assert "server auth" in condition.message


def _approve_once(certs: client.CertificatesV1Api, name: str) -> None:
    """Approve ``name`` unless it is approved already: a real cluster's kube-controller-manager
    approves a node client request of a user who may create ``certificatesigningrequests/nodeclient``."""
    retry_on_conflict(lambda: _approve(certs, name, once=True))


def _extended_usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_an_approved_kubelet_serving_request_is_signed_for_its_names(csrs: _CSRs) -> None:
    name, node = unique("csr"), f"system:node:{unique('node')}"
    dns, ip = f"{unique('node')}.conformance.example", ipaddress.ip_address("10.0.0.7")
    pem, _ = _request(node, (NODES,), (x509.DNSName(dns), x509.IPAddress(ip)))
    usages = ["digital signature", "server auth"]
    csrs.create(_csr(name, pem, signer=KUBELET_SERVING_SIGNER, usages=usages))
    _approve(csrs.api, name)
    issued = _issued(csrs.api, name)
    assert issued.status.certificate, issued.status.conditions
    cert = x509.load_pem_x509_certificate(base64.b64decode(issued.status.certificate))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == node
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == [NODES]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [dns]
    assert sans.get_values_for_type(x509.IPAddress) == [ip]
    assert _extended_usages(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature


def test_an_approved_kubelet_client_request_is_signed_for_the_node(
    kube_backend: KubeBackend, csrs: _CSRs
) -> None:
    name, node = unique("csr"), f"system:node:{unique('node')}"
    pem, key = _request(node, (NODES,))
    usages = ["digital signature", "key encipherment", "client auth"]
    csrs.create(_csr(name, pem, signer=KUBELET_CLIENT_SIGNER, usages=usages))
    _approve_once(csrs.api, name)
    issued = _issued(csrs.api, name)
    assert issued.status.certificate, issued.status.conditions
    cert_pem = base64.b64decode(issued.status.certificate)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == node
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == [NODES]
    assert _extended_usages(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    with _cert_client(kube_backend, cert_pem, key) as as_node:
        info = whoami(as_node).json()["status"]["userInfo"]
    assert info["username"] == node
    assert NODES in info["groups"]


@pytest.mark.parametrize(
    ("signer", "cn", "orgs", "sans", "usages", "why"),
    [
        (
            KUBELET_CLIENT_SIGNER,
            "alice",
            (NODES,),
            (),
            ["digital signature", "client auth"],
            "subject common name does not begin with system:node:",
        ),
        (
            KUBELET_CLIENT_SIGNER,
            "system:node:n",
            ("developers",),
            (),
            ["digital signature", "client auth"],
            "subject organization is not system:nodes",
        ),
        (
            KUBELET_CLIENT_SIGNER,
            "system:node:n",
            (NODES,),
            (x509.DNSName("n.example"),),
            ["digital signature", "client auth"],
            "DNS subjectAltNames are not allowed",
        ),
        (
            KUBELET_CLIENT_SIGNER,
            "system:node:n",
            (NODES,),
            (),
            ["client auth"],
            "usages did not match [client auth digital signature key encipherment]",
        ),
        (
            KUBELET_SERVING_SIGNER,
            "alice",
            (NODES,),
            (x509.DNSName("n.example"),),
            ["digital signature", "server auth"],
            "subject common name does not begin with system:node:",
        ),
        (
            KUBELET_SERVING_SIGNER,
            "system:node:n",
            (NODES,),
            (),
            ["digital signature", "server auth"],
            "DNS or IP subjectAltName is required",
        ),
        (
            KUBELET_SERVING_SIGNER,
            "system:node:n",
            (NODES,),
            (x509.RFC822Name("n@example.com"), x509.DNSName("n.example")),
            ["digital signature", "server auth"],
            "Email subjectAltNames are not allowed",
        ),
        (
            KUBELET_SERVING_SIGNER,
            "system:node:n",
            (NODES,),
            (x509.DNSName("n.example"),),
            ["digital signature", "server auth", "client auth"],
            "usages did not match [digital signature key encipherment server auth]",
        ),
    ],
    ids=[
        "client-cn",
        "client-org",
        "client-dns",
        "client-usages",
        "serving-cn",
        "serving-no-san",
        "serving-email",
        "serving-usages",
    ],
)
def test_a_kubelet_request_the_signer_does_not_accept_fails(
    csrs: _CSRs,
    signer: str,
    cn: str,
    orgs: tuple[str, ...],
    sans: tuple[x509.GeneralName, ...],
    usages: list[str],
    why: str,
) -> None:
    name = unique("csr")
    pem, _ = _request(cn, orgs, sans)
    csrs.create(_csr(name, pem, signer=signer, usages=usages))
    _approve(csrs.api, name)
    failed = _issued(csrs.api, name)
    assert not failed.status.certificate
    (condition,) = [c for c in failed.status.conditions if c.type == "Failed"]
    assert (condition.reason, condition.message) == ("SignerValidationFailure", why)


def test_the_object_itself_changes_neither_spec_nor_status(api: ApiClient, csrs: _CSRs) -> None:
    name = unique("csr")
    pem, _ = _request("someone")
    created = csrs.create(_csr(name, pem))
    body = csrs.api.api_client.sanitize_for_serialization(created)
    body["metadata"]["labels"] = {"team": "a"}
    body["spec"]["usages"] = ["digital signature", "client auth"]
    body["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Sneaky"}]}
    resp = raw(api, "PUT", f"{CSRS}/{name}", body=body)
    assert resp.status == 200, resp.data
    after = resp.json()
    assert after["metadata"]["labels"] == {"team": "a"}
    assert after["spec"]["usages"] == ["client auth"]
    assert not (after.get("status") or {}).get("conditions")


def test_approval_is_checked_and_never_taken_back(csrs: _CSRs) -> None:
    name = unique("csr")
    pem, _ = _request("someone")
    csrs.create(_csr(name, pem, signerName="example.com/conformance"))
    approved = _approve(csrs.api, name)
    with pytest.raises(client.ApiException) as both:
        _approve(csrs.api, name, "Denied")
    assert both.value.status == 422 and "mutually exclusive" in _message(both.value)
    approved.status.conditions = []
    with pytest.raises(client.ApiException) as removed:
        csrs.api.replace_certificate_signing_request_approval(name, approved)
    assert removed.value.status == 422
    assert 'may not remove a condition of type "Approved"' in _message(removed.value)


def test_field_selector_on_the_signer_name(csrs: _CSRs) -> None:
    """What a signer's controller lists: only the requests addressed to it."""
    mine, theirs = unique("example.com/mine"), unique("example.com/theirs")
    for signer in (mine, mine, theirs):
        csrs.create(_csr(unique("csr"), _request("someone")[0], signer))
    listed = csrs.api.list_certificate_signing_request(field_selector=f"spec.signerName={mine}")
    assert sorted(c.metadata.name for c in listed.items) == sorted(csrs.made[:2])


def test_an_approval_is_recorded_in_managed_fields_as_the_approval_subresource(
    csrs: _CSRs,
) -> None:
    # kube-apiserver records the subresource a write went through by its name: /approval
    # is not /status
    name = unique("csr")
    pem, _ = _request("someone")
    csrs.create(_csr(name, pem, signerName="example.com/conformance"))
    approved = _approve(csrs.api, name, field_manager="conformance-approver")
    entries = [m for m in approved.metadata.managed_fields if m.manager == "conformance-approver"]
    assert [(m.operation, m.subresource) for m in entries] == [("Update", "approval")]
    assert "f:conditions" in entries[0].fields_v1["f:status"]
    stored = csrs.api.read_certificate_signing_request(name)
    assert ("conformance-approver", "Update", "approval") in {
        (m.manager, m.operation, m.subresource) for m in stored.metadata.managed_fields
    }


@pytest.mark.parametrize(
    ("content_type", "operation"),
    [("application/merge-patch+json", "Update"), ("application/apply-patch+yaml", "Apply")],
    ids=["merge-patch", "apply"],
)
def test_a_patched_or_applied_approval_is_recorded_as_the_approval_subresource(
    api: ApiClient, csrs: _CSRs, content_type: str, operation: str
) -> None:
    name = unique("csr")
    pem, _ = _request("someone")
    csrs.create(_csr(name, pem, signerName="example.com/conformance"))
    condition = {"type": "Approved", "status": "True", "reason": "ConformanceTest"}
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "status": {"conditions": [condition]},
    }
    resp = raw(
        api,
        "PATCH",
        f"{CSRS}/{name}/approval",
        query=[("fieldManager", "conformance-approver")],
        body=body,
        content_type=content_type,
    )
    assert resp.status == 200, resp.data
    approved = resp.json()
    assert [c["type"] for c in approved["status"]["conditions"]] == ["Approved"]
    entries = [
        (m["operation"], m.get("subresource"))
        for m in approved["metadata"]["managedFields"]
        if m["manager"] == "conformance-approver"
    ]
    assert entries == [(operation, "approval")]


def test_a_signer_of_ones_own_sets_the_certificate_once_through_status(
    api: ApiClient, csrs: _CSRs
) -> None:
    # a signer no controller serves stays pending: the test plays the signer
    name = unique("csr")
    pem, _ = _request("someone")
    csrs.create(_csr(name, pem, signerName="example.com/conformance"))
    approved = _approve(csrs.api, name)
    assert not approved.status.certificate
    body = csrs.api.api_client.sanitize_for_serialization(approved)
    body["status"]["certificate"] = base64.b64encode(b"not a certificate").decode()
    bad = assert_status(raw(api, "PUT", f"{CSRS}/{name}/status", body=body), 422, "Invalid")
    assert bad["details"]["causes"][0]["field"] == "status.certificate"

    ca_key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(ca_key, hashes.SHA256())
    )
    body["status"]["certificate"] = base64.b64encode(
        cert.public_bytes(serialization.Encoding.PEM)
    ).decode()
    body["status"]["conditions"] = []  # the approval stays whatever status writes
    signed = raw(api, "PUT", f"{CSRS}/{name}/status", body=body)
    assert signed.status == 200, signed.data
    assert signed.json()["status"]["certificate"] == body["status"]["certificate"]
    assert {c["type"] for c in signed.json()["status"]["conditions"]} == {"Approved"}
    again = signed.json()
    again["status"]["certificate"] = base64.b64encode(
        cert.public_bytes(serialization.Encoding.PEM) * 2
    ).decode()
    status = assert_status(raw(api, "PUT", f"{CSRS}/{name}/status", body=again), 422, "Invalid")
    assert "may not modify existing certificate content" in status["message"]


def test_approving_needs_approve_on_the_signer(
    kube_backend: KubeBackend,
    api: ApiClient,
    csrs: _CSRs,
    ns: str,
    account: str,
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = unique("csr-approver")
    rule = {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests", "certificatesigningrequests/approval"],
        "verbs": ["get", "update"],
    }
    rbac.create_cluster_role({"metadata": {"name": role}, "rules": [rule]})
    subject = {"kind": "ServiceAccount", "name": account, "namespace": ns}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    rbac.create_cluster_role_binding(
        {"metadata": {"name": role}, "roleRef": ref, "subjects": [subject]}
    )
    try:
        name = unique("csr")
        pem, _ = _request("someone")
        csrs.create(_csr(name, pem, signerName="example.com/conformance"))
        with as_token(kube_backend, token_of(api, ns, account)) as sa_api:
            sa_certs = client.CertificatesV1Api(sa_api)

            def refused() -> str | None:
                try:
                    _approve(sa_certs, name)
                except client.ApiException as e:
                    return _message(e) if e.status == 403 else None
                return None

            message = wait_for(refused, timeout=SETTLE, what="the approval refused")
            assert (
                'not permitted to approve requests with signerName "example.com/conformance"'
                in message
            )
            signers = {
                "apiGroups": ["certificates.k8s.io"],
                "resources": ["signers"],
                "resourceNames": ["example.com/*"],
                "verbs": ["approve"],
            }
            rbac.replace_cluster_role(role, {"metadata": {"name": role}, "rules": [rule, signers]})

            def approved() -> Any:
                try:
                    return _approve(sa_certs, name)
                except client.ApiException as e:
                    if e.status == 403:
                        return None
                    raise

            done = wait_for(approved, timeout=SETTLE, what="the approval allowed")
            assert "Approved" in _types(done)
    finally:
        delete_cluster_scoped(rbac.delete_cluster_role_binding, role)
        delete_cluster_scoped(rbac.delete_cluster_role, role)
