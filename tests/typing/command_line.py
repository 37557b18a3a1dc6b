"""What a user's type checker sees of ``mcruntime.cli``, as the getting-started program uses it:
checked by ``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

``manager_from_args`` answers a ``Manager`` (it answered ``Any``, so everything the program
did with its manager went unchecked); each ``# type: ignore[...]`` marks an error it must
report, and fails as unused when it is not.
"""

from __future__ import annotations

import argparse
from typing import assert_type

import mcruntime
from mcruntime import cli
from mcruntime.multicluster import Provider


def main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    mgr = cli.manager_from_args(args, parser=parser)
    assert_type(mgr, mcruntime.Manager)
    assert_type(cli.provider_from_args(args), Provider | None)
    options = mcruntime.ManagerOptions(graceful_shutdown_timeout=5)
    assert_type(cli.manager_from_args(args, options=options), mcruntime.Manager)
    mgr.get_clster("x")  # type: ignore[attr-defined]
    cli.manager_from_args(args, option=options)  # type: ignore[call-arg]
    cli.add_manager_arguments(parser)
    assert_type(cli.run(mgr), int)
    cli.run(args)  # type: ignore[arg-type]
