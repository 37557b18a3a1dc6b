"""CertificateSigningRequests (``certificates.k8s.io/v1``), as kube-apiserver keeps them and
kube-controller-manager signs them.

kube-apiserver's side (its CSR strategy, validation and the CertificateApproval,
CertificateSigning and CertificateSubjectRestriction admission plugins):

- a create records who asked (``spec.username``, ``uid``, ``groups``, ``extra``)
  and clears ``status``; ``spec.request`` must be a PEM ``CERTIFICATE REQUEST``
  whose signature holds, ``spec.usages`` known and without duplicates,
  ``spec.signerName`` a domain-prefixed path, ``spec.expirationSeconds`` at least
  600; ``kubernetes.io/kube-apiserver-client`` refuses a request for the group
  ``system:masters`` (403);
- a write of the object itself changes neither ``spec`` nor ``status``; the
  ``/approval`` subresource changes the Approved/Denied conditions only (and needs
  ``approve`` on ``signers`` named after the signer, or its ``<domain>/*``); the
  ``/status`` subresource may set ``status.certificate`` once, PEM certificates
  only (and needs ``sign`` on the signer), and keeps the approval conditions;
  no update removes an Approved, Denied or Failed condition.

kube-controller-manager's side: its signers of ``kubernetes.io/kube-apiserver-client``,
``kubernetes.io/kube-apiserver-client-kubelet`` and ``kubernetes.io/kubelet-serving``
issue an approved request's certificate from envtest's CA, with its subject, subject
alternative names and the usages it asked for (a client certificate authenticates to
every envtest server as its common name, in its organizations as groups), for
``expirationSeconds`` (at most a year), or mark the request Failed
(``SignerValidationFailure``, with the signer's reason) when it is not one the
signer issues (``signer.go``, and ``ValidateKubeletClientCSR`` and
``ValidateKubeletServingCSR`` of ``pkg/apis/certificates/helpers.go``):

- a client certificate's usages are ``client auth``, and optionally ``digital
  signature`` and ``key encipherment``;
- a kubelet's client certificate is for ``system:node:<name>`` in exactly the
  organization ``system:nodes``, without subject alternative names, for ``digital
  signature`` and ``client auth`` (and ``key encipherment``);
- a kubelet's serving certificate is for ``system:node:<name>`` in exactly
  ``system:nodes``, with DNS names or IP addresses (at least one; no email address or
  URI), for ``digital signature`` and ``server auth`` (and ``key encipherment``).

envtest approves nothing by itself (kube-controller-manager's approver approves a
node's own client requests). Requests for other signers stay pending for a signer of
the test's own.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from collections.abc import Callable
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import NameOID

from mcruntime.envtest import _rbac
from mcruntime.envtest._names import now
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._tls import authority

__all__ = [
    "CLIENT_SIGNER",
    "CSRS",
    "KUBELET_CLIENT_SIGNER",
    "KUBELET_SERVING_SIGNER",
    "Requester",
    "signed_status",
    "write_check",
]

CSRS = ("certificates.k8s.io", "certificatesigningrequests")
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
_LEGACY_SIGNER = "kubernetes.io/legacy-unknown"
_KIND, _GROUP = "CertificateSigningRequest", "certificates.k8s.io"
USAGES = (
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
)
_CLIENT_USAGES = ("digital signature", "key encipherment", "client auth")
_NODES = "system:nodes"
_NODE_PREFIX = "system:node:"
#: the usages a kubelet's certificates may have: these, or these but key encipherment
_KUBELET_CLIENT_USAGES = frozenset({"client auth", "digital signature", "key encipherment"})
_KUBELET_SERVING_USAGES = frozenset({"digital signature", "key encipherment", "server auth"})
_TRUE_ONLY = ("Approved", "Denied", "Failed")
_STATUSES = ("True", "False", "Unknown")
_MAX_DURATION = datetime.timedelta(days=365)  # kube-controller-manager's --cluster-signing-duration
_BACKDATE = datetime.timedelta(minutes=5)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SIGNER = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*/[^/]+(/[^/]+)*$")

Obj = dict[str, Any]
Cause = tuple[str, str, str]  # reason, field, "field: message"
#: who sends a write: name, uid, groups, extra; and whether RBAC lets them do something
Requester = tuple[str, str, tuple[str, ...], dict[str, list[str]]]
Allowed = Callable[[_rbac.Attributes], bool]


def write_check(
    subresource: str,
    requester: Requester,
    allowed: Allowed,
    stored: Callable[[str], Obj | None],
) -> Callable[[Obj], None]:
    """The check a CSR write goes through before it is stored (it completes the object too):
    ``subresource`` "" (create or update), "status" or "approval"; ``stored(name)`` the
    object as stored (None on create)."""

    def check(obj: Obj) -> None:
        name = obj["metadata"].get("name", "")
        old = stored(name)
        if old is None:
            _prepare_create(obj, requester)
            _validate(obj, None, "")
            _restrict_subject(obj)
            return
        if subresource == "":
            obj.update(spec=old.get("spec") or {}, status=old.get("status") or {})
        else:
            _prepare_subresource(obj, old, subresource)
        _validate(obj, old, subresource)
        _authorize(obj, old, subresource, allowed)

    return check


def signed_status(obj: Obj) -> Obj | None:
    """The status kube-controller-manager's signers write for ``obj`` (None: none to write):
    the certificate of an approved request for one of them, or a Failed condition."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    types = {c.get("type") for c in status.get("conditions") or ()}
    refusal = _REFUSALS.get(spec.get("signerName") or "")
    if (
        refusal is None
        or "Approved" not in types
        or {"Denied", "Failed"} & types
        or status.get("certificate")
    ):
        return None
    usages = list(spec.get("usages") or ())
    request = x509.load_pem_x509_csr(base64.b64decode(spec["request"]))
    why = refusal(request, usages)
    if why:
        failed = _condition("Failed", "SignerValidationFailure", why)
        return {**status, "conditions": [*(status.get("conditions") or ()), failed]}
    seconds = spec.get("expirationSeconds")
    duration = min(_MAX_DURATION, datetime.timedelta(seconds=seconds)) if seconds else _MAX_DURATION
    pem = authority().sign_request(
        request,
        key_usage={"digital signature", "key encipherment"} & set(usages),
        client_auth="client auth" in usages,
        server_auth="server auth" in usages,
        not_before=_BACKDATE,
        duration=duration,
    )
    return {**status, "certificate": base64.b64encode(pem).decode()}


