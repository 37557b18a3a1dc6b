"""Label and field selectors with Kubernetes (apimachinery) semantics.

One implementation serves the embedded API server (``labelSelector`` /
``fieldSelector`` query parameters), the informer cache (filtered lists) and
predicates. Parsing validates like the API server; matching works on plain dicts
and is precompiled to tuples because it runs per object per watch event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcruntime.errors import SelectorError

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
    "field_label_view",
    "label_value_problems",
    "qualified_name_problems",
    "regex_error",
    "subdomain_problems",
    "selectable_fields",
    "with_field_labels_converted",
]


# Operators as stored in `Requirement.operator` (canonical spellings).
EQUALS: Final = "="
NOT_EQUALS: Final = "!="
IN: Final = "in"
NOT_IN: Final = "notin"
EXISTS: Final = "exists"
DOES_NOT_EXIST: Final = "!"
GREATER_THAN: Final = ">"
LESS_THAN: Final = "<"

_OPERATORS = frozenset(
    {EQUALS, NOT_EQUALS, IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN}
)

_NAME_MAX = 63
_PREFIX_MAX = 253
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\Z"
)
_INTEGER_RE = re.compile(r"[-+]?[0-9]+\Z")
# a field path of a field selector dict: what cannot be an operator or a term separator
_FIELD_PATH_RE = re.compile(r"[^\s=!,\\<>()]+\Z")


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` (its double spaces between examples included)."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _size(text: str) -> int:
    """A string's length as Go's ``len`` counts it: in bytes (UTF-8)."""
    return len(text.encode())


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_RE = re.compile(f"{_QUALIFIED_FMT}\\Z")
_LABEL_VALUE_FMT = f"({_QUALIFIED_FMT})?"
_LABEL_VALUE_RE = re.compile(f"{_LABEL_VALUE_FMT}\\Z")
_QUALIFIED_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)


def subdomain_problems(name: str) -> list[str]:
    """Why ``name`` is not a DNS subdomain (RFC 1123, lowercase), each as kube-apiserver says
    it (apimachinery's ``IsDNS1123Subdomain``); empty when it is."""
    problems: list[str] = []
    if _size(name) > _PREFIX_MAX:
        problems.append(f"must be no more than {_PREFIX_MAX} characters")
    if not _DNS1123_SUBDOMAIN_RE.match(name):
        problems.append(regex_error(_SUBDOMAIN_ERR, _SUBDOMAIN, "example.com"))
    return problems


_DNS1123_LABEL_RE = re.compile(f"{_LABEL}\\Z")
_LABEL_ERR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)


def dns_label_problems(name: str) -> list[str]:
    """Why ``name`` is not a DNS label (RFC 1123, lowercase: a namespace's name), each as
    kube-apiserver says it (apimachinery's ``IsDNS1123Label``); empty when it is."""
    problems: list[str] = []
    if _size(name) > _NAME_MAX:
        problems.append(f"must be no more than {_NAME_MAX} characters")
    if not _DNS1123_LABEL_RE.match(name):
        if _DNS1123_SUBDOMAIN_RE.match(name):  # its length was checked: it must be dots
            problems.append("must not contain dots")
        else:
            problems.append(regex_error(_LABEL_ERR, _LABEL, "my-name", "123-abc"))
    return problems


