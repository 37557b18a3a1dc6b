"""The CEL implementation behind a CRD's ``x-kubernetes-validations``: a typed adapter.

The evaluator is the ``common-expression-language`` package (Rust bindings of cel-rust,
imported as ``cel``), an optional dependency: ``pip install 'mcruntime[cel]'``. It is
imported on first use, never when mcruntime is; `available` says whether it can be.
Nothing outside this module touches the library.

Besides CEL's standard functions, an evaluation sees the Kubernetes extension functions
common rules use (k8s.io/apiserver ``pkg/cel/library`` and cel-go's strings extension,
as kube-apiserver 1.31 offers them, in part): ``charAt``, ``indexOf``, ``lastIndexOf``,
``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``,
``reverse``, ``format`` and ``strings.quote``; on lists ``isSorted``, ``sum``, ``min``,
``max``, ``indexOf``, ``lastIndexOf``; ``sets.contains``, ``sets.equivalent`` and
``sets.intersects``; ``find`` and ``findAll``; ``url``, ``isURL`` and the URL getters;
``quantity``, ``isQuantity`` and the quantity methods; ``ip``, ``isIP``,
``ip.isCanonical`` and the IP methods (``family``, ``isLoopback``, ...); ``cidr``,
``isCIDR`` and the CIDR methods (``containsIP``, ``containsCIDR``, ``ip``, ``masked``,
``prefixLength``); the format library (``format.dns1123Label()``, ``format.named(n)``
and their ``validate``). A URL, a quantity, an IP, a CIDR or a format is carried as a
one-key map (the library takes no opaque values), so two quantities are equal when their
canonical texts are, two IPs when their addresses are.

``size`` of a string counts its code points, as cel-go's does (the library's counts its
UTF-8 bytes), ``string()`` words a value as cel-go's does (`_string`), and ``matches`` (also in its global form ``matches(s, re)``), ``find`` and
``findAll`` take Go's regular expressions (`_regexp`; the library's ``matches`` is Rust's).
A function added under a standard name is not called, nor can a namespaced one
(``sets.contains``) be declared: a rule's calls of those (not a field named ``size``, nor
text in a string literal or a comment) are compiled as calls of the adapter's own.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import ipaddress
import logging
import math
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from mcruntime._selectors import label_value_problems, qualified_name_problems
from mcruntime.envtest import _formats, _quantity, _regexp, _schema
from mcruntime.envtest._gofmt import go_string
from mcruntime.envtest._names import name_problems, prefix_problems

__all__ = ["EXTRA", "CompileError", "EvalError", "Program", "available", "compile_rule"]

#: the extra that installs the library
EXTRA: Final = "mcruntime[cel]"

log = logging.getLogger("mcruntime.envtest")

_lib: Any = None
_import_failed = False
_lock = threading.Lock()
#: what was said to go unchecked for want of the library (`warn_missing_once`)
_warned: set[str] = set()
_warned_lock = threading.Lock()


class CompileError(Exception):
    """A rule that does not parse; ``str()`` is the library's report, cel-go's way."""


class EvalError(Exception):
    """A rule whose evaluation failed; ``str()`` words it as cel-go does where known
    (``no such key: x``, ``index out of bounds: 3``, ``division by zero``, ...)."""


def _library() -> Any:
    """The ``cel`` module, imported once; None when it is not installed."""
    global _lib, _import_failed
    if _lib is None and not _import_failed:
        with _lock:
            if _lib is None and not _import_failed:
                try:
                    import cel
                except ImportError:
                    _import_failed = True
                else:
                    _lib = cel
    return _lib


def warn_missing_once(what: str, consequence: str) -> None:
    """Log once per ``what`` (``CustomResourceDefinition x``, ``ValidatingAdmissionPolicy y``)
    what it goes without for want of the library (``consequence``), and how to install it."""
    with _warned_lock:
        if what in _warned:
            return
        _warned.add(what)
    log.warning("%s %s: pip install '%s'", what, consequence, EXTRA)


def available() -> bool:
    """Whether the CEL library is installed (imports it the first time)."""
    return _library() is not None


class Program:
    """A compiled expression; `run` evaluates it with the given variables."""

    __slots__ = ("_compiled", "functions", "source", "variables")

    def __init__(self, compiled: Any, source: str) -> None:
        self._compiled = compiled
        self.source = source
        #: the identifiers the expression mentions (comprehension variables included)
        self.variables: frozenset[str] = frozenset(compiled.variables())
        #: the functions it calls (operators included; a namespaced one by its last name)
        self.functions: frozenset[str] = frozenset(compiled.functions())

    def run(self, variables: dict[str, Any]) -> Any:
        """The expression's value; `EvalError` when its evaluation fails."""
        context = _context()
        for name, value in variables.items():
            context.add_variable(name, value)
        _state.failure = None
        try:
            return self._compiled.execute(context)
        except Exception as e:  # the library's errors are plain Python exceptions
            raise EvalError(_eval_message(e)) from None


