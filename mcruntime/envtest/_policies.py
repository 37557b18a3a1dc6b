"""ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``), checked and enforced as
kube-apiserver 1.31's ValidatingAdmissionPolicy plugin does (k8s.io/apiserver
``pkg/admission/plugin/policy/validating`` and ``.../generic``).

The API side: `default_policy` and `default_binding` fill in the scheme defaults
(``failurePolicy: Fail``, ``matchPolicy: Equivalent``, empty selectors, rule scopes ``*``,
``parameterNotFoundAction: Deny``); `validate_policy` and `validate_binding` refuse, with
kube-apiserver's causes, what ``pkg/apis/admissionregistration/validation`` refuses most
often (a policy without validations or audit annotations, an expression that does not
compile, a binding without ``policyName`` or with ``validationActions`` Deny and Warn...);
`policy_status` is the status the type-checking controller writes.

The admission side: `Enforcer.check` runs, for a request that admission sees, every
binding whose policy exists, in name order: the policy's ``matchConstraints`` and the
binding's ``matchResources`` (the webhooks' rule matching, `Matcher`), the policy's
``matchConditions``, its ``variables``, then its ``validations``, with ``object``,
``oldObject``, ``request``, ``namespaceObject``, ``params`` and ``variables``. A failed
validation is refused for a ``Deny`` binding with kube-apiserver's Status, warned about for
``Warn``; ``Audit`` has nothing to show (envtest keeps no audit log). An evaluation error,
a missing param, a failed match condition follow ``failurePolicy``.

What is not done: expressions are parsed, not type-checked (the status's ``typeChecking``
has no warnings); there is no cost budget; ``authorizer`` is not declared (an expression
that uses it fails to evaluate); audit annotations are compiled, never published.
Without the CEL library a policy is accepted and not enforced, with one warning in the
log (`warn_missing_library`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from mcruntime._selectors import LabelSelector, SelectorError
from mcruntime.envtest import _cel, _cel_rules
from mcruntime.envtest._gofmt import go_string, go_strings
from mcruntime.envtest._names import name_problems
from mcruntime.envtest._status import Causes, StatusError
from mcruntime.envtest._warnings import warn

if TYPE_CHECKING:
    from mcruntime.envtest._registry import Registry, ServedResource
    from mcruntime.envtest._storage import ObjectStore

__all__ = [
    "BINDINGS",
    "KEYS",
    "POLICIES",
    "Denial",
    "Enforcer",
    "aggregate",
    "check_match_conditions",
    "match_conditions",
    "default_binding",
    "default_policy",
    "policy_status",
    "validate_binding",
    "validate_policy",
]

log = logging.getLogger("mcruntime.envtest")

GROUP: Final = "admissionregistration.k8s.io"
POLICIES: Final = (GROUP, "validatingadmissionpolicies")
BINDINGS: Final = (GROUP, "validatingadmissionpolicybindings")
KEYS: Final = frozenset({POLICIES, BINDINGS})
#: the field manager of the status the type-checking controller writes
STATUS_MANAGER: Final = "validatingadmissionpolicy-status"

_FAILURE_POLICIES: Final = ("Fail", "Ignore")
_MATCH_POLICIES: Final = ("Equivalent", "Exact")
_ACTIONS: Final = ("Audit", "Deny", "Warn")
_REASONS: Final = ("Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized")
_CODES: Final = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}
_IDENT: Final = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_VARIABLE_USE: Final = re.compile(r"\bvariables\.([_a-zA-Z][_a-zA-Z0-9]*)")

# ------------------------------------------------------------------ defaults


def _default_match(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def default_policy(obj: dict[str, Any]) -> None:
    """The v1 scheme's defaults of a ValidatingAdmissionPolicy, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("failurePolicy", "Fail")
    _default_match(spec.get("matchConstraints"))


