"""The structured fields of mcruntime's log records: settable on any record, and documented."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

import mcruntime
from mcruntime._logfields import FIELDS, log_fields, new_reconcile_id

OPERATIONS = Path(mcruntime.__file__).parent.parent / "docs" / "operations.md"


def every_field() -> dict[str, str]:
    return log_fields(
        cluster="eu-1",
        controller="configmaps",
        kind="v1/ConfigMap",
        provider="clusters",
        namespace="default",
        name="web",
        reconcile_id=new_reconcile_id(),
        lease="default/lock",
        identity="pod-a",
    )


def test_every_field_can_be_set_on_a_record_and_the_set_is_fields() -> None:
    # a field named as a LogRecord attribute (``name``, ``message``) would make logging
    # raise "Attempt to overwrite ... in LogRecord" and lose the line
    fields = every_field()
    assert tuple(fields) == FIELDS
    record = logging.getLogger("mcruntime.test").makeRecord(
        "mcruntime.test", logging.INFO, __file__, 1, "line", (), None, extra=fields
    )
    assert {f: getattr(record, f) for f in FIELDS} == fields
    assert record.name == "mcruntime.test"


@pytest.mark.parametrize(
    ("namespace", "name", "key"),
    [("default", "web", "default/web"), ("", "node-1", "node-1"), (None, "node-1", "node-1")],
)
def test_an_object_is_named_by_namespace_object_name_and_request(
    namespace: str | None, name: str, key: str
) -> None:
    assert log_fields(cluster="", namespace=namespace, name=name) == {
        "cluster": "local",
        "namespace": namespace or "",
        "object_name": name,
        "request": key,
    }


def test_what_is_not_given_is_left_out() -> None:
    assert log_fields() == {}
    assert log_fields(cluster=None, controller="c") == {"controller": "c"}


def test_reconcile_ids_are_new_each_time() -> None:
    ids = {new_reconcile_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", i) for i in ids)


def test_every_field_is_documented() -> None:
    text = OPERATIONS.read_text()
    section = text[text.index("## Fields of the log records") :]
    section = section[: section.index("\n## ", 1)]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    assert documented == set(FIELDS)


def test_every_logger_of_the_library_and_its_providers_is_under_mcruntime() -> None:
    """One tree: ``logging.getLogger("mcruntime").setLevel(...)`` reaches every line of the
    library and of the provider distributions, and ``mcruntime.<part>`` each part's."""
    root = Path(mcruntime.__file__).parent
    sources = [p for p in root.rglob("*.py") if "examples" not in p.parts]
    sources += list((root.parent / "providers").glob("*/mcruntime_*/**/*.py"))
    names = {
        (p.relative_to(root.parent).as_posix(), name)
        for p in sources
        for name in re.findall(r"getLogger\(\"([^\"]*)\"\)", p.read_text())
    }
    assert len({path for path, _ in names}) > 30  # the scan found the modules that log
    outside = sorted(
        (p, n) for p, n in names if n != "mcruntime" and not n.startswith("mcruntime.")
    )
    assert outside == []


#: lines that name their cluster by a display string only (a connection pool's, a client
#: certificate's): they hold no cluster name to set as the field
_CLUSTER_BY_TEXT_ONLY = {"mcruntime/client/_rest.py": 1, "mcruntime/client/_tls.py": 2}


def test_every_line_that_names_its_cluster_in_its_text_carries_it_as_a_field() -> None:
    """A pipeline that queries ``cluster="eu-1"`` finds every line whose text says
    ``cluster=eu-1``: each logging call whose format names ``cluster=%s`` passes ``extra=``."""
    root = Path(mcruntime.__file__).parent
    sources = [p for p in root.rglob("*.py") if not {"examples", "envtest"} & set(p.parts)]
    sources += list((root.parent / "providers").glob("*/mcruntime_*/**/*.py"))
    levels = {"debug", "info", "warning", "error", "exception", "critical", "log"}
    without: dict[str, int] = {}
    calls = 0
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in levels
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "log"
            ):
                continue
            args = node.args[1:] if node.func.attr == "log" else node.args
            if not (args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)):
                continue
            if "cluster=%s" not in args[0].value:
                continue
            calls += 1
            if not any(k.arg == "extra" for k in node.keywords):
                where = path.relative_to(root.parent).as_posix()
                without[where] = without.get(where, 0) + 1
    assert calls > 100  # (the scan sees the library's lines)
    assert without == _CLUSTER_BY_TEXT_ONLY


def test_a_cluster_reads_as_in_the_line_s_text_and_the_metrics_label() -> None:
    """``cluster="local"`` finds the local cluster's lines as ``cluster="local"`` finds its
    series; a name a line cannot show as it is reads escaped, as in the text."""
    assert log_fields(cluster="")["cluster"] == "local"
    assert log_fields(cluster="eu-1")["cluster"] == "eu-1"
    assert log_fields(cluster="eu-1\nWARNING forged")["cluster"] == repr("eu-1\nWARNING forged")
