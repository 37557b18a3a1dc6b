"""Generate ``mcruntime/envtest/_protobuf_schema.json`` from Kubernetes' ``generated.proto`` files.

envtest decodes the protobuf request bodies that Go clients send for built-in
kinds (kubectl 1.33's ``create`` subcommands, client-go clientsets,
controller-runtime). The wire format carries field numbers only; this table
gives each message's fields their JSON names (the Go field's ``json`` tag;
go-to-protobuf names most proto fields after it) and types. It is data about
the wire format of the Kubernetes API (Apache-2.0), read from the
``kubernetes/api`` and ``kubernetes/apimachinery`` repositories:

    python tools/gen_envtest_protobuf.py API_CHECKOUT APIMACHINERY_CHECKOUT
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: the API group versions envtest serves, by directory of kubernetes/api
API_GROUPS = (
    "core/v1",
    "apps/v1",
    "batch/v1",
    "rbac/v1",
    "networking/v1",
    "coordination/v1",
    "events/v1",
    "discovery/v1",
    "admissionregistration/v1",
    "autoscaling/v1",  # Scale, of the /scale subresource; HorizontalPodAutoscaler v1
    "autoscaling/v2",  # HorizontalPodAutoscaler (kubectl autoscale)
    "policy/v1",  # PodDisruptionBudget; Eviction (the pods/eviction subresource, kubectl drain)
    "policy/v1beta1",  # Eviction as older clients send it (the subresource takes both versions)
    "scheduling/v1",  # PriorityClass
    "authentication/v1",  # SelfSubjectReview (kubectl auth whoami), TokenRequest
    "authorization/v1",  # SelfSubjectAccessReview, SelfSubjectRulesReview (kubectl auth can-i)
    "certificates/v1",  # CertificateSigningRequest (kubectl certificate approve)
    "storage/v1",  # StorageClass, CSIDriver, CSINode, VolumeAttachment
    "node/v1",  # RuntimeClass
)
APIMACHINERY = (
    "pkg/apis/meta/v1",
    "pkg/api/resource",
    "pkg/util/intstr",
    "pkg/runtime",
)
SCALARS = {"string": "s", "bytes": "y", "int32": "i", "int64": "i", "bool": "b"}
OUT = Path(__file__).resolve().parents[1] / "mcruntime" / "envtest" / "_protobuf_schema.json"

_PACKAGE = re.compile(r"^package\s+([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)", re.M)
_MAP = re.compile(r"^\s*map<\s*([\w.]+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)", re.M)


def _type(name: str, package: str) -> str:
    if name in SCALARS:
        return SCALARS[name]
    return name.lstrip(".") if "." in name else f"{package}.{name}"


def parse(text: str, schema: dict[str, dict[str, list[object]]]) -> None:
    package = _PACKAGE.search(text)
    assert package is not None
    pkg = package.group(1)
    for msg in _MESSAGE.finditer(text):
        body = re.sub(r"//[^\n]*", "", msg.group(2))
        fields: dict[str, list[object]] = {}
        for label, typ, name, num in _FIELD.findall(body):
            fields[num] = [name, _type(typ, pkg), int(label == "repeated"), None]
        for key, value, name, num in _MAP.findall(body):
            fields[num] = [name, _type(value, pkg), 2, _type(key, pkg)]
        schema[f"{pkg}.{msg.group(1)}"] = fields


_STRUCT = re.compile(r"^type\s+(\w+)\s+struct\s*\{(.*?)^\}", re.M | re.S)
_TAGGED = re.compile(r"^\s*([^`/]+?)\s*`([^`]*protobuf:\"\w+,(\d+),[^`]*)`", re.M)
#: ``type ResourceList map[ResourceName]resource.Quantity``: a named type that is no struct
_NAMED = re.compile(r"^type\s+(\w+)\s+([^\s{(]+)\s*$", re.M)
_IMPORT = re.compile(r'^\s*(?:(\w+)\s+)?"([\w./-]+)"\s*$', re.M)
_IMPORTS = re.compile(r"^import\s*(?:\((.*?)^\)|(.*?)$)", re.M | re.S)
_IDENT = re.compile(r"[A-Za-z_][\w.]*")
#: Go's predeclared types, as reflect names them (``byte`` is ``uint8``)
_PREDECLARED = {"byte": "uint8", "rune": "int32"}


def _go_type(expr: str, package: str, imports: dict[str, str]) -> str:
    """A Go type expression of a struct field as ``reflect.Type.String()`` prints it:
    package-local names qualified by the package's name (``[]Container`` is
    ``[]v1.Container``), import aliases by the imported package's (``metav1.Time`` is
    ``v1.Time``), ``byte`` as ``uint8``."""

    def name(m: re.Match[str]) -> str:
        ident = m.group(0)
        if "." in ident:
            alias, _, rest = ident.partition(".")
            return f"{imports.get(alias, alias)}.{rest}"
        if ident[0].isupper():
            return f"{package}.{ident}"
        return _PREDECLARED.get(ident, ident)

    return _IDENT.sub(name, expr)


def _item_type(go_type: str, named: dict[str, str]) -> str:
    """The type of the items of list or map type ``go_type`` (a local named type through its
    declaration), without the pointer reflect looks through; "" when it is neither."""
    go_type = named.get(go_type.lstrip("*"), go_type.lstrip("*"))
    if go_type.startswith("[]"):
        return go_type[2:].lstrip("*")
    if go_type.startswith("map["):
        depth = 0
        for i, c in enumerate(go_type):
            depth += (c == "[") - (c == "]")
            if c == "]" and depth == 0:
                return go_type[i + 1 :].lstrip("*")
    return ""


def _go_file(text: str) -> tuple[str, dict[str, str]]:
    """The package name of a Go file and its imports: alias (or last path element) -> the
    imported package's name (the last element of its path, as in Kubernetes' packages)."""
    package = re.search(r"^package\s+(\w+)", text, re.M)
    assert package is not None
    imports: dict[str, str] = {}
    for block, single in _IMPORTS.findall(text):
        for alias, path in _IMPORT.findall(block or single):
            last = path.rsplit("/", 1)[-1]
            imports[alias or last] = last
    return package.group(1), imports


def mark_go_fields(directory: Path, schema: dict[str, dict[str, list[object]]]) -> None:
    """Append to each field what its Go field says: pointer (1 or 0), inline in JSON (1 or 0),
    its Go type and the Go type of its items (a list's or map's, else ""), as
    ``reflect.Type.String()`` prints them.

    Go's protobuf encoder writes every non-pointer field, zero or not, where
    JSON omits the zero ones; a pointer field is written only when set, and
    then its zero value counts (``replicas: 0``). An embedded struct is a field
    of its own in protobuf, and its fields are the parent's in JSON when it has
    no JSON name (``Volume.VolumeSource``, ``IngressRule.IngressRuleValue``).
    """
    package = _PACKAGE.search((directory / "generated.proto").read_text())
    assert package is not None
    sources = [
        g.read_text() for g in sorted(directory.glob("*.go")) if not g.name.endswith("_test.go")
    ]
    named: dict[str, str] = {}
    for text in sources:
        go_package, imports = _go_file(text)
        for type_name, underlying in _NAMED.findall(text):
            named[f"{go_package}.{type_name}"] = _go_type(underlying, go_package, imports)
    for text in sources:
        go_package, imports = _go_file(text)
        for struct in _STRUCT.finditer(text):
            fields = schema.get(f"{package.group(1)}.{struct.group(1)}")
            if fields is None:
                continue
            for decl, tag, number in _TAGGED.findall(struct.group(2)):
                spec = fields.get(number)
                if spec is not None and len(spec) == 4:
                    json_tag = re.search(r'json:"([^",]*)', tag)
                    json_name = json_tag.group(1) if json_tag else ""
                    if json_name not in ("", "-"):
                        spec[0] = json_name  # a few proto names differ (``Webhooks``, ``aPIGroup``)
                    embedded = len(decl.split()) == 1
                    inline = embedded and not json_name
                    go_type = _go_type(decl.split()[-1], go_package, imports)
                    spec += [int(decl.split()[-1].startswith("*")), int(inline)]
                    spec += [go_type.lstrip("*"), _item_type(go_type, named)]


def main(argv: list[str]) -> int:
    api, apimachinery = (Path(a) for a in argv)
    schema: dict[str, dict[str, list[object]]] = {}
    dirs = [api / gv for gv in API_GROUPS] + [apimachinery / p for p in APIMACHINERY]
    for directory in dirs:
        parse((directory / "generated.proto").read_text(), schema)
    for directory in dirs:
        mark_go_fields(directory, schema)
    for fields in schema.values():
        for spec in fields.values():
            if len(spec) == 4:
                spec += [0, 0, "", ""]  # no Go field found (a custom marshaller): a plain value
    OUT.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {len(schema)} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
