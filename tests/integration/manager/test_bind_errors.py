"""A manager whose metrics, probe or debug address cannot be listened on fails to start with
an error naming the server, the option and the address, and never hangs.

controller-runtime's ``mgr.Start()`` returns ``failed to start metrics server: failed to
create listener: listen tcp :8080: bind: address already in use`` (pkg/manager/server.go,
pkg/metrics/server/server.go), and the process exits; a pod then crash-loops with the
reason in its log. A program's ``sys.exit(cli.run(mgr))`` says so in one line, exit status 1.
"""

from __future__ import annotations

import argparse
import errno
import logging
import socket
from collections.abc import Iterator

import pytest

import mcruntime
from mcruntime import cli
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on (a sidecar, a second manager)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def can_listen(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_run_raises_when_the_probe_port_is_taken_after_metrics_bound(taken_port: int) -> None:
    """It used to hang for ever: the metrics server, bound but never started, was shut down
    by waiting for its ``serve_forever``."""
    metrics_port = free_port()
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(
            metrics_bind_address=f"127.0.0.1:{metrics_port}",
            health_probe_bind_address=f"127.0.0.1:{taken_port}",
            debug_bind_address="127.0.0.1:0",
        ),
    )
    with pytest.raises(OSError) as err:
        mgr.run()
    assert str(err.value) == (
        f"cannot serve probes on 127.0.0.1:{taken_port} (health_probe_bind_address): "
        "address already in use"
    )
    assert err.value.errno == errno.EADDRINUSE
    assert can_listen(metrics_port), "the metrics server bound first is closed again"
    assert mgr.wait(0)


def test_start_names_the_metrics_server_and_its_address(taken_port: int) -> None:
    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(metrics_bind_address=f":{taken_port}")
    )
    with pytest.raises(OSError, match=rf"^cannot serve metrics on :{taken_port} "):
        mgr.start()
    mgr.stop()


@pytest.mark.parametrize(
    ("option", "address", "message"),
    [
        ("metrics_bind_address", ":99999", "port 99999 is out of range (0-65535)"),
        ("health_probe_bind_address", "127.0.0.1:http", "port 'http' is not a number"),
        ("debug_bind_address", "nonsense", "expected host:port or :port"),
    ],
)
def test_a_bad_address_is_refused_naming_the_option(
    option: str, address: str, message: str
) -> None:
    with pytest.raises(ValueError) as err:
        mcruntime.Manager(provider=Provider(), options=ManagerOptions(**{option: address}))
    assert str(err.value) == f"{option} {address!r}: {message}"


def test_a_host_that_does_not_resolve_is_named_with_its_option() -> None:
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(health_probe_bind_address="999.1.1.1:8081"),
    )
    with pytest.raises(
        OSError,
        match=r"^cannot serve probes on 999\.1\.1\.1:8081 "
        r"\(health_probe_bind_address\): cannot resolve the host",
    ):
        mgr.start()
    mgr.stop()


def test_a_taken_webhook_port_fails_start_and_closes_the_servers_bound(taken_port: int) -> None:
    from mcruntime.webhook import WebhookServer, WebhookServerOptions

    probes_port = free_port()
    webhooks = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=taken_port))
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(
            health_probe_bind_address=f"127.0.0.1:{probes_port}", webhook_server=webhooks
        ),
    )
    with pytest.raises(OSError, match=rf"^cannot serve webhooks on 127\.0\.0\.1:{taken_port} "):
        mgr.start()
    mgr.stop()
    assert can_listen(probes_port)


def test_run_answers_1_with_one_line_when_the_manager_cannot_start(
    taken_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, ``mgr.run()`` ended the program with a traceback of the private ListenError."""
    parser = argparse.ArgumentParser(prog="op")
    cli.add_arguments(parser)
    cli.add_manager_arguments(parser)
    args = parser.parse_args(
        ["--provider", "clusters", f"--metrics-bind-address=127.0.0.1:{taken_port}"]
    )
    mgr = cli.manager_from_args(args, parser=parser)
    with caplog.at_level(logging.ERROR):
        assert cli.run(mgr) == 1
    (line,) = [r for r in caplog.records if r.name == "mcruntime.cli"]
    assert line.levelno == logging.ERROR and line.exc_info is None
    assert line.getMessage() == (
        f"manager failed: cannot serve metrics on 127.0.0.1:{taken_port} (metrics_bind_address): "
        "address already in use; exiting with status 1"
    )


def test_a_taken_port_is_a_public_error_that_is_still_an_oserror(taken_port: int) -> None:
    """Before, the error was ``mcruntime._listen.ListenError``: a program could catch it only
    as any ``OSError``, or by a private name. controller-runtime's ``Start`` returns it; here it
    is ``mcruntime.errors.ListenError``, from the manager and from a webhook server alone."""
    from mcruntime.errors import ListenError, MCRuntimeError
    from mcruntime.webhook import WebhookServer, WebhookServerOptions

    mgr = mcruntime.Manager(
        provider=Provider(), options=ManagerOptions(metrics_bind_address=f":{taken_port}")
    )
    with pytest.raises(ListenError) as err:
        mgr.start()
    mgr.stop()
    assert isinstance(err.value, MCRuntimeError) and isinstance(err.value, OSError)
    assert err.value.errno == errno.EADDRINUSE
    assert type(err.value).__module__ == "mcruntime.errors"

    webhooks = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=taken_port))
    with pytest.raises(ListenError, match=rf"^cannot serve webhooks on 127\.0\.0\.1:{taken_port} "):
        webhooks.start()
    webhooks.stop()
