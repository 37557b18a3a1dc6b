"""A CRD's CEL validation rules (``x-kubernetes-validations``), checked as kube-apiserver 1.31
checks them (apiextensions-apiserver ``pkg/apiserver/schema/cel``).

`crd_rule_errors` is the CRD side: each rule of a version's schema is compiled when the
CRD is created or updated, and one that does not compile (or whose ``message``,
``reason`` or ``fieldPath`` is wrong) refuses the CRD, as does a ``default`` the rules refuse
(`default_rule_errors`). `RuleSet` is the object side,
built once per CRD write for each served version whose schema has rules (`build`, None
without): `RuleSet.validate` evaluates every rule at every schema node that declares
some, on the object as it would be stored (defaulted and pruned). ``self`` is the node's
value (objects as maps, arrays as lists, a ``number`` as a double, ``date-time``,
``date`` and ``duration`` strings as timestamps and durations, property names escaped as
Kubernetes escapes them, the resource root with only ``apiVersion``, ``kind`` and
``metadata.name`` and ``generateName``); ``oldSelf`` the node's old value on an update,
where it can be told (map keys, items of ``x-kubernetes-list-type: map`` lists by their
keys). A rule that mentions ``oldSelf`` is a transition rule and runs only on an update
with an old value (or with ``optionalOldSelf``, ``oldSelf`` an optional). On an update of
the object or of its status a failing rule whose node is unchanged is a warning, not a
refusal (validation ratcheting, on by default in 1.31).

What is not done: rules are parsed, and only in part type-checked against the schema (a
call of a function kube-apiserver does not declare, a select of a field the schema or the
resource's metadata does not declare); there is no cost budget.

The CEL library is optional (`_cel`): without it, a CRD's rules are not evaluated and the
CRD is accepted with one warning in the log (`warn_missing_library`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from mcruntime.envtest import _cel, _regexp
from mcruntime.envtest._schema import Cause, unchanged
from mcruntime.envtest._warnings import warn

__all__ = [
    "RuleSet",
    "build",
    "check",
    "crd_rule_errors",
    "default_rule_errors",
    "has_rules",
    "warn_missing_library",
]

log = logging.getLogger("mcruntime.envtest")

_RULES: Final = "x-kubernetes-validations"
_REASONS: Final = {
    "FieldValueInvalid": "FieldValueInvalid",
    "FieldValueForbidden": "FieldValueForbidden",
    "FieldValueRequired": "FieldValueRequired",
    "FieldValueDuplicate": "FieldValueDuplicate",
}
#: errors after which kube-apiserver does not run the rules (``hasBlockingErr``)
_BLOCKING: Final = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_NOT_CHECKED: Final[Cause] = (
    "FieldValueInvalid",
    "<nil>",
    '<nil>: Invalid value: "null": some validation rules were not checked because the object '
    "was invalid; correct the existing errors to complete validation",
)
_CEL_KEYWORDS: Final = frozenset(
    {
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for"),
        *("function", "if", "import", "let", "loop", "package", "namespace", "return"),
        *("var", "void", "while"),
    }
)
_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def has_rules(schema: Any) -> bool:
    """Whether ``schema`` declares a rule anywhere."""
    if not isinstance(schema, dict):
        return False
    if schema.get(_RULES):
        return True
    props = schema.get("properties")
    if isinstance(props, dict) and any(has_rules(s) for s in props.values()):
        return True
    return has_rules(schema.get("items")) or has_rules(schema.get("additionalProperties"))


def warn_missing_library(crd_name: str) -> None:
    """Log, once per CRD, that its rules are not evaluated for want of the library."""
    _cel.warn_missing_once(
        f"CustomResourceDefinition {crd_name}",
        "has x-kubernetes-validations rules, which envtest does not evaluate without a CEL library",
    )


def check(
    rules: RuleSet,
    schema_causes: list[Cause],
    obj: dict[str, Any],
    old: dict[str, Any] | None,
) -> list[Cause]:
    """The causes ``obj`` (defaulted and pruned; ``old`` the stored object on an update) is
    refused for by ``rules``, after the schema's own ``schema_causes``: as kube-apiserver's
    strategy, the rules do not run after a fault that makes them meaningless
    (``hasBlockingErr``). Ratcheted failures warn the client: on every update, a status
    write's included (its strategy passes ``cel.WithRatcheting`` too), so a rule that an
    unchanged spec fails does not stop its controller's status writes."""
    if any(reason in _BLOCKING for reason, _, _ in schema_causes):
        return [_NOT_CHECKED]
    causes, ratcheted = rules.validate(obj, old, ratchet=True)
    for message in ratcheted:
        warn(message)
    return causes