# -- kube-controller-manager's signers -------------------------------------------
# Each says why it does not sign a request ("" when it does), in its own words.


def _client_refusal(request: x509.CertificateSigningRequest, usages: list[str]) -> str:
    wrong = next((u for u in usages if u not in _CLIENT_USAGES), None)
    if wrong is not None:
        return f"invalid usage for client certificate: {wrong}"
    if "client auth" not in usages:
        return "missing required usage for client certificate: client auth"
    return ""


def _kubelet_client_refusal(request: x509.CertificateSigningRequest, usages: list[str]) -> str:
    sans = _sans(request)
    return (
        _not_nodes(request)
        or _present(sans, "DNS")
        or _present(sans, "Email")
        or _present(sans, "IP")
        or _present(sans, "URI")
        or _not_a_node(request)
        or _usages_refusal(usages, _KUBELET_CLIENT_USAGES)
    )


def _kubelet_serving_refusal(request: x509.CertificateSigningRequest, usages: list[str]) -> str:
    sans = _sans(request)
    named = sans.get("DNS") or sans.get("IP")
    return (
        _not_nodes(request)
        or ("" if named else "DNS or IP subjectAltName is required")
        or _present(sans, "Email")
        or _present(sans, "URI")
        or _usages_refusal(usages, _KUBELET_SERVING_USAGES)
        or _not_a_node(request)
    )


_REFUSALS: dict[str, Callable[[x509.CertificateSigningRequest, list[str]], str]] = {
    CLIENT_SIGNER: _client_refusal,
    KUBELET_CLIENT_SIGNER: _kubelet_client_refusal,
    KUBELET_SERVING_SIGNER: _kubelet_serving_refusal,
}


