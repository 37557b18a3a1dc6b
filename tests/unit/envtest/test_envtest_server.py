"""APIServer lifecycle, HTTP behaviour, auth and fault injection, through real clients."""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
import select
import socket
import ssl
import subprocess
import sys
import threading
import time

import orjson
import pytest
from kubernetes import client, config

from mcruntime.envtest import APIServer, _http, wait_for
from tests._slow_client import closed_by_server, trickle_until_closed

pytestmark = pytest.mark.timeout(30)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_restart_reuses_port_and_keeps_data() -> None:
    srv = APIServer("restart").start()
    try:
        core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
        core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
        port, rv = srv.port, srv.resource_version
        srv.stop()
        assert not srv.running
        assert _refused(port)
        srv.start()
        assert srv.running and srv.port == port
        assert srv.resource_version == rv
        assert core.read_namespaced_config_map("kept", "default").metadata.name == "kept"
    finally:
        srv.close()


_LOOP_SCRIPT = """
import threading
from mcruntime.envtest import APIServer

def loops():
    return [t for t in threading.enumerate() if t.name == "mcruntime/envtest/loop"]

assert loops() == []
a, b = APIServer("a").start(), APIServer("b").start()
assert len(loops()) == 1
a.stop()
assert len(loops()) == 1
b.stop()
assert loops() == [], loops()
a.start()
assert len(loops()) == 1
a.close()
assert loops() == []
print("ok")
"""


def test_loop_thread_exists_only_while_a_server_runs() -> None:
    # in a fresh process: other tests of this session may keep servers running
    out = subprocess.run(
        [sys.executable, "-c", _LOOP_SCRIPT], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_close_drops_data_and_context_manager_closes() -> None:
    with APIServer("ctx") as srv:
        assert srv.running and srv.url == f"https://127.0.0.1:{srv.port}"
        core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
        core.create_namespaced_config_map("default", {"metadata": {"name": "gone"}})
    assert not srv.running
    srv.start()
    try:
        core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
        assert core.list_namespaced_config_map("default").items == []
    finally:
        srv.close()


def test_health_and_version_need_no_token(server: APIServer) -> None:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    for path in ("/healthz", "/readyz", "/livez"):
        conn.request("GET", path)
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"ok")
    conn.request("GET", "/version")
    resp = conn.getresponse()
    assert resp.status == 200
    assert orjson.loads(resp.read())["gitVersion"].startswith("v1.")


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Basic abc"])
def test_missing_or_wrong_token_is_401(server: APIServer, auth: str | None) -> None:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request("GET", "/api/v1/namespaces", headers={"Authorization": auth} if auth else {})
    resp = conn.getresponse()
    body = orjson.loads(resp.read())
    assert resp.status == 401
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)
    assert server.token not in str(body)


def test_read_only_token_reads_but_every_write_is_403(server: APIServer) -> None:
    ro = client.CoreV1Api(config.new_client_from_config_dict(server.kubeconfig(read_only=True)))
    assert {n.metadata.name for n in ro.list_namespace().items} >= {"default", "kube-system"}
    writes = [
        lambda: ro.create_namespaced_config_map("default", {"metadata": {"name": "x"}}),
        lambda: ro.patch_namespace("default", {"metadata": {"labels": {"a": "b"}}}),
        lambda: ro.delete_namespace("default"),
        lambda: ro.delete_collection_namespaced_config_map("default"),
    ]
    for write in writes:
        with pytest.raises(client.ApiException) as e:
            write()
        assert e.value.status == 403
        assert orjson.loads(e.value.body)["reason"] == "Forbidden"


def test_latency_delays_every_request(server: APIServer, core: client.CoreV1Api) -> None:
    core.list_namespace()
    server.latency = 0.2
    start = time.monotonic()
    core.list_namespace()
    assert time.monotonic() - start >= 0.2
    server.latency = 0.0


def test_kubeconfig_names_context_and_file_is_private(server: APIServer, tmp_path) -> None:
    cfg = server.kubeconfig("other")
    assert cfg["current-context"] == "other"
    assert cfg["clusters"][0]["cluster"]["server"] == server.url
    assert cfg["users"][0]["user"]["token"] == server.token
    assert server.kubeconfig(read_only=True)["users"][0]["user"]["token"] == server.read_only_token
    path = server.write_kubeconfig(tmp_path / "kc" / "config")
    assert os.stat(path).st_mode & 0o777 == 0o600
    api = config.new_client_from_config(str(path))
    assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"