def default_binding(obj: dict[str, Any]) -> None:
    """The v1 scheme's defaults of a ValidatingAdmissionPolicyBinding, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _default_match(spec.get("matchResources"))
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        ref.setdefault("parameterNotFoundAction", "Deny")


def policy_status(obj: dict[str, Any]) -> dict[str, Any]:
    """The status kube-controller-manager's type checker writes for ``obj``: its generation
    observed, no expression warnings (envtest does not type-check)."""
    return {"observedGeneration": obj["metadata"].get("generation", 1), "typeChecking": {}}


# ------------------------------------------------------------------ validation


def _compile(causes: Causes, field: str, expression: str) -> None:
    """Refuse an expression that does not parse or calls a function kube-apiserver does not
    declare (when the library is there to tell)."""
    if not _cel.available():
        return
    try:
        _cel_rules.checked_calls(expression, _cel.compile_rule(expression))
    except _cel.CompileError as e:
        causes.invalid(field, go_string(expression), f"compilation failed: {e}")


def check_match_conditions(causes: Causes, conditions: Any, at: str) -> None:
    """Refuse the ``matchConditions`` (of a policy or a webhook, at field ``at``) that
    kube-apiserver's ``validateMatchConditions`` refuses most often: a name missing or
    repeated, an expression missing or that does not compile."""
    names: set[str] = set()
    for i, cond in enumerate(conditions or ()):
        item = f"{at}[{i}]"
        cond = cond if isinstance(cond, dict) else {}
        expression = str(cond.get("expression") or "").strip()
        if not expression:
            causes.required(f"{item}.expression")
        else:
            _compile(causes, f"{item}.expression", expression)
        name = str(cond.get("name") or "")
        if not name:
            causes.required(f"{item}.name")
        elif name in names:
            causes.add("FieldValueDuplicate", f"{item}.name", f"Duplicate value: {go_string(name)}")
        names.add(name)


def _check_rule(causes: Causes, rule: Any, at: str) -> None:
    if not isinstance(rule, dict):
        causes.invalid(at, "null", "must be an object")
        return
    for key, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = rule.get(key)
        if not values:
            causes.required(f"{at}.{key}")
        elif len(values) > 1 and "*" in values:
            causes.invalid(
                f"{at}.{key}",
                go_strings(values),
                f"if '*' is present, must not specify other {what}",
            )
    if not rule.get("operations"):
        causes.required(f"{at}.operations")
    resources = rule.get("resources")
    if not resources:
        causes.required(f"{at}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in ("*", "Cluster", "Namespaced"):
        causes.not_supported(f"{at}.scope", scope, ("*", "Cluster", "Namespaced"))


def _check_match(causes: Causes, match: Any, at: str) -> None:
    if not isinstance(match, dict):
        return
    policy = match.get("matchPolicy")
    if policy not in _MATCH_POLICIES:
        causes.not_supported(f"{at}.matchPolicy", policy or "", _MATCH_POLICIES)
    for key in ("namespaceSelector", "objectSelector"):
        sel = match.get(key)
        if sel:
            try:
                LabelSelector.from_label_selector(sel)
            except SelectorError as e:
                causes.invalid(f"{at}.{key}", "null", str(e))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or ()):
            _check_rule(causes, rule, f"{at}.{key}[{i}]")


def validate_policy(obj: dict[str, Any]) -> None:
    """Refuse a (defaulted) ValidatingAdmissionPolicy kube-apiserver's validation refuses."""
    causes = Causes()
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    failure = spec.get("failurePolicy")
    if failure is None:
        causes.required("spec.failurePolicy")
    elif failure not in _FAILURE_POLICIES:
        causes.not_supported("spec.failurePolicy", failure, _FAILURE_POLICIES)
    kind = spec.get("paramKind")
    if isinstance(kind, dict):
        if not kind.get("apiVersion"):
            causes.required("spec.paramKind.apiVersion")
        if not kind.get("kind"):
            causes.required("spec.paramKind.kind")
    match = spec.get("matchConstraints")
    if not isinstance(match, dict):
        causes.required("spec.matchConstraints")
    else:
        _check_match(causes, match, "spec.matchConstraints")
        if not match.get("resourceRules"):
            causes.required("spec.matchConstraints.resourceRules")
    check_match_conditions(causes, spec.get("matchConditions"), "spec.matchConditions")
    for i, var in enumerate(spec.get("variables") or ()):
        at = f"spec.variables[{i}]"
        var = var if isinstance(var, dict) else {}
        name = str(var.get("name") or "")
        if not name.strip():
            causes.required(f"{at}.name", "name is not specified")
        elif not _IDENT.match(name):
            causes.invalid(f"{at}.name", go_string(name), "name is not a valid CEL identifier")
        expression = str(var.get("expression") or "")
        if not expression.strip():
            causes.required(f"{at}.expression", "expression is not specified")
        else:
            _compile(causes, f"{at}.expression", expression)
    validations = spec.get("validations") or []
    audits = spec.get("auditAnnotations") or []
    if not validations and not audits:
        why = "validations or auditAnnotations must contain at least one item"
        causes.required("spec.validations", why)
        causes.required("spec.auditAnnotations", why)
    for i, v in enumerate(validations):
        _check_validation(causes, v if isinstance(v, dict) else {}, f"spec.validations[{i}]")
    keys: set[str] = set()
    for i, a in enumerate(audits):
        at = f"spec.auditAnnotations[{i}]"
        a = a if isinstance(a, dict) else {}
        value = str(a.get("valueExpression") or "").strip()
        if not value:
            causes.required(f"{at}.valueExpression", "valueExpression is not specified")
        else:
            _compile(causes, f"{at}.valueExpression", value)
        key = str(a.get("key") or "")
        if key in keys:
            causes.add("FieldValueDuplicate", f"{at}.key", f"Duplicate value: {go_string(key)}")
        keys.add(key)
    if causes.items:
        raise StatusError.invalid_causes(
            "ValidatingAdmissionPolicy", obj["metadata"]["name"], GROUP, causes.items
        )


