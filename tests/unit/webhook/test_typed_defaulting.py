"""A typed defaulting handler patches what the defaulter changed, never what the type's
round trip alone changes (the code path the webhook server runs for each review)."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

import pytest
from pydantic import AnyUrl

from mcruntime.client import Model, Resource
from mcruntime.webhook import AdmissionRequest, DefaultingHandler

pytestmark = pytest.mark.timeout(10)


class DatabaseSpec(Model):
    host: str
    replicas: int | None = None
    endpoint: AnyUrl | None = None
    id: uuid.UUID | None = None


class Database(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Database"
    spec: DatabaseSpec


SENT: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Database",
    "metadata": {"name": "db", "namespace": "default"},
    "spec": {
        "host": "pg",
        "endpoint": "https://db.example.com",
        "id": "0E5C1DA0-7C7C-4B8B-9D5E-7F9C7E3C1A2B",
    },
}


def review(obj: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest.from_review(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "1",
                "operation": "CREATE",
                "kind": {"group": "example.com", "version": "v1", "kind": "Database"},
                "resource": {"group": "example.com", "version": "v1", "resource": "databases"},
                "name": "db",
                "namespace": "default",
                "object": obj,
            },
        }
    )


def patch_of(handler: DefaultingHandler) -> list[dict[str, Any]]:
    response = handler.handle(review(SENT))
    assert response.allowed
    return response.patch


def test_a_defaulter_with_nothing_to_do_answers_an_empty_patch() -> None:
    assert patch_of(DefaultingHandler(Database, lambda request, db: None)) == []


def test_only_the_defaulters_changes_are_patched() -> None:
    def default(request: AdmissionRequest, db: Database) -> None:
        db.spec.replicas = 3

    assert patch_of(DefaultingHandler(Database, default)) == [
        {"op": "add", "path": "/spec/replicas", "value": 3}
    ]
