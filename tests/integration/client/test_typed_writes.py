"""Typed writes keep what was stored: a pydantic Resource read, changed and written back
through the embedded server (CRDs generated from the models)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from ipaddress import IPv6Address
from typing import Annotated, Any, ClassVar, Literal

import pytest
from pydantic import AnyUrl, Field, SecretBytes, SecretStr, computed_field

from mcruntime.client import Client, Model, ObjectMeta, Resource, to_typed
from mcruntime.crd import ListType, Nullable, install_crds
from mcruntime.errors import Invalid, ObjectNotTyped

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


@pytest.fixture(scope="module")
def kinds(client: Client) -> None:
    install_crds(client, [Database, App, Quota, Job, Server, Pool, Link, Probe, Tiered], timeout=20)


class AppSpec(Model):
    image: str
    replicas: int = 1
    paused: bool = False


class AppStatus(Model):
    observed_generation: int | None = None
    phase: str = "Pending"


class App(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "App"
    spec: AppSpec
    status: AppStatus | None = None


class QuotaSpec(Model):
    image: str
    limit: Annotated[int | None, Nullable] = 10  # null: unlimited; absent: 10


class Quota(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Quota"
    spec: QuotaSpec


class QuotaOldSpec(Model):
    image: str


class QuotaOld(Resource):
    """Quota as an older release knows it: without ``limit``."""

    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Quota"
    spec: QuotaOldSpec


class JobSpec(Model):
    image: str
    token: str = Field(default_factory=lambda: uuid.uuid4().hex)
    since: datetime = Field(default_factory=lambda: datetime.now(UTC))
    labels: dict[str, str] = Field(default_factory=dict)


class Job(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Job"
    spec: JobSpec


class Port(Model):
    container_port: int
    protocol: str = "TCP"


class ServerSpec(Model):
    ports: Annotated[list[Port], ListType("map", keys=("container_port", "protocol"))]


class Server(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Server"
    spec: ServerSpec


class PoolSpec(Model):
    hosts: list[str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def host_count(self) -> int:
        return len(self.hosts)


class Pool(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Pool"
    spec: PoolSpec


class LinkSpec(Model):
    url: AnyUrl
    id: uuid.UUID
    ip: IPv6Address
    when: datetime
    ratio: float
    zones: set[str]
    replicas: int = 1


class Link(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Link"
    spec: LinkSpec


class ProbeSpec(Model):
    interval: timedelta = timedelta(seconds=30)


class Probe(Resource):
    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Probe"
    spec: ProbeSpec


class TierSpec(Model):
    tier: str


class Tiered(Resource):
    """The newer release's model, whose CRD is installed."""

    api_version: ClassVar[str] = "typed.example.com/v1"
    kind: ClassVar[str] = "Tiered"
    spec: TierSpec


class OldTierSpec(Model):
    tier: Literal["gold", "silver"]


class OldTiered(Tiered):
    """An older release's model: the newer one added the tier ``platinum``."""

    spec: OldTierSpec


def create_stored(
    client: Client, cls: type[Resource], name: str, ns: str, spec: dict[str, Any]
) -> None:
    """Create an object as another writer would: a dict, as given."""
    body = {"apiVersion": cls.api_version, "kind": cls.kind, "spec": spec}
    client.create({**body, "metadata": {"name": name, "namespace": ns}})


def stored(client: Client, cls: type[Resource], name: str, ns: str) -> dict[str, Any]:
    return client.get(str(cls.gvk()), name, ns)


