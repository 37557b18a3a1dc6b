"""Shared command-line handling for mcruntime programs and examples.

    parser = argparse.ArgumentParser()
    mcruntime.cli.add_arguments(parser)
    args = parser.parse_args()
    mcruntime.cli.setup_logging(args.log_level)
    mgr = mcruntime.cli.manager_from_args(args, parser=parser)

``--provider NAME`` picks a provider plugin, ``--provider-option key=value``
(repeatable; a repeated key makes a list, JSON values are decoded) sets its
options, ``--kubeconfig``/``--context`` name the local (management) cluster and
``--local-cluster auto|yes|no`` says whether there is one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

from mcruntime.plugins import ProviderError, load_provider

__all__ = [
    "add_arguments",
    "parse_provider_options",
    "provider_from_args",
    "manager_from_args",
    "wants_local_cluster",
    "setup_logging",
]

NO_PROVIDER = "none"


def add_arguments(parser: argparse.ArgumentParser, *, default_provider: str = NO_PROVIDER) -> None:
    """Add ``--provider``, ``--provider-option``, ``--kubeconfig``, ``--context``, ``--log-level``."""
    parser.add_argument(
        "--provider",
        default=default_provider,
        help=f"cluster provider plugin (default: {default_provider}; '{NO_PROVIDER}' = local cluster only)",
    )
    parser.add_argument(
        "--provider-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider option (repeatable)",
    )
    parser.add_argument(
        "--local-cluster",
        choices=["auto", "yes", "no"],
        default="auto",
        help="whether the manager has a local (management) cluster; auto: yes without a provider, "
        "with --kubeconfig/--context, or inside a pod (in-cluster config)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig of the local (management) cluster")
    parser.add_argument("--context", help="kubeconfig context of the local cluster")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_provider_options(pairs: list[str]) -> dict[str, Any]:
    """``["a=1", "b=x", "b=y"]`` -> ``{"a": 1, "b": ["x", "y"]}``."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ProviderError(f"--provider-option {pair!r}: expected KEY=VALUE")
        value = _value(raw)
        if key in options:
            prev = options[key]
            options[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            options[key] = value
    return options


def provider_from_args(args: argparse.Namespace) -> Any:
    """The provider the arguments name, or None for ``--provider none``."""
    if not args.provider or args.provider == NO_PROVIDER:
        return None
    return load_provider(args.provider, **parse_provider_options(args.provider_option))


def wants_local_cluster(args: argparse.Namespace, provider: Any) -> bool:
    """Whether ``--local-cluster`` (auto, yes, no) asks for a local cluster."""
    choice = getattr(args, "local_cluster", "auto")
    if choice != "auto":
        return bool(choice == "yes")
    in_pod = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    return provider is None or bool(args.kubeconfig or args.context) or in_pod


def manager_from_args(
    args: argparse.Namespace,
    *,
    parser: argparse.ArgumentParser | None = None,
    **manager_kwargs: Any,
) -> Any:
    """A [`Manager`][mcruntime.Manager] for the arguments: local cluster and provider.

    With ``parser``, a bad provider name or option, or a local kubeconfig that cannot be
    loaded, ends the program as a bad argument does (``parser.error``: the usage and
    ``error: ...``, exit status 2) instead of raising
    [`MCRuntimeError`][mcruntime.errors.MCRuntimeError].
    """
    from mcruntime.errors import MCRuntimeError
    from mcruntime.manager import Manager

    try:
        provider = provider_from_args(args)
        config: Any = None
        if wants_local_cluster(args, provider):
            from mcruntime.cluster import Cluster

            config = Cluster.from_kubeconfig(args.kubeconfig, context=args.context)
        return Manager(config, provider=provider, **manager_kwargs)
    except MCRuntimeError as exc:
        if parser is None:
            raise
        parser.error(str(exc))


def setup_logging(level: str = "INFO") -> None:
    """Plain stdlib logging: time, level, logger, message (messages carry cluster names)."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
