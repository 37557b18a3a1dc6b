"""envtest decodes the protobuf bodies Go clients send for built-in kinds into the JSON they stand for."""

from __future__ import annotations

import pytest

from mcruntime.envtest._protobuf import UnsupportedKind, decode
from tests._protobuf_wire import body, entry

# field numbers from Kubernetes' generated.proto, written out as a Go client encodes them
META = [(1, "web"), (3, "default"), (11, entry("app", "web")), (7, 0), (8, [(1, 0)])]


def test_a_pod_decodes_to_the_json_a_client_would_send() -> None:
    port = [(1, ""), (2, 0), (3, 8080), (4, "TCP"), (5, "")]  # hostPort 0: written, not JSON
    env = [(1, "MODE"), (2, ""), (3, [(3, [(1, [(1, "settings")]), (2, "mode")])])]
    limits = [(1, entry("cpu", [(1, "500m")]))]
    container = [(1, "web"), (2, "nginx"), (6, port), (7, env), (8, limits), (18, False)]
    volume = [(1, "config"), (2, [(19, [(1, [(1, "settings")]), (3, 0o644)])])]
    spec = [(1, volume), (2, container), (3, "Always"), (4, 0)]  # terminationGrace...: a pointer

    assert decode(body("v1", "Pod", [(1, META), (2, spec)])) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            # VolumeSource and LocalObjectReference are embedded, inline in JSON
            "volumes": [{"name": "config", "configMap": {"name": "settings", "defaultMode": 420}}],
            "containers": [
                {
                    "name": "web",
                    "image": "nginx",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [
                        {
                            "name": "MODE",
                            "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}},
                        }
                    ],
                    "resources": {"limits": {"cpu": "500m"}},
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
        },
    }


def test_maps_keep_empty_values_and_bytes_are_base64() -> None:
    cm = decode(
        body("v1", "ConfigMap", [(1, META), (2, entry("empty", "")), (3, entry("b", b"\x00\xff"))])
    )
    assert cm["data"] == {"empty": ""}
    assert cm["binaryData"] == {"b": "AP8="}


def test_int_or_string_times_and_negative_numbers() -> None:
    port = [(3, 80), (4, [(1, 1), (2, 0), (3, "http")])]  # targetPort: the string form
    created = [(1, 1_700_000_000), (2, 0)]
    svc = decode(body("v1", "Service", [(1, [(1, "s"), (8, created)]), (2, [(1, port)])]))
    assert svc["spec"]["ports"] == [{"port": 80, "targetPort": "http"}]
    assert svc["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    deployment = decode(body("apps/v1", "Deployment", [(1, META), (2, [(6, -1)])]))
    assert deployment["spec"] == {"revisionHistoryLimit": -1}


def test_delete_options_under_any_group_version() -> None:
    opts = decode(body("apps/v1", "DeleteOptions", [(4, "Foreground")]))
    assert opts == {
        "apiVersion": "apps/v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
    }


def test_custom_resources_are_not_decoded() -> None:
    with pytest.raises(UnsupportedKind, match="Widget in example.com/v1"):
        decode(body("example.com/v1", "Widget", [(1, META)]))


@pytest.mark.parametrize(
    "data",
    [
        b"{}",  # JSON under the protobuf content type
        b"k8s\x00\x0a\xff",  # a length past the end
        b"k8s\x00\x0f",  # wire type 7
        body("v1", "ConfigMap", [(1, 5)]),  # a number where metadata (a message) belongs
        body("v1", "ConfigMap", [(1, [(8, [(1, 10**18)])])]),  # a time the platform cannot hold
    ],
)
def test_a_malformed_body_is_an_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_embedded_objects_in_json_or_protobuf() -> None:
    # ControllerRevision{metadata: 1, data: 2 (RawExtension{raw: 1}), revision: 3}
    as_json = [(1, META), (2, [(1, b'{"spec": {"a": 1}}')]), (3, 2)]
    assert decode(body("apps/v1", "ControllerRevision", as_json))["data"] == {"spec": {"a": 1}}
    inner = body("v1", "ConfigMap", [(1, [(1, "x")])])
    as_protobuf = [(1, META), (2, [(1, inner)]), (3, 2)]
    embedded = decode(body("apps/v1", "ControllerRevision", as_protobuf))["data"]
    assert embedded == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}


def test_json_names_come_from_the_go_fields_where_the_proto_names_differ() -> None:
    # ValidatingWebhookConfiguration{webhooks: 2} is "Webhooks" in generated.proto
    hook = [(1, "check.example.com"), (6, "None")]
    config = decode(
        body(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            [(1, [(1, "checks")]), (2, hook)],
        )
    )
    assert config["webhooks"] == [{"name": "check.example.com", "sideEffects": "None"}]


def test_every_served_built_in_kind_but_crds_has_a_schema() -> None:
    from mcruntime.envtest._registry import BUILTINS

    missing = {f"{r.api_version} {r.kind}" for r in BUILTINS if not _decodes(r.api_version, r.kind)}
    # apiextensions' types live in another repository: CRDs stay JSON and YAML in envtest
    assert missing == {"apiextensions.k8s.io/v1 CustomResourceDefinition"}


def _decodes(api_version: str, kind: str) -> bool:
    try:
        decode(body(api_version, kind, []))
    except UnsupportedKind:
        return False
    return True
