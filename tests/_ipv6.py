"""Whether this machine has an IPv6 loopback, for tests of servers listening on IPv6."""

from __future__ import annotations

import socket

import pytest

__all__ = ["needs_ipv6_loopback"]


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


#: skips a test on a machine without IPv6 (Python built without it, IPv6 off in the kernel,
#: a container without ::1)
needs_ipv6_loopback = pytest.mark.skipif(
    not _ipv6_loopback(), reason="this machine has no IPv6 loopback (::1 cannot be bound)"
)