# ------------------------------------------------------------------ the CRD side


def _go_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _go_rule(rule: dict[str, Any]) -> str:
    """The rule as kube-apiserver prints the internal ``apiextensions.ValidationRule`` in an
    error (Go's ``%#v``; a pointer set is shown by its value, not by an address)."""

    def pointer(key: str, type_: str, show: str) -> str:
        value = rule.get(key)
        return f"({type_})(nil)" if value is None else f"&{show}"

    reason = rule.get("reason")
    optional = rule.get("optionalOldSelf")
    return (
        f"apiextensions.ValidationRule{{Rule:{_go_quote(str(rule.get('rule') or ''))}, "
        f"Message:{_go_quote(str(rule.get('message') or ''))}, "
        f"MessageExpression:{_go_quote(str(rule.get('messageExpression') or ''))}, "
        f"Reason:{pointer('reason', '*apiextensions.FieldValueErrorReason', _go_quote(str(reason)))}, "
        f"FieldPath:{_go_quote(str(rule.get('fieldPath') or ''))}, "
        f"OptionalOldSelf:{pointer('optionalOldSelf', '*bool', str(optional).lower())}}}"
    )


def crd_rule_errors(schema: Any, path: str) -> list[Cause]:
    """What is wrong with the rules of ``schema`` (at ``path``,
    ``spec.versions[i].schema.openAPIV3Schema``), as apiextensions' CRD validation says it."""
    causes: list[Cause] = []
    _check_node(schema, path, causes)
    return causes


def _check_node(schema: Any, path: str, causes: list[Cause], root: bool = True) -> None:
    if not isinstance(schema, dict):
        return
    rules = schema.get(_RULES)
    if rules is not None:
        at = f"{path}.{_RULES}"
        if not isinstance(rules, list):
            causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: must be a list"))
        else:
            for i, rule in enumerate(rules):
                _check_rule(rule, schema, f"{at}[{i}]", causes, root)
    props = schema.get("properties")
    if isinstance(props, dict):
        for k, sub in props.items():
            _check_node(sub, f"{path}.properties[{k}]", causes, False)
    _check_node(schema.get("items"), f"{path}.items", causes, False)
    _check_node(schema.get("additionalProperties"), f"{path}.additionalProperties", causes, False)


