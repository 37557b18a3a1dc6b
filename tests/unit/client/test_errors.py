"""API errors: the right class per status/reason, Status fields preserved, helpers."""

from __future__ import annotations

import json

import pytest

from mcruntime.errors import (
    AlreadyExists,
    APIError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    MCRuntimeError,
    MethodNotSupported,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    ignore_not_found,
    is_already_exists,
    is_conflict,
    is_not_found,
)


def _status(code: int, reason: str, message: str = "m", **details: object) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
            "details": details,
        }
    ).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", BadRequest),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (405, "MethodNotAllowed", MethodNotSupported),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", Gone),
        (410, "Gone", Gone),
        (415, "UnsupportedMediaType", UnsupportedMediaType),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (418, "", ServerError),
    ],
)
def test_status_maps_to_class(code: int, reason: str, cls: type[APIError]) -> None:
    err = APIError.from_response(code, _status(code, reason))
    assert type(err) is cls
    assert isinstance(err, MCRuntimeError)
    assert err.status == code and err.reason == reason


def test_message_names_cluster_and_keeps_status_fields() -> None:
    body = _status(404, "NotFound", 'configmaps "web" not found', name="web", kind="configmaps")
    err = APIError.from_response(404, body, cluster_name="eu-1")
    assert str(err) == '[cluster eu-1] configmaps "web" not found'
    assert err.message == 'configmaps "web" not found'
    assert (err.name, err.kind, err.cluster_name) == ("web", "configmaps", "eu-1")


def test_non_status_body_is_kept_short() -> None:
    err = APIError.from_response(502, b"<html>bad gateway</html>" + b"x" * 2000)
    assert isinstance(err, ServerError)
    assert "bad gateway" in str(err) and len(str(err)) < 600
    assert APIError.from_response(500, b"").message == ""


def test_the_status_of_kube_apiservers_timeout_filter_has_no_kind_and_is_read_all_the_same() -> (
    None
):
    # k8s.io/apiserver pkg/server/filters/timeout.go: a request that outlived --request-timeout
    # (its etcd down, say) gets a Status written without kind or apiVersion
    body = (
        b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete '
        b'within the allotted timeout","reason":"Timeout","details":{},"code":504}'
    )
    err = APIError.from_response(504, body, cluster_name="eu-1")
    assert isinstance(err, ServerError)
    assert err.reason == "Timeout"
    assert (
        str(err) == "[cluster eu-1] Timeout: request did not complete within the allotted timeout"
    )


def test_retry_after_from_details() -> None:
    err = APIError.from_response(429, _status(429, "TooManyRequests", retryAfterSeconds=3))
    assert err.retry_after == 3.0


def test_ignore_not_found_as_context_manager_and_function() -> None:
    with ignore_not_found():
        raise NotFound("gone")
    with pytest.raises(Conflict), ignore_not_found():
        raise Conflict("stale")
    assert ignore_not_found(NotFound("x")) is None
    with pytest.raises(Forbidden):
        ignore_not_found(Forbidden("no"))


def test_predicates() -> None:
    assert is_not_found(NotFound()) and not is_not_found(Conflict())
    assert is_conflict(Conflict()) and not is_conflict(AlreadyExists())
    assert is_already_exists(AlreadyExists()) and not is_already_exists(None)


@pytest.mark.parametrize("value", ["soon", "5", [3], {"s": 3}, True, -1, float("inf"), None])
def test_a_retry_after_that_is_no_number_of_seconds_is_ignored(value: object) -> None:
    """A gateway's Status whose ``details.retryAfterSeconds`` is not a number of seconds
    (the API's field is an int32) says nothing about when to retry: None, not a ValueError
    (client-go ignores a delay that does not parse, rest/request.go ``retryAfterSeconds``)."""
    err = APIError.from_response(429, _status(429, "TooManyRequests", retryAfterSeconds=value))
    assert isinstance(err, TooManyRequests)
    assert err.retry_after is None
    assert APIError.from_response(429, _status(429, "x", retryAfterSeconds=0.5)).retry_after == 0.5


def _apply_conflict(*messages: str) -> Conflict:
    causes = [
        {"reason": "FieldManagerConflict", "message": m, "field": ".spec.replicas"}
        for m in messages
    ]
    body = {"kind": "Status", "code": 409, "reason": "Conflict", "details": {"causes": causes}}
    err = APIError.from_response(409, json.dumps(body))
    assert isinstance(err, Conflict)
    return err


def test_a_field_conflict_tells_an_apply_from_a_scale_and_an_update() -> None:
    # the manager as kube-apiserver's printManager words it (fieldmanager conflict.go)
    scale, applier, updater = _apply_conflict(
        'conflict with "kubectl" with subresource "scale" using apps/v1',
        'conflict with "kubectl"',
        'conflict with "my \\"op\\"" using v1',
    ).field_conflicts
    assert (scale.manager, scale.operation, scale.subresource, scale.api_version) == (
        "kubectl",
        "Update",
        "scale",
        "apps/v1",
    )
    assert (applier.manager, applier.operation, applier.subresource, applier.api_version) == (
        "kubectl",
        "Apply",
        "",
        "",
    )
    assert (updater.manager, updater.operation, updater.api_version) == ('my "op"', "Update", "v1")
    # the tuple stays (field, manager, message)
    assert tuple(scale) == (".spec.replicas", "kubectl", scale.message)


def test_a_field_conflict_worded_otherwise_has_no_operation() -> None:
    [c] = _apply_conflict("owned by someone").field_conflicts
    assert (c.operation, c.subresource, c.api_version) == ("", "", "")


def test_the_value_a_patch_cause_quotes_is_left_out_however_it_is_escaped() -> None:
    # kube-apiserver quotes the patched object with Go's %q: escaped quotes and backslashes
    # inside it are no end of it; an error of several causes keeps the others; a value cut
    # short (a proxy's truncated body) is left out to the end
    value = r'"{\"data\":{\"k\":\"c2VjcmV0\",\"q\":\"a\\\"b\"}}"'
    status = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": f' "" is invalid: [patch: Invalid value: {value}: json: bad, '
        f'metadata.name: Invalid value: "Bad_Name": lowercase]',
        "details": {
            "causes": [
                {
                    "field": "patch",
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {value}: json: bad",
                },
                {
                    "field": "metadata.name",
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "Bad_Name": lowercase',
                },
            ]
        },
    }
    err = APIError.from_response(422, json.dumps(status))
    assert isinstance(err, Invalid)
    assert "c2VjcmV0" not in str(err) + repr(err.details)
    assert err.message == (
        ' "" is invalid: [patch: Invalid value: "<not quoted: it may hold a Secret\'s data>": '
        'json: bad, metadata.name: Invalid value: "Bad_Name": lowercase]'
    )
    causes = (err.details or {})["causes"]
    assert causes[0]["message"] == (
        'Invalid value: "<not quoted: it may hold a Secret\'s data>": json: bad'
    )
    assert causes[1]["message"] == 'Invalid value: "Bad_Name": lowercase'
    cut = APIError.from_response(
        422,
        json.dumps({**status, "message": 'patch: Invalid value: "{\\"data\\":{\\"k\\":\\"c2Vj'}),
    )
    assert cut.message == "patch: Invalid value: \"<not quoted: it may hold a Secret's data>"