def _sans(request: x509.CertificateSigningRequest) -> dict[str, list[Any]]:
    """The subject alternative names of ``request`` by kind, as Go names the kinds."""
    try:
        ext = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return {}
    return {
        "DNS": ext.get_values_for_type(x509.DNSName),
        "Email": ext.get_values_for_type(x509.RFC822Name),
        "IP": ext.get_values_for_type(x509.IPAddress),
        "URI": ext.get_values_for_type(x509.UniformResourceIdentifier),
    }


def _not_nodes(request: x509.CertificateSigningRequest) -> str:
    orgs = [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return "" if orgs == [_NODES] else "subject organization is not system:nodes"


def _not_a_node(request: x509.CertificateSigningRequest) -> str:
    cns = [a.value for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    ok = bool(cns) and isinstance(cns[-1], str) and cns[-1].startswith(_NODE_PREFIX)
    return "" if ok else "subject common name does not begin with system:node:"


def _present(sans: dict[str, list[Any]], kind: str) -> str:
    return f"{kind} subjectAltNames are not allowed" if sans.get(kind) else ""


def _usages_refusal(usages: list[str], allowed: frozenset[str]) -> str:
    """A kubelet's certificate has the usages ``allowed``, or them but key encipherment."""
    if set(usages) in (allowed, allowed - {"key encipherment"}):
        return ""
    return f"usages did not match [{' '.join(sorted(allowed))}]"


# -- kube-apiserver's strategy -------------------------------------------------


def _prepare_create(obj: Obj, requester: Requester) -> None:
    name, uid, groups, extra = requester
    spec = {
        k: v
        for k, v in (obj.get("spec") or {}).items()
        if k not in ("username", "uid", "groups", "extra")
    }
    spec["username"] = name
    if uid:
        spec["uid"] = uid
    spec["groups"] = list(groups)
    if extra:
        spec["extra"] = {k: list(v) for k, v in extra.items()}
    obj["spec"] = spec
    obj["status"] = {}


def _prepare_subresource(obj: Obj, old: Obj, subresource: str) -> None:
    """A write of ``/approval`` changes the conditions but Failed (the certificate stays); one
    of ``/status`` changes the status but the Approved and Denied conditions."""
    kept = ("Failed",) if subresource == "approval" else ("Approved", "Denied")
    old_status = old.get("status") or {}
    status = dict(obj.get("status") or {})
    conditions = [c for c in status.pop("conditions", None) or () if c.get("type") not in kept]
    conditions += [c for c in old_status.get("conditions") or () if c.get("type") in kept]
    if conditions:
        status["conditions"] = _stamped(conditions, old_status.get("conditions") or ())
    if subresource == "approval":
        status.pop("certificate", None)
        if "certificate" in old_status:
            status["certificate"] = old_status["certificate"]
    obj["spec"] = old.get("spec") or {}
    obj["status"] = status


def _stamped(conditions: list[Obj], old: Any) -> list[Obj]:
    """``lastUpdateTime`` and ``lastTransitionTime`` filled in where a writer left them out
    (the transition time kept from the old condition of the type while its status is the same)."""
    before = {c.get("type"): c for c in old}
    out = []
    for c in conditions:
        c = dict(c)
        c.setdefault("lastUpdateTime", now())
        prior = before.get(c.get("type")) or {}
        if "lastTransitionTime" not in c:
            kept = prior.get("status") == c.get("status") and prior.get("lastTransitionTime")
            c["lastTransitionTime"] = kept or now()
        out.append(c)
    return out


def _condition(type_: str, reason: str, message: str) -> Obj:
    t = now()
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": t,
        "lastTransitionTime": t,
    }


# -- validation ----------------------------------------------------------------


def _validate(obj: Obj, old: Obj | None, subresource: str) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    causes: list[Cause] = []
    why = _request_error(spec.get("request"))
    if why:
        causes.append(_cause("FieldValueInvalid", "spec.request", f"Invalid value: {why}"))
    usages = spec.get("usages") or []
    if not usages:
        causes.append(_cause("FieldValueRequired", "spec.usages", "Required value"))
    seen: set[str] = set()
    for i, u in enumerate(usages):
        where = f"spec.usages[{i}]"
        if u not in USAGES:
            supported = ", ".join(f'"{x}"' for x in USAGES)
            causes.append(
                _cause(
                    "FieldValueNotSupported",
                    where,
                    f'Unsupported value: "{u}": supported values: {supported}',
                )
            )
        elif u in seen:
            causes.append(_cause("FieldValueDuplicate", where, f'Duplicate value: "{u}"'))
        seen.add(u)
    causes += _signer_causes(spec.get("signerName"), old)
    seconds = spec.get("expirationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or seconds < 600):
        causes.append(
            _cause(
                "FieldValueInvalid",
                "spec.expirationSeconds",
                f"Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)",
            )
        )
    causes += _condition_causes(status.get("conditions") or [])
    certificate = status.get("certificate")
    if old is None or certificate != _certificate(old):
        why = _certificate_error(certificate)
        if why:
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    "status.certificate",
                    f'Invalid value: "<certificate data>": {why}',
                )
            )
    if old is not None:
        causes += _update_causes(obj, old, subresource)
    if causes:
        raise StatusError.invalid_causes(_KIND, obj["metadata"].get("name", ""), _GROUP, causes)