def _check_validation(causes: Causes, v: dict[str, Any], at: str) -> None:
    expression = str(v.get("expression") or "")
    if not expression.strip():
        causes.required(f"{at}.expression", "expression is not specified")
    else:
        _compile(causes, f"{at}.expression", expression)
    message_expression = str(v.get("messageExpression") or "")
    if message_expression and not message_expression.strip():
        causes.invalid(
            f"{at}.messageExpression",
            go_string(message_expression),
            "must be non-empty if specified",
        )
    elif message_expression.strip():
        _compile(causes, f"{at}.messageExpression", message_expression)
    message = str(v.get("message") or "")
    if message and not message.strip():
        causes.invalid(
            f"{at}.message", go_string(message), "message must be non-empty if specified"
        )
    elif re.search(r"[\n\r]", message.strip()):
        causes.invalid(f"{at}.message", go_string(message), "message must not contain line breaks")
    reason = v.get("reason")
    if reason is not None and reason not in _REASONS:
        causes.not_supported(f"{at}.reason", reason, _REASONS)


def validate_binding(obj: dict[str, Any]) -> None:
    """Refuse a (defaulted) ValidatingAdmissionPolicyBinding kube-apiserver's validation
    refuses."""
    causes = Causes()
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    policy = spec.get("policyName")
    if not policy:
        causes.required("spec.policyName")
    else:
        for why in name_problems(str(policy), "subdomain"):
            causes.invalid("spec.policyName", go_string(policy), why)
    ref = spec.get("paramRef")
    if isinstance(ref, dict):
        name, selector = ref.get("name"), ref.get("selector")
        if name and selector is not None:
            exclusive = "Forbidden: name and selector are mutually exclusive"
            causes.add("FieldValueForbidden", "spec.paramRef.name", exclusive)
            causes.add("FieldValueForbidden", "spec.paramRef.selector", exclusive)
        if not name and selector is None:
            causes.required("spec.paramRef", "one of name or selector must be specified")
        action = ref.get("parameterNotFoundAction")
        if not action:
            causes.required("spec.paramRef.parameterNotFoundAction")
        elif action not in ("Deny", "Allow"):
            causes.not_supported("spec.paramRef.parameterNotFoundAction", action, ("Deny", "Allow"))
    # "matchResouces": kube-apiserver's own spelling of the field in its errors
    _check_match(causes, spec.get("matchResources"), "spec.matchResouces")
    actions = spec.get("validationActions") or []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        at = f"spec.validationActions[{i}]"
        if action not in _ACTIONS:
            causes.not_supported(at, action, _ACTIONS)
        if action in seen:
            causes.add("FieldValueDuplicate", at, f"Duplicate value: {go_string(action)}")
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        causes.invalid(
            "spec.validationActions",
            go_strings(actions),
            "must not contain both Deny and Warn (repeating the same validation failure "
            "information in the API response and headers serves no purpose)",
        )
    if not seen:
        causes.required("spec.validationActions", "at least one validation action is required")
    if causes.items:
        raise StatusError.invalid_causes(
            "ValidatingAdmissionPolicyBinding", obj["metadata"]["name"], GROUP, causes.items
        )


# ------------------------------------------------------------------ the CEL library


def warn_missing_library(policy: str) -> None:
    """Log, once per policy, that it is not enforced for want of the library."""
    _cel.warn_missing_once(
        f"ValidatingAdmissionPolicy {policy}",
        "is not enforced: envtest evaluates CEL only with a CEL library",
    )


# ------------------------------------------------------------------ enforcement


