"""Watch streams: initial state, resume, 410, bookmarks, timeouts, selectors and faults."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient

from mcruntime.envtest import APIServer, wait_for
from tests.conformance._support import crd_manifest

pytestmark = pytest.mark.timeout(30)

Watches = Callable[..., Any]


def _cm(core: client.CoreV1Api, name: str, ns: str = "default", **labels: str) -> str:
    return core.create_namespaced_config_map(
        ns, {"metadata": {"name": name, "labels": labels}}
    ).metadata.resource_version


def test_watch_from_zero_sends_existing_then_live(core: client.CoreV1Api, watches: Watches) -> None:
    _cm(core, "old")
    w = watches(core.list_namespaced_config_map, "default", resource_version="0")
    assert w.take(1) == [("ADDED", "old")]
    _cm(core, "new")
    core.patch_namespaced_config_map("new", "default", {"data": {"a": "b"}})
    core.delete_namespaced_config_map("new", "default")
    assert w.take(3) == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]


def test_watch_resumes_after_resource_version_in_order(
    core: client.CoreV1Api, watches: Watches
) -> None:
    rv = _cm(core, "a")
    _cm(core, "b")
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    core.delete_namespaced_config_map("b", "default")
    w = watches(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1)
    events = [e for e in w.until_end() if e["type"] != "END"]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_compact_makes_old_resource_versions_expire(
    server: APIServer, core: client.CoreV1Api, watches: Watches
) -> None:
    rv = _cm(core, "c")
    server.compact()
    w = watches(core.list_namespaced_config_map, "default", resource_version=rv)
    ev = w.next()
    assert ev["type"] == "ERROR"
    assert (ev["object"]["code"], ev["object"]["reason"]) == (410, "Expired")
    assert w.next()["type"] == "END"
    fresh = core.list_namespaced_config_map("default").metadata.resource_version
    w2 = watches(core.list_namespaced_config_map, "default", resource_version=fresh)
    _cm(core, "after")
    assert w2.take(1) == [("ADDED", "after")]


def test_history_overflow_expires_resource_versions(watches: Watches) -> None:
    from kubernetes import config

    with APIServer("small", history=3) as srv:
        core = client.CoreV1Api(config.new_client_from_config_dict(srv.kubeconfig()))
        rv = _cm(core, "h0")
        for i in range(1, 5):
            _cm(core, f"h{i}")
        w = watches(core.list_namespaced_config_map, "default", resource_version=rv)
        assert w.next()["object"]["code"] == 410


def test_bookmark_arrives_promptly(
    server: APIServer, core: client.CoreV1Api, watches: Watches
) -> None:
    server.bookmark_interval = 0.2
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    w = watches(
        core.list_namespaced_config_map, "default", resource_version=rv, allow_watch_bookmarks=True
    )
    start = time.monotonic()
    ev = w.next(2)
    assert ev["type"] == "BOOKMARK" and time.monotonic() - start < 1.5
    assert ev["object"]["kind"] == "ConfigMap"
    assert int(ev["object"]["metadata"]["resourceVersion"]) >= int(rv)
    _cm(core, "bm")
    assert w.next_of({"ADDED"})["object"]["metadata"]["name"] == "bm"
    again = w.next_of({"BOOKMARK"}, 2)
    assert int(again["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_timeout_seconds_ends_stream_cleanly(core: client.CoreV1Api, watches: Watches) -> None:
    start = time.monotonic()
    w = watches(core.list_namespaced_config_map, "default", timeout_seconds=1)
    assert w.until_end()[-1]["type"] == "END"
    assert 0.9 <= time.monotonic() - start < 5
    # the connection went back to the pool and still works
    assert core.read_namespace("default").metadata.name == "default"


def test_drop_watches_ends_streams(
    server: APIServer, core: client.CoreV1Api, watches: Watches
) -> None:
    w1 = watches(core.list_namespaced_config_map, "default")
    w2 = watches(core.list_namespace)
    server.drop_watches()
    assert w1.until_end()[-1]["type"] == "END"
    assert [e["type"] for e in w2.until_end()][-1] == "END"
    assert core.list_namespace().items


def test_stop_cuts_watches(server: APIServer, core: client.CoreV1Api, watches: Watches) -> None:
    w = watches(core.list_namespaced_config_map, "default", resource_version="0")
    server.stop()
    assert w.until_end()[-1]["type"] in ("END", "CUT")
    server.start()


def test_selector_transitions_become_added_and_deleted(
    core: client.CoreV1Api, watches: Watches
) -> None:
    w = watches(core.list_namespaced_config_map, "default", label_selector="app=web")
    _cm(core, "other")
    _cm(core, "sel")
    core.patch_namespaced_config_map("sel", "default", {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_config_map("sel", "default", {"data": {"a": "1"}})
    core.patch_namespaced_config_map("sel", "default", {"metadata": {"labels": {"app": "db"}}})
    assert w.take(3) == [("ADDED", "sel"), ("MODIFIED", "sel"), ("DELETED", "sel")]


def test_namespace_path_filters_events(core: client.CoreV1Api, watches: Watches) -> None:
    core.create_namespace({"metadata": {"name": "elsewhere"}})
    w = watches(core.list_namespaced_config_map, "elsewhere")
    everywhere = watches(core.list_config_map_for_all_namespaces)
    _cm(core, "here")
    _cm(core, "there", "elsewhere")
    assert w.take(1) == [("ADDED", "there")]
    assert everywhere.take(2) == [("ADDED", "here"), ("ADDED", "there")]


def test_field_selector_on_name(core: client.CoreV1Api, watches: Watches) -> None:
    w = watches(core.list_namespaced_config_map, "default", field_selector="metadata.name=only")
    _cm(core, "notme")
    _cm(core, "only")
    assert w.take(1) == [("ADDED", "only")]


def test_send_initial_events_ends_with_marked_bookmark(
    core: client.CoreV1Api, watches: Watches
) -> None:
    _cm(core, "init")
    w = watches(
        core.list_namespaced_config_map,
        "default",
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    )
    assert w.take(1) == [("ADDED", "init")]
    ev = w.next()
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_a_restored_snapshot_brings_the_objects_back_and_expires_older_resource_versions(
    server: APIServer, core: client.CoreV1Api, watches: Watches
) -> None:
    """`restore()` is etcd restored from a backup under a restarted kube-apiserver: the
    objects as they were, an empty watch cache (a watch from an older resourceVersion gets
    410), and the resourceVersion the snapshot's plus the bump."""
    _cm(core, "kept")
    _cm(core, "deleted-after")
    before = _cm(core, "older")
    snap = server.snapshot()
    assert snap.resource_version == server.resource_version
    core.patch_namespaced_config_map("kept", "default", {"data": {"v": "2"}})
    core.delete_namespaced_config_map("deleted-after", "default")
    _cm(core, "created-after")
    with pytest.raises(RuntimeError, match="stop\\(\\) it before restore\\(\\)"):
        server.restore(snap)
    server.stop()
    with pytest.raises(ValueError, match="bump_revision must be a whole number"):
        server.restore(snap, bump_revision=-1)
    server.restore(snap, bump_revision=1000)
    server.start()
    assert int(server.resource_version) == int(snap.resource_version) + 1000
    listed = core.list_namespaced_config_map("default")
    names = {o.metadata.name: o.data for o in listed.items}
    assert {n: names.get(n) for n in ("kept", "deleted-after", "older")} == {
        "kept": None,
        "deleted-after": None,
        "older": None,
    }
    assert "created-after" not in names
    w = watches(core.list_namespaced_config_map, "default", resource_version=before)
    ev = w.next()
    assert ev["type"] == "ERROR"
    assert (ev["object"]["code"], ev["object"]["reason"]) == (410, "Expired")
    # a write after the restore is newer than anything before it
    assert int(_cm(core, "after-restore")) > int(snap.resource_version) + 1000


def test_a_restored_snapshot_serves_the_crds_it_had(server: APIServer, api: ApiClient) -> None:
    ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    group = "restore.example.com"

    def served(plural: str) -> bool:
        try:
            custom.list_namespaced_custom_object(group, "v1", "default", plural)
        except client.ApiException as e:
            assert e.status == 404, e
            return False
        return True

    ext.create_custom_resource_definition(crd_manifest(group, "gadgets", "Gadget"))
    snap = server.snapshot()
    ext.delete_custom_resource_definition(f"gadgets.{group}")
    wait_for(lambda: not served("gadgets"), 10)
    ext.create_custom_resource_definition(crd_manifest(group, "widgets", "Widget"))
    assert served("widgets")
    server.stop()
    server.restore(snap)
    server.start()
    assert served("gadgets")
    assert not served("widgets")