def _check_rule(
    rule: Any, schema: dict[str, Any], at: str, causes: list[Cause], root: bool = False
) -> None:
    def add(reason: str, field: str, message: str) -> None:
        causes.append((reason, f"{at}.{field}", f"{at}.{field}: {message}"))

    if not isinstance(rule, dict):
        causes.append(("FieldValueInvalid", at, f"{at}: Invalid value: must be an object"))
        return
    text = str(rule.get("rule") or "").strip()
    message = rule.get("message")
    if not text:
        add("FieldValueRequired", "rule", "Required value: rule is not specified")
        return
    if message is not None and not str(message).strip():
        add(
            "FieldValueInvalid",
            "message",
            f"Invalid value: {_go_quote(str(message))}: message must be non-empty if specified",
        )
    elif "\n" in str(message or "").strip():
        add(
            "FieldValueInvalid",
            "message",
            f"Invalid value: {_go_quote(str(message))}: message must not contain line breaks",
        )
    elif "\n" in text and not str(message or "").strip():
        add(
            "FieldValueRequired",
            "message",
            "Required value: message must be specified if rule contains line breaks",
        )
    expression = rule.get("messageExpression")
    if expression is not None and not str(expression).strip():
        add(
            "FieldValueRequired",
            "messageExpression",
            "Required value: messageExpression must be non-empty if specified",
        )
    reason = rule.get("reason")
    if reason is not None and reason not in _REASONS:
        supported = ", ".join(_go_quote(r) for r in sorted(_REASONS))
        add(
            "FieldValueNotSupported",
            "reason",
            f"Unsupported value: {_go_quote(str(reason))}: supported values: {supported}",
        )
    field_path = rule.get("fieldPath")
    if field_path is not None and _field_path(str(field_path), schema) is None:
        add(
            "FieldValueInvalid",
            "fieldPath",
            f"Invalid value: {_go_quote(str(field_path))}: fieldPath must be a valid path",
        )
    try:
        program = _cel.compile_rule(text)
        checked_calls(text, program)
        undefined_field(text, schema, root)
    except _cel.CompileError as e:
        add(
            "FieldValueInvalid", "rule", f"Invalid value: {_go_rule(rule)}: compilation failed: {e}"
        )
        return
    if rule.get("optionalOldSelf") is not None and "oldSelf" not in program.variables:
        add(
            "FieldValueInvalid",
            "optionalOldSelf",
            f"Invalid value: {str(rule['optionalOldSelf']).lower()}: may not be set if oldSelf "
            "is not used in rule",
        )
    if expression:
        try:
            source = str(expression).strip()
            checked_calls(source, _cel.compile_rule(source))
        except _cel.CompileError as e:
            add(
                "FieldValueInvalid",
                "messageExpression",
                f"Invalid value: {_go_rule(rule)}: messageExpression compilation failed: {e}",
            )


#: ``self.x``, ``oldSelf . x``: a select of the rule's own value (``.?`` left to runtime)
_SELECT = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: what the root of a custom resource always has, declared or not
_ROOT_FIELDS = frozenset(("apiVersion", "kind", "metadata"))
#: the metadata a rule sees of a resource (its root or an embedded one): only these
_METADATA: Final = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
}
#: a call: the function's name, then its opening parenthesis
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
#: a receiver's ``matches`` call, up to its argument
_MATCHES_LITERAL = re.compile(r"\.\s*matches\s*\(\s*(?=[rR]?$)")
#: a CEL string literal (raw or not, in single, double or triple quotes)
_STRING_LITERAL = re.compile(
    r"[rR]?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*')"
)


def checked_calls(text: str, program: _cel.Program) -> None:
    """Raise `CompileError` as kube-apiserver's compile of ``text`` fails for its calls: a
    call of a function it does not declare (`_cel.undeclared`: ``undeclared reference to
    'fooBar'``, at the call's opening parenthesis), or a ``matches`` given a literal
    pattern Go refuses (cel-go's ``ValidateRegexLiterals``: ``invalid matches argument``,
    at the literal)."""
    unknown = _cel.undeclared(program)
    for begin, end in _code_spans(text):
        for m in _CALL.finditer(text, begin, end):
            if m.group(1) in unknown:
                message = f"undeclared reference to '{m.group(1)}' (in container '')"
                raise _cel.CompileError(_issue(text, m.end() - 1, message))
        for m in _MATCHES_LITERAL.finditer(text, begin, end):
            literal = _STRING_LITERAL.match(text, m.end())
            if literal is None or not re.match(r"\s*\)", text[literal.end() :]):
                continue
            try:
                pattern = _cel.compile_rule(literal.group()).run({})
                if isinstance(pattern, str):
                    _regexp.compile_go(pattern)
            except _cel.EvalError:
                continue
            except _regexp.GoRegexpError:
                at = literal.start()
                raise _cel.CompileError(_issue(text, at, "invalid matches argument")) from None
    if unknown:
        message = f"undeclared reference to '{unknown[0]}' (in container '')"
        raise _cel.CompileError(f"ERROR: <input>:1:1: {message}\n | {text}\n | ^")


