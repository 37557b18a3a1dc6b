"""Type-check the Python snippets of the docs and the READMEs as a user's code.

Two checkers, as strict users run them: mypy --strict and strict pyright, one run of each over
all pages. The ```python blocks of one page are one module, in order (later blocks build on
earlier ones; a block opening with a docstring naming its file, `pkg/mod.py: ...`, starts
the next module). Snippets are fragments: they use a `mgr`, a `req` or a `reconcile` defined
elsewhere. Those names come typed from `CONTEXT`, the rest of a user's program (`mgr` is a
`Manager`, `req` a `Request`...), and the user's own modules from `USER_MODULES`: the module's
first line imports the names it uses before (or without) defining them, so what a snippet does
with them is checked too, pyright's strict mode reporting what is unknown. What only says that a
snippet is a fragment is not reported: an undefined name `CONTEXT` lacks, a redefinition across
blocks, an unused name, an unresolved import, a `return` outside a function, and what is
reported on that first line (the context's `reconcile` against the one the page defines).
What is reported is what a user's type checker would say about mcruntime's API and the
snippet's use of it, naming the page and its line: wrong arguments, missing attributes, wrong
types and, under pyright, a type that is partly unknown (an un-annotated `[]`, an mcruntime
annotation without its parameters). A block that is not meant for this starts with
`# snippet: no-check`. Run from the repository root (pyright comes with the `lint` extra):

    python .ci/check_snippets.py
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SKIP = "# snippet: no-check"
# pages whose code is a module checked on its own (mypy --strict) and compared with the page
# by a test: the guide shows mcruntime/examples/configsets.py a method at a time
CHECKED_ELSEWHERE = {"docs/guides/writing-a-controller.md"}
# errors that only say a snippet is a fragment of a program
FRAGMENT_CODES = ["name-defined", "used-before-def", "has-type", "no-redef", "return", "misc"]
# the same for pyright: rules off, and messages without a rule
FRAGMENT_RULES = [
    "reportUndefinedVariable",
    "reportRedeclaration",
    "reportConstantRedefinition",
    "reportDuplicateImport",
    "reportMissingImports",
    "reportUnusedImport",
    "reportUnusedVariable",
    "reportUnusedExpression",
    "reportUnusedCoroutine",
    "reportUnusedFunction",
    "reportUnusedClass",
]
FRAGMENT_MESSAGES = re.compile(r'"return" can be used only within a function')
# the rest of a user's program: the names snippets use without defining them, typed
CONTEXT = """\
import threading as threading
from collections.abc import Callable
from typing import Any, Protocol as Protocol

from kubernetes.client import CoreV1Api, PolicyV1Api

import mcruntime as mcruntime
from mcruntime import Cluster as Cluster, Manager, Request as Request, Result as Result
from mcruntime.builder import Builder
from mcruntime.client import Client, KindLike as KindLike, Resource
from mcruntime.envtest import Fleet
from mcruntime.envtest.pytest_plugin import KubeBackend
from mcruntime.multicluster import Aware as Aware, IndexFunc as IndexFunc, Provider

mgr: Manager
provider: Provider
builder: Builder
cluster: Cluster
hub: Cluster
local: Cluster
remote: Cluster
client: Client
hub_kubeconfig: str
req: Request
name: str
err: Exception
obj: dict[str, Any]
widget: dict[str, Any]
config_map: dict[str, Any]
job_spec: dict[str, Any]
JOB: str
FLEETJOB: str
fleet: Fleet
kube_backend: KubeBackend
core: CoreV1Api
policy: PolicyV1Api

class Widget(Resource): ...
class WebApp(Resource): ...