class Denial(Exception):
    """A policy's refusal, before it is worded for the request (`Enforcer.check`)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.message, self.reason = message, reason


#: ``match(match_resources, rules_required)``: whether the request being admitted matches
#: (a policy's ``matchConstraints`` or a binding's ``matchResources``)
Match = Callable[[dict[str, Any], bool], bool]


class _Decision:
    __slots__ = ("deny", "message", "reason")

    def __init__(self, deny: bool, message: str = "", reason: str = "") -> None:
        self.deny, self.message, self.reason = deny, message, reason


class Enforcer:
    """The policies of one server."""

    def __init__(self, store: ObjectStore, registry: Registry) -> None:
        self.store, self.registry = store, registry

    def active(self) -> bool:
        """Whether any binding exists: only then do requests pay for policies."""
        return any(True for _ in self.store.iter(BINDINGS, ""))

    def _bound(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Every existing policy that some binding names, with its bindings (name order)."""
        by_policy: dict[str, list[dict[str, Any]]] = {}
        for b in sorted(self.store.iter(BINDINGS, ""), key=lambda o: o["metadata"]["name"]):
            name = (b.get("spec") or {}).get("policyName")
            if isinstance(name, str):
                by_policy.setdefault(name, []).append(b)
        for name in sorted(by_policy):
            policy = self.store.get(POLICIES, "", name)
            if policy is not None:
                yield policy, by_policy[name]

    def check(
        self,
        match: Match,
        variables: dict[str, Any],
        namespace: str,
    ) -> None:
        """Run the bound policies on a request (``variables``: ``object``, ``oldObject``,
        ``request`` and ``namespaceObject``; ``namespace`` the request's); raise `Denial`
        for the first refusal, warn for ``Warn`` bindings."""
        if not _cel.available():
            for policy, _ in self._bound():
                warn_missing_library(policy["metadata"]["name"])
            return
        denied: tuple[dict[str, Any], dict[str, Any] | None, _Decision] | None = None
        for policy, bindings in self._bound():
            spec = policy.get("spec") or {}
            fail = spec.get("failurePolicy", "Fail") != "Ignore"
            constraints = spec.get("matchConstraints")
            if not isinstance(constraints, dict) or not match(constraints, True):
                continue
            param_res, config_error = self._param_resource(spec.get("paramKind"))
            if config_error:
                if fail and denied is None:
                    denied = (
                        policy,
                        None,
                        _Decision(True, f"failed to configure policy: {config_error}"),
                    )
                continue
            for binding in bindings:
                bspec = binding.get("spec") or {}
                resources = bspec.get("matchResources")
                if isinstance(resources, dict) and not match(resources, False):
                    continue
                try:
                    params = self._params(
                        param_res, spec.get("paramKind"), bspec.get("paramRef"), namespace
                    )
                except ValueError as e:
                    if fail and denied is None:
                        denied = (
                            policy,
                            binding,
                            _Decision(True, f"failed to configure binding: {e}"),
                        )
                    continue
                actions = bspec.get("validationActions") or []
                for param in params:
                    for decision in _evaluate(spec, {**variables, "params": param}, fail):
                        if not decision.deny:
                            continue
                        if "Deny" in actions and denied is None:
                            denied = (policy, binding, decision)
                        if "Warn" in actions:
                            warn(
                                f"Validation failed for ValidatingAdmissionPolicy "
                                f"'{policy['metadata']['name']}' with binding "
                                f"'{binding['metadata']['name']}': {decision.message}"
                            )
        if denied is not None:
            policy, by_binding, decision = denied
            name = policy["metadata"]["name"]
            if by_binding is not None:
                by = (
                    f"ValidatingAdmissionPolicy '{name}' with binding "
                    f"'{by_binding['metadata']['name']}'"
                )
            else:
                by = f"ValidatingAdmissionPolicy '{name}'"
            raise Denial(f"{by} denied request: {decision.message}", decision.reason or "Invalid")

    def _param_resource(self, kind: Any) -> tuple[ServedResource | None, str]:
        """The resource of a policy's ``paramKind`` (None without one), or why not."""
        if not isinstance(kind, dict):
            return None, ""
        api_version, k = str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")
        group, _, version = api_version.rpartition("/")
        for r in self.registry.resources(group, version):
            if r.kind == k:
                return r, ""
        return None, (
            f"failed to find resource referenced by paramKind: "
            f"'&ParamKind{{APIVersion:{api_version},Kind:{k},}}'"
        )

    def _params(self, res: ServedResource | None, kind: Any, ref: Any, namespace: str) -> list[Any]:
        """The params a binding's ``paramRef`` names (``[None]`` without ``paramKind`` or
        ``paramRef``); ValueError for a configuration fault, as ``CollectParams`` says it."""
        if res is None or not isinstance(ref, dict):
            return [None]
        ns = ""
        if res.namespaced:
            ns = str(ref.get("namespace") or namespace)
            if not ns:
                raise ValueError(
                    "cannot use namespaced paramRef in policy binding that matches "
                    "cluster-scoped resources"
                )
        elif ref.get("namespace"):
            raise ValueError(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
            )
        params: list[Any]
        if ref.get("name"):
            found = self.store.get(res.key, ns, str(ref["name"]))
            params = [found] if found is not None else []
        else:
            try:
                selector = LabelSelector.from_label_selector(ref.get("selector") or {})
            except SelectorError as e:
                raise ValueError(str(e)) from None
            params = [
                o
                for o in self.store.iter(res.key, ns)
                if selector.matches((o.get("metadata") or {}).get("labels") or {})
            ]
        if not params and ref.get("parameterNotFoundAction", "Deny") == "Deny":
            raise ValueError(
                "no params found for policy binding with `Deny` parameterNotFoundAction"
            )
        return params


