"""A kubeconfig's certificates and keys handed to ssl from memory, never written to disk.

The `kubernetes` loader writes every ``*-data`` field of a kubeconfig (the CA, the
client certificate, the client key) to a file in the temporary directory and removes
it at interpreter exit (`atexit`): a process that is killed, or dies on a signal,
leaves its client keys on disk. mcruntime takes these fields out before the loader
sees them:

- the CA goes to ``Configuration.ca_cert_data``, which ssl loads from memory;
- a client certificate and key, which ssl loads only from a file, go to a file that
  lives in memory (`os.memfd_create` on Linux, opened through ``/proc/self/fd``),
  certificate and key in one file: one per distinct identity, sealed against writes,
  open while a ``Configuration`` (or a copy of one) names it, and gone with the process
  however it ends. The ``Configuration`` holds the file (a copy shares it), so its
  descriptor is closed, and its number free for another file, only once nothing can
  name it: a fleet whose credentials rotate keeps no descriptor per old identity.
  Where memory files are not available (another OS, no ``/proc``), they are left to
  the loader and its temporary files.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import os
import ssl
import tempfile
import threading
import weakref
from collections import OrderedDict
from typing import Any

try:
    import fcntl
except ImportError:  # not on this OS: no memory files either
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "HELD_ATTRIBUTE",
    "TLSData",
    "client_certificate_file",
    "load_cert_chain",
    "take_tls_data",
    "verify_as_go",
]

_SEALS: int = (
    getattr(fcntl, "F_SEAL_SEAL", 0)
    | getattr(fcntl, "F_SEAL_SHRINK", 0)
    | getattr(fcntl, "F_SEAL_GROW", 0)
    | getattr(fcntl, "F_SEAL_WRITE", 0)
)

# content -> its memory file while a Configuration holds it
_files: weakref.WeakValueDictionary[bytes, _MemoryFile] = weakref.WeakValueDictionary()
# CA text -> itself: one string per distinct CA, as the loader kept one file per content; the
# last used `_CAS_KEPT` only (clusters that come and go, each with a CA of its own, would
# otherwise keep every CA ever loaded: str cannot be held weakly)
_cas: OrderedDict[str, str] = OrderedDict()
_CAS_KEPT = 64
_lock = threading.Lock()
_available = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")
#: failures that say nothing about the next attempt (that one falls back to the loader's file)
_PASSING = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EINTR})


class _MemoryFile:
    """An open memory file, closed when the last ``Configuration`` holding it is gone.

    Copies of a ``Configuration`` (``copy``, ``deepcopy``) share it, as they share the
    path; it cannot be pickled: its path means nothing in another process.
    """

    __slots__ = ("path", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.path = f"/proc/self/fd/{fd}"
        weakref.finalize(self, os.close, fd)

    def __copy__(self) -> _MemoryFile:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _MemoryFile:
        return self

    def __reduce__(self) -> Any:
        raise TypeError("a kubeconfig's memory file cannot leave its process")


def _memory_file(content: bytes) -> _MemoryFile | None:
    """A sealed memory file holding ``content``, or None if none can be made."""
    global _available
    with _lock:
        found = _files.get(content)
        if found is not None or not _available:
            return found
        try:
            fd = os.memfd_create(
                "mcruntime-kubeconfig", os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0)
            )
        except OSError as exc:
            # not supported here: stop trying; out of descriptors or memory: this one only
            if exc.errno not in _PASSING:
                _available = False
            return None
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if _SEALS and fcntl is not None and hasattr(fcntl, "F_ADD_SEALS"):
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            with open(f"/proc/self/fd/{fd}", "rb") as f:  # readable by path, as ssl opens it
                if f.read(1) != content[:1]:
                    raise OSError("the memory file does not read back")
        except OSError as exc:
            os.close(fd)
            if exc.errno not in _PASSING:
                _available = False  # /proc cannot open it, or it cannot be sealed
            return None
        found = _files[content] = _MemoryFile(fd)
        return found


#: the attribute of a ``Configuration`` that holds its memory files open
HELD_ATTRIBUTE = "mcruntime_memory_files"


class TLSData:
    """What [`take_tls_data`][] took out of a kubeconfig, to put on its ``Configuration``."""

    __slots__ = ("ca_pem", "files")

    def __init__(self, ca_pem: str | None, files: tuple[_MemoryFile, ...]) -> None:
        self.ca_pem = ca_pem
        self.files = files

    def apply(self, cfg: Any) -> None:
        """Set the CA on ``cfg`` (a ``kubernetes`` ``Configuration`` the loader filled), and
        make it hold the memory files its paths name."""
        if self.ca_pem is not None:
            cfg.ssl_ca_cert = None
            cfg.ca_cert_data = self.ca_pem
        if self.files:
            setattr(cfg, HELD_ATTRIBUTE, self.files)


def _decoded(entry: dict[str, Any], field: str) -> bytes | None:
    data = entry.get(field)
    if not data or not isinstance(data, (str, bytes)):
        return None
    try:
        return base64.standard_b64decode(data)  # as the loader decodes it
    except (binascii.Error, ValueError):
        return None  # left for the loader to report


def take_tls_data(doc: dict[str, Any]) -> TLSData:
    """Take the certificate and key data out of ``doc`` (one context's copy: its cluster and
    user), in place: the CA to be applied to the loaded ``Configuration``, the client
    certificate and key replaced by the path of a memory file. The data wins over a file
    path given beside it, as in client-go."""
    ca_pem: str | None = None
    for named in doc.get("clusters") or ():
        cluster = named.get("cluster") if isinstance(named, dict) else None
        if not isinstance(cluster, dict):
            continue
        ca = _decoded(cluster, "certificate-authority-data")
        if ca is not None and b"-----BEGIN" in ca:
            try:
                text = ca.decode("ascii")
            except UnicodeDecodeError:
                continue
            with _lock:  # clusters sharing a CA share one string (a fleet's often do)
                ca_pem = _cas.setdefault(text, text)
                _cas.move_to_end(text)
                if len(_cas) > _CAS_KEPT:
                    _cas.popitem(last=False)
            del cluster["certificate-authority-data"]
            cluster.pop("certificate-authority", None)
    if not _available:
        return TLSData(ca_pem, ())
    files: list[_MemoryFile] = []
    for named in doc.get("users") or ():
        user = named.get("user") if isinstance(named, dict) else None
        if not isinstance(user, dict):
            continue
        cert = _decoded(user, "client-certificate-data")
        key = _decoded(user, "client-key-data")
        if cert is not None and key is not None:
            # one file for both (see `_pem_pair`)
            both = _memory_file(_pem_pair(cert, key))
            if both is not None:
                files.append(both)
                del user["client-certificate-data"], user["client-key-data"]
                user["client-certificate"] = user["client-key"] = both.path
            continue
        for content, data_field, file_field in (
            (cert, "client-certificate-data", "client-certificate"),
            (key, "client-key-data", "client-key"),
        ):
            if content is not None:
                one = _memory_file(content)
                if one is not None:
                    files.append(one)
                    del user[data_field]
                    user[file_field] = one.path
    return TLSData(ca_pem, tuple(files))


def _pem_pair(cert: bytes, key: bytes) -> bytes:
    """A certificate and its key as one PEM file: ssl reads the certificates and the key
    from it, each skipping the other's blocks."""
    return cert.rstrip(b"\n") + b"\n" + key


