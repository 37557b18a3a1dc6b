"""The CRD controllers: validation of a CustomResourceDefinition, its status, what it serves."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcruntime import _json
from mcruntime.envtest import _cel, _cel_rules
from mcruntime.envtest._gofmt import go_string
from mcruntime.envtest._names import now
from mcruntime.envtest._registry import (
    BASE_FIELDS,
    CLUSTER_FIELDS,
    ServedResource,
    version_priority,
)
from mcruntime.envtest._schema import Cause, check_schema, declares_default, default_errors
from mcruntime.envtest._status import Causes, StatusError
from mcruntime.envtest._storage import ResKey

__all__ = [
    "CRDS",
    "CRD_CLEANUP_FINALIZER",
    "check_stored_versions",
    "validate_crd",
    "crd_status",
    "established",
    "name_status",
    "crd_resources",
]

CRDS: ResKey = ("apiextensions.k8s.io", "customresourcedefinitions")
#: what kube-apiserver adds to a CRD being deleted: it holds the CRD until its custom
#: resources are gone
CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def validate_crd(crd: dict[str, Any]) -> dict[str, Any]:
    """The spec of a valid CRD, with defaults filled in; 422 Invalid otherwise."""
    name = crd["metadata"]["name"]
    kind, group = "CustomResourceDefinition", "apiextensions.k8s.io"

    def invalid(field: str, why: str) -> StatusError:
        return StatusError.invalid(kind, name, group, field, why)

    spec = crd.get("spec")
    if not isinstance(spec, dict):
        raise invalid("spec", "Required value")
    crd_group = spec.get("group")
    names = spec.get("names")
    if not isinstance(crd_group, str) or not crd_group:
        raise invalid("spec.group", "Required value")
    if not isinstance(names, dict) or not all(
        isinstance(names.get(k), str) and names[k] for k in ("plural", "kind")
    ):
        raise invalid("spec.names", "Required value: plural and kind are required")
    if name != f"{names['plural']}.{crd_group}":
        raise invalid(
            "metadata.name",
            f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        raise invalid(
            "spec.scope",
            f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        raise invalid(
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        )
    bad_defaults: list[Cause] = []
    for i, v in enumerate(versions):
        field = f"spec.versions[{i}]"
        if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
            raise invalid(f"{field}.name", "Required value: every version needs a name")
        if not isinstance(v.get("subresources") or {}, dict):
            raise invalid(f"{field}.subresources", "Invalid value: must be an object")
        if not isinstance(v.get("selectableFields") or [], list):
            raise invalid(f"{field}.selectableFields", "Invalid value: must be a list")
        schema = v.get("schema")
        if schema is not None:
            if not isinstance(schema, dict):
                raise invalid(f"{field}.schema", "Invalid value: must be an object")
            if schema.get("openAPIV3Schema") is not None:
                why = check_schema(schema["openAPIV3Schema"])
                if why:
                    where, _, detail = why.partition(": ")
                    raise invalid(f"{field}.schema.{where}", detail)
                # every version's, in one refusal, as kube-apiserver aggregates them
                bad_defaults += default_errors(
                    schema["openAPIV3Schema"], f"{field}.schema.openAPIV3Schema"
                )
                _check_rules(crd, schema["openAPIV3Schema"], f"{field}.schema.openAPIV3Schema")
    if bad_defaults:
        raise StatusError.invalid_causes(kind, name, group, bad_defaults)
    for field in ("shortNames", "categories"):
        value = names.get(field)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(x, str) for x in value)
        ):
            raise invalid(f"spec.names.{field}", "Invalid value: must be a list of strings")
    if sum(1 for v in versions if v.get("storage")) != 1:
        raise invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        )
    _check_conversion(kind, name, group, spec.get("conversion"))
    names = {**names}
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    return {
        **spec,
        "names": names,
        "conversion": spec.get("conversion") or {"strategy": "None"},
    }


def _check_conversion(kind: str, name: str, group: str, conversion: Any) -> None:
    """Refuse (422) a conversion kube-apiserver's ``validateCustomResourceConversion`` refuses:
    ``Webhook`` without a webhook or its ``conversionReviewVersions``, a webhook URL that is
    not ``https``, a webhook given with another strategy. Paths are those of the internal
    type kube-apiserver validates (``spec.conversion.webhookClientConfig``)."""
    if conversion is None:
        return
    at = "spec.conversion"
    if not isinstance(conversion, dict):
        raise StatusError.invalid(kind, name, group, at, "Invalid value: must be an object")
    causes = Causes()
    strategy = conversion.get("strategy")
    webhook = conversion.get("webhook")
    webhook = webhook if isinstance(webhook, dict) else {}
    client_config = webhook.get("clientConfig")
    versions = webhook.get("conversionReviewVersions")
    if strategy not in ("None", "Webhook"):
        causes.not_supported(f"{at}.strategy", strategy or "", ("None", "Webhook"))
    elif strategy == "Webhook":
        config = f"{at}.webhookClientConfig"
        if not isinstance(client_config, dict):
            causes.required(config, "required when strategy is set to Webhook")
        elif bool(client_config.get("url")) == bool(client_config.get("service")):
            causes.required(config, "exactly one of url or service is required")
        elif client_config.get("url"):
            scheme = str(client_config["url"]).partition("://")[0]
            if scheme != "https":
                causes.invalid(
                    f"{config}.url",
                    go_string(scheme),
                    "'https' is the only allowed URL scheme; desired format: https://host[/path]",
                )
        if not versions:
            causes.required(f"{at}.conversionReviewVersions")
        elif not isinstance(versions, list) or not {"v1", "v1beta1"} & set(versions):
            causes.invalid(
                f"{at}.conversionReviewVersions",
                _json.dumps(versions).decode(),  # Go's field errors show a list as JSON
                "must include at least one of v1, v1beta1",
            )
    else:
        forbidden = "should not be set when strategy is not set to Webhook"
        if client_config is not None:
            causes.forbidden(f"{at}.webhookClientConfig", forbidden)
        if versions:
            causes.forbidden(f"{at}.conversionReviewVersions", forbidden)
    causes.raise_if_any(kind, name, group)


def check_stored_versions(crd: dict[str, Any]) -> None:
    """Refuse (422) an update whose ``spec.versions`` lost a version of
    ``status.storedVersions``, as kube-apiserver's
    ``ValidateCustomResourceDefinitionStoredVersions`` does: objects may still be stored in
    it until a storage migration drops it from ``status.storedVersions``."""
    declared = {v.get("name") for v in crd["spec"].get("versions") or ()}
    stored = (crd.get("status") or {}).get("storedVersions") or []
    causes = Causes()
    for i, v in enumerate(stored):
        if v not in declared:
            causes.invalid(
                f"status.storedVersions[{i}]",
                f'"{v}"',
                f"missing from spec.versions; {v} was previously a storage version, and must "
                f"remain in spec.versions until a storage migration ensures no data remains "
                f"persisted in {v} and removes {v} from status.storedVersions",
            )
    causes.raise_if_any("CustomResourceDefinition", crd["metadata"]["name"], "apiextensions.k8s.io")


def _check_rules(crd: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    """Refuse (422) a CRD whose CEL rules at ``path`` do not compile; without the CEL
    library, accept them unchecked (and log that once)."""
    if not _cel_rules.has_rules(schema):
        return
    name = crd["metadata"]["name"]
    if not _cel.available():
        _cel_rules.warn_missing_library(name)
        return
    causes = _cel_rules.crd_rule_errors(schema, path)
    if causes:
        raise StatusError.invalid_causes(
            "CustomResourceDefinition", name, "apiextensions.k8s.io", causes
        )


def crd_status(
    crd: dict[str, Any], old: dict[str, Any] | None, group_crds: Iterable[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The status of an accepted CRD: its stored versions, and the names it is given and
    its ``NamesAccepted`` and ``Established`` conditions (`name_status`) among
    ``group_crds``, the other CRDs of its group (``old``: its status before an update)."""
    spec = crd["spec"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    stored = list((old or {}).get("storedVersions") or [])
    if storage not in stored:
        stored.append(storage)
    return {**(old or {}), **name_status(crd, old, group_crds), "storedVersions": stored}


def established(crd: dict[str, Any]) -> bool:
    """Whether the CRD's ``Established`` condition is True (it is served)."""
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )


