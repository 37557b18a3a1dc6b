"""Where the webhook server listens: by default on every address, IPv4 and IPv6, as
controller-runtime's ``webhook.Options.Host`` (``Defaults to "" - all addresses``,
pkg/webhook/server.go, which ``net.Listen``s ``host:port``); the API server of an IPv6
single-stack cluster calls the pod's IPv6 address."""

from __future__ import annotations

import socket

import pytest

from mcruntime.webhook import WebhookServer, WebhookServerOptions
from tests._ipv6 import needs_ipv6_loopback

pytestmark = pytest.mark.timeout(10)


def connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@needs_ipv6_loopback
@pytest.mark.parametrize("host", [None, "::"])
def test_the_default_host_and_unspecified_ipv6_accept_ipv4_and_ipv6(host: str | None) -> None:
    options = WebhookServerOptions(port=0) if host is None else WebhookServerOptions(host, 0)
    server = WebhookServer(options)
    server.start()
    try:
        assert connects("127.0.0.1", server.port)
        assert connects("::1", server.port)
        server.ready_check()
    finally:
        server.stop()


@needs_ipv6_loopback
def test_an_ipv6_literal_host_is_listened_on() -> None:
    server = WebhookServer(WebhookServerOptions(host="::1", port=0))
    server.start()
    try:
        assert connects("::1", server.port)
        server.ready_check()
    finally:
        server.stop()


def test_a_port_taken_names_the_webhook_server_and_its_address() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=port))
        with pytest.raises(OSError, match=rf"^cannot serve webhooks on 127\.0\.0\.1:{port} "):
            server.start()
