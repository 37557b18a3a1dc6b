"""Bind addresses read and listened on as Go's ``net.SplitHostPort`` and ``net.Listen`` do."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcruntime import _listen
from mcruntime._listen import bind_server, parse_bind_address

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":8081", ("", 8081)),
        ("[::]:8081", ("::", 8081)),
        ("[::1]:8081", ("::1", 8081)),
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("0", None),
        ("", None),
    ],
)
def test_addresses_are_split_as_go_splits_them(address: str, expected: object) -> None:
    assert parse_bind_address(address, "metrics_bind_address") == expected


def test_an_unbracketed_ipv6_address_is_refused_saying_how_to_write_it() -> None:
    with pytest.raises(ValueError, match=r"^metrics_bind_address '::1:8080': .*\[::1\]:8080"):
        parse_bind_address("::1:8080", "metrics_bind_address")


def test_every_address_falls_back_to_ipv4_on_a_machine_without_ipv6(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_listen, "_has_ipv6", lambda: False)
    server = bind_server(
        ThreadingHTTPServer, ("", 0), BaseHTTPRequestHandler, what="probes", option="x"
    )
    try:
        assert server.socket.family == socket.AF_INET
        assert server.server_address[0] == "0.0.0.0"
    finally:
        server.server_close()