class _TemporaryFile:
    """A client certificate and key in a file of the temporary directory (mode 0600), removed
    when nothing holds it any more or at exit: where memory files are not available."""

    __slots__ = ("path", "__weakref__")

    def __init__(self, content: bytes) -> None:
        fd, self.path = tempfile.mkstemp(prefix="mcruntime-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        except OSError:
            os.unlink(self.path)
            raise
        weakref.finalize(self, _unlink, self.path)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def client_certificate_file(cert: bytes, key: bytes) -> _MemoryFile | _TemporaryFile:
    """One file holding a client certificate and its key (PEM), for ssl to load: a memory file
    where there are memory files, else a private temporary file. Open (or on disk) while the
    returned object is alive."""
    content = _pem_pair(cert, key)
    found = _memory_file(content)
    return found if found is not None else _TemporaryFile(content)


def load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load the certificate (chain) ``cert`` and its ``key`` (PEM) into ``ctx`` without
    leaving them on disk, even if the process is killed: from the file
    `client_certificate_file` makes (a memory file, closed once ssl read it), or where
    there are none from a private temporary file removed at once."""
    held = client_certificate_file(cert, key)
    try:
        ctx.load_cert_chain(held.path)
    finally:
        if isinstance(held, _TemporaryFile):
            _unlink(held.path)  # now, not when the object goes


def verify_as_go(ctx: ssl.SSLContext) -> ssl.SSLContext:
    """``ctx``, verifying certificates as Go's crypto/x509 does (kubectl, kube-apiserver):
    without Python 3.13's strict RFC 5280 checks (``VERIFY_X509_STRICT``), which refuse
    cluster CAs Go accepts (a kubeadm CA made by Go before 1.15 has no key identifiers),
    and with a partial chain: a CA of the bundle is an anchor even if it is an intermediate
    one (``VERIFY_X509_PARTIAL_CHAIN``)."""
    ctx.verify_flags = (ctx.verify_flags & ~ssl.VERIFY_X509_STRICT) | ssl.VERIFY_X509_PARTIAL_CHAIN
    return ctx
