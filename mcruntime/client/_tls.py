"""One TLS context per set of identical TLS settings, shared by every connection that uses them.

urllib3 builds a fresh `ssl.SSLContext` for every HTTPS connection and loads the CA
file (and the client certificate) into it: ~0.4 ms and ~16 KiB per connection, for
the same context each time. A fleet's clusters mostly share a CA (and sometimes a client
certificate), so mcruntime's connections share one context per distinct set of settings.

The settings are those urllib3 would load: verification mode, the CA file (by path and
its identity on disk: device, inode, size, mtime), CA directory, CA data, client certificate
and key files (likewise), and whether hostname checking is off. A file replaced on disk
gives a new context for the connections made afterwards, as urllib3's own reloading did.
Connections with settings urllib3 handles in ways not reproduced here (an own
`ssl_context`, TLS versions, a key password or an encrypted key, proxies) keep urllib3's
own path, and so does any connection whose context cannot be built (urllib3 then raises
its usual error); those get a context of their own (`own_context`) that verifies as the
shared ones do.

Certificates are verified as kubectl (Go's crypto/x509) verifies them, on every Python:
Python 3.13 turns on OpenSSL's strict RFC 5280 checks (``VERIFY_X509_STRICT``; urllib3
2.3+ follows it), which refuse cluster CAs that kubectl accepts. A kubeadm cluster set
up with a Kubernetes built by Go before 1.15 has a CA without a subject key identifier
and serving certificates without an authority key identifier, valid for ten years.
A CA in the bundle is a trust anchor even if it is an intermediate one, as in Go
(``VERIFY_X509_PARTIAL_CHAIN``, which 3.13 turns on too).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import weakref
from typing import Any

from urllib3.util import ssl_ as _ssl_util

from mcruntime._keypair import KeyProblem, check_pair
from mcruntime._memfile import verify_as_go

__all__ = ["LastGoodPair", "own_context", "shared_context"]

log = logging.getLogger("mcruntime.client")

_contexts: weakref.WeakValueDictionary[tuple[Any, ...], ssl.SSLContext] = (
    weakref.WeakValueDictionary()
)
_lock = threading.Lock()


def _file_key(path: str | None) -> tuple[Any, ...] | None:
    if not path:
        return None
    st = os.stat(path)
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _build(
    cert_reqs: int,
    ca_certs: str | None,
    ca_cert_dir: str | None,
    ca_cert_data: str | bytes | None,
    cert_file: str | None,
    key_file: str | None,
    no_hostname_check: bool,
) -> ssl.SSLContext:
    """What urllib3's `_ssl_wrap_socket_and_match_hostname` and `ssl_wrap_socket` build."""
    ctx = verify_as_go(_ssl_util.create_urllib3_context(cert_reqs=cert_reqs))
    ctx.verify_mode = ssl.VerifyMode(cert_reqs)
    if no_hostname_check:
        ctx.check_hostname = False
    if ca_certs or ca_cert_dir or ca_cert_data:
        ctx.load_verify_locations(ca_certs, ca_cert_dir, ca_cert_data)
    else:
        ctx.load_default_certs()
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def shared_context(conn: Any) -> ssl.SSLContext | None:
    """The shared context for urllib3 HTTPS connection ``conn``'s own TLS settings, or None
    when ``conn`` must build its own (see the module's docstring)."""
    if (
        conn.ssl_context is not None
        or conn.ssl_version is not None
        or conn.ssl_minimum_version is not None
        or conn.ssl_maximum_version is not None
        or conn.key_password is not None
        or getattr(conn, "proxy", None) is not None
        or getattr(conn, "_tunnel_host", None) is not None
        or _ssl_util.IS_PYOPENSSL
    ):
        return None
    try:
        cert_reqs = _ssl_util.resolve_cert_reqs(conn.cert_reqs)
        no_hostname_check = bool(
            conn.assert_fingerprint
            or conn.assert_hostname
            or conn.assert_hostname is False
            or not _ssl_util.HAS_NEVER_CHECK_COMMON_NAME
        )
        key_file = conn.key_file or None
        if key_file and _ssl_util._is_key_file_encrypted(key_file):
            return None
        key = (
            cert_reqs,
            _file_key(conn.ca_certs),
            conn.ca_cert_dir,
            conn.ca_cert_data,
            _file_key(conn.cert_file),
            _file_key(key_file),
            no_hostname_check,
        )
        with _lock:
            ctx = _contexts.get(key)
        if ctx is None:
            built = _build(
                cert_reqs,
                conn.ca_certs,
                conn.ca_cert_dir,
                conn.ca_cert_data,
                conn.cert_file,
                key_file,
                no_hostname_check,
            )
            with _lock:
                ctx = _contexts.setdefault(key, built)
        return ctx
    except (OSError, ValueError, ssl.SSLError):
        return None


