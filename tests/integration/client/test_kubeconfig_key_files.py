"""A kubeconfig's certificate and key data reach ssl through memory, not the disk.

The `kubernetes` loader writes ``*-data`` fields to the temporary directory and
removes them only at a clean interpreter exit; a killed controller would leave its
client key behind. On Linux mcruntime hands them over as sealed memory files.
"""

from __future__ import annotations

import base64
import copy
import gc
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime import Cluster, _memfile
from mcruntime._certs import CertificateAuthority
from mcruntime.errors import ConfigError
from tests.integration.client.test_tls_errors import kubeconfig_for

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"),
        reason="memory files need Linux (memfd_create and /proc); elsewhere the loader's temp files are used",
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from mcruntime.envtest import APIServer

    with APIServer("key-files") as s:
        yield s


def _key_pem(kubeconfig: dict[str, Any]) -> bytes:
    data: str = kubeconfig["users"][0]["user"]["client-key-data"]
    return base64.standard_b64decode(data)


def _memory_files() -> set[str]:
    """The descriptors of this process that are mcruntime's memory files."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor, a socket)
        if target.startswith("/memfd:mcruntime-kubeconfig"):
            found.add(fd)
    return found


def test_a_killed_process_leaves_no_key_of_its_kubeconfig_on_disk(
    server: Any, tmp_path: Path
) -> None:
    kubeconfig = server.kubeconfig(auth="certificate")
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(kubeconfig))
    path.chmod(0o600)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # a controller that connects with a client certificate, then dies on SIGKILL: no
    # atexit runs, as when a pod is OOM-killed
    script = textwrap.dedent(
        f"""
        import os, signal
        from mcruntime import Cluster
        c = Cluster.from_kubeconfig({str(path)!r}, name="k")
        c.rest.request("GET", "/api/v1/namespaces")
        print("connected", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=45
    )
    assert "connected" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == -9
    key = _key_pem(kubeconfig)
    left = [p for p in tmp.rglob("*") if p.is_file() and key in p.read_bytes()]
    assert not left, f"the client key was left on disk in {left}"


def test_client_certificate_authentication_works_through_memory_files(server: Any) -> None:
    kubeconfig = server.kubeconfig(auth="certificate")
    before = set(os.listdir(tempfile.gettempdir()))
    cluster = Cluster.from_kubeconfig(kubeconfig, name="mem")
    try:
        got = cluster.rest.request("GET", "/api/v1/namespaces")
        assert {"default", "kube-system"} <= {n["metadata"]["name"] for n in got["items"]}
        cfg = cluster.rest.api_client.configuration
        # the CA is loaded from memory; the certificate and key share one memory file
        assert cfg.ssl_ca_cert is None and "BEGIN CERTIFICATE" in cfg.ca_cert_data
        assert cfg.cert_file == cfg.key_file and cfg.key_file.startswith("/proc/self/fd/")
        with open(cfg.key_file, "rb") as f:
            assert _key_pem(kubeconfig) in f.read()
    finally:
        cluster.stop()
    key = _key_pem(kubeconfig)
    tmpdir = Path(tempfile.gettempdir())
    new = [tmpdir / n for n in set(os.listdir(tmpdir)) - before]
    assert not [p for p in new if p.is_file() and key in p.read_bytes()]


def test_the_same_data_loaded_again_uses_the_same_memory_files(server: Any) -> None:
    kubeconfig = server.kubeconfig(auth="certificate")
    first = Cluster.from_kubeconfig(kubeconfig, name="a")
    fds = _memory_files()
    assert fds, "no memory file open"
    clusters = [Cluster.from_kubeconfig(kubeconfig, name=f"b{i}") for i in range(20)]
    try:
        # another test's cluster, collected meanwhile, may close its own memory file:
        # what counts is that these 20 loads opened none
        assert not _memory_files() - fds, "a memory file per load, not per content"
        cfgs = [c.rest.api_client.configuration for c in (first, *clusters)]
        assert len({(c.ca_cert_data, c.cert_file, c.key_file) for c in cfgs}) == 1
        assert len({id(c.ca_cert_data) for c in cfgs}) == 1, "one CA string, not one per cluster"
    finally:
        for c in (first, *clusters):
            c.stop()


def test_clusters_that_came_and_went_each_with_its_own_ca_leave_their_cas_behind() -> None:
    # a fleet's clusters come and go daily, each with a new CA (kind, Cluster API): the
    # CA strings shared between clusters are the last ones used, not every CA ever loaded
    shared = CertificateAuthority("fleet-ca")
    for i in range(2 * _memfile._CAS_KEPT):  # noqa: SLF001
        for ca in (shared, CertificateAuthority(f"ca-{i}")):
            c = Cluster.from_kubeconfig(kubeconfig_for(1, ca), name=f"member-{i}")
            c.stop()
    assert len(_memfile._cas) <= _memfile._CAS_KEPT  # noqa: SLF001
    a, b = (Cluster.from_kubeconfig(kubeconfig_for(1, shared), name=n) for n in ("a", "b"))
    try:
        cas = [c.rest.api_client.configuration.ca_cert_data for c in (a, b)]
        assert cas[0] is cas[1], "clusters sharing a CA share one CA string"
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
def test_a_file_path_beside_its_data_is_refused_as_in_client_go(
    server: Any, tmp_path: Path, field: str
) -> None:
    # client-go's validation refuses it (kubectl cannot load the file); the data won here
    kubeconfig = server.kubeconfig(auth="certificate")
    section = "clusters" if field == "certificate-authority" else "users"
    key = section[:-1]
    kubeconfig[section][0][key][field] = str(tmp_path / "missing")
    with pytest.raises(ConfigError) as err:
        Cluster.from_kubeconfig(kubeconfig, name="both")
    assert f"sets both {field} and {field}-data: kubectl refuses it too" in str(err.value)


def test_a_memory_file_cannot_be_changed_through_its_path(server: Any) -> None:
    cluster = Cluster.from_kubeconfig(server.kubeconfig(auth="certificate"), name="sealed")
    try:
        key_file = cluster.rest.api_client.configuration.key_file
        with pytest.raises(PermissionError), open(key_file, "r+b") as f:
            f.write(b"x")
    finally:
        cluster.stop()


def test_a_memory_file_is_closed_once_nothing_names_it_and_copies_keep_it(server: Any) -> None:
    # a cluster's credentials rotate: the old identity's file must not stay open for good
    kubeconfig = server.kubeconfig(auth="certificate")
    gc.collect()  # the clusters of earlier tests, which held the same identity
    before = _memory_files()
    cluster = Cluster.from_kubeconfig(kubeconfig, name="rotating")
    cfg = cluster.rest.api_client.configuration
    kept = copy.deepcopy(cfg)
    opened = _memory_files() - before
    assert len(opened) == 1
    cluster.stop()
    del cluster, cfg
    gc.collect()
    # the copy names the same file, so it is still open and still holds the key
    assert _memory_files() - before == opened
    with open(kept.key_file, "rb") as f:
        assert _key_pem(kubeconfig) in f.read()
    del kept
    gc.collect()
    assert not _memory_files() - before, "the file of an identity no one holds is still open"
    with pytest.raises(TypeError, match="cannot leave its process"):
        pickle.dumps(Cluster.from_kubeconfig(kubeconfig, name="x").rest.api_client.configuration)