def _in_use(requested: Any, accepted: Any, used: set[str]) -> str | None:
    """apiextensions' ``equalToAcceptedOrFresh``: why ``requested`` may not be had."""
    if requested == accepted or requested not in used:
        return None
    return f"{go_string(requested)} is already in use"


def name_status(
    crd: dict[str, Any], old: dict[str, Any] | None, group_crds: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    """``acceptedNames`` and ``conditions`` of the CRD as kube-apiserver's naming controller
    (``NamingConditionController.calculateNamesAndConditions``) and establishing controller
    leave them: each of ``spec.names`` is accepted unless another CRD of the group
    (``group_crds``; itself among them is harmless) has it among its accepted names
    (plural, singular and short names one set, kind and list kind another); a conflict is
    ``NamesAccepted=False`` with the reason and message of the last name that conflicts
    (``PluralConflict``, ..., ``ListKindConflict``: ``"FooList" is already in use``), and a
    CRD never established stays so, unserved. One established keeps being so (served with
    the names it had) whatever its new names. envtest establishes a CRD whose names are all
    accepted at once."""
    requested = crd["spec"]["names"]
    before = old or {}
    accepted: dict[str, Any] = dict(before.get("acceptedNames") or {})
    resources: set[str] = set()
    kinds: set[str] = set()
    for other in group_crds:
        names = (other.get("status") or {}).get("acceptedNames") or {}
        resources.update(
            [
                str(names.get("plural") or ""),
                str(names.get("singular") or ""),
                *(str(n) for n in names.get("shortNames") or ()),
            ]
        )
        kinds.update([str(names.get("kind") or ""), str(names.get("listKind") or "")])
    conflict: tuple[str, str] | None = None
    new = dict(accepted)
    for field, reason, used in (
        ("plural", "PluralConflict", resources),
        ("singular", "SingularConflict", resources),
    ):
        why = _in_use(requested.get(field), accepted.get(field), used)
        if why:
            conflict = (reason, why)
        else:
            new[field] = requested.get(field)
    short = list(requested.get("shortNames") or ())
    if short != list(accepted.get("shortNames") or ()):
        mine = set(accepted.get("shortNames") or ())
        errors = list(
            dict.fromkeys(
                why for n in short if n not in mine and (why := _in_use(n, "", resources))
            )
        )
        if errors:
            # utilerrors.NewAggregate's words: one error as it is, more in brackets
            conflict = (
                "ShortNamesConflict",
                errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]",
            )
        else:
            new["shortNames"] = short
    for field, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        why = _in_use(requested.get(field), accepted.get(field), kinds)
        if why:
            conflict = (reason, why)
        else:
            new[field] = requested.get(field)
    if requested.get("categories"):
        new["categories"] = requested["categories"]
    else:
        new.pop("categories", None)
    new.setdefault("plural", "")
    new.setdefault("kind", "")
    new = {k: v for k, v in new.items() if v or k in ("plural", "kind")}
    if conflict is None:
        names_accepted = ("True", "NoConflicts", "no conflicts found")
    else:
        names_accepted = ("False", *conflict)
    conditions = list(before.get("conditions") or ())
    if established({"status": before}):
        establishing = None
    elif conflict is None:
        establishing = ("True", "InitialNamesAccepted", "the initial names have been accepted")
    else:
        establishing = ("False", "NotAccepted", "not all names are accepted")
    conditions = _set_condition(conditions, "NamesAccepted", names_accepted)
    if establishing is not None:
        conditions = _set_condition(conditions, "Established", establishing)
    return {"conditions": conditions, "acceptedNames": new}