def _code_spans(text: str) -> list[tuple[int, int]]:
    """The parts of ``text`` outside string literals (CEL's quotes, triple quotes and
    escapes; a raw string's backslashes escape nothing) and ``//`` comments."""
    spans: list[tuple[int, int]] = []
    start = i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("//", i):  # a comment, to the end of its line
            spans.append((start, i))
            eol = text.find("\n", i)
            i = start = len(text) if eol < 0 else eol
            continue
        if c not in "'\"":
            i += 1
            continue
        raw = i > 0 and text[i - 1] in "rR"
        spans.append((start, i))
        quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else c
        i += len(quote)
        while i < len(text) and not text.startswith(quote, i):
            i += 2 if text[i] == "\\" and not raw else 1
        i = start = i + len(quote)
    spans.append((min(start, len(text)), len(text)))
    return spans


def undefined_field(text: str, schema: dict[str, Any], root: bool) -> None:
    """Raise `CompileError` as cel-go's checker does for ``self.x`` (or ``oldSelf.x``) naming
    a property ``schema`` does not declare: ``undefined field 'x'``. Of a resource's
    ``metadata`` (at the root, ``root``, or of an embedded resource) only ``name`` and
    ``generateName`` are declared.

    Only selects of the rule's own value through objects whose properties are all
    declared are checked (not maps, lists, ``x-kubernetes-preserve-unknown-fields``,
    escaped names or method calls): the rest of kube-apiserver's type check is left out.
    """
    for begin, end in _code_spans(text):
        code = text[begin:end]
        for m in _IDENT.finditer(code):
            if m.group() not in ("self", "oldSelf") or (
                m.start() > 0 and code[m.start() - 1] in ".?"
            ):
                continue
            node, pos, top = schema, m.end(), root
            while isinstance(node, dict):
                sel = _SELECT.match(code, pos)
                if sel is None:
                    break
                name, pos = sel.group(1), sel.end()
                if code[pos:].lstrip().startswith("(") or "__" in name:
                    break  # a method (startsWith) or an escaped property name
                if (top or node.get("x-kubernetes-embedded-resource")) and name in _ROOT_FIELDS:
                    if name != "metadata":
                        break
                    node, top = _METADATA, False  # of metadata, only name and generateName
                    continue
                props = node.get("properties")
                if (
                    node.get("x-kubernetes-preserve-unknown-fields")
                    or node.get("x-kubernetes-embedded-resource")
                    or node.get("additionalProperties") not in (None, False)
                    or not isinstance(props, dict)
                ):
                    break
                if name not in props:
                    dot = begin + code.index(".", sel.start())
                    raise _cel.CompileError(_issue(text, dot, f"undefined field '{name}'"))
                node, top = props[name], False


def _issue(text: str, at: int, message: str) -> str:
    """cel-go's issue text: ``ERROR: <input>:line:column: message`` and the line, marked."""
    line_no = text.count("\n", 0, at) + 1
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    column = at - line_start
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"


_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]")


def _field_path(text: str, schema: dict[str, Any]) -> str | None:
    """``fieldPath`` normalized as ``field.Path`` prints it (``spec.a[key]``), when it names a
    field of ``schema`` (``ValidFieldPath``); None when it does not."""
    out, pos, node = "", 0, schema
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if m is None:
            return None
        pos = m.end()
        name = m.group(1) if m.group(1) is not None else re.sub(r"\\(.)", r"\1", m.group(2))
        props = node.get("properties")
        additional = node.get("additionalProperties")
        if isinstance(props, dict):
            if name not in props:
                return None
            node = props[name]
            out = f"{out}.{name}" if out else name
        elif isinstance(additional, dict):
            node = additional
            out = f"{out}[{name}]"
        else:
            return None
    return out or None


def default_rule_errors(schema: Any, path: str, refused: Collection[str] = ()) -> list[Cause]:
    """The ``default`` values of a CRD version's ``schema`` (at ``path``) that the rules of
    their own schema node, or of the nodes under it, refuse: kube-apiserver's
    ``defaulting.ValidateDefaults`` evaluates them (with the default as ``oldSelf``, then,
    as ratcheting is on, as a create) and refuses the CRD, at ``<path>.default``
    (``...properties[spec].default: Invalid value: "object": min must not exceed max``). A
    default whose field is in ``refused`` (its schema refused it already) is not evaluated,
    as upstream evaluates only defaults its OpenAPI validation passed; nor are defaults under
    ``additionalProperties``. Nothing without the CEL library."""
    if not has_rules(schema) or not _cel.available():
        return []
    causes: list[Cause] = []
    _default_rules(schema, path, causes, frozenset(refused), True)
    return causes


