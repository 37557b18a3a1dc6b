"""The structural openAPIV3Schema generated from pydantic Resource classes."""

from __future__ import annotations

import datetime
import decimal
import enum
from typing import Annotated, Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from mcruntime.client import Model, Resource
from mcruntime.crd import (
    CRDError,
    EmbeddedResource,
    ListType,
    Nullable,
    PreserveUnknownFields,
    openapi_schema,
)

pytestmark = pytest.mark.timeout(30)


class Mode(enum.StrEnum):
    """How changes roll out."""

    FAST = "Fast"
    SAFE = "Safe"


class Port(Model):
    """A port the widget listens on."""

    name: str
    port: int = Field(ge=1, le=65535)
    target_port: int | str = 80


class WidgetSpec(Model):
    """What the user wants."""

    replicas: int = Field(1, ge=0, le=100, description="How many widgets run.")
    mode: Mode = Mode.SAFE
    tier: Literal["gold", "silver"] | None = None
    """Service tier; none means best effort."""
    image: str = Field(pattern=r"^[a-z0-9./:-]+$", min_length=1, max_length=253)
    ratio: float = Field(0.5, gt=0, lt=1)
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = []
    labels: dict[str, str] = Field(default_factory=dict)
    template: dict[str, Any] = {}
    anything: Any = None
    tags: set[str] = set()
    primary: Port = Port(name="http", port=8080)
    backup: Port | None = None
    note: Annotated[str | None, Nullable] = None
    extras: Annotated[Port, PreserveUnknownFields] | None = None
    pod: Annotated[dict[str, Any], EmbeddedResource] | None = None


class WidgetStatus(Model):
    ready_replicas: int = 0
    conditions: list[dict[str, Any]] = []