def test_secret_fields_are_written_with_their_value_and_kept_on_update(
    client: Client, ns: str, kinds: None
) -> None:
    create_stored(
        client, Database, "read", ns, {"host": "pg", "password": "hunter2", "token": "t0k"}
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


def test_a_typed_patch_sends_only_the_fields_set_not_the_model_defaults(
    client: Client, ns: str, kinds: None
) -> None:
    kind = str(App.gvk())
    create_stored(client, App, "p", ns, {"image": "x", "replicas": 5, "paused": True})
    client.patch_status(kind, "p", {"status": {"phase": "Running"}}, ns)
    meta = ObjectMeta(name="p", namespace=ns)
    client.patch(App, "p", App(metadata=meta, spec=AppSpec(image="y")), ns)
    status = AppStatus(observed_generation=2)
    client.patch_status(App, "p", App(metadata=meta, spec=AppSpec(image="y"), status=status), ns)
    after = stored(client, App, "p", ns)
    assert after["spec"] == {"image": "y", "replicas": 5, "paused": True}
    assert after["status"] == {"phase": "Running", "observedGeneration": 2}


def test_a_null_read_or_assigned_is_written_as_null_not_replaced_by_the_default(
    client: Client, ns: str, kinds: None
) -> None:
    create_stored(client, Quota, "n", ns, {"image": "nginx", "limit": None})
    for cls in (Quota, QuotaOld):  # a declared field, and an extra of an older model
        obj = client.get(cls, "n", ns)
        obj.spec.image = f"nginx:{cls.__name__}"
        client.update(obj)
        assert stored(client, Quota, "n", ns)["spec"] == {
            "image": f"nginx:{cls.__name__}",
            "limit": None,
        }
    meta = ObjectMeta(name="built", namespace=ns)
    client.create(Quota(metadata=meta, spec=QuotaSpec(image="nginx", limit=None)))
    assert stored(client, Quota, "built", ns)["spec"] == {"image": "nginx", "limit": None}
    meta = ObjectMeta(name="default", namespace=ns)
    client.create(Quota(metadata=meta, spec=QuotaSpec(image="nginx")))
    assert stored(client, Quota, "default", ns)["spec"] == {"image": "nginx", "limit": 10}


def test_default_factory_values_are_not_written_back_nor_applied(
    client: Client, ns: str, kinds: None
) -> None:
    kind = str(Job.gvk())
    create_stored(client, Job, "f", ns, {"image": "nginx"})
    client.update(client.get(Job, "f", ns))  # read and written back unchanged
    after = stored(client, Job, "f", ns)
    assert after["spec"] == {"image": "nginx"}
    assert after["metadata"]["generation"] == 1
    job = client.get(Job, "f", ns)
    job.spec.labels["team"] = "a"  # a factory default changed in place is written
    client.update(job)
    assert stored(client, Job, "f", ns)["spec"] == {"image": "nginx", "labels": {"team": "a"}}
    for _ in range(2):
        client.apply(
            Job(metadata=ObjectMeta(name="a", namespace=ns), spec=JobSpec(image="nginx")),
            field_manager="op",
        )
    applied = client.get(kind, "a", ns)
    assert applied["spec"] == {"image": "nginx"}
    assert applied["metadata"]["generation"] == 1


def test_a_list_map_keyed_by_python_field_names_keeps_items_apart(
    client: Client, ns: str, kinds: None
) -> None:
    ports = [Port(container_port=80), Port(container_port=443)]
    client.create(Server(metadata=ObjectMeta(name="s", namespace=ns), spec=ServerSpec(ports=ports)))
    assert stored(client, Server, "s", ns)["spec"]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"},
        {"containerPort": 443, "protocol": "TCP"},
    ]


def test_computed_fields_are_not_written(client: Client, ns: str, kinds: None) -> None:
    pool = Pool(metadata=ObjectMeta(name="p", namespace=ns), spec=PoolSpec(hosts=["a", "b"]))
    client.apply(pool, field_manager="op")  # the CRD has no hostCount: an apply would fail
    client.update(client.get(Pool, "p", ns))
    assert stored(client, Pool, "p", ns)["spec"] == {"hosts": ["a", "b"]}


def test_values_the_model_normalises_are_written_back_as_read(
    client: Client, ns: str, kinds: None
) -> None:
    spec = {
        "url": "https://EXAMPLE.com/a?b=c d",
        "id": "0E5C1DA0-7C7C-4B8B-9D5E-7F9C7E3C1A2B",
        "ip": "2001:DB8::0001",
        "when": "2024-01-01T00:00:00.123456789Z",
        "ratio": 9007199254740993,
        "zones": ["us-2a", "eu-1b", "eu-1a", "eu-1c"],
    }
    create_stored(client, Link, "l", ns, spec)
    client.update(client.get(Link, "l", ns))  # unchanged: a no-op
    assert stored(client, Link, "l", ns)["metadata"]["generation"] == 1
    link = client.get(Link, "l", ns)
    link.spec.replicas = 2
    client.update(link)
    assert stored(client, Link, "l", ns)["spec"] == {**spec, "replicas": 2}
    link = client.get(Link, "l", ns)
    link.spec.zones.add("eu-1d")  # changed: written in one order in every process
    client.update(link)
    zones = ["eu-1a", "eu-1b", "eu-1c", "eu-1d", "us-2a"]
    assert stored(client, Link, "l", ns)["spec"] == {**spec, "replicas": 2, "zones": zones}


def test_a_duration_the_model_cannot_read_is_refused_naming_the_field(
    client: Client, ns: str, kinds: None
) -> None:
    with pytest.raises(Invalid, match=r"spec\.interval.*should match"):
        create_stored(client, Probe, "go", ns, {"interval": "1m30s"})  # a Go duration
    create_stored(client, Probe, "iso", ns, {"interval": "PT1M30S"})
    probe = client.get(Probe, "iso", ns)
    assert probe.spec.interval == timedelta(seconds=90)
    built = Probe(metadata=ObjectMeta(name="built", namespace=ns), spec=ProbeSpec())
    client.create(built)
    assert client.get(Probe, "built", ns).spec.interval == timedelta(seconds=30)


def test_one_object_that_does_not_fit_fails_the_typed_list_and_the_documented_way_round(
    client: Client, ns: str, kinds: None
) -> None:
    create_stored(client, Tiered, "old", ns, {"tier": "gold"})
    create_stored(client, Tiered, "new", ns, {"tier": "platinum"})
    with pytest.raises(ObjectNotTyped, match="new does not fit OldTiered: spec.tier"):
        client.list(OldTiered, ns)
    fitting = []
    for item in client.list(str(OldTiered.gvk()), ns):  # docs/concepts/errors.md
        try:
            fitting.append(to_typed(item, OldTiered))
        except ObjectNotTyped:
            continue
    assert [t.metadata.name for t in fitting] == ["old"]
