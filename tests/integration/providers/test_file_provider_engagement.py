"""The ``file`` provider under a running manager: kubeconfig files written, changed, deleted, broken, fixed."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotFound
from mcruntime.providers import file
from tests._logs import logged
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    configmap_controller,
    create_cms,
    running,
)

pytestmark = pytest.mark.timeout(60)


def _write(path: Path, content: Any) -> None:
    """Write atomically, as tools that manage kubeconfig files do."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    os.replace(tmp, path)


def test_files_written_changed_and_deleted_engage_re_engage_and_disengage(
    make_envtest_server: Any, tmp_path: Path
) -> None:
    a, b = make_envtest_server("a"), make_envtest_server("b")
    create_cms(a, ["in-a"])
    create_cms(b, ["in-b"])
    provider = file.Provider(file.Options(paths=[str(tmp_path)], interval=0.1))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    path = tmp_path / "one.yaml"
    name = f"{path}+ctx"
    with running(mgr):
        _write(path, a.kubeconfig(context="ctx"))
        wait_for(lambda: rec.saw(name, "default/in-a"), what="written file engaged")
        first = mgr.get_cluster(name)

        # rewriting the same content (a new mtime) does not re-engage
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        _write(path, a.kubeconfig(context="ctx"))
        other = tmp_path / "other.yaml"
        _write(other, a.kubeconfig(context="ctx"))
        wait_for(lambda: f"{other}+ctx" in mgr.engaged_clusters(), what="a later file seen")
        assert mgr.get_cluster(name) is first, "unchanged content keeps its engagement"
        other.unlink()

        _write(path, b.kubeconfig(context="ctx"))
        wait_for(lambda: rec.saw(name, "default/in-b"), what="changed file re-engaged")
        assert mgr.get_cluster(name) is not first
        assert first.stopped, "the replaced engagement's cluster is stopped"

        path.unlink()
        wait_for(lambda: name not in mgr.engaged_clusters(), what="deleted file disengaged")
        with pytest.raises(ClusterNotFound):
            mgr.get_cluster(name)


def test_each_context_of_a_file_is_a_cluster(make_envtest_fleet: Any, tmp_path: Path) -> None:
    fleet = make_envtest_fleet(2)
    path = fleet.write_kubeconfig(tmp_path / "fleet.yaml")
    provider = file.Provider(file.Options(paths=[str(tmp_path / "*.yaml")], interval=0.1))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == [f"{path}+cluster-0", f"{path}+cluster-1"])
        mgr.get_cluster(f"{path}+cluster-1").client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "x", "namespace": "default"},
            }
        )
        wait_for(lambda: rec.saw(f"{path}+cluster-1", "default/x"))
        # dropping a context from the file disengages only that cluster
        cfg = fleet.kubeconfig()
        cfg["contexts"] = [c for c in cfg["contexts"] if c["name"] != "cluster-0"]
        cfg["current-context"] = "cluster-1"
        _write(Path(path), cfg)
        wait_for(lambda: mgr.engaged_clusters() == [f"{path}+cluster-1"])