def _cause(reason: str, field: str, message: str) -> Cause:
    return (reason, field, f"{field}: {message}")


def _request_error(request: Any) -> str:
    if not isinstance(request, str) or not request:
        return "<nil>: PEM block type must be CERTIFICATE REQUEST"
    try:
        pem = base64.b64decode(request, validate=True)
    except (binascii.Error, ValueError):
        return "illegal base64 data"
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        return "PEM block type must be CERTIFICATE REQUEST"
    try:
        csr = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        return f"x509: {exc}"
    if not csr.is_signature_valid:
        return _verification_failure(csr)
    return ""


def _verification_failure(csr: x509.CertificateSigningRequest) -> str:
    """Go's error for a request whose signature does not verify, by its key's algorithm."""
    key = csr.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        return "crypto/rsa: verification error"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "x509: Ed25519 verification failure"
    return "x509: ECDSA verification failure"


def _signer_causes(signer: Any, old: Obj | None) -> list[Cause]:
    field = "spec.signerName"
    if not signer:
        return [_cause("FieldValueRequired", field, "Required value")]
    legacy_before = ((old or {}).get("spec") or {}).get("signerName") == _LEGACY_SIGNER
    if signer == _LEGACY_SIGNER and not legacy_before:
        return [
            _cause(
                "FieldValueInvalid",
                field,
                f'Invalid value: "{signer}": the legacy signerName is not allowed via this API version',
            )
        ]
    if not isinstance(signer, str) or not _SIGNER.match(signer) or len(signer) > 571:
        return [
            _cause(
                "FieldValueInvalid",
                field,
                f'Invalid value: "{signer}": must be a fully qualified domain and path of the form '
                "'example.com/signer-name'",
            )
        ]
    return []


def _condition_causes(conditions: list[Obj]) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        type_, status = c.get("type") or "", c.get("status") or ""
        where = f"status.conditions[{i}]"
        if not type_:
            causes.append(_cause("FieldValueRequired", f"{where}.type", "Required value"))
        allowed = ("True",) if type_ in _TRUE_ONLY else _STATUSES
        if not status:
            causes.append(_cause("FieldValueRequired", f"{where}.status", "Required value"))
        elif status not in allowed:
            values = ", ".join(f'"{s}"' for s in allowed)
            causes.append(
                _cause(
                    "FieldValueNotSupported",
                    f"{where}.status",
                    f'Unsupported value: "{status}": supported values: {values}',
                )
            )
        other = {"Approved": "Denied", "Denied": "Approved"}.get(type_)
        if other is not None and other in seen:
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    f"{where}.type",
                    f'Invalid value: "{type_}": Approved and Denied conditions are mutually exclusive',
                )
            )
        if type_ in seen:
            causes.append(
                _cause("FieldValueDuplicate", f"{where}.type", f'Duplicate value: "{type_}"')
            )
        seen.add(type_)
    return causes