def _default_rules(
    schema: Any, path: str, causes: list[Cause], refused: frozenset[str], root: bool
) -> None:
    if not has_rules(schema):
        return
    embedded = root or schema.get("x-kubernetes-embedded-resource") is True
    value = schema.get("default")
    at = f"{path}.default"
    if value is not None and not any(
        f == at or f.startswith((f"{at}.", f"{at}[")) for f in refused
    ):
        node = _node(schema, resource_root=embedded)
        if node is not None:
            walk = _Walk(ratchet=False)
            walk.node(node, value, value, at, False)
            if not walk.causes:
                walk.node(node, value, _ABSENT, at, False)
            causes.extend(walk.causes)
    items = schema.get("items")
    if isinstance(items, dict):
        _default_rules(items, f"{path}.items", causes, refused, False)
    props = schema.get("properties")
    if isinstance(props, dict):
        for k, sub in props.items():
            _default_rules(sub, f"{path}.properties[{k}]", causes, refused, False)


# ------------------------------------------------------------------ the object side


@dataclass(frozen=True, slots=True)
class _Rule:
    program: _cel.Program
    transition: bool  # mentions oldSelf
    optional_old_self: bool
    text: str  # ruleErrorString: the message, else the rule
    message: str  # ruleMessageOrDefault
    message_program: _cel.Program | None
    reason: str
    field_path: str


@dataclass(slots=True)
class _Node:
    schema: dict[str, Any]
    type: str
    rules: tuple[_Rule, ...]
    properties: dict[str, _Node]
    additional: _Node | None
    items: _Node | None
    map_keys: tuple[str, ...] | None  # an x-kubernetes-list-type: map list's keys
    resource_root: bool


def build(schema: Any) -> RuleSet | None:
    """The rules of ``schema`` compiled, or None when it has none or the library is missing
    (a rule that does not compile is left out: the CRD was refused for it)."""
    if not has_rules(schema) or not _cel.available():
        return None
    node = _node(schema, resource_root=True)
    return None if node is None else RuleSet(node)


def _node(schema: Any, resource_root: bool = False) -> _Node | None:
    if not has_rules(schema):
        return None
    rules = []
    for rule in schema.get(_RULES) or ():
        if not isinstance(rule, dict) or not str(rule.get("rule") or "").strip():
            continue
        try:
            program = _cel.compile_rule(str(rule["rule"]).strip())
        except _cel.CompileError:
            continue
        message = str(rule.get("message") or "").strip()
        expression = str(rule.get("messageExpression") or "").strip()
        message_program = None
        if expression:
            with contextlib.suppress(_cel.CompileError):
                message_program = _cel.compile_rule(expression)
        field_path = rule.get("fieldPath")
        rules.append(
            _Rule(
                program=program,
                transition="oldSelf" in program.variables,
                optional_old_self=rule.get("optionalOldSelf") is True,
                text=message or program.source,
                message=message or f"failed rule: {program.source}",
                message_program=message_program,
                reason=_REASONS.get(str(rule.get("reason")), "FieldValueInvalid"),
                field_path=(_field_path(str(field_path), schema) or "") if field_path else "",
            )
        )
    props = schema.get("properties")
    sub_nodes = {}
    if isinstance(props, dict):
        for k, sub in props.items():
            n = _node(sub, resource_root=bool(sub.get("x-kubernetes-embedded-resource")))
            if n is not None:
                sub_nodes[k] = n
    additional = schema.get("additionalProperties")
    items = schema.get("items")
    keys = schema.get("x-kubernetes-list-map-keys")
    return _Node(
        schema=schema,
        type=str(schema.get("type") or ""),
        rules=tuple(rules),
        properties=sub_nodes,
        additional=_node(additional) if isinstance(additional, dict) else None,
        items=_node(items) if isinstance(items, dict) else None,
        map_keys=tuple(keys)
        if schema.get("x-kubernetes-list-type") == "map" and isinstance(keys, list)
        else None,
        resource_root=resource_root,
    )