def _run(expression: str, variables: dict[str, Any]) -> Any:
    """The value of ``expression``; `_cel.EvalError` worded as the CEL filter words it."""
    try:
        program = _cel.compile_rule(expression)
    except _cel.CompileError as e:  # stored before the library came: refused when written
        raise _cel.EvalError(f"compilation error: compilation failed: {e}") from None
    known = {k: v for k, v in variables.items() if k in program.variables}
    try:
        return program.run(known)
    except _cel.EvalError as e:
        raise _cel.EvalError(f"expression '{expression}' resulted in error: {e}") from None


def match_conditions(conditions: Any, variables: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether ``conditions`` (the ``matchConditions`` of a policy or a webhook) let a
    request through, with ``variables`` (``object``, ``oldObject``, ``request``...): False at
    the first that evaluates to false, else True with the errors of those that failed to
    evaluate (kube-apiserver's ``matchconditions.Matcher``)."""
    errors: list[str] = []
    for cond in conditions or ():
        try:
            value = _run(str(cond.get("expression") or ""), variables)
        except _cel.EvalError as e:
            errors.append(str(e))
            continue
        if value is False:
            return False, []
    return True, errors


def aggregate(errors: list[str]) -> str:
    """``errors`` as Go's ``utilerrors.NewAggregate(...).Error()`` words them."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _evaluate(spec: dict[str, Any], variables: dict[str, Any], fail: bool) -> list[_Decision]:
    """The decisions of a policy's validations on one request (and param): none when a
    match condition is false; one for an evaluation error of a match condition."""
    matched, errors = match_conditions(spec.get("matchConditions"), variables)
    if not matched:
        return []
    if errors:
        if not fail:
            return []
        return [_Decision(True, aggregate(errors))]
    composed: dict[str, Any] = {}
    failed: dict[str, str] = {}
    scope = {**variables, "variables": composed}
    for var in spec.get("variables") or ():
        name = str(var.get("name") or "")
        try:
            composed[name] = _run(str(var.get("expression") or ""), scope)
        except _cel.EvalError as e:
            failed[name] = str(e)
    decisions: list[_Decision] = []
    for v in spec.get("validations") or ():
        expression = str(v.get("expression") or "")
        broken = [failed[n] for n in _VARIABLE_USE.findall(expression) if n in failed]
        try:
            if broken:
                raise _cel.EvalError(broken[0])
            value = _run(expression, scope)
        except _cel.EvalError as e:
            decisions.append(_Decision(fail, str(e)))
            continue
        if value is True:
            decisions.append(_Decision(False))
            continue
        message = ""
        if v.get("messageExpression"):
            try:
                shown = _run(str(v["messageExpression"]), scope)
            except _cel.EvalError:
                shown = None
            if isinstance(shown, str) and "\n" not in shown.strip():
                message = shown.strip()
        if not message:
            message = str(v.get("message") or "").strip()
        if not message:
            message = f"failed expression: {expression.strip()}"
        decisions.append(_Decision(True, message, str(v.get("reason") or "Invalid")))
    return decisions


def status_code(reason: str) -> int:
    """The HTTP code of a denial's reason (``reasonToCode``)."""
    return _CODES.get(reason, 422)