class Widget(Resource):
    """A widget runs replicas of an image."""

    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec
    status: WidgetStatus | None = None


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return openapi_schema(Widget)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        found.append((path, node))
        for k, sub in (node.get("properties") or {}).items():
            found += _walk(sub, f"{path}.{k}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                found += _walk(node[key], f"{path}[{key}]")
    return found


def test_top_level_has_type_meta_an_opaque_metadata_and_the_class_docstring(
    schema: dict[str, Any],
) -> None:
    assert schema["type"] == "object"
    assert schema["description"] == "A widget runs replicas of an image."
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == "string"
    assert schema["properties"]["kind"]["type"] == "string"
    assert schema["required"] == ["spec"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}


def test_schema_is_structural_every_node_typed_no_refs_no_titles_no_null_branches(
    schema: dict[str, Any],
) -> None:
    text = repr(schema)
    for banned in ("$ref", "$defs", "'title'", "'null'", "allOf", "oneOf", "uniqueItems", "const"):
        assert banned not in text, banned
    for path, node in _walk(schema):
        assert (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        ), path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "anyOf" in node:  # only the int-or-string form
            assert node["x-kubernetes-int-or-string"] is True, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path


def test_camel_case_names_required_fields_and_defaults(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["image"]
    assert spec["description"] == "What the user wants."
    assert spec["properties"]["replicas"] == {
        "type": "integer",
        "description": "How many widgets run.",
        "default": 1,
        "minimum": 0,
        "maximum": 100,
    }
    port = spec["properties"]["primary"]
    assert port["default"] == {"name": "http", "port": 8080, "targetPort": 80}
    assert port["required"] == ["name", "port"]
    assert port["properties"]["targetPort"]["default"] == 80
    status = schema["properties"]["status"]["properties"]
    assert status["readyReplicas"] == {"type": "integer", "default": 0}


def test_enums_from_enum_classes_and_literals(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]
    assert props["mode"] == {
        "type": "string",
        "description": "How changes roll out.",
        "default": "Safe",
        "enum": ["Fast", "Safe"],
    }
    assert props["tier"] == {
        "type": "string",
        "description": "Service tier; none means best effort.",
        "enum": ["gold", "silver"],
    }


def test_optional_fields_are_optional_not_nullable_unless_marked(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]
    assert props["backup"]["type"] == "object" and "nullable" not in props["backup"]
    assert "default" not in props["backup"]
    assert props["note"] == {"type": "string", "nullable": True}


def test_string_number_and_list_constraints(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]
    assert props["image"] == {
        "type": "string",
        "maxLength": 253,
        "minLength": 1,
        "pattern": r"^[a-z0-9./:-]+$",
    }
    # JSON schema's numeric exclusive bounds become OpenAPI v3.0 booleans
    assert props["ratio"] == {
        "type": "number",
        "default": 0.5,
        "minimum": 0,
        "exclusiveMinimum": True,
        "maximum": 1,
        "exclusiveMaximum": True,
    }
    assert props["tags"] == {
        "type": "array",
        "default": [],
        "x-kubernetes-list-type": "set",
        "items": {"type": "string"},
    }
    ports = props["ports"]
    assert ports["x-kubernetes-list-type"] == "map"
    assert ports["x-kubernetes-list-map-keys"] == ["name"]
    assert ports["items"]["properties"]["port"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 65535,
    }


def test_int_or_string_open_maps_any_and_markers(schema: dict[str, Any]) -> None:
    props = schema["properties"]["spec"]["properties"]
    target = props["ports"]["items"]["properties"]["targetPort"]
    assert target["x-kubernetes-int-or-string"] is True and "type" not in target
    assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert props["template"] == {
        "type": "object",
        "default": {},
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert props["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["extras"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(props["extras"]["properties"]) == {"name", "port", "targetPort"}
    assert props["pod"]["x-kubernetes-embedded-resource"] is True
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["items"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_plain_pydantic_models_and_inherited_field_docs_work_too() -> None:
    class Base(BaseModel):
        size: int = 1
        """Size in gigabytes."""

    class Volume(Base):
        class_name: str = Field(alias="className")

    class Disk(Resource):
        api_version: ClassVar[str] = "storage.example.com/v1"
        kind: ClassVar[str] = "Disk"
        spec: Volume

    spec = openapi_schema(Disk)["properties"]["spec"]
    assert spec["properties"]["size"]["description"] == "Size in gigabytes."
    assert spec["required"] == ["className"]


class Node(Model):
    children: list[Node] = []


class Tree(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Tree"
    spec: Node


class Shape(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Shape"
    spec: dict[str, int | bool]


class Pair(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Pair"
    spec: tuple[int, str]


class Priced(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Priced"
    spec: dict[str, decimal.Decimal]


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Tree, r"Tree: field spec\.children\[\*\]: model Node contains itself"),
        (Shape, r"Shape: field spec\[\*\]: the union integer \| boolean"),
        (Pair, r"Pair: field spec: tuples have no structural schema"),
        (
            Priced,
            r"Priced: field spec\[\*\]: a Decimal has no structural schema \(pydantic reads it "
            r"from a number or a string\): type it float, or str",
        ),
    ],
)
def test_models_without_a_structural_schema_fail_naming_the_field(
    cls: type[Resource], message: str
) -> None:
    with pytest.raises(CRDError, match=message):
        openapi_schema(cls)


def test_extra_schema_keywords_such_as_cel_rules_pass_through() -> None:
    rules = [{"rule": "self.min <= self.max", "message": "min must not exceed max"}]

    class Range(Model):
        min: int = 0
        max: int = Field(10, json_schema_extra={"x-kubernetes-validations": rules})

    class Ranged(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Ranged"
        spec: Range

    spec = openapi_schema(Ranged)["properties"]["spec"]
    assert spec["properties"]["max"]["x-kubernetes-validations"] == rules


def test_a_fields_cel_rules_add_to_those_of_its_models_class() -> None:
    # controller-gen keeps a type's XValidation rules and its field's: neither replaces the other
    own = [{"rule": "self.min <= self.max", "message": "min must not exceed max"}]
    window_rule = [{"rule": "self.max <= 100", "message": "max at most 100"}]
    spare_rule = [{"rule": "self.max <= 10"}]

    class Range(Model):
        model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": own})
        min: int = 0
        max: int = 5

    class Windows(Model):
        window: Range = Field(Range(), json_schema_extra={"x-kubernetes-validations": window_rule})
        spare: Range | None = Field(
            None, json_schema_extra={"x-kubernetes-validations": spare_rule}
        )
        plain: Range = Range()

    class Windowed(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Windowed"
        spec: Windows

    props = openapi_schema(Windowed)["properties"]["spec"]["properties"]
    assert props["window"]["x-kubernetes-validations"] == own + window_rule
    assert props["spare"]["x-kubernetes-validations"] == own + spare_rule
    assert props["plain"]["x-kubernetes-validations"] == own


class Port(Model):
    container_port: int
    protocol: str = "TCP"


class Exposed(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Exposed"
    spec: dict[str, Annotated[list[Port], ListType("map", keys=("container_port", "protocol"))]]


class Misnamed(Resource):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Misnamed"
    spec: dict[str, Annotated[list[Port], ListType("map", keys=("port",))]]


def test_list_map_keys_name_the_items_fields_on_the_wire_or_fail_naming_the_key() -> None:
    ports = openapi_schema(Exposed)["properties"]["spec"]["additionalProperties"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    with pytest.raises(CRDError, match=r"Misnamed: field spec\[\*\]: ListType\('map'\) key 'port'"):
        openapi_schema(Misnamed)


def test_a_list_map_key_that_may_be_missing_fails_naming_the_key() -> None:
    # kube-apiserver refuses the CRD ("this property is in x-kubernetes-list-map-keys, so it
    # must have a default or be a required property"): the generator says it first
    class Route(Model):
        host: str | None = None
        path: str = "/"

    class Routed(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Routed"
        spec: Annotated[list[Route], ListType("map", keys=("host", "path"))]

    with pytest.raises(
        CRDError,
        match=r"Routed: field spec: ListType\('map'\) key 'host' must be a required field "
        r"or have a default",
    ):
        openapi_schema(Routed)


def test_a_default_factory_s_value_is_not_baked_into_a_parent_s_default() -> None:
    # default_factory means "nothing the server could fill in"; a parent model's default
    # (`= Job()`) must not carry the one value the factory made when the CRD was generated
    # (every object would get the same token, and every generation a different CRD)
    serial = iter(range(100))

    class Step(Model):
        token: str = Field(default_factory=lambda: f"t{next(serial)}")
        size: int = 1

    class JobSpec(Model):
        token: str = Field(default_factory=lambda: f"t{next(serial)}")
        size: int = 1
        first: Step = Step()
        steps: list[Step] = [Step(), Step(token="fixed")]
        named: Step = Step(token="chosen")

    class Job(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Job"
        spec: JobSpec = JobSpec()

    spec = openapi_schema(Job)["properties"]["spec"]
    assert spec["default"] == {
        "size": 1,
        "first": {"size": 1},
        "steps": [{"size": 1}, {"token": "fixed", "size": 1}],
        "named": {"token": "chosen", "size": 1},
    }
    assert "default" not in spec["properties"]["token"]
    assert openapi_schema(Job) == openapi_schema(Job)  # the same CRD every time


def test_a_naive_datetime_default_is_an_error_naming_the_field() -> None:
    # kube-apiserver refuses a date-time without a timezone ("... in body must be of type
    # date-time"), so a CRD with one as a default would be refused at install
    class Window(Model):
        opens: datetime.datetime = datetime.datetime(2024, 1, 1)

    class Windowed(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Windowed"
        spec: Window

    with pytest.raises(CRDError, match=r"Windowed: field spec\.opens: its default "):
        openapi_schema(Windowed)

    class Late(Model):
        opens: datetime.datetime

    class Held(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Held"
        spec: Late = Late(opens=datetime.datetime(2024, 1, 1))

    with pytest.raises(CRDError, match=r"Held: field spec: its default .* at opens"):
        openapi_schema(Held)

    class Aware(Model):
        opens: datetime.datetime = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        local: datetime.datetime = datetime.datetime(
            2024, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        )

    class Fine(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Fine"
        spec: Aware = Aware()

    assert openapi_schema(Fine)["properties"]["spec"]["default"] == {
        "opens": "2024-01-01T00:00:00Z",
        "local": "2024-01-01T00:00:00+02:00",
    }


def test_a_list_type_the_api_server_refuses_fails_naming_the_field() -> None:
    class Item(Model):
        name: str

    class Sets(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Sets"
        spec: Annotated[list[Item], ListType("set")]

    class Mapped(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Mapped"
        spec: Annotated[dict[str, str], ListType("atomic")]

    with pytest.raises(CRDError, match=r"Sets: field spec: ListType\('set'\) holds scalars"):
        openapi_schema(Sets)
    with pytest.raises(
        CRDError, match=r"Mapped: field spec: ListType\('atomic'\) marks a list, and this field"
    ):
        openapi_schema(Mapped)


def test_a_secret_default_is_an_error_naming_the_field() -> None:
    # pydantic writes a SecretStr default as its mask: every object would get "**********"
    # (and the secret itself has no place in a CRD, which whoever may read CRDs reads)
    class Login(Model):
        user: str = "admin"
        password: SecretStr = SecretStr("hunter2")

    class Site(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Site"
        spec: Login

    with pytest.raises(CRDError, match=r"Site: field spec\.password: its default holds a secret"):
        openapi_schema(Site)

    class Held(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Held"
        spec: dict[str, SecretStr] = {"db": SecretStr("hunter2")}

    with pytest.raises(CRDError, match=r"Held: field spec: its default holds a secret at db"):
        openapi_schema(Held)


def test_an_embedded_resource_default_without_its_kind_is_an_error() -> None:
    # kube-apiserver: "default.apiVersion: Required value", "default.kind: Required value"
    class Templated(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Templated"
        spec: Annotated[dict[str, Any], EmbeddedResource] = {}

    with pytest.raises(CRDError, match=r"Templated: field spec: its default \{\} is not a Kub"):
        openapi_schema(Templated)

    class Given(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Given"
        spec: Annotated[dict[str, Any], EmbeddedResource] = {"apiVersion": "v1", "kind": "Pod"}
        other: Annotated[dict[str, Any], EmbeddedResource] = Field(default_factory=dict)

    props = openapi_schema(Given)["properties"]
    assert props["spec"]["default"] == {"apiVersion": "v1", "kind": "Pod"}
    assert "default" not in props["other"]