_ABSENT: Final = object()


class RuleSet:
    """The compiled rules of one CRD version's schema."""

    __slots__ = ("_root",)

    def __init__(self, root: _Node) -> None:
        self._root = root

    def validate(
        self, obj: dict[str, Any], old: dict[str, Any] | None, *, ratchet: bool
    ) -> tuple[list[Cause], list[str]]:
        """The causes ``obj`` is refused for (``old`` is the stored object on an update),
        and the warnings of failures ratcheting let through (``ratchet``: an update of the
        object, not of its status)."""
        walk = _Walk(ratchet and old is not None)
        walk.node(
            self._root,
            obj,
            _ABSENT if old is None else old,
            "",
            old is not None and unchanged(obj, old, self._root.schema),
        )
        return walk.causes, walk.warnings


class _Walk:
    __slots__ = ("causes", "ratchet", "warnings")

    def __init__(self, ratchet: bool) -> None:
        self.ratchet = ratchet
        self.causes: list[Cause] = []
        self.warnings: list[str] = []

    def node(self, node: _Node, value: Any, old: Any, path: str, was_same: bool) -> None:
        """``was_same``: this node (when it has an old value) or its nearest ancestor that
        has one equals its old value (kube-apiserver's ``shouldRatchetError``, equality as
        its ``CorrelatedObject`` tells it: `_schema.unchanged`)."""
        if value is None:
            return
        if node.rules:
            self.rules(node, value, old, path, was_same)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) else {}
            for k, v in value.items():
                sub = node.properties.get(k)
                at = f"{path}.{k}" if path else k
                if sub is None and node.additional is not None and not node.properties:
                    sub, at = node.additional, f"{path}[{k}]"
                if sub is None:
                    continue
                o = old_map.get(k, _ABSENT)
                same = was_same if o is _ABSENT else unchanged(v, o, sub.schema)
                self.node(sub, v, o, at, same)
        elif isinstance(value, list) and node.items is not None:
            olds = _correlated(node, old)
            for i, v in enumerate(value):
                o = _ABSENT
                if olds is not None and isinstance(v, dict):
                    o = olds.get(tuple(_key(v.get(k)) for k in node.map_keys or ()), _ABSENT)
                same = was_same if o is _ABSENT else unchanged(v, o, node.items.schema)
                self.node(node.items, v, o, f"{path}[{i}]", same)

    def rules(self, node: _Node, value: Any, old: Any, path: str, was_same: bool) -> None:
        self_value = _to_cel(value, node.schema, node.resource_root)
        old_value: Any = None
        if old is not _ABSENT and any(r.transition for r in node.rules):
            old_value = _to_cel(old, node.schema, node.resource_root)
        shown = path or "<nil>"
        for rule in node.rules:
            if rule.transition and old is _ABSENT and not rule.optional_old_self:
                continue
            variables = {"self": self_value}
            if rule.optional_old_self:
                variables["oldSelf"] = _cel.optional(old_value, old is not _ABSENT)
            elif rule.transition:
                variables["oldSelf"] = old_value
            try:
                result = rule.program.run(variables)
            except _cel.EvalError as e:
                self.causes.append(_invalid(shown, node.type, f"{e} evaluating rule: {rule.text}"))
                continue
            if result is True:
                continue
            if result is not False:
                self.causes.append(
                    _invalid(
                        shown, node.type, f"cel expression must evaluate to a bool: {rule.text}"
                    )
                )
                continue
            at = path
            if rule.field_path:
                at = f"{path}.{rule.field_path}" if path else rule.field_path
                at = at.replace(".[", "[")
            cause = _cause(at or "<nil>", node.type, _message(rule, variables), rule.reason)
            if not rule.transition and self.ratchet and was_same:
                self.warnings.append(cause[2])
            else:
                self.causes.append(cause)


