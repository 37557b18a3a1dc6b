"""The JSONPath subset CRD printer columns and scale paths use, evaluated on plain dicts.

Supported: ``.field`` (``\\.`` escaping a dot in it), ``['field.with.dots']``, ``[n]``
(negative too), slices ``[start:end:step]``, ``[*]``, ``..`` is not; filters
``[?(@.path=="value")]`` (``==``/``!=``, string or number literal, or just ``[?(@.path)]``
for presence). A path that matches
nothing yields no values, as kube-apiserver's printer leaves such cells empty.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["JSONPathError", "compile_path", "find"]

_TOKEN = re.compile(
    r"""\.(?P<field>(?:\\.|[^\s.,\[\]$@{}\\])+)
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*"(?P<dquoted>[^"]*)"\s*\]
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*(?P<slice>(?P<start>-?\d+)?\s*:\s*(?P<end>-?\d+)?(?:\s*:\s*(?P<step>\d+)?)?)\s*\]
      | \[\s*(?P<star>\*)\s*\]
      | \.(?P<dotstar>\*)
      | \[\s*\?\(\s*@(?P<fpath>(?:\.[A-Za-z0-9_-]+)+)\s*
            (?:(?P<op>==|!=)\s*(?:'(?P<fs>[^']*)'|"(?P<fd>[^"]*)"|(?P<fn>-?[\d.]+)))?\s*\)\s*\]
    """,
    re.VERBOSE,
)

Step = tuple[str, Any]


class JSONPathError(ValueError):
    """A path outside the supported subset."""


def compile_path(path: str) -> list[Step]:
    """Parse ``path`` (optionally wrapped in ``{}``) into steps; raises `JSONPathError`."""
    p = path.strip()
    if p.startswith("{") and p.endswith("}"):
        p = p[1:-1].strip()
    if p.startswith("$"):
        p = p[1:]
    if p and not p.startswith((".", "[")):
        p = "." + p
    steps: list[Step] = []
    pos = 0
    while pos < len(p):
        m = _TOKEN.match(p, pos)
        if m is None:
            raise JSONPathError(f"unsupported JSONPath {path!r} at {p[pos:]!r}")
        pos = m.end()
        if m["field"] is not None:
            # client-go's parseField: up to a terminator, a backslash escaping the next
            # character (``.metadata.labels.app\.kubernetes\.io/name``), "*" all
            field = m["field"].replace("\\", "")
            steps.append(("all", None) if m["field"] == "*" else ("field", field))
        elif m["slice"] is not None:
            bounds = (m["start"], m["end"], m["step"])
            steps.append(("slice", tuple(None if b is None else int(b) for b in bounds)))
        elif m["quoted"] is not None or m["dquoted"] is not None:
            steps.append(("field", m["quoted"] if m["quoted"] is not None else m["dquoted"]))
        elif m["index"] is not None:
            steps.append(("index", int(m["index"])))
        elif m["star"] is not None or m["dotstar"] is not None:
            steps.append(("all", None))
        else:
            value: Any = None
            if m["fs"] is not None or m["fd"] is not None:
                value = m["fs"] if m["fs"] is not None else m["fd"]
            elif m["fn"] is not None:
                value = float(m["fn"])
            fpath = [("field", f) for f in m["fpath"].strip(".").split(".")]
            steps.append(("filter", (fpath, m["op"], value)))
    return steps


def _walk(values: list[Any], steps: list[Step]) -> list[Any]:
    for kind, arg in steps:
        out: list[Any] = []
        for v in values:
            if kind == "field":
                if isinstance(v, dict) and arg in v:
                    out.append(v[arg])
            elif kind == "index":
                if isinstance(v, list) and -len(v) <= arg < len(v):
                    out.append(v[arg])
            elif kind == "slice":
                if isinstance(v, list):
                    out.extend(_slice(v, *arg))
            elif kind == "all":
                if isinstance(v, list):
                    out.extend(v)
                elif isinstance(v, dict):
                    out.extend(v.values())
            else:
                fpath, op, want = arg
                for item in v if isinstance(v, list) else ():
                    got = _walk([item], fpath)
                    if op is None:
                        keep = bool(got)
                    else:
                        have = got[0] if got else None
                        if isinstance(want, float) and isinstance(have, int | float):
                            equal = float(have) == want
                        else:
                            equal = have == want
                        keep = bool(got) and (equal if op == "==" else not equal)
                    if keep:
                        out.append(item)
        values = out
    return values


def _slice(items: list[Any], start: int | None, end: int | None, step: int | None) -> list[Any]:
    """client-go's ``evalArray`` of ``[start:end:step]``: negative bounds count from the end;
    bounds out of the list are an error (nothing, as the printer's cell then is)."""
    n = len(items)
    first = 0 if start is None else start + n if start < 0 else start
    last = n if end is None else end + n if end < 0 else end
    if first == last:
        return []
    if not (0 <= first < n) or not (0 <= last <= n) or first > last:
        return []
    return items[first : last : step or 1]


def find(obj: Any, path: str | list[Step]) -> list[Any]:
    """Every value ``path`` selects in ``obj`` (empty when nothing matches)."""
    steps = compile_path(path) if isinstance(path, str) else path
    return _walk([obj], steps)