def _certificate_error(certificate: Any) -> str:
    if not certificate:
        return ""
    try:
        data = base64.b64decode(certificate, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return "illegal base64 data"
    blocks = re.findall(rb"-----BEGIN ([A-Z0-9 ]+)-----", data)
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    wrong = next((b for b in blocks if b != b"CERTIFICATE"), None)
    if wrong is not None:
        return f'only CERTIFICATE PEM blocks are allowed, found "{wrong.decode()}"'
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        return f"x509: {exc}"
    return ""


def _update_causes(new: Obj, old: Obj, subresource: str) -> list[Cause]:
    causes: list[Cause] = []
    field = "status.conditions"
    for t in ("Approved", "Denied", "Failed"):
        before, after = _of_type(old, t), _of_type(new, t)
        if len(after) < len(before):
            causes.append(
                _cause(
                    "FieldValueForbidden",
                    field,
                    f'Forbidden: updates may not remove a condition of type "{t}"',
                )
            )
        elif t != "Failed" and subresource != "approval":
            if len(after) > len(before):
                causes.append(
                    _cause(
                        "FieldValueForbidden",
                        field,
                        f'Forbidden: updates may not add a condition of type "{t}"',
                    )
                )
            elif after != before:
                causes.append(
                    _cause(
                        "FieldValueForbidden",
                        field,
                        f'Forbidden: updates may not modify a condition of type "{t}"',
                    )
                )
    before_cert, after_cert = _certificate(old), _certificate(new)
    if after_cert != before_cert:
        field = "status.certificate"
        if subresource != "status":
            causes.append(
                _cause(
                    "FieldValueForbidden",
                    field,
                    "Forbidden: updates may not set certificate content",
                )
            )
        elif before_cert:
            causes.append(
                _cause(
                    "FieldValueForbidden",
                    field,
                    "Forbidden: updates may not modify existing certificate content",
                )
            )
    return causes


def _of_type(obj: Obj, type_: str) -> list[Obj]:
    return [c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == type_]


# -- admission -----------------------------------------------------------------


def _restrict_subject(obj: Obj) -> None:
    """CertificateSubjectRestriction: no client certificate for ``system:masters`` by this API."""
    spec = obj.get("spec") or {}
    if spec.get("signerName") != CLIENT_SIGNER:
        return
    request = x509.load_pem_x509_csr(base64.b64decode(spec["request"]))
    orgs = [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if "system:masters" in orgs:
        raise _forbidden(
            obj, f"use of {CLIENT_SIGNER} signer with system:masters group is not allowed"
        )


def _authorize(obj: Obj, old: Obj, subresource: str, allowed: Allowed) -> None:
    """CertificateApproval and CertificateSigning: ``approve`` (a change of the approval
    conditions) or ``sign`` (a certificate) on ``signers``, named after the signer or ``<domain>/*``."""
    if subresource == "approval":
        verb = "approve"
        changed = any(_of_type(obj, t) != _of_type(old, t) for t in ("Approved", "Denied"))
    elif subresource == "status":
        verb = "sign"
        changed = _certificate(obj) != _certificate(old)
    else:
        return
    signer = (obj.get("spec") or {}).get("signerName") or ""
    names = (signer, signer.split("/", 1)[0] + "/*")
    if changed and not any(
        allowed(_rbac.Attributes(verb, _GROUP, "signers", name=n)) for n in names
    ):
        raise _forbidden(obj, f'user not permitted to {verb} requests with signerName "{signer}"')


def _certificate(obj: Obj) -> Any:
    return (obj.get("status") or {}).get("certificate")


def _forbidden(obj: Obj, why: str) -> StatusError:
    name = obj["metadata"].get("name", "")
    return StatusError.forbidden(
        f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: {why}',
        name,
        _GROUP,
        "certificatesigningrequests",
    )
