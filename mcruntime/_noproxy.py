"""The environment's proxy skipped as Go skips it (golang.org/x/net/http/httpproxy, behind
net/http's ``ProxyFromEnvironment``, which client-go's transports use): for a cluster's
server and an oidc issuer alike."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["direct"]


def direct(url: str, no_proxy: str) -> bool:
    """True when Go's ``http.ProxyFromEnvironment`` reaches ``url`` without the environment's
    proxy (golang.org/x/net/http/httpproxy, ``useProxy``): "requests to localhost or
    loopback addresses are never proxied", and ``NO_PROXY`` read as Go reads it: ``*``; an
    IP or CIDR, for IP hosts only, with an optional port; a domain, which matches itself
    and its subdomains (``.example.com`` and ``*.example.com`` its subdomains only), with
    an optional port; the port is the URL's or its scheme's default."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host:
        return False
    try:
        port = str(parts.port or (443 if parts.scheme.lower() == "https" else 80))
    except ValueError:
        port = ""
    if host == "localhost":
        return True
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return True
    for entry in no_proxy.split(","):
        p = entry.strip().lower()
        if not p:
            continue
        if p == "*":
            return True
        if "/" in p:  # a CIDR (Go's net.ParseCIDR); else read on as Go does
            try:
                net = ipaddress.ip_network(p, strict=False)
            except ValueError:
                pass
            else:
                if ip is not None and ip.version == net.version and ip in net:
                    return True
                continue
        phost, pport = _host_port(p)
        pip = _ip(phost)
        if pip is not None:
            if ip is not None and ip == pip and pport in ("", port):
                return True
            continue
        if not phost:
            continue
        if phost.startswith("*."):
            phost = phost[1:]
        whole = not phost.startswith(".")
        if whole:
            phost = "." + phost
        if (host.endswith(phost) or (whole and host == phost[1:])) and pport in ("", port):
            return True
    return False


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (an IPv4-mapped IPv6 one as its IPv4, as Go's), or None."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _host_port(entry: str) -> tuple[str, str]:
    """A ``NO_PROXY`` entry's host and port, as Go's ``net.SplitHostPort`` splits it (the
    whole entry and no port when it is no ``host:port``)."""
    if entry.startswith("["):
        host, sep, port = entry[1:].partition("]:")
        return (host, port) if sep and port.isdigit() else (entry, "")
    host, sep, port = entry.rpartition(":")
    if sep and ":" not in host and port.isdigit():
        return host, port
    return entry, ""
