from __future__ import annotations

import threading
from typing import Any

import pytest

from mcruntime.cache import Store, object_key, strip_managed_fields


def cm(name: str, ns: str | None = "default", rv: str = "1", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": labels}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def by_app(obj: dict[str, Any]) -> list[str]:
    app = obj["metadata"]["labels"].get("app")
    return [app] if app else []


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_object_key_is_namespace_slash_name_or_name() -> None:
    assert object_key(cm("a", "ns1")) == "ns1/a"
    assert object_key(cm("node-1", None)) == "node-1"


def test_strip_managed_fields_drops_only_managed_fields() -> None:
    obj = cm("a")
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    out = strip_managed_fields(obj)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["name"] == "a"


def test_get_list_keys_len_and_delete() -> None:
    s = Store()
    a, b = cm("a"), cm("b", "other")
    assert s.add(a) is None
    s.add(b)
    assert s.get("default/a") is a
    assert s.get("missing") is None
    assert sorted(s.keys()) == ["default/a", "other/b"]
    assert names(s.list()) == ["a", "b"]
    assert len(s) == 2
    assert s.delete(cm("a")) is a
    assert s.delete("default/a") is None
    assert len(s) == 1


def test_update_returns_previous_object() -> None:
    s = Store()
    old = cm("a", rv="1")
    s.add(old)
    assert s.update(cm("a", rv="2")) is old
    got = s.get("default/a")
    assert got is not None and got["metadata"]["resourceVersion"] == "2"


def test_namespace_index_is_built_in() -> None:
    s = Store()
    s.add(cm("a", "ns1"))
    s.add(cm("b", "ns1"))
    s.add(cm("c", "ns2"))
    s.add(cm("node", None))
    assert names(s.by_index("namespace", "ns1")) == ["a", "b"]
    assert names(s.by_index("namespace", "ns2")) == ["c"]
    assert names(s.by_index("namespace", "")) == ["node"]
    assert s.by_index("namespace", "nope") == []


def test_namespace_index_follows_deletes_and_re_adds() -> None:
    s = Store()
    s.add(cm("a", "ns1"))
    s.add(cm("b", "ns1"))
    s.add(cm("node", None))
    s.update(cm("a", "ns1", rv="2"))
    assert names(s.by_index("namespace", "ns1")) == ["a", "b"]
    s.delete(cm("a", "ns1"))
    s.delete("ns1/b")
    s.delete("node")
    assert s.by_index("namespace", "ns1") == [] and s.by_index("namespace", "") == []
    assert s.index_keys("namespace", "ns1") == []
    s.add(cm("b", "ns1", rv="3"))
    assert names(s.by_index("namespace", "ns1")) == ["b"]


def test_add_indexers_after_objects_exist_indexes_them() -> None:
    s = Store()
    s.add(cm("a", app="web"))
    s.add(cm("b", app="db"))
    s.add(cm("c"))
    s.add_indexers({"app": by_app})
    assert names(s.by_index("app", "web")) == ["a"]
    assert names(s.by_index("app", "db")) == ["b"]


def test_index_follows_updates_and_deletes() -> None:
    s = Store({"app": by_app})
    s.add(cm("a", app="web"))
    s.add(cm("b", app="web"))
    s.update(cm("a", rv="2", app="db"))
    assert names(s.by_index("app", "web")) == ["b"]
    assert names(s.by_index("app", "db")) == ["a"]
    s.delete(cm("b"))
    assert s.by_index("app", "web") == []
    s.update(cm("a", rv="3"))
    assert s.by_index("app", "db") == []


def test_multi_valued_and_str_returning_index_functions() -> None:
    s = Store(
        {
            "keys": lambda o: list(o["metadata"]["labels"]),
            "first": lambda o: o["metadata"]["name"][0],
            "none": lambda o: None,
        }
    )
    s.add(cm("abc", x="1", y="2"))
    assert names(s.by_index("keys", "x")) == ["abc"]
    assert names(s.by_index("keys", "y")) == ["abc"]
    assert names(s.by_index("first", "a")) == ["abc"]
    assert s.by_index("none", "") == []


def test_failing_index_function_does_not_break_writes() -> None:
    def boom(obj: dict[str, Any]) -> list[str]:
        raise RuntimeError("bad indexer")

    s = Store({"boom": boom})
    s.add(cm("a"))
    assert s.get("default/a") is not None
    assert s.by_index("boom", "x") == []


def test_unknown_index_and_duplicate_indexer_are_errors() -> None:
    s = Store()
    with pytest.raises(KeyError, match="nope"):
        s.by_index("nope", "x")
    with pytest.raises(ValueError, match="namespace"):
        s.add_indexers({"namespace": by_app})


def test_replace_swaps_content_and_rebuilds_indexes() -> None:
    s = Store({"app": by_app})
    s.add(cm("gone", app="web"))
    s.replace([cm("a", app="web"), cm("b", "ns2", app="db"), cm("c", None)], "42")
    assert s.get("default/gone") is None
    assert s.resource_version == "42"
    assert names(s.by_index("app", "web")) == ["a"]
    assert names(s.by_index("namespace", "ns2")) == ["b"]
    assert names(s.by_index("namespace", "default")) == ["a"]
    assert names(s.by_index("namespace", "")) == ["c"]  # cluster-scoped


@pytest.mark.timeout(20)
def test_concurrent_writers_and_readers_keep_index_consistent() -> None:
    s = Store({"app": by_app})
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(prefix: str) -> None:
        try:
            for i in range(2000):
                s.add(cm(f"{prefix}{i % 50}", rv=str(i), app="web" if i % 2 else "db"))
                if i % 7 == 0:
                    s.delete(f"default/{prefix}{i % 50}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        while not stop.is_set():
            for o in s.by_index("app", "web"):
                assert o["metadata"]["labels"]["app"] == "web"
            s.list()

    writers = [threading.Thread(target=writer, args=(p,)) for p in "xy"]
    r = threading.Thread(target=reader)
    r.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    r.join()
    assert not errors
    web = {object_key(o) for o in s.by_index("app", "web")}
    db = {object_key(o) for o in s.by_index("app", "db")}
    assert web | db == set(s.keys())
    assert not web & db