def own_context(conn: Any) -> ssl.SSLContext | None:
    """A new context for urllib3 HTTPS connection ``conn`` that `shared_context` leaves to
    urllib3 (its proxy, TLS versions, key password): what urllib3 would build, verifying
    as kubectl does. urllib3 loads the CA and client certificate into it. None when
    ``conn`` has a context of its own, or when urllib3 must build it (and raise its error)."""
    if conn.ssl_context is not None or _ssl_util.IS_PYOPENSSL:
        return None
    try:
        ctx = _ssl_util.create_urllib3_context(
            ssl_version=_ssl_util.resolve_ssl_version(conn.ssl_version),
            ssl_minimum_version=conn.ssl_minimum_version,
            ssl_maximum_version=conn.ssl_maximum_version,
            cert_reqs=_ssl_util.resolve_cert_reqs(conn.cert_reqs),
        )
        if not (conn.ca_certs or conn.ca_cert_dir or conn.ca_cert_data):
            ctx.load_default_certs()  # as urllib3 does for a context of its own
    except (OSError, ValueError, ssl.SSLError):
        return None
    return verify_as_go(ctx)


class LastGoodPair:
    """The shared context one client last had for its client certificate and key files,
    presented while the files on disk cannot be used (see the module's docstring)."""

    def __init__(self, who: str) -> None:
        self._who = who
        self._lock = threading.Lock()
        self._files: tuple[str, str | None] | None = None
        self._ctx: ssl.SSLContext | None = None
        #: what is wrong with the files while the last good pair is presented (None: nothing)
        self.problem: str | None = None

    def choose(
        self, cert_file: str, key_file: str | None, ctx: ssl.SSLContext | None
    ) -> ssl.SSLContext | None:
        """``ctx`` (the shared context for the files as they are), remembered; or, when it
        could not be built because the files cannot be used, the last one that could be."""
        files = (cert_file, key_file)
        if ctx is not None:
            with self._lock:
                recovered = self.problem is not None and self._files == files
                self._files, self._ctx, self.problem = files, ctx, None
            if recovered:
                log.info(
                    "cluster=%s the client certificate and key files can be used again; "
                    "new connections present them",
                    self._who,
                )
            return ctx
        with self._lock:
            last = self._ctx if self._files == files else None
        if last is None:
            return None
        problem = _pair_problem(cert_file, key_file)
        if problem is None:
            return None  # something else failed (the CA): urllib3 says what
        with self._lock:
            first = self.problem is None
            self.problem = problem
        if first:
            log.warning(
                "cluster=%s the client certificate on disk cannot be used: %s (a renewal being "
                "written?); new connections present the last pair that could be until it can",
                self._who,
                problem,
            )
        return last


def _pair_problem(cert_file: str, key_file: str | None) -> str | None:
    """What is wrong with the client certificate and key files as they are now, or None."""
    try:
        with open(cert_file, "rb") as f:
            cert_pem = f.read()
        key_pem = cert_pem
        if key_file:
            with open(key_file, "rb") as f:
                key_pem = f.read()
    except OSError as exc:
        return f"{exc.filename} cannot be read: {exc.strerror or type(exc).__name__}"
    try:
        check_pair(
            cert_pem,
            f"client-certificate {cert_file}",
            key_pem,
            f"client-key {key_file or cert_file}",
            "its client-certificate",
        )
    except KeyProblem as exc:
        return str(exc)
    return None
