"""docs/getting-started.md's programs run as the page tells a newcomer to run them.

.ci/check_snippets.py type-checks them; these tests run them: the reconciler put on the
embedded fleet (the page's own substitutions) prints the lines the page shows, and the
command-line program labels a ConfigMap of the cluster its kubeconfig names and stops on
Ctrl-C.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mcruntime import Cluster
from mcruntime.envtest import APIServer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.S | re.M)
MANAGER = "mgr = mcruntime.Manager()  # $KUBECONFIG, the in-cluster config, or ~/.kube/config\n"
RUN = "mgr.run()  # until Ctrl-C or SIGTERM\n"


@pytest.mark.timeout(60)
def test_the_first_reconciler_on_the_embedded_fleet_prints_what_the_page_shows(
    tmp_path: Path,
) -> None:
    first, _envtest, fleet, start_and_write, _cli, *_typing = BLOCKS
    assert MANAGER in first and RUN in first, "the first reconciler's lines changed"
    # "Give the manager a provider", then "in place of mgr.run(), start the manager and write"
    script = tmp_path / "fleet.py"
    script.write_text(first.replace(MANAGER, fleet).replace(RUN, start_and_write))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=50, check=True
    ).stdout
    shown = re.search(r"Each request prints as .*?```text\n(.*?)```", PAGE.read_text(), re.S)
    assert shown, "the page shows no output of the fleet program"
    assert sorted(out.splitlines()) == sorted(shown.group(1).splitlines())


@pytest.mark.timeout(60)
def test_the_command_line_program_labels_a_configmap_and_stops_on_ctrl_c(
    tmp_path: Path, make_envtest_server: Callable[..., APIServer]
) -> None:
    server = make_envtest_server("demo")
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    client = Cluster.from_kubeconfig(server.kubeconfig()).uncached_client
    client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "hello", "namespace": "default"},
        }
    )
    script = tmp_path / "label_configmaps.py"
    script.write_text(BLOCKS[4])
    # the page's "one cluster" command line
    proc = subprocess.Popen(
        [sys.executable, str(script), "--provider", "none", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # (the pipe ends if the program does)
        assert line == "labelled default/hello\n"  # (a request of the local cluster)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert "manager stopped" in err
    labels = client.get("v1/ConfigMap", "hello", "default")["metadata"]["labels"]
    assert labels == {"example.com/seen": "true"}
