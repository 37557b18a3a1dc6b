"""Naming kinds: strings, classes and GroupVersionKinds all name the same kind; mapping paths."""

from __future__ import annotations

from typing import ClassVar

import pytest
from kubernetes.client import CoreV1Event, EventsV1Event, V1ConfigMap, V1Deployment, V1Lease

from mcruntime.client import GroupVersionKind, Resource, RESTMapping, kind_of


@pytest.mark.parametrize(
    ("text", "gvk"),
    [
        ("v1/ConfigMap", GroupVersionKind("", "v1", "ConfigMap")),
        ("apps/v1/Deployment", GroupVersionKind("apps", "v1", "Deployment")),
        ("example.com/v1alpha1/Widget", GroupVersionKind("example.com", "v1alpha1", "Widget")),
    ],
)
def test_parse_and_str_round_trip(text: str, gvk: GroupVersionKind) -> None:
    assert GroupVersionKind.parse(text) == gvk
    assert str(gvk) == text
    assert kind_of(text) == gvk


def test_api_version_of_core_and_named_groups() -> None:
    assert GroupVersionKind("", "v1", "Pod").api_version == "v1"
    assert GroupVersionKind("apps", "v1", "Deployment").api_version == "apps/v1"
    assert GroupVersionKind.from_api_version("apps/v1", "Deployment") == kind_of(
        "apps/v1/Deployment"
    )


@pytest.mark.parametrize("bad", ["ConfigMap", "", "a/b/c/d", "apps/Deployment", "v1/", "Apps/v1/X"])
def test_bad_strings_name_the_input_and_the_accepted_forms(bad: str) -> None:
    with pytest.raises(ValueError) as err:
        kind_of(bad)
    assert repr(bad) in str(err.value)
    assert "apps/v1/Deployment" in str(err.value)


def test_bare_kind_name_gets_a_suggestion() -> None:
    with pytest.raises(ValueError, match="did you mean 'apps/v1/Deployment'"):
        kind_of("Deployment")


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("apps/v1, Kind=Deployment", "apps/v1/Deployment"),  # Go's GroupVersionKind.String()
        ("/v1, Kind=Pod", "v1/Pod"),
        ("Deployment.v1.apps", "apps/v1/Deployment"),  # kubectl's kind.version.group
        ("Widget.v1alpha1.example.com", "example.com/v1alpha1/Widget"),
    ],
)
def test_go_and_kubectl_spellings_get_a_suggestion(text: str, meant: str) -> None:
    with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
        kind_of(text)


def test_model_classes_name_their_group() -> None:
    assert kind_of(V1ConfigMap) == GroupVersionKind("", "v1", "ConfigMap")
    assert kind_of(V1Deployment) == GroupVersionKind("apps", "v1", "Deployment")
    assert kind_of(V1Lease) == GroupVersionKind("coordination.k8s.io", "v1", "Lease")
    assert kind_of(CoreV1Event) == GroupVersionKind("", "v1", "Event")
    assert kind_of(EventsV1Event) == GroupVersionKind("events.k8s.io", "v1", "Event")


def test_create_only_model_classes_name_their_kind() -> None:
    from kubernetes.client import AuthenticationV1TokenRequest, V1SelfSubjectAccessReview

    assert kind_of(AuthenticationV1TokenRequest) == GroupVersionKind(
        "authentication.k8s.io", "v1", "TokenRequest"
    )
    assert kind_of(V1SelfSubjectAccessReview).group == "authorization.k8s.io"


def test_model_class_that_is_not_a_kind_is_rejected() -> None:
    from kubernetes.client import StorageV1TokenRequest, V1beta1ParamRef, V1ObjectMeta

    with pytest.raises(ValueError, match="V1ObjectMeta.*such as '<group>/v1/ObjectMeta'"):
        kind_of(V1ObjectMeta)
    # a group's name before the version is not part of the suggested version
    with pytest.raises(ValueError, match="such as '<group>/v1/TokenRequest'"):
        kind_of(StorageV1TokenRequest)
    with pytest.raises(ValueError, match="such as '<group>/v1beta1/ParamRef'"):
        kind_of(V1beta1ParamRef)


def test_resource_subclass_names_its_kind() -> None:
    class Widget(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Widget"

    assert kind_of(Widget) == GroupVersionKind("example.com", "v1", "Widget")
    with pytest.raises(ValueError, match="api_version and kind"):
        kind_of(Resource)
    with pytest.raises(ValueError, match="int"):
        kind_of(int)


def test_gvk_is_accepted_as_is_and_as_tuple() -> None:
    gvk = GroupVersionKind("apps", "v1", "Deployment")
    assert kind_of(gvk) is gvk
    assert kind_of(("apps", "v1", "Deployment")) == gvk


def _mapping(group: str, namespaced: bool) -> RESTMapping:
    kind = "Deployment" if group else "ConfigMap"
    resource = "deployments" if group else "configmaps"
    return RESTMapping(GroupVersionKind(group, "v1", kind), resource, namespaced)


def test_paths_of_namespaced_kinds() -> None:
    cm = _mapping("", True)
    assert cm.path() == "/api/v1/configmaps"
    assert cm.path("ns") == "/api/v1/namespaces/ns/configmaps"
    assert cm.path("ns", "web") == "/api/v1/namespaces/ns/configmaps/web"
    assert cm.path("ns", "web", "status") == "/api/v1/namespaces/ns/configmaps/web/status"
    assert _mapping("apps", True).path() == "/apis/apps/v1/deployments"
    assert _mapping("apps", True).path("a", "b") == "/apis/apps/v1/namespaces/a/deployments/b"


def test_paths_of_cluster_scoped_kinds_ignore_the_namespace() -> None:
    ns = RESTMapping(GroupVersionKind("", "v1", "Namespace"), "namespaces", False)
    assert ns.path("x", "prod") == "/api/v1/namespaces/prod"


def test_path_segments_are_escaped_and_subresource_needs_a_name() -> None:
    cm = _mapping("", True)
    assert cm.path("ns", "system:a b") == "/api/v1/namespaces/ns/configmaps/system%3Aa%20b"
    with pytest.raises(ValueError, match="invalid resource name 'a/b': may not contain '/'"):
        cm.path("ns", "a/b")
    with pytest.raises(ValueError):
        cm.path("ns", None, "status")
    with pytest.raises(ValueError):
        cm.path("ns", "")


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("v1/configmaps", "v1/ConfigMap"),
        ("v1/configmap", "v1/ConfigMap"),
        ("apps/v1/deployments", "apps/v1/Deployment"),
        ("networking.k8s.io/v1/networkpolicies", "networking.k8s.io/v1/NetworkPolicy"),
        ("networking.k8s.io/v1/ingresses", "networking.k8s.io/v1/Ingress"),
    ],
)
def test_a_built_in_resource_s_name_for_its_kind_gets_a_suggestion(text: str, meant: str) -> None:
    # never served as a kind: a controller for it would wait for it in vain, silently
    with pytest.raises(
        ValueError, match=f"is a resource's name, not its kind .did you mean '{meant}'"
    ):
        kind_of(text)


def test_a_lower_case_kind_of_another_group_is_read_as_written() -> None:
    # a CRD may name its kind so (the server checks only its lower-case form)
    assert kind_of("example.com/v1/widgets") == GroupVersionKind("example.com", "v1", "widgets")
