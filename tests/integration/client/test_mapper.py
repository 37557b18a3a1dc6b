"""RESTMapper against an embedded API server: discovery, CRDs installed later, helpful misses."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from mcruntime.client import Client, GroupVersionKind, RESTMapper
from mcruntime.errors import NoKindMatch

pytestmark = pytest.mark.timeout(60)


def test_core_and_group_kinds_map_to_resources(mapper: RESTMapper) -> None:
    cm = mapper.mapping("v1/ConfigMap")
    assert (cm.resource, cm.namespaced) == ("configmaps", True)
    assert {"get", "list", "watch", "create"} <= cm.verbs
    assert mapper.mapping(V1ConfigMap) == cm
    ns = mapper.mapping(GroupVersionKind("", "v1", "Namespace"))
    assert (ns.resource, ns.namespaced) == ("namespaces", False)
    assert "status" in ns.subresources
    assert mapper.mapping_for_resource("", "v1", "configmaps") == cm


def test_wrong_kind_suggests_close_matches(mapper: RESTMapper) -> None:
    with pytest.raises(NoKindMatch) as err:
        mapper.mapping("v1/Configmap")
    assert "did you mean 'v1/ConfigMap'" in str(err.value)
    assert err.value.kind == "v1/Configmap" and "c1" in str(err.value)
    with pytest.raises(NoKindMatch, match="no kind 'nope.io/v1/Thing'"):
        mapper.mapping("nope.io/v1/Thing")


def test_crd_created_later_is_found_after_refresh(
    mapper: RESTMapper, client: Client, wait_until: Any, make_crd: Any
) -> None:
    crd = make_crd("later.example.com", "Gadget", "gadgets")
    with pytest.raises(NoKindMatch):
        mapper.mapping("later.example.com/v1/Gadget")
    client.create(crd)

    def found() -> Any:
        try:
            return mapper.mapping("later.example.com/v1/Gadget")
        except NoKindMatch:
            return None

    m = wait_until(found, timeout=10)
    assert (m.resource, m.namespaced) == ("gadgets", True)
    with pytest.raises(NoKindMatch) as err:
        mapper.mapping("v1/Gadget")
    assert "later.example.com/v1/Gadget" in str(err.value)


def test_reset_forgets_discovery(mapper: RESTMapper) -> None:
    mapper.mapping("v1/ConfigMap")
    mapper.reset()
    assert mapper.mapping("v1/ConfigMap").resource == "configmaps"
