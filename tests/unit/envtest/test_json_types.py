"""The decoder's type errors for built-in kinds, as Go's encoding/json words them."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.envtest._json_types import type_error


@pytest.mark.parametrize(
    ("text", "offset"),
    [("not base64", 3), ("YQ=", 3), ("Y===", 1), ("YQ==YQ==", 4), ("YWJj\nZA==", None), ("", None)],
)
def test_base64_errors_give_go_s_offset(text: str, offset: int | None) -> None:
    error = type_error({"data": {"k": text}}, "v1", "Secret")
    expected = None if offset is None else f"illegal base64 data at input byte {offset}"
    assert error == expected


def test_a_number_where_a_time_belongs_is_decoded_as_go_s_string() -> None:
    error = type_error({"metadata": {"creationTimestamp": 5}}, "v1", "ConfigMap")
    assert error == (
        "json: cannot unmarshal number into Go struct field "
        "ObjectMeta.metadata.creationTimestamp of type string"
    )


def test_a_type_that_decodes_itself_wins_over_an_earlier_error() -> None:
    container: dict[str, Any] = {"name": "a", "resources": {"limits": {"cpu": "lots"}}}
    body = {"metadata": {"labels": {"a": 1}}, "spec": {"containers": [container]}}
    error = type_error(body, "v1", "Pod")
    assert error is not None and error.startswith("quantities must match")


def test_embedded_struct_fields_belong_to_the_outer_struct() -> None:
    body = {"spec": {"volumes": [{"name": "v", "configMap": "x"}]}}
    assert type_error(body, "v1", "Pod") == (
        "json: cannot unmarshal string into Go struct field Volume.spec.volumes.configMap "
        "of type v1.ConfigMapVolumeSource"
    )


def test_overflow_of_an_int32_names_the_number() -> None:
    error = type_error({"spec": {"replicas": 2**31}}, "apps/v1", "Deployment")
    assert error == (
        "json: cannot unmarshal number 2147483648 into Go struct field "
        "DeploymentSpec.spec.replicas of type int32"
    )


def test_unknown_fields_raw_extensions_and_kinds_without_a_schema_pass() -> None:
    assert type_error({"spec": {"replicaz": "3"}}, "apps/v1", "Deployment") is None
    assert type_error({"spec": {"x": 1}}, "example.com/v1", "Widget") is None
    assert type_error({"metadata": {"managedFields": [{"fieldsV1": 5}]}}, "v1", "Pod") is None
