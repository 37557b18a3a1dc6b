"""What a user's type checker sees of ``AsyncClient.run_sync``: checked by ``mypy`` and
``pyright`` (strict; see pyproject.toml), never run.

It awaits a blocking function with that function's own arguments and answer: the answer of an
overloaded client call as the call itself answers, a misspelled keyword an error (each
``# type: ignore[...]`` fails as unused when the arguments are ``Any`` again).
"""

from __future__ import annotations

from typing import Any, assert_type

from mcruntime.client import AsyncClient, Client, MetadataOnly
from mcruntime.controllerutil import OperationResult, create_or_update
from tests.typing.client_returns import Widget


def grow(obj: Widget) -> None:
    obj.spec.size += 1


async def run_sync(aclient: AsyncClient, client: Client, w: Widget) -> None:
    assert_type(await aclient.run_sync(create_or_update, client, w, grow), OperationResult)
    assert_type(await aclient.run_sync(client.get, Widget, "a", "default"), Widget)
    assert_type(await aclient.run_sync(client.get, "v1/ConfigMap", "a"), dict[str, Any])
    assert_type(await aclient.run_sync(client.get, Widget, "a", metadata_only=True), MetadataOnly)
    await aclient.run_sync(create_or_update, client, w, grow, timout=3)  # type: ignore[arg-type]
    await aclient.run_sync(create_or_update, w, client)  # type: ignore[arg-type]
