"""What a user's type checker sees of the built-in ``nop`` provider: checked by ``mypy`` and
``pyright`` (strict; see pyproject.toml), never run.

``get`` always raises (it answered ``Any``); ``index_field`` takes an index function (it took
``Any``). Each ``# type: ignore[...]`` marks a mistake that must be reported.
"""

from __future__ import annotations

from typing import Any, NoReturn, assert_type

from mcruntime.multicluster import Provider
from mcruntime.providers import nop


def owner_of(obj: dict[str, Any]) -> str | None:
    return str(obj["metadata"].get("name"))


def use(p: nop.Provider) -> None:
    provider: Provider = p
    provider.index_field("v1/ConfigMap", "owner", owner_of)
    p.index_field("v1/ConfigMap", "owner", "metadata.name")  # type: ignore[arg-type]


def get(p: nop.Provider) -> None:
    assert_type(p.get("cluster-1"), NoReturn)  # it raises ClusterNotFound