def reconcile(req: Request, /) -> Result | None: ...
reconciler: Callable[[Request], Result | None]
reconcile_rollout: Callable[[Request], Result | None]
def ready(obj: dict[str, Any], /) -> bool: ...
def write_summary(req: Request, summary: dict[str, str], /) -> None: ...
def v1_to_v2(obj: dict[str, Any], /) -> dict[str, Any]: ...
def v2_to_v1(obj: dict[str, Any], /) -> dict[str, Any]: ...
"""
# the user's own modules snippets import (stubs, as CONTEXT)
USER_MODULES = {
    "my_controller/__init__.pyi": "",
    "my_controller/reconciler.pyi": """\
from collections.abc import Callable

from mcruntime import Manager, Request, Result

def make_reconciler(mgr: Manager, /) -> Callable[[Request], Result | None]: ...
""",
    "myoperator/__init__.pyi": "",
    "myoperator/api.pyi": """\
from mcruntime import Resource

class WebApp(Resource): ...
""",
}
# a block that opens with the docstring of a module of its own (`"""pkg/mod.py: ...`) starts a
# new module: a page that shows the files of a user's package a file at a time
OWN_MODULE = re.compile(r'^"""[\w/]+\.py\b')
FUTURE = re.compile(r"^from __future__ import .*$", re.M)


@dataclass
class Module:
    path: Path
    page: str
    lines: list[int]  # the page's line of each line of the module (0: none)

    def where(self, line: int) -> str | None:
        """`page:line` of a line (1-based) of the module; None for its first line.

        The first line imports the names of `CONTEXT` the module uses: what is reported there
        is the context's assumption about a name the page itself defines later (its own
        `reconcile`, the protocol it shows), not an error of the page.
        """
        if line == 1:
            return None
        page_line = self.lines[line - 1] if 0 < line <= len(self.lines) else 0
        return f"{self.page}:{page_line}" if page_line else f"{self.page} ({self.path.name}:{line})"


def _provided() -> set[str]:
    """The names `CONTEXT` declares."""
    names = set()
    for stmt in ast.parse(CONTEXT).body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names.update(a.asname for a in stmt.names if a.asname)
    return names


def _module_bindings(tree: ast.Module) -> dict[str, int]:
    """The first line where the module binds each name (not in a function or a class)."""
    first: dict[str, int] = {}

    def bind(name: str, line: int) -> None:
        first[name] = min(line, first.get(name, line))

    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind(node.name, node.lineno)
            continue  # its body is a scope of its own
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bind(node.id, node.lineno)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], node.lineno)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, node.lineno)
        todo.extend(ast.iter_child_nodes(node))
    return first


def _from_context(source: str) -> list[str]:
    """The names of `CONTEXT` the module uses before it binds them, or never binds itself."""
    tree = ast.parse(source)
    bound = _module_bindings(tree)
    used = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            used[node.id] = min(node.lineno, used.get(node.id, node.lineno))
    return sorted(n for n in _provided() & used.keys() if used[n] < bound.get(n, sys.maxsize))


def _write(out: Path, page: str, part: int, body: list[str], lines: list[int]) -> Module:
    source = "\n".join(body) + "\n"
    names = _from_context(source)
    head = f"from _snippet_context import {', '.join(names)}  " if names else ""
    name = (
        "snippet_"
        + re.sub(r"\W", "_", str(Path(page).with_suffix("")))
        + (f"_{part}" if part else "")
    )
    path = out / f"{name}.py"
    path.write_text(f"{head}# from {page}\n{source}")
    return Module(path, page, [0, *lines])  # its first line: the context's import


def modules(out: Path) -> list[Module]:
    written = []
    pages = [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        # the provider distributions' and the larger examples' own pages
        *sorted(REPO.glob("providers/*/README.md")),
        *sorted(REPO.glob("examples/*/README.md")),
    ]
    (out / "_snippet_context.pyi").write_text(CONTEXT)
    for stub, text in USER_MODULES.items():
        (out / stub).parent.mkdir(exist_ok=True)
        (out / stub).write_text(text)
    for page in pages:
        rel = str(page.relative_to(REPO))
        if rel in CHECKED_ELSEWHERE:
            continue
        text = page.read_text()
        body: list[str] = []
        lines: list[int] = []
        part = 0
        for match in BLOCK.finditer(text):
            block = match.group(1)
            if block.lstrip().startswith(SKIP):
                continue
            if body and OWN_MODULE.match(block):
                written.append(_write(out, rel, part, body, lines))
                body, lines, part = [], [], part + 1
            if body:
                body += ["", ""]
                lines += [0, 0]
            first = text.count("\n", 0, match.start(1)) + 1
            # a `from __future__` import of a later block is one of the page, not of the module
            block_lines = FUTURE.sub("", block).splitlines()
            body += block_lines
            lines += range(first, first + len(block_lines))
        if body:
            written.append(_write(out, rel, part, body, lines))
    return written


def _mypy(files: list[Module]) -> tuple[list[str], int]:
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--ignore-missing-imports",
            "--allow-redefinition",
            "--disable-error-code=no-untyped-call",
            *(f"--disable-error-code={code}" for code in FRAGMENT_CODES),
            "--no-incremental",
            # mcruntime itself is checked by mypy; here it is an installed library
            "--follow-imports=silent",
            *(str(m.path) for m in files),
        ]
    )
    sys.stderr.write(stderr)
    by_path = {str(m.path): m for m in files}
    found = []
    for line in stdout.splitlines():
        where = re.match(r"^(.*?\.py):(\d+): ", line)
        if where and where.group(1) in by_path:
            page_line = by_path[where.group(1)].where(int(where.group(2)))
            if page_line:
                found.append(f"{page_line}: {line[where.end() :]}")
        elif ": error:" in line:  # not of a page's module: the checker's own stubs
            found.append(line)
    # 2: mypy did not run; else what is left once the context's first lines are dropped
    return found, status if status > 1 else int(any(": error:" in line for line in found))


def _pyright(out: Path, files: list[Module]) -> tuple[list[str], int]:
    config = {
        "include": [m.path.name for m in files],
        "typeCheckingMode": "strict",
        "pythonVersion": "3.11",
        # mcruntime and the provider distributions from this checkout (an editable install's
        # import hook is not followed by pyright)
        "extraPaths": [
            str(REPO),
            *(str(p.parent) for p in sorted(REPO.glob("providers/*/pyproject.toml"))),
            *(str(p.parent) for p in sorted(REPO.glob("examples/*/pyproject.toml"))),
        ],
        **{rule: "none" for rule in FRAGMENT_RULES},
    }
    (out / "pyrightconfig.json").write_text(json.dumps(config))
    run = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "-p", str(out / "pyrightconfig.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(run.stdout)
    except ValueError:
        sys.stderr.write(run.stdout + run.stderr)
        return ["pyright did not run"], 2
    by_path = {str(m.path): m for m in files}
    found = []
    for diag in report["generalDiagnostics"]:
        if diag["severity"] != "error" or FRAGMENT_MESSAGES.search(diag["message"]):
            continue
        module = by_path.get(diag["file"])
        line = diag["range"]["start"]["line"] + 1
        where = module.where(line) if module else f"{diag['file']}:{line}"
        if where is None:
            continue
        message = diag["message"].replace("\n", " ").replace("\u00a0", " ")
        found.append(f"{where}: error: {message}  [pyright: {diag.get('rule', '-')}]")
    return found, 1 if found else 0


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        files = modules(out)
        mypy_found, mypy_status = _mypy(files)
        pyright_found, pyright_status = _pyright(out, files)
    for line in [*mypy_found, *pyright_found]:
        print(line.replace(tmp + "/", ""))
    errors = sum(": error:" in line for line in mypy_found)
    pages = len({m.page for m in files})
    print(
        f"mypy --strict: {errors} errors; strict pyright: {len(pyright_found)} errors"
        f" (the snippets of {pages} pages)"
    )
    return max(mypy_status, pyright_status)


if __name__ == "__main__":
    sys.exit(main())