def qualified_name_problems(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``[prefix/]name``: a label or annotation key, a
    finalizer), each as kube-apiserver says it (apimachinery's ``IsQualifiedName``: a field
    error each); empty when it is. The client checks label keys and finalizers with it before
    a request, envtest checks what it is sent."""
    parts = key.split("/")
    problems: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {p}" for p in subdomain_problems(prefix)]
    elif len(parts) == 1:
        name = key
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_ERR, _QUALIFIED_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        problems.append("name part must be non-empty")
    elif _size(name) > _NAME_MAX:
        problems.append(f"name part must be no more than {_NAME_MAX} characters")
    if not _QUALIFIED_RE.match(name):
        problems.append(
            "name part "
            + regex_error(_QUALIFIED_ERR, _QUALIFIED_FMT, "MyName", "my.name", "123-abc")
        )
    return problems


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a label value, each as kube-apiserver says it (apimachinery's
    ``IsValidLabelValue``); empty when it is ("" is valid)."""
    problems: list[str] = []
    if _size(value) > _NAME_MAX:
        problems.append(f"must be no more than {_NAME_MAX} characters")
    if not _LABEL_VALUE_RE.match(value):
        problems.append(
            regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return problems


def _check_key(key: str, context: str = "") -> None:
    """Refuse a label key that is not a qualified name, in our words and in kube-apiserver's
    (a parsed selector's refusal within its requirement)."""
    if problems := qualified_name_problems(key):
        problem = "; ".join(problems)
        raise SelectorError(
            f"{context}invalid label key {key!r}: {problem}",
            f"{_IN_REQUIREMENT}<nil>: Invalid value: {_go_quote(key)}: {problem}",
        )


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector: ``key``, an operator and its sorted values.

    ``operator`` is one of ``"="``, ``"!="``, ``"in"``, ``"notin"``, ``"exists"``,
    ``"!"`` (does not exist), ``">"`` and ``"<"`` (integer comparisons).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def create(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        """Validated requirement; raises `SelectorError` naming the bad part."""
        if operator == "==":
            operator = EQUALS
        if operator not in _OPERATORS:
            raise SelectorError(f"invalid label selector operator {operator!r} for key {key!r}")
        _check_key(key)
        vals = tuple(sorted(set(values)))
        if operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise SelectorError(
                    f"label selector requirement {key!r} {operator}: values must be empty"
                )
        elif operator in (IN, NOT_IN):
            if not vals:
                raise SelectorError(
                    f"label selector requirement {key!r} {operator}: values must be non-empty"
                )
        elif len(vals) != 1:
            raise SelectorError(
                f"label selector requirement {key!r} {operator}: exactly one value is required"
            )
        # the values checked as the parser checks them (apimachinery's NewRequirement): a
        # gt/lt value an int64, every value a label value ("-1" is refused)
        return _checked(key, operator, list(vals), "")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        return _match_one(self.key, self.operator, self.values, frozenset(self.values), labels)

    def __str__(self) -> str:
        op, key, vals = self.operator, self.key, self.values
        if op == EXISTS:
            return key
        if op == DOES_NOT_EXIST:
            return "!" + key
        if op in (IN, NOT_IN):
            return f"{key} {op} ({','.join(vals)})"
        return f"{key}{op}{vals[0]}"


def _match_one(
    key: str, op: str, values: tuple[str, ...], value_set: frozenset[str], labels: Mapping[str, str]
) -> bool:
    if op == EQUALS:
        v = labels.get(key)
        return v is not None and v == values[0]
    if op == IN:
        v = labels.get(key)
        return v is not None and v in value_set
    if op == EXISTS:
        return key in labels
    if op == NOT_EQUALS:
        v = labels.get(key)
        return v is None or v != values[0]
    if op == NOT_IN:
        v = labels.get(key)
        return v is None or v not in value_set
    if op == DOES_NOT_EXIST:
        return key not in labels
    v = labels.get(key)
    if v is None:
        return False
    try:
        have = int(v)
    except ValueError:
        return False
    want = int(values[0])
    return have > want if op == GREATER_THAN else have < want


# --- label selector text parsing --------------------------------------------------

_T_ID, _T_NOT, _T_NE, _T_EQ, _T_EQEQ, _T_GT, _T_LT, _T_OPEN, _T_CLOSE, _T_COMMA, _T_END = range(11)
_SYMBOLS = {
    "!=": _T_NE,
    "==": _T_EQEQ,
    "=": _T_EQ,
    "!": _T_NOT,
    ">": _T_GT,
    "<": _T_LT,
    "(": _T_OPEN,
    ")": _T_CLOSE,
    ",": _T_COMMA,
}
_SPECIAL = frozenset("=!()<>,")
_WHITESPACE = frozenset(" \t\r\n")  # the lexer's isWhitespace
_Token = tuple[int, str, int]  # kind, literal, position


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
        elif c in _SPECIAL:
            two = text[i : i + 2]
            if two in ("!=", "=="):
                tokens.append((_SYMBOLS[two], two, i))
                i += 2
            else:
                tokens.append((_SYMBOLS[c], c, i))
                i += 1
        else:
            j = i
            while j < n and text[j] not in _WHITESPACE and text[j] not in _SPECIAL:
                j += 1
            tokens.append((_T_ID, text[i:j], i))
            i = j
    tokens.append((_T_END, "", n))
    return tokens


#: how kube-apiserver prefixes what is wrong within one requirement
_IN_REQUIREMENT = "unable to parse requirement: "
_INT64 = 2**63


def _go_quote(text: str) -> str:
    """A Go ``%q`` of ``text``."""
    return json.dumps(text, ensure_ascii=False)


def _go_aggregate(messages: list[str]) -> str:
    """apimachinery's aggregate error: one message as it is, more deduplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class _LabelParser:
    """apimachinery's label selector parser (``labels.Parse``), step by step: it accepts
    what kube-apiserver accepts, and each refusal carries kube-apiserver's words
    (`SelectorError.kube`) besides a message that says where the selector went wrong."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self) -> _Token:
        return self.tokens[self.pos]

    def _next(self) -> _Token:
        tok = self.tokens[self.pos]
        if tok[0] != _T_END:
            self.pos += 1
        return tok

    def _fail(self, tok: _Token, expected: str, kube: str) -> SelectorError:
        found = repr(tok[1]) if tok[0] != _T_END else "end of string"
        return SelectorError(
            f"invalid label selector {self.text!r}: found {found} at position {tok[2]}, "
            f"expected {expected}",
            kube,
        )

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok = self._peek()
            if tok[0] == _T_END:
                return reqs
            if tok[0] not in (_T_ID, _T_NOT):
                raise self._fail(
                    tok,
                    "'!', a label key, or end of string",
                    f"found '{tok[1]}', expected: !, identifier, or 'end of string'",
                )
            reqs.append(self._requirement())
            tok = self._next()
            if tok[0] == _T_END:
                return reqs
            if tok[0] != _T_COMMA:
                raise self._fail(
                    tok,
                    "',' or end of string",
                    f"found '{tok[1]}', expected: ',' or 'end of string'",
                )
            after = self._peek()
            if after[0] not in (_T_ID, _T_NOT):
                raise self._fail(
                    after,
                    "'!' or a label key after ','",
                    f"found '{after[1]}', expected: identifier after ','",
                )

    def _requirement(self) -> Requirement:
        tok = self._next()
        negated = tok[0] == _T_NOT
        if negated:
            tok = self._next()
        if tok[0] != _T_ID:
            raise self._fail(
                tok, "a label key", f"{_IN_REQUIREMENT}found '{tok[1]}', expected: identifier"
            )
        key = tok[1]
        context = f"invalid label selector {self.text!r}: "
        _check_key(key, context)
        if negated or self._peek()[0] in (_T_END, _T_COMMA):
            return Requirement(key, DOES_NOT_EXIST if negated else EXISTS)
        op_tok = self._next()
        kind = op_tok[0]
        if kind == _T_ID and op_tok[1] in (IN, NOT_IN):
            values = self._value_list()
            op = op_tok[1]
        elif kind in (_T_EQ, _T_EQEQ, _T_NE, _T_GT, _T_LT):
            values = [self._exact_value()]
            op = {_T_EQ: EQUALS, _T_EQEQ: EQUALS, _T_NE: NOT_EQUALS, _T_GT: GREATER_THAN}.get(
                kind, LESS_THAN
            )
        else:
            raise self._fail(
                op_tok,
                "an operator (=, ==, !=, in, notin, >, <) after the key",
                f"{_IN_REQUIREMENT}found '{op_tok[1]}', expected: in, notin, =, ==, !=, gt, lt",
            )
        return _checked(key, op, sorted(set(values)), context)

    def _exact_value(self) -> str:
        tok = self._peek()
        if tok[0] in (_T_END, _T_COMMA):
            return ""
        self._next()
        if tok[0] != _T_ID:
            raise self._fail(
                tok, "a label value", f"{_IN_REQUIREMENT}found '{tok[1]}', expected: identifier"
            )
        return tok[1]

    def _value_list(self) -> list[str]:
        tok = self._next()
        if tok[0] != _T_OPEN:
            raise self._fail(
                tok,
                "'(' after the set operator",
                f"{_IN_REQUIREMENT}found '{tok[1]}' expected: '('",
            )
        first = self._peek()
        if first[0] == _T_CLOSE:  # "()": the empty value
            self._next()
            return [""]
        if first[0] not in (_T_ID, _T_COMMA):
            raise self._fail(
                first,
                "a label value, ',' or ')'",
                f"{_IN_REQUIREMENT}found '{first[1]}', expected: ',', ')' or identifier",
            )
        values: list[str] = []
        while True:  # parseIdentifiersList: a comma next to a comma or a paren is the empty value
            tok = self._next()
            if tok[0] == _T_ID:
                values.append(tok[1])
                after = self._peek()
                if after[0] == _T_CLOSE:
                    self._next()
                    return values
                if after[0] != _T_COMMA:
                    raise self._fail(
                        after,
                        "',' or ')'",
                        f"{_IN_REQUIREMENT}found '{after[1]}', expected: ',' or ')'",
                    )
            elif tok[0] == _T_COMMA:
                after = self._peek()
                if not values or after[0] in (_T_COMMA, _T_CLOSE):
                    values.append("")
                if after[0] == _T_CLOSE:
                    self._next()
                    return values
            else:
                raise self._fail(
                    tok,
                    "a label value, ',' or ')'",
                    f"{_IN_REQUIREMENT}found '{tok[1]}', expected: ',', or identifier",
                )


def _checked(key: str, op: str, values: list[str], context: str) -> Requirement:
    """The requirement the parser read, checked as apimachinery's ``NewRequirement`` checks
    it: a ``gt``/``lt`` value an int64, every value a label value."""
    problems: list[tuple[str, str]] = []  # (ours, kube-apiserver's)
    if op in (GREATER_THAN, LESS_THAN):
        for i, v in enumerate(values):
            if not (_INTEGER_RE.match(v) and -_INT64 <= int(v) < _INT64):
                problems.append(
                    (
                        f"value {v!r} for {key!r} {op} must be an integer",
                        f"values[{i}]: Invalid value: {_go_quote(v)}: "
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, v in enumerate(values):
        if found := label_value_problems(v):
            problem = "; ".join(found)
            problems.append(
                (
                    f"invalid label value {v!r} for key {key!r}: {problem}",
                    f"values[{i}][{key}]: Invalid value: {_go_quote(v)}: {problem}",
                )
            )
    if problems:
        raise SelectorError(
            context + "; ".join(ours for ours, _ in problems),
            _IN_REQUIREMENT + _go_aggregate([kube for _, kube in problems]),
        )
    return Requirement(key, op, tuple(values))


# --- label selector ----------------------------------------------------------------

_Compiled = tuple[str, str, tuple[str, ...], frozenset[str]]


class LabelSelector:
    """A parsed label selector: requirements ANDed together.

    An empty selector matches everything. `nothing()` (what a null
    ``metav1.LabelSelector`` means) matches no object at all.
    """

    __slots__ = ("_compiled", "_hash", "_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        reqs = tuple(sorted(requirements, key=lambda r: (r.key, r.operator, r.values)))
        self.requirements: tuple[Requirement, ...] = reqs
        self._nothing = nothing
        self._compiled: tuple[_Compiled, ...] = tuple(
            (r.key, r.operator, r.values, frozenset(r.values)) for r in reqs
        )
        self._hash = hash((reqs, nothing))

    @classmethod
    def everything(cls) -> LabelSelector:
        """Selector that matches every object."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> LabelSelector:
        """Selector that matches no object (a null ``metav1.LabelSelector``)."""
        return _NOTHING

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """Parse selector text such as ``app=web,tier in (a,b),!legacy``; "" or None = everything."""
        if text is None or not text.strip():
            return _EVERYTHING
        return cls(_LabelParser(text).parse())

    @classmethod
    def from_dict(cls, match_labels: Mapping[str, str] | None) -> LabelSelector:
        """Selector requiring every ``key: value`` of ``match_labels`` (like matchLabels)."""
        if not match_labels:
            return _EVERYTHING
        return cls(Requirement.create(k, EQUALS, (v,)) for k, v in match_labels.items())

    @classmethod
    def from_label_selector(cls, sel: Mapping[str, Any] | None) -> LabelSelector:
        """Selector from a ``metav1.LabelSelector`` dict (matchLabels + matchExpressions).

        As in Kubernetes, None matches nothing while ``{}`` matches everything.
        """
        if sel is None:
            return _NOTHING
        if not isinstance(sel, Mapping):
            raise SelectorError(f"label selector must be an object, got {type(sel).__name__}")
        reqs: list[Requirement] = []
        for k, v in (sel.get("matchLabels") or {}).items():
            if not isinstance(v, str):
                raise SelectorError(f"matchLabels[{k!r}]: value must be a string, got {v!r}")
            reqs.append(Requirement.create(k, EQUALS, (v,)))
        ops = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}
        for i, expr in enumerate(sel.get("matchExpressions") or ()):
            where = f"matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                raise SelectorError(f"{where}: must be an object")
            key, op_name = expr.get("key"), expr.get("operator")
            values = expr.get("values") or ()
            if not isinstance(key, str):
                raise SelectorError(f"{where}.key: must be a string")
            if op_name not in ops:
                raise SelectorError(
                    f"{where}.operator: {op_name!r} is not a valid label selector operator "
                    "(In, NotIn, Exists, DoesNotExist)"
                )
            if isinstance(values, str) or not all(isinstance(v, str) for v in values):
                raise SelectorError(f"{where}.values: must be a list of strings")
            try:
                reqs.append(Requirement.create(key, ops[op_name], values))
            except SelectorError as exc:
                raise SelectorError(f"{where}: {exc}") from None
        return cls(reqs)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` (None = no labels) is selected."""
        if self._nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        for key, op, values, value_set in self._compiled:
            if op == EQUALS:
                v = labels.get(key)
                if v is None or v != values[0]:
                    return False
            elif not _match_one(key, op, values, value_set, labels):
                return False
        return True

    def empty(self) -> bool:
        """True when this selector matches everything."""
        return not self.requirements and not self._nothing

    def is_nothing(self) -> bool:
        """True for the selector that matches no object."""
        return self._nothing

    def exact_values(self, key: str) -> set[str] | None:
        """Values ``key`` must equal to match (from ``=`` and ``in``), or None if unconstrained.

        Lets an index serve a lookup: an object can only match if its label
        ``key`` is one of the returned values. An empty set means no object matches.
        """
        if self._nothing:
            return set()
        allowed: set[str] | None = None
        for k, op, values, _ in self._compiled:
            if k == key and op in (EQUALS, IN):
                allowed = set(values) if allowed is None else allowed & set(values)
        return allowed

    def __str__(self) -> str:
        if self._nothing:
            return "<nothing>"
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self.requirements == other.requirements and self._nothing == other._nothing

    def __hash__(self) -> int:
        return self._hash


_NO_LABELS: Mapping[str, str] = {}
_EVERYTHING = LabelSelector()
_NOTHING = LabelSelector(nothing=True)


def parse_label_selector(text: str | None) -> LabelSelector:
    """Alias of `LabelSelector.parse()`."""
    return LabelSelector.parse(text)


# --- field selectors ---------------------------------------------------------------

_ESCAPES = {"\\": "\\", ",": ",", "=": "="}
_MISSING = object()


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == ",":
            terms.append(text[start:i])
            start = i + 1
        i += 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    i, n = 0, len(term)
    while i < n:
        c = term[i]
        if c == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return term[:i], NOT_EQUALS, term[i + 2 :]
        if term.startswith("==", i):
            return term[:i], EQUALS, term[i + 2 :]
        if c == "=":
            return term[:i], EQUALS, term[i + 1 :]
        i += 1
    return None


def _unescape(value: str, text: str) -> str:
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        c = value[i]
        if c == "\\":
            nxt = value[i + 1 : i + 2]
            if nxt not in _ESCAPES:
                raise SelectorError(
                    f"invalid field selector {text!r}: invalid escape sequence "
                    f"{value[i : i + 2]!r} in value {value!r}"
                )
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        if c in ",=":
            raise SelectorError(
                f"invalid field selector {text!r}: unescaped {c!r} in value {value!r} "
                "(escape it with a backslash)"
            )
        out.append(c)
        i += 1
    return "".join(out)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _field_string(value: Any) -> Any:
    """The string a field value compares as; ``_MISSING`` for objects/lists."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return _MISSING


class FieldSelector:
    """A parsed field selector: ``field=value`` / ``field!=value`` terms ANDed together.

    Fields are dotted paths into the object dict (``metadata.name``,
    ``status.phase``); a missing field compares as "". Values may escape ``,``,
    ``=`` and ``\\`` with a backslash as in Kubernetes.
    """

    __slots__ = ("_compiled", "_hash", "requirements")

    def __init__(self, requirements: Iterable[tuple[str, str, str]] = ()) -> None:
        reqs = tuple(sorted(set(requirements)))
        for field, op, value in reqs:
            if op not in (EQUALS, NOT_EQUALS):
                raise SelectorError(f"invalid field selector operator {op!r} for {field!r}")
            if not field:
                raise SelectorError(f"invalid field selector: empty field name before {op!r}")
            if not isinstance(value, str):
                raise SelectorError(f"field selector value for {field!r} must be a string")
        self.requirements: tuple[tuple[str, str, str], ...] = reqs
        self._compiled = tuple((tuple(f.split(".")), op == EQUALS, v) for f, op, v in reqs)
        self._hash = hash(reqs)

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        """Parse text such as ``metadata.name=web,status.phase!=Failed``; "" or None = everything."""
        if text is None or not text.strip():
            return _ALL_FIELDS
        reqs: list[tuple[str, str, str]] = []
        for term in _split_terms(text):
            if not term.strip():
                continue
            split = _split_term(term)
            if split is None:
                raise SelectorError(
                    f"invalid field selector {text!r}: cannot understand {term.strip()!r} "
                    "(expected field=value, field==value or field!=value)"
                )
            field, op, value = split
            field = field.strip()
            if not field:
                raise SelectorError(
                    f"invalid field selector {text!r}: missing field name in {term.strip()!r}"
                )
            reqs.append((field, op, _unescape(value.strip(), text)))
        return cls(reqs)

    @classmethod
    def from_dict(cls, fields: Mapping[str, str] | None) -> FieldSelector:
        """Selector requiring ``field == value`` for every item of ``fields``."""
        if not fields:
            return _ALL_FIELDS
        for field in fields:
            if not isinstance(field, str) or not _FIELD_PATH_RE.match(field):
                raise SelectorError(
                    f"invalid field selector key {field!r}: a field path such as "
                    "'metadata.name' or 'status.phase' (no operator, comma, space or backslash)"
                )
        return cls((f, EQUALS, v) for f, v in fields.items())

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (a plain dict) satisfies every term."""
        for path, equal, want in self._compiled:
            cur: Any = obj
            for part in path:
                if isinstance(cur, Mapping):
                    cur = cur.get(part)
                else:
                    cur = None
                    break
            have = cur if type(cur) is str else _field_string(cur)
            if (have == want) is not equal:
                return False
        return True

    def empty(self) -> bool:
        """True when this selector matches everything."""
        return not self.requirements

    def exact_value(self, field: str) -> str | None:
        """The value ``field`` must equal (an ``=`` term), or None; lets an index serve a lookup."""
        for f, op, v in self.requirements:
            if f == field and op == EQUALS:
                return v
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape(v)}" for f, op, v in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.requirements == other.requirements

    def __hash__(self) -> int:
        return self._hash


_ALL_FIELDS = FieldSelector()


def field_terms_as_kube(text: str) -> list[tuple[str, str, str]]:
    """The ``(field, operator, value)`` terms of a ``fieldSelector`` as kube-apiserver reads
    them (apimachinery's ``fields.ParseSelector``): in sorted order, nothing trimmed, a field
    never escaped (it ends at its first operator), so ``" metadata.name"`` is a field of its
    own that the kind then refuses. A refusal is a `SelectorError` in its words."""
    terms: list[tuple[str, str, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _go_split_term(part)
        if split is None:
            message = f"invalid selector: '{text}'; can't understand '{part}'"
            raise SelectorError(message, message)
        field, op, value = split
        terms.append((field, op, _go_unescape(value)))
    return terms


def _go_split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op, canonical in (("!=", NOT_EQUALS), ("==", EQUALS), ("=", EQUALS)):
            if term.startswith(op, i):
                return term[:i], canonical, term[i + len(op) :]
    return None


def _go_unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in _ESCAPES:
                message = f"invalid field selector: invalid escape sequence: \\{c}"
                raise SelectorError(message, message)
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            # Go formats the rune with %v: its number
            message = f"invalid field selector: unescaped character in value: {ord(c)}"
            raise SelectorError(message, message)
        else:
            out.append(c)
    if escaped:
        message = "invalid field selector: invalid escape sequence: \\"
        raise SelectorError(message, message)
    return "".join(out)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Alias of `FieldSelector.parse()`."""
    return FieldSelector.parse(text)


# -- field labels a kind's registry computes ---------------------------------------------
#
# kube-apiserver passes each label of a field selector through the kind's field label
# conversion (renaming old labels), then matches it against the kind's *selectable
# fields*: a flat set its registry computes from the object (``GetAttrs``). For most kinds
# they are the object's own values. Pods (`pkg/apis/core/v1/conversion.go`,
# `pkg/registry/core/pod/strategy.go` ``ToSelectableFields``): ``spec.host`` is the old
# name of ``spec.nodeName``; ``spec.hostNetwork`` is ``"false"`` when unset;
# ``status.podIP`` is the first pod IP; ``status.podIPs`` is accepted but no selectable
# field, so it compares as ``""``. core/v1 Events (`pkg/registry/core/event/strategy.go`):
# ``source`` is ``source.component``, else the ``reportingComponent``.

#: old field labels the conversion renames, per (group, kind)
_FIELD_LABEL_ALIASES: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("", "Pod"): {"spec.host": "spec.nodeName"},
}


def with_field_labels_converted(group: str, kind: str, sel: FieldSelector) -> FieldSelector:
    """``sel`` with the labels the kind's field label conversion renames renamed."""
    aliases = _FIELD_LABEL_ALIASES.get((group, kind))
    if not aliases or not any(f in aliases for f, _, _ in sel.requirements):
        return sel
    return FieldSelector((aliases.get(f, f), op, v) for f, op, v in sel.requirements)


def selectable_fields(group: str, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What kube-apiserver's field selectors read of ``obj``: the kind's selectable fields
    where its registry computes them (Pods, core/v1 Events), else ``obj`` itself."""
    if group == "" and kind == "Pod":
        return _pod_fields(obj)
    if group == "" and kind == "Event":
        return {**obj, "source": _event_source(obj)}
    return obj


def field_label_view(group: str, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` with the selectable fields its kind's registry computes laid over its own
    values: a selector reads the server's values for the labels the server knows, and the
    object's for any other path (a cache may select on any field)."""
    if group == "" and kind == "Pod":
        computed = _pod_fields(obj)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return {
            **obj,
            "spec": {**spec, **computed["spec"]},
            "status": {**status, **computed["status"], "podIPs": ""},
        }
    return selectable_fields(group, kind, obj)


def _pod_fields(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ips = status.get("podIPs")
    first = ips[0].get("ip") if isinstance(ips, list) and ips and isinstance(ips[0], dict) else ""
    return {
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "spec": {
            "nodeName": spec.get("nodeName"),
            "restartPolicy": spec.get("restartPolicy"),
            "schedulerName": spec.get("schedulerName"),
            "serviceAccountName": spec.get("serviceAccountName"),
            "hostNetwork": "true" if spec.get("hostNetwork") is True else "false",
        },
        "status": {
            "phase": status.get("phase"),
            "podIP": status.get("podIP") or first,
            "nominatedNodeName": status.get("nominatedNodeName"),
        },
    }


def _event_source(event: Mapping[str, Any]) -> str:
    source = event.get("source")
    component = source.get("component") if isinstance(source, Mapping) else None
    return str(component or event.get("reportingComponent") or "")
