"""Self reviews: who the caller is (``kubectl auth whoami``) and whether it may act (``kubectl auth can-i``).

Reviews are answered, never stored.
"""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from ._support import raw

pytestmark = pytest.mark.timeout(30)


def test_a_self_subject_review_names_the_caller(api: ApiClient) -> None:
    resp = raw(
        api,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert resp.status == 201, resp.data
    review = resp.json()
    assert review["kind"] == "SelfSubjectReview"
    user = review["status"]["userInfo"]
    assert user["username"] and "system:authenticated" in user["groups"]


def test_a_self_subject_access_review_answers_for_the_caller(api: ApiClient, ns: str) -> None:
    # the conformance credentials may create ConfigMaps (every other test does)
    spec = {"resourceAttributes": {"namespace": ns, "verb": "create", "resource": "configmaps"}}
    resp = raw(
        api,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": spec,
        },
    )
    assert resp.status == 201, resp.data
    review = resp.json()
    assert review["status"]["allowed"] is True
    assert review["spec"]["resourceAttributes"]["resource"] == "configmaps"


def test_reviews_are_not_stored(api: ApiClient) -> None:
    resp = raw(api, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert resp.status == 405, resp.data
