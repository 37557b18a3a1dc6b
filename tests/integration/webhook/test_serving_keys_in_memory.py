"""The serving keys mcruntime generates never touch the disk: a killed process leaves none.

The webhook server without ``cert_dir`` used to keep its generated CA, certificate and key
in a temporary directory removed at stop; a controller that was OOM-killed (no stop, no
``atexit``) left its serving key there. Generated keys are loaded from memory files now,
as the kubeconfig's client keys are (`tests/integration/client/test_kubeconfig_key_files.py`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

SERVERS = {
    "webhook server": """
        from mcruntime.webhook import WebhookServer, WebhookServerOptions
        srv = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
        srv.start()
        port, ca = srv.port, srv.ca_bundle
        """,
    "metrics server": """
        import mcruntime
        from mcruntime.envtest import APIServer
        from mcruntime.manager import ManagerOptions
        api = APIServer(tls=False)
        api.start()
        mgr = mcruntime.Manager(api.kubeconfig(), options=ManagerOptions(
            metrics_bind_address="127.0.0.1:0", metrics_secure=True))
        mgr.start()
        port, ca = mgr.metrics_address[1], None
        """,
    "envtest server": """
        from mcruntime.envtest import APIServer
        api = APIServer(tls=True)
        api.start()
        port, ca = api.port, api.ca_data
        """,
}


@pytest.mark.parametrize("server", list(SERVERS))
def test_a_killed_process_leaves_no_generated_serving_key_on_disk(
    tmp_path: Path, server: str
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = textwrap.dedent(SERVERS[server]) + textwrap.dedent(
        """
        import os, signal, socket, ssl
        ctx = ssl.create_default_context(cadata=ca.decode()) if ca else ssl._create_unverified_context()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1"):
                print("served over TLS", flush=True)  # the handshake presented the key
        os.kill(os.getpid(), signal.SIGKILL)  # no stop, no atexit: as an OOM kill
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "served over TLS" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == -9
    left = [p for p in tmp.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    assert not left, f"a serving key was left on disk in {left}"