#: the formats of k8s.io/apiserver's format library (``format.dns1123Label()``)
_NAMED_FORMATS: Final = (
    *("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName"),
    *("dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue"),
    *("uri", "uuid", "byte", "date", "datetime"),
)
#: the functions a rule's calls are compiled to: of standard names the library's own cannot
#: be replaced by (``size`` counts code points, ``matches`` is a Go regular expression), and
#: of namespaced ones it cannot declare (``sets.contains``)
_RENAMED: Final = {
    "size": "__mcruntime_size__",
    "matches": "__mcruntime_matches__",
    "string": "__mcruntime_string__",
    "sets.contains": "__mcruntime_sets_contains__",
    "sets.equivalent": "__mcruntime_sets_equivalent__",
    "sets.intersects": "__mcruntime_sets_intersects__",
    "strings.quote": "__mcruntime_strings_quote__",
    "ip.isCanonical": "__mcruntime_ip_is_canonical__",
    "format.named": "__mcruntime_format_named__",
    **{f"format.{name}": f"__mcruntime_format_{name}__" for name in _NAMED_FORMATS},
}
#: a call of a renamed function (the name, then its opening parenthesis), or what is
#: ``kept`` as it is: a comment, or a string or bytes literal (raw ones without escapes)
_CALLS = re.compile(
    r"(?P<kept>//[^\n]*"  # a comment
    # a raw string or bytes literal (a backslash escapes nothing), or another
    r"|[bB]?[rR](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"[^\"\r\n]*\"|'[^'\r\n]*')"
    r"|[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''"
    r"|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*'))"
    r"|(?<![\w.])(?P<qualified>(?:sets|strings|ip|format)\s*\.\s*[A-Za-z_]\w*)(?=\s*\()"
    r"|(?<!\w)(?P<name>size|matches|string)(?=\s*\()"
)


def _renamed(m: re.Match[str]) -> str:
    if m.group("kept"):
        return m.group("kept")
    if m.group("qualified"):
        name = re.sub(r"\s", "", m.group("qualified"))
        return _RENAMED.get(name, m.group("qualified"))
    return _RENAMED[m.group("name")]


@functools.lru_cache(maxsize=4096)
def compile_rule(source: str) -> Program:
    """``source`` compiled (once per text); `CompileError` when it does not parse.

    Only parsing is checked here: kube-apiserver also type-checks a rule against the
    schema, of which `_cel_rules.undefined_field` does the selects of undeclared fields."""
    lib = _library()
    if lib is None:
        raise RuntimeError(f"the CEL library is not installed: pip install '{EXTRA}'")
    try:
        compiled = lib.compile(source)
    except ValueError as e:
        text = str(e)
        # "Failed to parse expression '...': ERROR: <input>:1:17: ..." -> cel-go's issues text
        at = text.find("ERROR: ")
        raise CompileError((text[at:] if at >= 0 else text).replace("\n| ", "\n | ")) from None
    renamed = _CALLS.sub(_renamed, source)
    if renamed != source:  # compiled as written first: a compile error shows the rule's text
        compiled = lib.compile(renamed)
    return Program(compiled, source)


def optional(value: Any, present: bool) -> Any:
    """A CEL ``optional``: of ``value`` when ``present``, else none (``optionalOldSelf``)."""
    lib = _library()
    return lib.OptionalValue.of(value) if present else lib.OptionalValue.none()


# ------------------------------------------------------------------ evaluation errors

_state = threading.local()
_contexts = threading.local()


class _Failed:
    """What a Kubernetes function returns when it fails: the library cannot convert it, so
    the evaluation stops (a raised exception would be printed to stderr by the library);
    the reason is kept in ``_state.failure``."""

    __slots__ = ()


_FAILED: Final = _Failed()


class _Refusal(Exception):
    """A Kubernetes function's own error (cel-go's wording)."""


def _eval_message(e: Exception) -> str:
    failure = getattr(_state, "failure", None)
    if failure:
        return str(failure)
    text = str(e)
    if isinstance(e, KeyError):
        return f"no such key: {e.args[0] if e.args else text}"
    if isinstance(e, ZeroDivisionError):
        return "modulus by zero" if "modulo" in text else "division by zero"
    if isinstance(e, OverflowError):
        return "unsigned integer overflow" if "unsigned" in text else "integer overflow"
    if isinstance(e, TypeError):
        return "no such overload"
    m = re.match(r"Function '[^']*' error: (.*?)(\. Check function arguments.*)?$", text, re.S)
    if m:
        return m.group(1)
    m = re.match(r"Undefined variable or function: '([^']*)'", text)
    if m:
        return f"undeclared reference to '{m.group(1)}'"
    return text


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except _Refusal as e:
            _state.failure = str(e)
        except (TypeError, ValueError, AttributeError, IndexError, KeyError):
            _state.failure = "no such overload"
        return _FAILED

    return call


def _context() -> Any:
    """This thread's evaluation context, with the Kubernetes functions (made once)."""
    context = getattr(_contexts, "context", None)
    if context is None:
        context = _library().Context()
        for name, fn in _FUNCTIONS.items():
            context.add_function(name, _guarded(fn))
        _contexts.context = context
    return context


# ------------------------------------------------------------------ strings and lists


def _check_str(*values: Any) -> None:
    for v in values:
        if not isinstance(v, str):
            raise TypeError


def _check_int(*values: Any) -> None:
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError


def _char_at(s: str, i: int) -> str:
    _check_str(s)
    _check_int(i)
    if i < 0 or i > len(s):
        raise _Refusal(f"index out of range: {i}")
    return s[i] if i < len(s) else ""


def _index_of(target: Any, item: Any, offset: int = 0) -> int:
    if isinstance(target, list):
        return next((i for i, v in enumerate(target) if _equal(v, item)), -1)
    _check_str(target, item)
    _check_int(offset)
    if offset < 0 or offset > len(target):
        raise _Refusal(f"index out of range: {offset}")
    return str(target).find(item, offset)


def _last_index_of(target: Any, item: Any, offset: int | None = None) -> int:
    if isinstance(target, list):
        found = [i for i, v in enumerate(target) if _equal(v, item)]
        return found[-1] if found else -1
    _check_str(target, item)
    if offset is None:
        return str(target).rfind(item)
    _check_int(offset)
    if offset < 0 or offset >= len(target):
        raise _Refusal(f"index out of range: {offset}")
    return str(target).rfind(item, 0, offset + len(item))


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _lower_ascii(s: str) -> str:
    _check_str(s)
    return s.translate(_LOWER)


def _upper_ascii(s: str) -> str:
    _check_str(s)
    return s.translate(_UPPER)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    _check_str(s, old, new)
    _check_int(n)
    return s.replace(old, new, n if n >= 0 else -1)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's ``strings.SplitN``: n == 0 is no parts, n < 0 all of them."""
    _check_str(s, sep)
    _check_int(n)
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        return chars if n < 0 or n >= len(chars) else [*chars[: n - 1], "".join(chars[n - 1 :])]
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> str:
    _check_str(s)
    _check_int(start)
    if end is None:
        end = len(s)
    _check_int(end)
    if start < 0 or start > len(s):
        raise _Refusal(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise _Refusal(f"index out of range: {end}")
    if start > end:
        raise _Refusal(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


def _trim(s: str) -> str:
    _check_str(s)
    return s.strip()


def _join(items: list[Any], sep: str = "") -> str:
    _check_str(sep, *items)
    return sep.join(items)


def _reverse(s: Any) -> Any:
    if isinstance(s, list):
        return s[::-1]
    _check_str(s)
    return s[::-1]


def _equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _comparable(items: list[Any]) -> list[Any]:
    if not isinstance(items, list):
        raise TypeError
    kinds = {str if isinstance(v, str) else (bool if isinstance(v, bool) else float) for v in items}
    if len(kinds) > 1 or any(
        not isinstance(v, int | float | str) or isinstance(v, bool) for v in items
    ):
        raise TypeError
    return items


def _is_sorted(items: list[Any]) -> bool:
    items = _comparable(items)
    return all(a <= b for a, b in zip(items, items[1:], strict=False))


def _sum(items: list[Any]) -> Any:
    items = _comparable(items)
    if any(isinstance(v, str) for v in items):
        raise TypeError
    return sum(items) if items else 0


def _min(items: list[Any]) -> Any:
    items = _comparable(items)
    if not items:
        raise _Refusal("min called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    items = _comparable(items)
    if not items:
        raise _Refusal("max called on empty list")
    return max(items)


def _regex(pattern: str, prefix: str = "") -> Any:
    """``pattern`` compiled as Go's ``regexp`` (`_regexp`); its refusal in Go's words."""
    try:
        return _regexp.compile_go(pattern)
    except _regexp.GoRegexpError as e:
        raise _Refusal(f"{prefix}{e}") from None


def _matches(s: str, pattern: str) -> bool:
    """cel-go's ``matches`` (``s.matches(re)``, ``matches(s, re)``): Go's ``MatchString``."""
    _check_str(s, pattern)
    return _regex(pattern).search(s) is not None


def _find(s: str, pattern: str) -> str:
    _check_str(s, pattern)
    m = _regex(pattern, "Illegal regex: ").search(s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    _check_str(s, pattern)
    _check_int(n)
    _regex(pattern, "Illegal regex: ")
    return _regexp.find_all(pattern, s, n)


def _sets_contains(items: list[Any], sub: list[Any]) -> bool:
    """cel-go's ``sets.contains``: every item of ``sub`` is in ``items``."""
    if not isinstance(items, list) or not isinstance(sub, list):
        raise TypeError
    return all(any(_equal(a, b) for a in items) for b in sub)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    if not isinstance(a, list) or not isinstance(b, list):
        raise TypeError
    return any(_equal(x, y) for x in a for y in b)


_QUOTED: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _quote(s: str) -> str:
    """cel-go's ``strings.quote``: in double quotes, with C escapes for what needs one."""
    _check_str(s)
    return '"' + "".join(_QUOTED.get(c, c) for c in s) + '"'


def _go_float(value: float, verb: str, precision: int) -> str:
    """Go's ``%.<precision>f`` or ``%.<precision>e`` (Python's but for infinities)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return "NaN" if math.isnan(value) else f"{value:.{precision}{verb}}"


def _go_shortest(value: float) -> str:
    """Go's ``%g`` (the shortest digits): cel-go's ``string(double)``."""
    if math.isinf(value) or math.isnan(value):
        return _go_float(value, "g", 0)
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    parts = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, parts.digits))
    point = len(digits) + int(parts.exponent)  # digits before the decimal point
    exp = point - 1
    if exp < -4 or exp >= 6:  # the shortest form decides at precision 6
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _format_value(value: Any, quoted: bool = False) -> str:
    """cel-go's ``%s`` of a value (``quoted``: inside a list or a map, as a CEL literal)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return go_string(value) if quoted else value
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return "b" + go_string(text) if quoted else text
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value, "f", 6) if quoted else _go_shortest(value)
    if isinstance(value, list):
        return "[" + ", ".join(_format_value(v, True) for v in value) + "]"
    if isinstance(value, dict):
        pairs = sorted((_format_value(k, True), _format_value(v, True)) for k, v in value.items())
        return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"
    raise TypeError


def _format_clause(verb: str, precision: int | None, value: Any) -> str:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if verb == "s":
        return _format_value(value)
    if verb == "d":
        if not is_int:
            raise _Refusal(
                "error during formatting: decimal clause can only be used on integers, was "
                f"given {_type_name(value)}"
            )
        return str(value)
    if verb in "fe":
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            value = float(value.replace("Infinity", "inf"))
        if not isinstance(value, float):
            kind = "fixed-point" if verb == "f" else "scientific"
            raise _Refusal(
                f"error during formatting: {kind} clause can only be used on doubles, was "
                f"given {_type_name(value)}"
            )
        return _go_float(value, verb, 6 if precision is None else precision)
    if verb == "b":
        if isinstance(value, bool):
            return "1" if value else "0"
        if not is_int:
            raise _Refusal(
                "error during formatting: only integers and bools can be formatted as binary, "
                f"was given {_type_name(value)}"
            )
        return format(value, "b")
    if verb == "o":
        if not is_int:
            raise _Refusal(
                "error during formatting: octal clause can only be used on integers, was given "
                f"{_type_name(value)}"
            )
        return format(value, "o")
    # x, X
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        text = value.hex()
    elif is_int:
        text = format(value, "x")
    else:
        raise _Refusal(
            "error during formatting: only integers, byte buffers, and strings can be "
            f"formatted as hex, was given {_type_name(value)}"
        )
    return text.upper() if verb == "X" else text


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null_type"
    names = {int: "int", float: "double", str: "string", bytes: "bytes", list: "list", dict: "map"}
    return names.get(type(value), type(value).__name__)


_CLAUSE = re.compile(r"%(?:\.([0-9]*))?(.)?", re.S)


def _format(template: str, args: list[Any]) -> str:
    """cel-go's ``string.format`` (strings extension v2): ``%s``, ``%d``, ``%f``, ``%e``
    (with a precision: ``%.2f``), ``%b``, ``%o``, ``%x``, ``%X`` and ``%%``."""
    _check_str(template)
    if not isinstance(args, list):
        raise TypeError
    out: list[str] = []
    pos = index = 0
    while pos < len(template):
        at = template.find("%", pos)
        if at < 0:
            out.append(template[pos:])
            break
        out.append(template[pos:at])
        if template.startswith("%%", at):
            out.append("%")
            pos = at + 2
            continue
        if index >= len(args):
            raise _Refusal(f"index {index} out of range")
        m = _CLAUSE.match(template, at)
        assert m is not None
        precision_text, verb = m.group(1), m.group(2)
        if verb is None:
            raise _Refusal("unexpected end of string")
        if verb not in "sdfebxXo":
            raise _Refusal(
                f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
            )
        precision = int(precision_text) if precision_text else None
        out.append(_format_clause(verb, precision, args[index]))
        index += 1
        pos = m.end()
    return "".join(out)


# ------------------------------------------------------------------ named formats

_FORMAT_KEY: Final = "__format__"


def _format_problems(name: str, text: str) -> list[str]:
    """What k8s.io/apiserver's format library says of ``text`` in format ``name``."""
    rule = {"dns1123Label": "label", "dns1123Subdomain": "subdomain", "dns1035Label": "dns1035"}
    if name in rule:
        return name_problems(text, rule[name])
    if name.endswith("Prefix"):
        return prefix_problems(text, rule[name.removesuffix("Prefix")])
    if name == "qualifiedName":
        return qualified_name_problems(text)
    if name == "labelValue":
        return label_value_problems(text)
    if name == "uri":
        ok = _formats.CHECKS["uri"](text)
        return [] if ok else [f"parse {go_string(text)}: invalid URI for request"]
    words = {"uuid": "does not match the UUID format", "byte": "invalid base64"}
    if _schema.format_matches(name, text):
        return []
    return [words.get(name, f"invalid {name}")]


def _validate(fmt: Any, text: str) -> Any:
    """``<Format>.validate(s)``: none when ``s`` is of the format, else its problems."""
    if not isinstance(fmt, dict) or _FORMAT_KEY not in fmt:
        raise TypeError
    _check_str(text)
    problems = _format_problems(fmt[_FORMAT_KEY], text)
    return optional(problems, bool(problems))


def _format_named(name: str) -> Any:
    _check_str(name)
    return optional({_FORMAT_KEY: name}, name in _NAMED_FORMATS)


# ------------------------------------------------------------------ URLs

_URL_KEY: Final = "__url__"


def _parse_url(s: Any) -> urllib.parse.SplitResult | None:
    """Go's ``url.ParseRequestURI``, roughly: an absolute URI or an absolute path."""
    if not isinstance(s, str) or not s or any(c.isspace() for c in s):
        return None
    try:
        parts = urllib.parse.urlsplit(s)
        parts.port  # noqa: B018 - a bad port raises
    except ValueError:
        return None
    if parts.scheme:
        return parts if parts.netloc or parts.path.startswith("/") else None
    return parts if s.startswith("/") else None


def _url(s: str) -> dict[str, str]:
    _check_str(s)
    if _parse_url(s) is None:
        raise _Refusal(f"URL parse error during conversion from string: parse {s!r}")
    return {_URL_KEY: s}


def _is_url(s: str) -> bool:
    _check_str(s)
    return _parse_url(s) is not None


def _url_parts(u: Any) -> urllib.parse.SplitResult:
    if not isinstance(u, dict) or _URL_KEY not in u:
        raise TypeError
    parts = _parse_url(u[_URL_KEY])
    assert parts is not None
    return parts


def _get_hostname(u: Any) -> str:
    host = _url_parts(u).netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.partition(":")[0]


def _get_port(u: Any) -> str:
    host = _url_parts(u).netloc.rpartition("@")[2]
    if host.startswith("["):
        host = host[host.find("]") + 1 :]
    return host.partition(":")[2]


def _get_query(u: Any) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(_url_parts(u).query, keep_blank_values=True)


# ------------------------------------------------------------------ IPs and CIDRs

_IP_KEY: Final = "__ip__"
_CIDR_KEY: Final = "__cidr__"
_IPV4_FIELD = re.compile(r"0|[1-9][0-9]{0,2}")
_BITS = re.compile(r"0|[1-9][0-9]*")
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _netip_addr(s: str) -> tuple[_Address | None, str]:
    """Go's ``netip.ParseAddr``: the address and its zone, or None (leading zeros in an
    IPv4 field, an IPv4 address of other than four fields and the like are refused)."""
    if ":" in s:
        text, _, zone = s.partition("%")
        if "%" in s and not zone:
            return None, ""
        try:
            return ipaddress.IPv6Address(text), zone
        except ValueError:
            return None, ""
    fields = s.split(".")
    if len(fields) != 4 or not all(_IPV4_FIELD.fullmatch(f) and int(f) < 256 for f in fields):
        return None, ""
    return ipaddress.IPv4Address(s), ""


def _parse_ip(s: str) -> _Address:
    """k8s.io/apiserver's ``parseIPAddr``: no zone, no IPv4-mapped IPv6 address."""
    addr, zone = _netip_addr(s)
    if addr is None:
        raise _Refusal(
            f"IP Address {go_string(s)} parse error during conversion from string: "
            f"ParseAddr({go_string(s)}): unable to parse IP"
        )
    if zone:
        raise _Refusal(f"IP address {go_string(s)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise _Refusal(f"IPv4-mapped IPv6 address {go_string(s)} is not allowed")
    return addr


def _parse_cidr(s: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """``netip.ParsePrefix`` (host bits may be set), without an IPv4-mapped IPv6 address."""
    once = "network address parse error during conversion from string: "
    twice = once * 2
    addr_text, slash, bits = s.rpartition("/")
    where = f"netip.ParsePrefix({go_string(s)})"
    if not slash:
        raise _Refusal(f"{twice}{where}: no '/'")
    addr, zone = _netip_addr(addr_text)
    if addr is None:
        raise _Refusal(f"{twice}{where}: ParseAddr({go_string(addr_text)}): unable to parse IP")
    if zone:
        raise _Refusal(f"{twice}{where}: IPv6 zones cannot be present in a prefix")
    if not _BITS.fullmatch(bits):
        raise _Refusal(f"{twice}{where}: bad bits after slash: {go_string(bits)}")
    if int(bits) > addr.max_prefixlen:
        raise _Refusal(f"{twice}{where}: prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise _Refusal(f"{once}IPv4-mapped IPv6 address {go_string(s)} is not allowed")
    return ipaddress.ip_interface(f"{addr}/{int(bits)}")


def _is_ip(s: str) -> bool:
    _check_str(s)
    try:
        _parse_ip(s)
    except _Refusal:
        return False
    return True


def _is_cidr(s: str) -> bool:
    _check_str(s)
    try:
        _parse_cidr(s)
    except _Refusal:
        return False
    return True


def _ip_value(addr: _Address) -> dict[str, str]:
    return {_IP_KEY: str(addr)}  # Go's Addr.String(): RFC 5952 for IPv6


def _cidr_value(net: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> dict[str, str]:
    return {_CIDR_KEY: f"{net.ip}/{net.network.prefixlen}"}


def _ip(value: Any) -> dict[str, str]:
    """``ip(string)``, or a CIDR's ``ip()``: its address."""
    if isinstance(value, dict) and _CIDR_KEY in value:
        return _ip_value(_cidr_of(value).ip)
    _check_str(value)
    return _ip_value(_parse_ip(value))


def _ip_of(value: Any) -> _Address:
    if not isinstance(value, dict) or _IP_KEY not in value:
        raise TypeError
    return ipaddress.ip_address(value[_IP_KEY])


def _cidr_of(value: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    if not isinstance(value, dict) or _CIDR_KEY not in value:
        raise TypeError
    return ipaddress.ip_interface(value[_CIDR_KEY])


def _cidr(s: str) -> dict[str, str]:
    _check_str(s)
    return _cidr_value(_parse_cidr(s))


def _ip_is_canonical(s: str) -> bool:
    _check_str(s)
    return str(_parse_ip(s)) == s


def _first16(addr: _Address) -> int:
    return int(addr) >> 112


def _is_link_local_multicast(value: Any) -> bool:
    """Go's ``Addr.IsLinkLocalMulticast``: 224.0.0.0/24, or ff02::/16 (any flags)."""
    addr = _ip_of(value)
    if addr.version == 4:
        return int(addr) >> 8 == 0xE00000
    return _first16(addr) & 0xFF0F == 0xFF02


def _is_link_local_unicast(value: Any) -> bool:
    addr = _ip_of(value)
    if addr.version == 4:
        return int(addr) >> 16 == 0xA9FE
    return _first16(addr) & 0xFFC0 == 0xFE80


def _is_loopback(value: Any) -> bool:
    addr = _ip_of(value)
    return int(addr) >> 24 == 127 if addr.version == 4 else int(addr) == 1


def _is_global_unicast(value: Any) -> bool:
    """Go's ``Addr.IsGlobalUnicast``: not unspecified, loopback, multicast, link-local
    unicast nor the IPv4 broadcast address (private addresses are global unicast)."""
    addr = _ip_of(value)
    multicast = int(addr) >> 28 == 0xE if addr.version == 4 else int(addr) >> 120 == 0xFF
    return not (
        int(addr) == 0
        or (addr.version == 4 and int(addr) == 0xFFFFFFFF)
        or _is_loopback(value)
        or multicast
        or _is_link_local_unicast(value)
    )


def _contains_ip(cidr: Any, other: Any) -> bool:
    net = _cidr_of(cidr)
    addr = _parse_ip(other) if isinstance(other, str) else _ip_of(other)
    return addr.version == net.version and addr in net.network


def _contains_cidr(cidr: Any, other: Any) -> bool:
    """As k8s.io/apiserver has it: the masked prefix equals the other's address (not
    masked) at this prefix's length, and this prefix is not longer than the other's."""
    net = _cidr_of(cidr)
    inner = _parse_cidr(other) if isinstance(other, str) else _cidr_of(other)
    return (
        inner.version == net.version
        and net.network.network_address == inner.ip
        and net.network.prefixlen <= inner.network.prefixlen
    )


# ------------------------------------------------------------------ quantities

_QUANTITY_KEY: Final = "__quantity__"


def _new_quantity(s: str) -> dict[str, str]:
    _check_str(s)
    text = _quantity.canonical(s) if _quantity.parse(s) is not None else None
    if text is None:
        raise _Refusal(_quantity.FORMAT_ERROR)
    return {_QUANTITY_KEY: text}


def _is_quantity(s: str) -> bool:
    _check_str(s)
    return _quantity.parse(s) is not None


def _nanos(q: Any) -> int:
    if isinstance(q, int) and not isinstance(q, bool):
        return q * 1_000_000_000
    if not isinstance(q, dict) or _QUANTITY_KEY not in q:
        raise TypeError
    parsed = _quantity.parse(q[_QUANTITY_KEY])
    assert parsed is not None
    return parsed[0]


def _from_nanos(nanos: int) -> dict[str, str]:
    whole, rest = divmod(abs(nanos), 1_000_000_000)
    text = ("-" if nanos < 0 else "") + (f"{whole}.{rest:09d}".rstrip("0").rstrip("."))
    return {_QUANTITY_KEY: _quantity.canonical(text) or "0"}


def _compare(a: Any, b: Any) -> int:
    x, y = _nanos(a), _nanos(b)
    return (x > y) - (x < y)


def _as_integer(q: Any) -> int:
    nanos = _nanos(q)
    if nanos % 1_000_000_000 or abs(nanos // 1_000_000_000) >= 1 << 63:
        raise _Refusal("cannot convert value to integer")
    return nanos // 1_000_000_000


def _size(value: Any) -> int:
    """cel-go's ``size``: a string's code points, bytes' count, a list's or map's items."""
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    raise TypeError


def _string(value: Any) -> str:
    """cel-go's ``string()``: of a double its shortest ``%g``, of a timestamp RFC 3339 in UTC
    (``Z``), of a duration its seconds (``90s``), of an IP or a CIDR its address."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_shortest(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise _Refusal("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        text: str = value.strftime("%Y-%m-%dT%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text + "Z"
    if isinstance(value, datetime.timedelta):
        seconds = decimal.Decimal(value.days * 86400 + value.seconds) + decimal.Decimal(
            value.microseconds
        ).scaleb(-6)
        text = format(seconds.normalize(), "f")
        return f"{text}s"
    if isinstance(value, dict) and _IP_KEY in value:
        return str(value[_IP_KEY])
    if isinstance(value, dict) and _CIDR_KEY in value:
        return str(value[_CIDR_KEY])
    raise TypeError


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    _RENAMED["size"]: _size,
    _RENAMED["matches"]: _matches,
    _RENAMED["string"]: _string,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "reverse": _reverse,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "find": _find,
    "findAll": _find_all,
    "url": _url,
    "isURL": _is_url,
    "getScheme": lambda u: _url_parts(u).scheme,
    "getHost": lambda u: _url_parts(u).netloc.rpartition("@")[2],
    "getHostname": _get_hostname,
    "getPort": _get_port,
    "getEscapedPath": lambda u: _url_parts(u).path,
    "getQuery": _get_query,
    "quantity": _new_quantity,
    "isQuantity": _is_quantity,
    "sign": lambda q: (_nanos(q) > 0) - (_nanos(q) < 0),
    "isInteger": lambda q: _nanos(q) % 1_000_000_000 == 0,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: _nanos(q) / 1e9,
    "add": lambda a, b: _from_nanos(_nanos(a) + _nanos(b)),
    "sub": lambda a, b: _from_nanos(_nanos(a) - _nanos(b)),
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "compareTo": _compare,
    "format": _format,
    _RENAMED["strings.quote"]: _quote,
    _RENAMED["sets.contains"]: _sets_contains,
    _RENAMED["sets.equivalent"]: lambda a, b: _sets_contains(a, b) and _sets_contains(b, a),
    _RENAMED["sets.intersects"]: _sets_intersects,
    "validate": _validate,
    _RENAMED["format.named"]: _format_named,
    **{_RENAMED[f"format.{n}"]: functools.partial(dict, {_FORMAT_KEY: n}) for n in _NAMED_FORMATS},
    "isIP": _is_ip,
    "ip": _ip,
    _RENAMED["ip.isCanonical"]: _ip_is_canonical,
    "family": lambda ip: _ip_of(ip).version,
    "isUnspecified": lambda ip: int(_ip_of(ip)) == 0,
    "isLoopback": _is_loopback,
    "isLinkLocalMulticast": _is_link_local_multicast,
    "isLinkLocalUnicast": _is_link_local_unicast,
    "isGlobalUnicast": _is_global_unicast,
    "isCIDR": _is_cidr,
    "cidr": _cidr,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "prefixLength": lambda cidr: _cidr_of(cidr).network.prefixlen,
    "masked": lambda cidr: _cidr_value(ipaddress.ip_interface(_cidr_of(cidr).network)),
}


#: the functions kube-apiserver 1.31's base environment declares besides the adapter's, by
#: the names the library reports them (``optional.of`` as ``of``): cel-go's standard ones
#: (the library's), optional types, and those not offered here (the format and authorizer
#: libraries), whose calls compile and fail when they run
_DECLARED_ELSEWHERE: Final = frozenset(
    {
        *("size", "contains", "endsWith", "startsWith", "matches", "int", "uint", "double"),
        *("string", "bytes", "bool", "duration", "timestamp", "dyn", "type"),
        *("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate"),
        *("getDayOfWeek", "getHours", "getMinutes", "getSeconds", "getMilliseconds"),
        *("has", "all", "exists", "exists_one", "map", "filter", "optMap", "optFlatMap"),
        *("of", "ofNonZeroValue", "none", "hasValue", "value", "or", "orValue"),
        # k8s.io/apiserver's authorizer library, and its selectors
        *("path", "group", "serviceAccount", "resource", "subresource", "namespace", "name"),
        *("check", "allowed", "reason", "errored", "error", "fieldSelector", "labelSelector"),
    }
)


def undeclared(program: Program) -> list[str]:
    """The functions ``program`` calls that kube-apiserver's type check refuses it for
    (``undeclared reference to 'fooBar'``): neither the adapter's nor declared in
    kube-apiserver 1.31's base environment."""
    return sorted(
        f
        for f in program.functions
        if f[:1].isalpha() and f not in _FUNCTIONS and f not in _DECLARED_ELSEWHERE
    )