def _set_condition(conditions: list[Any], type_: str, value: tuple[str, str, str]) -> list[Any]:
    """``conditions`` with the condition ``type_`` set to (status, reason, message), as
    apiextensions' ``SetCRDCondition`` sets it: in its place, its transition time kept
    while its status stays."""
    status, reason, message = value
    out = list(conditions)
    at = next(
        (i for i, c in enumerate(out) if isinstance(c, dict) and c.get("type") == type_), None
    )
    previous = out[at] if at is not None else {}
    stamp = (
        previous.get("lastTransitionTime")
        if previous.get("status") == status and previous.get("lastTransitionTime")
        else now()
    )
    condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if at is None:
        out.append(condition)
    else:
        out[at] = condition
    return out


def crd_resources(crd: dict[str, Any]) -> list[ServedResource]:
    """The resources (one per served version) a CRD declares."""
    spec = crd["spec"]
    names = spec["names"]
    namespaced = spec["scope"] == "Namespaced"
    schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in spec["versions"]}
    read_defaults: dict[str, dict[str, Any]] = {
        version: schema
        for version, schema in schemas.items()
        if isinstance(schema, dict) and declares_default(schema)
    }
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    webhook = (spec.get("conversion") or {}).get("strategy") == "Webhook"
    out = []
    for v in spec["versions"]:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        # a webhook CRD's other versions are written through `_conversion` in the storage one
        stored_as = (
            None
            if webhook or v["name"] == storage
            else (f"{spec['group']}/{storage}", schemas[storage])
        )
        selectable = {
            f["jsonPath"].lstrip(".")
            for f in v.get("selectableFields") or ()
            if isinstance(f, dict) and isinstance(f.get("jsonPath"), str)
        }
        out.append(
            ServedResource(
                group=spec["group"],
                version=v["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=namespaced,
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in subs,
                generation=True,
                custom=True,
                fields=(BASE_FIELDS if namespaced else CLUSTER_FIELDS) | selectable,
                categories=tuple(names.get("categories") or ()),
                schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                read_defaults=read_defaults or None,
                stored_as=stored_as,
                rules=_cel_rules.build((v.get("schema") or {}).get("openAPIV3Schema")),
                scale=subs["scale"] if isinstance(subs.get("scale"), dict) else None,
                printer_columns=tuple(
                    c for c in v.get("additionalPrinterColumns") or () if isinstance(c, dict)
                ),
                warning=_deprecation(spec, v),
            )
        )
    return out


def _deprecation(spec: dict[str, Any], version: dict[str, Any]) -> str:
    """The warning of a deprecated version: its ``deprecationWarning``, or kube-apiserver's
    default naming the highest served, not deprecated, later version ("" when not deprecated)."""
    if not version.get("deprecated"):
        return ""
    custom = version.get("deprecationWarning")
    if isinstance(custom, str):
        return custom
    name, group, kind = version["name"], spec["group"], spec["names"]["kind"]
    later = [
        v["name"]
        for v in spec["versions"]
        if v.get("served", True)
        and not v.get("deprecated")
        and version_priority(v["name"]) < version_priority(name)
    ]
    message = f"{group}/{name} {kind} is deprecated"
    if later:
        message += f"; use {group}/{min(later, key=version_priority)} {kind}"
    return message
