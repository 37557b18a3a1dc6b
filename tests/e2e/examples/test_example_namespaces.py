"""``python -m mcruntime.examples.namespaces``: each namespace engaged as a cluster, confined to itself."""

from __future__ import annotations

import logging
import pathlib
import re
from collections.abc import Callable

import pytest

from mcruntime.envtest import APIServer
from mcruntime.examples import namespaces as example
from tests.e2e.examples._example_support import ExampleProcess, core_api, leaked_threads, wait_until

RECONCILED = re.compile(r"^cluster=(\S+) reconciled configmap (\S+)/(\S+) ", re.M)


@pytest.mark.timeout(30)
def test_demo_without_arguments_engages_namespaces_as_clusters(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert example.main(["--duration", "5"]) == 0
    # a namespace deleted: its cluster ends at once, holding up no other's events
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    out = capsys.readouterr().out
    seen = RECONCILED.findall(out)
    # every reconcile ran in the cluster named after the ConfigMap's namespace
    assert all(cluster == namespace for cluster, namespace, _ in seen), out
    assert {(c, n) for c, _, n in seen} == {
        ("team-a", "settings"),
        ("team-a", "features"),
        ("team-b", "settings"),
        ("team-c", "settings"),
    }, out
    engaged = re.search(r"^state: engaged clusters: (.*)$", out, re.M)
    assert engaged is not None, out
    clusters = engaged.group(1).split(", ")
    assert {"default", "team-a", "team-c"} <= set(
        clusters
    ) and "team-b" not in clusters  # team-b was deleted
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")


@pytest.mark.timeout(40)
def test_labelled_namespaces_come_and_go_as_clusters(
    tmp_path: pathlib.Path, make_envtest_server: Callable[..., APIServer]
) -> None:
    host = make_envtest_server("host")
    host.write_kubeconfig(tmp_path / "host.yaml")
    core = core_api(host)
    core.create_namespace({"metadata": {"name": "shop", "labels": {"tenant": "shop"}}})
    core.create_namespace({"metadata": {"name": "not-a-tenant"}})
    core.create_namespaced_config_map(
        "shop", {"metadata": {"name": "prices"}, "data": {"apple": "1"}}
    )
    core.create_namespaced_config_map("not-a-tenant", {"metadata": {"name": "secret-plans"}})

    with ExampleProcess(
        "namespaces",
        "--kubeconfig",
        str(tmp_path / "host.yaml"),
        "--provider-option",
        "label_selector=tenant",
        "--duration",
        "120",
    ) as proc:
        proc.wait_for(r"^cluster=shop reconciled configmap shop/prices \(keys: apple\)$")
        # the reconciler wrote through the cluster's confined client, into its own namespace
        wait_until(
            lambda: (
                (core.read_namespaced_config_map("prices", "shop").metadata.annotations or {}).get(
                    example.ANNOTATION
                )
                == "shop"
            ),
            what="annotation written by cluster shop",
        )

        core.create_namespace({"metadata": {"name": "blog", "labels": {"tenant": "blog"}}})
        proc.wait_for(r"cluster=blog engaged")
        core.create_namespaced_config_map(
            "blog", {"metadata": {"name": "theme"}, "data": {"dark": "yes"}}
        )
        proc.wait_for(r"^cluster=blog reconciled configmap blog/theme \(keys: dark\)$")

        core.delete_namespace("shop")
        proc.wait_for(r"cluster=shop disengaged")

        assert "not-a-tenant" not in proc.output  # not selected: never engaged, never reconciled
        assert {c for c, ns, _ in RECONCILED.findall(proc.output) if c != ns} == set()
        assert proc.interrupt() == 0, proc.output
        assert "manager stopped" in proc.output