def test_a_kubeconfig_written_over_a_readable_file_is_private_before_its_tokens_are(
    server: APIServer, tmp_path
) -> None:
    # the tokens were written into the file at its old mode, made 0600 only afterwards. The
    # file here is a FIFO with a one-page buffer and the kubeconfig is several pages (a long
    # context name), so the writer waits for its reader, who sees the file's mode as the
    # first bytes come in
    path = tmp_path / "config"
    os.mkfifo(path)
    path.chmod(0o644)  # (whatever the umask)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)
    seen: list[int] = []
    data = bytearray()

    def read() -> None:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            ready, _, _ = select.select([reader], [], [], 0.1)
            if not ready:
                continue
            chunk = os.read(reader, 1 if not data else 65536)
            if chunk and not data:
                seen.append(os.stat(path).st_mode & 0o777)
            elif not chunk and data:
                return  # the writer closed it
            elif not chunk:
                time.sleep(0.01)  # no writer yet (a FIFO without one reads as ended)
            data.extend(chunk)

    t = threading.Thread(target=read, name="test/fifo-reader")
    t.start()
    try:
        server.write_kubeconfig(path, "c" * 4096)
    finally:
        t.join(10)
        os.close(reader)
    assert len(data) > 3 * 4096 and server.token in data.decode()
    assert seen == [0o600]


def test_keep_alive_serves_many_requests_on_one_connection(server: APIServer) -> None:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    for i in range(20):
        body = orjson.dumps({"metadata": {"name": f"k{i}"}})
        conn.request("POST", "/api/v1/namespaces/default/configmaps", body, headers)
        resp = conn.getresponse()
        assert resp.status == 201
        resp.read()
    assert len(server._conns) == 1


def test_chunked_request_body_is_accepted(server: APIServer) -> None:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    parts = [b'{"metadata":', b'{"name":"chunky"}}']
    conn.request(
        "POST", "/api/v1/namespaces/default/configmaps", iter(parts), headers, encode_chunked=True
    )
    resp = conn.getresponse()
    assert resp.status == 201
    assert orjson.loads(resp.read())["metadata"]["name"] == "chunky"


def test_connection_close_is_honoured(server: APIServer) -> None:
    raw = socket.create_connection((server.host, server.port), timeout=5)
    sock = server.client_ssl_context().wrap_socket(raw, server_hostname=server.host)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    sock.close()
    assert data.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in data


def _tls_socket(server: APIServer) -> ssl.SSLSocket:
    raw = socket.create_connection((server.host, server.port), timeout=5)
    return server.client_ssl_context().wrap_socket(raw, server_hostname=server.host)


def test_an_idle_kept_alive_connection_is_closed_as_kube_apiserver_closes_it(
    server: APIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-apiserver closes a connection with no new request for 90 s (its server's
    IdleTimeout); envtest kept it open for good, so no client met that close in tests."""
    assert _http.IDLE_TIMEOUT == 90.0
    monkeypatch.setattr(_http, "IDLE_TIMEOUT", 0.5)
    with _tls_socket(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
        answered = time.monotonic()
        wait_for(lambda: closed_by_server(sock), timeout=5, what="the idle connection closed")
        assert time.monotonic() - answered > 0.4


def test_a_request_head_not_read_in_time_closes_the_connection_unanswered(
    server: APIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As kube-apiserver's ReadHeaderTimeout (32 s): a request line and headers that trickle
    in, each byte in time, are not waited for past it; nothing is answered."""
    assert _http.READ_HEADER_TIMEOUT == 32.0
    monkeypatch.setattr(_http, "READ_HEADER_TIMEOUT", 0.5)
    with _tls_socket(server) as sock:
        took = trickle_until_closed(sock, limit=5)
        sock.settimeout(1)
        with contextlib.suppress(OSError):
            assert sock.recv(4096) == b""  # no answer, not even a 408
    assert 0.4 < took < 3, took


def test_a_connection_accepted_before_stop_is_not_served_after_it() -> None:
    """A client that connected just before `stop()` (its TLS handshake not yet done) must not
    be answered once the server is stopped: it would see a cluster that is down answer."""
    other = APIServer("other").start()  # keeps the shared loop running, as in a fleet
    srv = APIServer("stopping").start()
    try:
        raw = socket.create_connection((srv.host, srv.port), timeout=5)
        # the loop accepts in order: once a later connection is answered, ``raw`` was accepted
        # too, and its handshake is still to come
        later = http.client.HTTPSConnection(
            srv.host, srv.port, timeout=5, context=srv.client_ssl_context()
        )
        later.request("GET", "/healthz")
        assert later.getresponse().status == 200
        later.close()
        srv.stop()
        try:
            sock = srv.client_ssl_context().wrap_socket(raw, server_hostname=srv.host)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = sock.recv(4096)
        except (OSError, ssl.SSLError):
            data = b""  # cut: what a stopped server does
        finally:
            raw.close()
        assert data == b"", f"a stopped server answered: {data[:40]!r}"
    finally:
        srv.close()
        other.close()