def _message(rule: _Rule, variables: dict[str, Any]) -> str:
    """The rule's messageExpression's value when it gives a usable one, else its message."""
    if rule.message_program is not None:
        try:
            text = rule.message_program.run(variables)
        except _cel.EvalError:
            text = None
        if isinstance(text, str):
            text = text.strip()
            if text and "\n" not in text and len(text) <= 5 * 1024:
                return text
    return rule.message


def _invalid(path: str, type_: str, detail: str) -> Cause:
    return ("FieldValueInvalid", path, f"{path}: Invalid value: {_go_quote(type_)}: {detail}")


def _cause(path: str, type_: str, detail: str, reason: str) -> Cause:
    """``fieldErrorForReason``: the value shown is the node's type, as in 1.31."""
    if reason == "FieldValueForbidden":
        return (reason, path, f"{path}: Forbidden: {detail}")
    if reason == "FieldValueRequired":
        return (reason, path, f"{path}: Required value: {detail}")
    if reason == "FieldValueDuplicate":
        return (reason, path, f"{path}: Duplicate value: {_go_quote(type_)}")
    return _invalid(path, type_, detail)


def _key(value: Any) -> Any:
    return repr(value) if isinstance(value, dict | list) else (type(value).__name__, value)


def _correlated(node: _Node, old: Any) -> dict[tuple[Any, ...], Any] | None:
    """The old items of a map list by their keys (None: the items cannot be correlated)."""
    if node.map_keys is None or not isinstance(old, list):
        return None
    return {tuple(_key(o.get(k)) for k in node.map_keys): o for o in old if isinstance(o, dict)}


# ------------------------------------------------------------------ values for CEL


def _escape(name: str) -> str | None:
    """A property's name as CEL sees it (Kubernetes' escaping), or None when CEL cannot."""
    if name in _CEL_KEYWORDS:
        return f"__{name}__"
    escaped = (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )
    return escaped if _IDENT.match(escaped) else None


def _to_cel(value: Any, schema: dict[str, Any], resource_root: bool = False) -> Any:
    """``value`` as CEL sees it under ``schema`` (`UnstructuredToVal`)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        if isinstance(props, dict):
            out = {}
            for k, v in value.items():
                sub = props.get(k)
                if resource_root and k in ("apiVersion", "kind"):
                    out[k] = v
                elif resource_root and k == "metadata":
                    meta = v if isinstance(v, dict) else {}
                    out[k] = {m: meta[m] for m in ("name", "generateName") if m in meta}
                elif sub is not None:
                    name = _escape(k)
                    if name is not None:
                        out[name] = _to_cel(v, sub)
                else:
                    out[k] = v
            return out
        if isinstance(additional, dict):
            return {k: _to_cel(v, additional) for k, v in value.items()}
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [_to_cel(v, items) for v in value] if isinstance(items, dict) else value
    t = schema.get("type")
    if t == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if t == "string" and isinstance(value, str):
        fmt = schema.get("format")
        if fmt:
            return _formatted(value, fmt)
    return value


_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def _formatted(value: str, fmt: str) -> Any:
    """A ``date-time``, ``date``, ``duration`` or ``byte`` string as its CEL type (the
    string itself when it does not parse)."""
    try:
        if fmt == "date-time":
            return datetime.datetime.fromisoformat(
                value.replace("Z", "+00:00").replace("z", "+00:00")
            )
        if fmt == "date":
            return datetime.datetime.fromisoformat(value).replace(tzinfo=datetime.UTC)
        if fmt == "byte":
            return base64.b64decode(value, validate=True)
        if fmt == "duration":
            sign, text = (-1, value[1:]) if value.startswith("-") else (1, value.lstrip("+"))
            if text == "0":
                return datetime.timedelta(0)
            seconds, pos = 0.0, 0
            while pos < len(text):
                m = _DURATION.match(text, pos)
                if m is None or not m.group(1) or m.end() == pos:
                    return value
                seconds += float(m.group(1)) * _UNITS[m.group(2)]
                pos = m.end()
            return datetime.timedelta(seconds=sign * seconds) if text else value
    except ValueError:
        return value
    return value
