from mcruntime.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from mcruntime.handler import (
    Funcs,
    enqueue_request_for_object,
    enqueue_request_for_owner,
    enqueue_requests_from_map_func,
)
from mcruntime.reconcile import Request


class RecordingQueue:
    def __init__(self):
        self.items = []

    def add(self, item, *, priority=None):
        self.items.append(item)

    def add_after(self, item, seconds, *, priority=None):
        self.items.append(item)

    def add_rate_limited(self, item, *, priority=None):
        self.items.append(item)


def cm(name="web", ns="default", owners=()):
    return {"metadata": {"name": name, "namespace": ns, "ownerReferences": list(owners)}}


def test_request_for_object_is_stamped_with_the_event_cluster():
    q = RecordingQueue()
    h = enqueue_request_for_object()
    h.create(CreateEvent(cm(), "eu-1"), q)
    h.update(UpdateEvent(cm(), cm(), "eu-1"), q)
    h.delete(DeleteEvent(cm(), ""), q)
    h.generic(GenericEvent(cm("x", ""), "us-2"), q)
    assert q.items == [
        Request("default", "web", "eu-1"),
        Request("default", "web", "eu-1"),
        Request("default", "web", ""),
        Request("", "x", "us-2"),
    ]


def test_request_for_owner_follows_the_controller_reference_by_group_and_kind():
    q = RecordingQueue()
    h = enqueue_request_for_owner("apps/v1/Deployment")
    refs = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "owner",
            "uid": "1",
            "controller": True,
        },
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "not-controller", "uid": "2"},
        {
            "apiVersion": "v1",
            "kind": "Deployment",
            "name": "other-group",
            "uid": "3",
            "controller": True,
        },
    ]
    h.create(CreateEvent(cm(owners=refs), "c1"), q)
    assert q.items == [Request("default", "owner", "c1")]


def test_request_for_owner_all_references_when_not_only_controller():
    q = RecordingQueue()
    h = enqueue_request_for_owner("v1/ConfigMap", only_controller=False)
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n} for n in ("a", "b")]
    h.create(CreateEvent(cm(owners=refs), "c1"), q)
    assert q.items == [Request("default", "a", "c1"), Request("default", "b", "c1")]


def test_map_func_stamps_source_cluster_unless_cross_cluster():
    q = RecordingQueue()
    fn = lambda o: [Request("ns", "r", cluster_name="hub"), ("ns2", "pair")]  # noqa: E731
    enqueue_requests_from_map_func(fn).create(CreateEvent(cm(), "eu-1"), q)
    assert q.items == [Request("ns", "r", "eu-1"), Request("ns2", "pair", "eu-1")]
    q.items.clear()
    enqueue_requests_from_map_func(fn, cross_cluster=True).create(CreateEvent(cm(), "eu-1"), q)
    assert q.items == [Request("ns", "r", "hub"), Request("ns2", "pair", "eu-1")]


def test_funcs_requests_without_a_cluster_are_for_the_event_cluster_unless_cross_cluster():
    # Go: a lifted handler.TypedFuncs adding reconcile.Request{...} gets the event's cluster
    def add(event, queue):
        queue.add(Request("ns", "plain"))
        queue.add_after(Request("ns", "later"), 1.0)
        queue.add_rate_limited(Request("ns", "named", cluster_name="hub"))

    q = RecordingQueue()
    handler = Funcs(create=add, update=add, delete=add, generic=add)
    handler.create(CreateEvent(cm(), "eu-1"), q)
    assert q.items == [
        Request("ns", "plain", "eu-1"),
        Request("ns", "later", "eu-1"),
        Request("ns", "named", "hub"),
    ]
    q.items.clear()
    handler.update(UpdateEvent(cm(), cm(), "eu-1"), q)
    handler.delete(DeleteEvent(cm(), "eu-1"), q)
    handler.generic(GenericEvent(cm(), "eu-1"), q)
    assert {r.cluster_name for r in q.items if r.name != "named"} == {"eu-1"}
    q.items.clear()
    Funcs(create=add, cross_cluster=True).create(CreateEvent(cm(), "eu-1"), q)
    assert [r.cluster_name for r in q.items] == ["", "", "hub"]


def test_a_map_func_that_cannot_take_the_object_alone_is_refused_when_made():
    import pytest

    # Go: handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) ...)
    with pytest.raises(TypeError, match=r"\(ctx, obj\) \(Go's ctx has no counterpart"):
        enqueue_requests_from_map_func(lambda ctx, obj: [])
    with pytest.raises(TypeError, match="is not callable"):
        enqueue_requests_from_map_func("configmaps")
    enqueue_requests_from_map_func(lambda obj, *more: [])  # fine


def test_map_func_failure_is_logged_not_raised(caplog):
    q = RecordingQueue()

    def boom(o):
        raise RuntimeError("bad map")

    enqueue_requests_from_map_func(boom).create(CreateEvent(cm(), "eu-1"), q)
    assert q.items == []
    assert "eu-1" in caplog.text and "map function" in caplog.text


def test_request_string_forms():
    assert str(Request("ns", "a", "eu-1")) == "cluster://eu-1/ns/a"
    assert str(Request("ns", "a")) == "ns/a"
    assert str(Request("", "node-1", "c")) == "cluster://c/node-1"
    assert hash(Request("ns", "a", "x")) == hash(Request("ns", "a", "x"))
