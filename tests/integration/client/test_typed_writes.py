"""Typed writes keep what was stored: a pydantic Resource read, changed and written back
through the embedded server (CRDs generated from the models)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import SecretBytes, SecretStr

from mcruntime.client import Client, Model, ObjectMeta, Resource, RESTMapper
from mcruntime.crd import generate_crd
from mcruntime.envtest import wait_for
from tests.integration.client.conftest import served

pytestmark = pytest.mark.timeout(30)


class DatabaseSpec(Model):
    host: str
    password: SecretStr
    token: SecretBytes | None = None
    replicas: int = 1


class Database(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Database"
    spec: DatabaseSpec


def _install(client: Client, mapper: RESTMapper, cls: type[Resource]) -> None:
    client.create(generate_crd(cls))
    wait_for(lambda: served(mapper, str(cls.gvk())))


@pytest.fixture(scope="module")
def kinds(client: Client, mapper: RESTMapper) -> None:
    for cls in (Database,):
        _install(client, mapper, cls)


def stored(client: Client, cls: type[Resource], name: str, ns: str) -> dict[str, Any]:
    return client.get(str(cls.gvk()), name, ns)


def test_secret_fields_are_written_with_their_value_and_kept_on_update(
    client: Client, ns: str, kinds: None
) -> None:
    client.create(
        {
            "apiVersion": Database.api_version,
            "kind": "Database",
            "metadata": {"name": "read", "namespace": ns},
            "spec": {"host": "pg", "password": "hunter2", "token": "t0k"},
        }
    )
    db = client.get(Database, "read", ns)
    assert repr(db.spec.password) == "SecretStr('**********')"  # still masked in logs
    db.spec.replicas = 2
    client.update(db)
    assert stored(client, Database, "read", ns)["spec"] == {
        "host": "pg",
        "password": "hunter2",
        "token": "t0k",
        "replicas": 2,
    }
    built = Database(
        metadata=ObjectMeta(name="built", namespace=ns),
        spec=DatabaseSpec(host="pg", password=SecretStr("s3cret")),
    )
    client.create(built)
    assert stored(client, Database, "built", ns)["spec"]["password"] == "s3cret"
    assert client.get(Database, "built", ns).spec.password.get_secret_value() == "s3cret"
