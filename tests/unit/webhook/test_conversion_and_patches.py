"""Hub-and-spoke conversion round trips, and JSON patches computed from a handler's changes."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime._patch import create_json_patch, json_equal, json_patch
from mcruntime.webhook import ConversionError, Converter


def v1_to_hub(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.pop("spec", {})
    obj["spec"] = {"size": {"value": spec.get("size", 0), "unit": "Gi"}}
    return obj


def hub_to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.pop("spec", {})
    obj["spec"] = {"size": spec.get("size", {}).get("value", 0)}
    return obj


CONV = Converter("ex.io", "Disk", "v2", {"v1": (v1_to_hub, hub_to_v1)})


def disk(version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"ex.io/{version}",
        "kind": "Disk",
        "metadata": {"name": "d"},
        "spec": spec,
    }


def test_a_spoke_converts_to_the_hub_and_back_without_loss() -> None:
    v1 = disk("v1", {"size": 5})
    hub = CONV.convert(v1, "ex.io/v2")
    assert hub == disk("v2", {"size": {"value": 5, "unit": "Gi"}})
    assert CONV.convert(hub, "ex.io/v1") == v1
    assert v1 == disk("v1", {"size": 5})  # the input is not changed


def test_unknown_versions_and_kinds_are_conversion_errors() -> None:
    with pytest.raises(ConversionError, match="unknown version 'v3'"):
        CONV.convert(disk("v1", {}), "ex.io/v3")
    with pytest.raises(ConversionError, match="serves Disk.ex.io"):
        CONV.convert({**disk("v1", {}), "kind": "Other"}, "ex.io/v2")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 2, "b": {"c": [1]}}),
        ({"a": {"x/y": 1, "m~n": 2}}, {"a": {"x/y": 3}}),
        ({"l": [1, 2, 3]}, {"l": [1, 5, 3]}),
        ({"l": [1, 2, 3]}, {"l": [1]}),
        ({"a": 1}, {"a": None}),
        ({"a": True}, {"a": 1}),
    ],
)
def test_the_computed_json_patch_turns_the_original_into_the_modified(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    ops = create_json_patch(before, after)
    assert json_patch(before, ops) == after
    assert (ops == []) == json_equal(before, after)
