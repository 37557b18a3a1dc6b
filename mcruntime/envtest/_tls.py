"""TLS for envtest: one certificate authority per process, server and client certificates.

Every server of a process presents the same serving certificate (SANs
``127.0.0.1``, ``::1`` and ``localhost``), signed by a CA generated on first
use with ``cryptography`` (ECDSA P-256: fast to generate and to handshake).
Clients authenticate by bearer token or by a client certificate from the same
CA whose common name is the user and whose organizations are the groups, as
kind and kubeadm kubeconfigs do. ``ssl`` loads certificate chains only from
files, so the serving certificate and key are loaded from a memory file
(`mcruntime._memfile.load_cert_chain`): a process that is killed leaves no key
behind.
"""

from __future__ import annotations

import ssl
import threading
import time
from typing import NamedTuple

from mcruntime import _certs
from mcruntime._certs import KeyPair
from mcruntime._memfile import load_cert_chain

__all__ = ["CertificateAuthority", "KeyPair", "PeerCertificate", "authority", "peer_identity"]

SERVER_HOSTS = ("127.0.0.1", "::1", "localhost")
#: OpenSSL's X509_V_FLAG_NO_CHECK_TIME (``ssl`` has no name for it)
_NO_CHECK_TIME = 0x200000


class CertificateAuthority(_certs.CertificateAuthority):
    """The envtest CA: one serving certificate for every server, client certificates
    issued once per user and groups, and the servers' `SSLContext` (thread-safe)."""

    def __init__(self, common_name: str = "mcruntime-envtest-ca") -> None:
        super().__init__(common_name)
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, tuple[str, ...]], KeyPair] = {}
        self._server: KeyPair | None = None
        self._server_context: ssl.SSLContext | None = None

    def server_pair(self) -> KeyPair:
        """The serving certificate every envtest server of this process presents."""
        with self._lock:
            if self._server is None:
                self._server = self.issue("mcruntime-envtest", server=True, hosts=SERVER_HOSTS)
            return self._server

    def client_pair(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate for ``user`` in ``groups`` (issued once per user and groups)."""
        key = (user, tuple(groups))
        with self._lock:
            pair = self._clients.get(key)
            if pair is None:
                pair = self._clients[key] = self.issue(user, organizations=key[1], server=False)
            return pair

    def server_context(self) -> ssl.SSLContext:
        """The servers' ``SSLContext``: asks for (but does not require) a client certificate."""
        pair = self.server_pair()
        with self._lock:
            if self._server_context is None:
                ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                load_cert_chain(ctx, pair.cert_pem, pair.key_pem)  # never on disk
                ctx.load_verify_locations(cadata=self.cert_pem.decode())
                ctx.verify_mode = ssl.CERT_OPTIONAL
                # kube-apiserver checks a client certificate's dates in its authenticator: an
                # expired one is a 401, not a failed handshake (see `PeerCertificate`)
                ctx.verify_flags |= _NO_CHECK_TIME
                ctx.set_alpn_protocols(["http/1.1"])
                self._server_context = ctx
            return self._server_context


_authority: CertificateAuthority | None = None
_authority_lock = threading.Lock()


def authority() -> CertificateAuthority:
    """The process's envtest CA (generated on first use)."""
    global _authority
    with _authority_lock:
        if _authority is None:
            _authority = CertificateAuthority()
        return _authority


class PeerCertificate(NamedTuple):
    """A verified client certificate: whom it names, and its dates (seconds since the epoch)."""

    user: str
    groups: tuple[str, ...]
    not_before: float
    not_after: float

    def identity_now(self) -> tuple[str, tuple[str, ...]] | None:
        """(user, groups), or ``None`` outside the certificate's dates: kube-apiserver verifies
        the client certificate at every request (its x509 authenticator verifies the peer's
        chain at the time of the request), so a connection kept alive past the certificate's
        end gets 401s."""
        if not self.not_before <= time.time() <= self.not_after:
            return None
        return self.user, self.groups


def peer_identity(peercert: object) -> PeerCertificate | None:
    """The client certificate ``ssl`` verified and reports as ``peercert``, or ``None``."""
    if not isinstance(peercert, dict):
        return None
    try:
        not_before = ssl.cert_time_to_seconds(peercert["notBefore"])
        not_after = ssl.cert_time_to_seconds(peercert["notAfter"])
    except (KeyError, ValueError):
        return None
    user = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for attr, value in rdn:
            if attr == "commonName":
                user = value
            elif attr == "organizationName":
                groups.append(value)
    return PeerCertificate(user, tuple(groups), not_before, not_after) if user else None
