"""The CEL implementation behind a CRD's ``x-kubernetes-validations``: a typed adapter.

The evaluator is the ``common-expression-language`` package (Rust bindings of cel-rust,
imported as ``cel``), an optional dependency: ``pip install 'mcruntime[cel]'``. It is
imported on first use, never when mcruntime is; `available` says whether it can be.
Nothing outside this module touches the library.

Besides CEL's standard functions, an evaluation sees the Kubernetes extension functions
common rules use (k8s.io/apiserver ``pkg/cel/library`` and cel-go's strings extension,
as kube-apiserver 1.31 offers them, in part): ``charAt``, ``indexOf``, ``lastIndexOf``,
``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``,
``reverse``; on lists ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
``lastIndexOf``; ``find`` and ``findAll``; ``url``, ``isURL`` and the URL getters;
``quantity``, ``isQuantity`` and the quantity methods. A URL or a quantity is carried as
a one-key map (the library takes no opaque values), so two quantities are equal when
their canonical texts are.

``size`` of a string counts its code points, as cel-go's does (the library's counts its
UTF-8 bytes), and ``matches`` (also in its global form ``matches(s, re)``), ``find`` and
``findAll`` take Go's regular expressions (`_regexp`; the library's ``matches`` is Rust's).
A function added under a standard name is not called, nor can a namespaced one
(``sets.contains``) be declared: a rule's calls of those (not a field named ``size``, nor
text in a string literal or a comment) are compiled as calls of the adapter's own.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from mcruntime.envtest import _quantity, _regexp

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

    __slots__ = ("_compiled", "source", "variables")

    def __init__(self, compiled: Any, source: str) -> None:
        self._compiled = compiled
        self.source = source
        #: the identifiers the expression mentions (comprehension variables included)
        self.variables: frozenset[str] = frozenset(compiled.variables())

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


#: the functions a rule's calls are compiled to: of standard names the library's own cannot
#: be replaced by (``size`` counts code points, ``matches`` is a Go regular expression), and
#: of namespaced ones it cannot declare (``sets.contains``)
_RENAMED: Final = {
    "size": "__mcruntime_size__",
    "matches": "__mcruntime_matches__",
    "sets.contains": "__mcruntime_sets_contains__",
    "sets.equivalent": "__mcruntime_sets_equivalent__",
    "sets.intersects": "__mcruntime_sets_intersects__",
    "strings.quote": "__mcruntime_strings_quote__",
    "ip.isCanonical": "__mcruntime_ip_is_canonical__",
}
#: a call of a renamed function (the name, then its opening parenthesis), or what is
#: ``kept`` as it is: a comment, or a string or bytes literal (raw ones without escapes)
_CALLS = re.compile(
    r"(?P<kept>//[^\n]*"  # a comment
    # a raw string or bytes literal (a backslash escapes nothing), or another
    r"|[bB]?[rR](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"[^\"\r\n]*\"|'[^'\r\n]*')"
    r"|[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''"
    r"|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*'))"
    r"|(?<![\w.])(?P<qualified>(?:sets|strings|ip)\s*\.\s*[A-Za-z_]\w*)(?=\s*\()"
    r"|(?<!\w)(?P<name>size|matches)(?=\s*\()"
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


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    _RENAMED["size"]: _size,
    _RENAMED["matches"]: _matches,
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
}
