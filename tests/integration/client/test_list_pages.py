"""LIST page by page: `APIReader.pages` for collections too big to hold, and what an
expired continuation does (kube-apiserver keeps a list's pages for about five minutes).

The envtest server forgets its history on `compact()`, as etcd's compaction does: a
continue token from before it is a 410, as on a real cluster after the compaction interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime import _held_back as held_back
from mcruntime.client import APIReader, Client, MetadataOnly, deadline
from mcruntime.client import _client as client_module
from mcruntime.client import _rest as rest_module
from mcruntime.errors import DeadlineExceeded, Gone

pytestmark = pytest.mark.timeout(60)


def _fill(client: Client, ns: str, count: int) -> list[str]:
    names = [f"cm-{i:02d}" for i in range(count)]
    for name in names:
        meta = {"name": name, "namespace": ns}
        client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}
        )
    return names


def test_pages_come_one_request_at_a_time_and_resume_from_a_token(
    api_reader: APIReader, client: Client, ns: str
) -> None:
    names = _fill(client, ns, 7)
    pages = list(api_reader.pages("v1/ConfigMap", ns, page_size=3))
    assert [[o["metadata"]["name"] for o in p.items] for p in pages] == [
        names[0:3],
        names[3:6],
        names[6:7],
    ]
    assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for p in pages for o in p.items)
    assert [p.remaining_item_count for p in pages] == [4, 1, None]
    assert pages[-1].continue_token is None and pages[0].continue_token
    assert len({p.resource_version for p in pages}) == 1  # one consistent list
    # stopped after the first page, resumed later from its token: the rest, nothing twice
    first = next(iter(api_reader.pages("v1/ConfigMap", ns, page_size=3)))
    rest = api_reader.pages("v1/ConfigMap", ns, page_size=3, continue_token=first.continue_token)
    assert [o["metadata"]["name"] for p in rest for o in p.items] == names[3:]
    meta = next(iter(api_reader.pages("v1/ConfigMap", ns, page_size=2, metadata_only=True)))
    assert [type(o) for o in meta.items] == [MetadataOnly] * 2
    assert meta.items[0]["kind"] == "ConfigMap" and "data" not in meta.items[0]
    with pytest.raises(ValueError, match="at least one object"):
        next(iter(api_reader.pages("v1/ConfigMap", ns, page_size=0)))


def test_pages_that_expired_say_to_list_again(
    api_reader: APIReader, client: Client, ns: str, server: Any
) -> None:
    _fill(client, ns, 4)
    pages = api_reader.pages("v1/ConfigMap", ns, page_size=2)
    next(pages)
    server.compact()  # as after kube-apiserver's five minutes
    with pytest.raises(Gone) as err:
        next(pages)
    assert str(err.value) == (
        "[cluster c1] the pages of this list of v1/ConfigMap expired (the server keeps them "
        "consistent for about five minutes): list again from the start"
    )


def test_a_list_whose_pages_expired_is_listed_again_whole(
    api_reader: APIReader, client: Client, ns: str, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as client-go's pager (FullListIfExpired): a list slower than the server's compaction
    # interval was a 410 for the caller, who had no token to do anything with
    names = _fill(client, ns, 5)
    monkeypatch.setattr(client_module, "DEFAULT_PAGE_SIZE", 2)
    request = api_reader.rest.request
    asked: list[dict[str, Any]] = []

    def compacting_after_the_first_page(*args: Any, **kwargs: Any) -> Any:
        asked.append(dict(kwargs.get("query") or {}))
        answer = request(*args, **kwargs)
        if len(asked) == 1:
            server.compact()
        return answer

    monkeypatch.setattr(api_reader.rest, "request", compacting_after_the_first_page)
    got = [o["metadata"]["name"] for o in api_reader.list("v1/ConfigMap", ns)]
    assert got == names  # each once
    assert [(q.get("limit"), bool(q.get("continue"))) for q in asked] == [
        (2, False),
        (2, True),  # 410
        (None, False),  # the whole list, in one answer
    ]


# -- one deadline for a whole list --------------------------------------------------------
# 5 objects in pages of 2, each request 0.5 s late: two pages come in 1 s, the third is cut
# at 1.3 s with 0.3 s left; the deadline is the list's, not each page's


@pytest.fixture
def slow_pages(
    client: Client, ns: str, server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[held_back.Met]:
    """5 ConfigMaps in ``ns``, listed in pages of 2, each request 0.5 s late; yields the
    clusters the calls of the test failed on, as a reconcile notes them."""
    _fill(client, ns, 5)
    monkeypatch.setattr(client_module, "DEFAULT_PAGE_SIZE", 2)
    monkeypatch.setattr(server, "latency", 0.5)
    met = held_back.Met()
    token = held_back.noting(met)
    try:
        yield met
    finally:
        held_back.stop_noting(token)


def _cut(list_it: Callable[[], Any]) -> DeadlineExceeded:
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as err:
        list_it()
    assert time.monotonic() - began < 1.45  # one deadline: not 1.3 s for each page
    return err.value


def test_a_list_cut_by_its_timeout_says_how_far_it_got_and_is_no_failure_of_the_cluster(
    api_reader: APIReader, client: Client, ns: str, slow_pages: held_back.Met
) -> None:
    for list_it in (
        lambda: api_reader.list("v1/ConfigMap", ns, timeout=1.3),
        lambda: client.list("v1/ConfigMap", ns, timeout=1.3),  # the uncached client
    ):
        exc = _cut(list_it)
        assert str(exc).startswith(
            f"[cluster c1] GET /api/v1/namespaces/{ns}/configmaps: the list was cut by its "
            "timeout (1.3s for the whole list) after 2 pages, 4 objects, in "
        ), str(exc)
        assert "no answer from" not in str(exc)  # the server answered every page in time
        assert exc.by_caller and exc.sent
    assert not slow_pages.failed  # a reconcile is not held back for its cluster


def test_a_list_cut_by_an_enclosing_deadline_names_it(
    api_reader: APIReader, ns: str, slow_pages: held_back.Met
) -> None:
    with deadline(1.3):
        exc = _cut(lambda: api_reader.list("v1/ConfigMap", ns))
    assert "the list was cut by its caller's deadline() (a reconcile's reconcile_timeout" in str(
        exc
    )
    assert "after 2 pages, 4 objects" in str(exc)
    assert exc.by_caller and not slow_pages.failed


def test_a_list_without_a_timeout_has_one_default_deadline_for_all_its_pages(
    api_reader: APIReader, ns: str, slow_pages: held_back.Met, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DEFAULT_TIMEOUT bounds the whole list, as the docs say, not each page (a 40-page list
    # went on past it, page after page)
    monkeypatch.setattr(rest_module, "DEFAULT_TIMEOUT", 1.3)
    exc = _cut(lambda: api_reader.list("v1/ConfigMap", ns))
    assert (
        "the list was cut by the default deadline of a whole list (DEFAULT_TIMEOUT, 1.3s) "
        "after 2 pages, 4 objects"
    ) in str(exc)
    assert not exc.by_caller  # no deadline of the caller's
    assert not slow_pages.failed