def test_a_context_whose_name_has_control_characters_is_skipped_with_one_warning(
    make_envtest_fleet: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Context names are free text: one with a newline and a terminal escape would forge
    log lines about another cluster. It is skipped, warned about once (its name escaped,
    on one line), and the file's other contexts are engaged."""
    caplog.set_level(logging.DEBUG, logger="mcruntime")
    fleet = make_envtest_fleet(2)
    forged = "x\nWARNING mcruntime.manager: cluster=prod FORGED\x1b[2J"
    cfg = fleet.kubeconfig()
    cfg["contexts"][1]["name"] = forged
    path = tmp_path / "fleet.yaml"
    _write(path, cfg)
    provider = file.Provider(file.Options(paths=[str(path)], interval=0.1))
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        wait_for(lambda: mgr.engaged_clusters() == [f"{path}+cluster-0"])
        scans = provider.scans
        wait_for(lambda: provider.scans >= scans + 3, what="three more scans")
        assert mgr.engaged_clusters() == [f"{path}+cluster-0"]
    warned = logged(caplog, logging.WARNING, containing="control characters")
    assert len(warned) == 1
    assert warned[0].startswith(f"cluster={f'{path}+{forged}'!r} file provider: loading context")
    for record in caplog.records:
        assert "\n" not in record.getMessage() and "\x1b" not in record.getMessage()
        assert "\n" not in record.threadName


def test_a_broken_file_is_logged_with_its_path_and_skipped_while_the_others_keep_running(
    make_envtest_fleet: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.providers.file")
    fleet = make_envtest_fleet(2)
    good, broken = tmp_path / "good.yaml", tmp_path / "broken.yaml"

    def lines(level: int) -> list[str]:
        return logged(caplog, level, containing=str(broken))

    _write(good, fleet["cluster-0"].kubeconfig())
    _write(broken, "clusters: [this is: not: yaml\n")
    provider = file.Provider(file.Options(paths=[str(tmp_path)], interval=0.1))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    good_name, broken_name = f"{good}+cluster-0", f"{broken}+cluster-1"
    with running(mgr):
        wait_for(lambda: good_name in mgr.engaged_clusters())
        wait_for(lambda: lines(logging.WARNING), what="broken file logged")
        assert lines(logging.WARNING)[0].startswith(
            f"file provider: reading kubeconfig {broken} failed: the file is not valid YAML "
            "(line 1, column 24)"
        )
        assert fleet["cluster-0"].token not in caplog.text
        mgr.get_cluster(good_name).client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "alive", "namespace": "default"},
            }
        )
        wait_for(
            lambda: rec.saw(good_name, "default/alive"), what="the good cluster keeps reconciling"
        )
        assert mgr.engaged_clusters() == [good_name]

        # a file with a context naming a missing cluster is skipped too, not fatal
        _write(
            broken,
            {
                "apiVersion": "v1",
                "kind": "Config",
                "contexts": [
                    {"name": "cluster-1", "context": {"cluster": "nowhere", "user": "nobody"}}
                ],
                "current-context": "cluster-1",
            },
        )
        wait_for(lambda: len(lines(logging.WARNING)) >= 2)
        assert mgr.engaged_clusters() == [good_name]
        assert lines(logging.WARNING)[1].startswith(
            f"cluster={broken_name} file provider: loading context 'cluster-1' failed: "
        )
        # the file reads again; the context does not
        (read,) = lines(logging.INFO)
        assert read.startswith(f"file provider: reading kubeconfig {broken} works again after ")
        # logged once per change of the file, not once per scan (every 0.1 s here)
        scans = provider.scans
        wait_for(lambda: provider.scans >= scans + 5, what="five more scans")
        assert len(lines(logging.WARNING)) == 2

        _write(broken, fleet["cluster-1"].kubeconfig())
        wait_for(lambda: broken_name in mgr.engaged_clusters(), what="the fixed file engaged")
        assert len(lines(logging.WARNING)) == 2
        assert lines(logging.INFO)[1].startswith(
            f"cluster={broken_name} file provider: loading context 'cluster-1' works again after "
        )
        create_cms(fleet["cluster-1"], ["fixed"])
        wait_for(lambda: rec.saw(broken_name, "default/fixed"))
        assert good_name in mgr.engaged_clusters()


#: an exec plugin that hangs while ``hang`` exists in its folder, else prints the token in
#: ``token``; each run appends its pid to ``runs``
_PLUGIN = """
import json, os, pathlib, sys, time
here = pathlib.Path(sys.argv[1])
with open(here / "runs", "a") as f:
    f.write(f"{os.getpid()}\\n")
while (here / "hang").exists():
    time.sleep(0.05)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": (here / "token").read_text()}}))
"""


def test_a_hung_exec_plugin_holds_only_its_cluster_and_is_killed_with_each_attempt(
    make_envtest_fleet: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    fleet = make_envtest_fleet(2)
    files, plugin = tmp_path / "files", tmp_path / "plugin"
    files.mkdir()
    plugin.mkdir()
    (plugin / "plugin.py").write_text(_PLUGIN)
    (plugin / "token").write_text(fleet["cluster-1"].token)
    (plugin / "hang").touch()
    doc = fleet["cluster-1"].kubeconfig()
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin / "plugin.py"), str(plugin)],
            "interactiveMode": "Never",
        }
    }
    good, hung = files / "good.yaml", files / "hung.yaml"
    _write(good, fleet["cluster-0"].kubeconfig())
    _write(hung, doc)
    provider = file.Provider(file.Options(paths=[str(files)], interval=0.1))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=1.0)
    )
    rec = Recorder()
    configmap_controller(mgr, rec)
    good_name, hung_name = f"{good}+cluster-0", f"{hung}+cluster-1"

    def runs() -> list[int]:
        path = plugin / "runs"
        return [int(x) for x in path.read_text().split()] if path.exists() else []

    create_cms(fleet["cluster-0"], ["in-good"])
    create_cms(fleet["cluster-1"], ["in-hung"])
    with running(mgr):
        wait_for(lambda: rec.saw(good_name, "default/in-good"), what="the good cluster served")
        warned = lambda: logged(caplog, logging.WARNING, containing=f"cluster={hung_name} ")  # noqa: E731
        wait_for(warned, timeout=10, what="the hung plugin's cluster named in a warning")
        assert "not synced" in warned()[0]
        # the engagement's first list ran the plugin within the attempt's deadline, which
        # killed it; the informer's own list runs it again: one alive at most
        wait_for(lambda: len(runs()) >= 2, timeout=10, what="the informer's own run")
        assert _gone(runs()[0]), "the run the attempt's deadline ended was killed"
        assert sum(not _gone(pid) for pid in runs()) <= 1
        # the login comes back: the next attempt engages the cluster
        (plugin / "hang").unlink()
        wait_for(
            lambda: rec.saw(hung_name, "default/in-hung"), timeout=20, what="the cluster engaged"
        )
        assert len(warned()) == 1, "one warning for the failure streak"
    wait_for(lambda: all(_gone(pid) for pid in runs()), timeout=5, what="no plugin left running")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie answers kill(0) until its parent reaps it
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"
