"""Bind addresses of the library's own servers (metrics, probes, debug pages, webhooks).

An address is read as Go's ``net.SplitHostPort`` reads it (``"host:port"``, ``":port"``,
``"[::1]:port"``), and a server that cannot listen there raises an error naming the
server, the option and the address, as controller-runtime's
``failed to start metrics server: failed to create listener: listen tcp :8080: bind:
address already in use`` does, never a bare ``OSError``.
"""

from __future__ import annotations

import socket
import socketserver
from typing import Any, TypeVar

from mcruntime.errors import ListenError

__all__ = ["ListenError", "bind_server", "format_address", "parse_bind_address"]

_S = TypeVar("_S", bound=socketserver.TCPServer)


def parse_bind_address(address: str | None, option: str) -> tuple[str, int] | None:
    """``"host:port"``, ``":port"``, ``"[v6]:port"`` -> (host, port), the host without
    brackets (``""``: every address); None, ``""`` or ``"0"`` disable the server.

    Raises ValueError naming ``option`` and the address when it is no address.
    """
    if address in (None, "", "0"):
        return None
    assert address is not None
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"{option} {address!r}: expected host:port or :port")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"{option} {address!r}: missing ']' in the address")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(
            f"{option} {address!r}: an IPv6 address is written in brackets ([::1]:8080)"
        )
    if not port.isdigit():
        raise ValueError(f"{option} {address!r}: port {port!r} is not a number")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"{option} {address!r}: port {port} is out of range (0-65535)")
    return host, int(port)


def format_address(host: str, port: int) -> str:
    """``host:port`` as Go writes it: IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_server(
    server_class: type[_S], address: tuple[str, int], handler: Any, *, what: str, option: str
) -> _S:
    """A ``socketserver.TCPServer`` subclass bound and listening on ``address`` (not serving
    yet). Raises [`ListenError`][mcruntime.errors.ListenError] naming ``what`` (the server),
    ``option`` and the address when it cannot listen there.

    As Go's ``net.Listen("tcp", address)``: an empty host or ``::`` listens on every
    address, IPv4 and IPv6 (one IPv6 socket with ``IPV6_V6ONLY`` off, or ``0.0.0.0`` on a
    machine without IPv6); an IPv6 literal on an IPv6 socket; a name on the first address
    it resolves to, IPv4 first (Go's ``internetAddrList`` for a listener).
    """
    host, port = address
    shown = format_address(host, port)
    try:
        family, bind_host, dual = _where(host, port)
        server = server_class((bind_host, port), handler, bind_and_activate=False)
    except OSError as exc:
        raise _listen_error(exc, what, option, shown) from exc
    try:
        sock = server.socket
        if sock.family != family:
            sock.close()
            server.address_family = family
            server.socket = sock = socket.socket(family, sock.type)
        if dual:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.server_bind()
        server.server_activate()
    except (OSError, OverflowError) as exc:
        server.server_close()
        raise _listen_error(exc, what, option, shown) from exc
    return server


def _where(host: str, port: int) -> tuple[socket.AddressFamily, str, bool]:
    """(address family, host to bind, dual-stack) for listening on ``host``."""
    if host in ("", "::"):
        if _has_ipv6():
            return socket.AF_INET6, "::", True
        return socket.AF_INET, "0.0.0.0", False
    if ":" in host:
        return socket.AF_INET6, host, False
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    found.sort(key=lambda info: info[0] != socket.AF_INET)
    family, _type, _proto, _name, sockaddr = found[0]
    return family, str(sockaddr[0]), False


def _has_ipv6() -> bool:
    """Whether this machine can open an IPv6 socket (a kernel may have IPv6 turned off)."""
    if not socket.has_ipv6:
        return False
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    except OSError:
        return False
    return True


def _listen_error(exc: BaseException, what: str, option: str, shown: str) -> ListenError:
    if isinstance(exc, socket.gaierror):
        reason = f"cannot resolve the host: {exc.strerror or exc}"
    elif isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror[:1].lower() + exc.strerror[1:]
    else:
        reason = str(exc)
    err = ListenError(f"cannot serve {what} on {shown} ({option}): {reason}")
    if isinstance(exc, OSError) and not isinstance(exc, socket.gaierror):
        err.errno = exc.errno
    return err
