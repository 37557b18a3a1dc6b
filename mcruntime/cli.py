"""Shared command-line handling for mcruntime programs and examples.

    parser = argparse.ArgumentParser()
    mcruntime.cli.add_arguments(parser)
    args = parser.parse_args()
    mcruntime.cli.setup_logging(args.log_level)
    mgr = mcruntime.cli.manager_from_args(args, parser=parser)

``--provider NAME`` picks a provider plugin, ``--provider-option key=value``
(repeatable; a repeated key makes a list, JSON values are decoded, except that an
option that takes a string gets the text as written: ``label_value=true``) sets its
options, ``--kubeconfig``/``--context`` name the local (management) cluster and
``--local-cluster auto|yes|no`` says whether there is one.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from mcruntime._kubeconfig import in_cluster_problem
from mcruntime.plugins import ProviderError, available_providers, load_provider

if TYPE_CHECKING:
    from mcruntime.manager import Manager, ManagerOptions
    from mcruntime.multicluster import Provider

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
        "with --kubeconfig/--context, or inside a pod with its service account token (in-cluster "
        "config)",
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


def _typed_value(raw: str, model: type[BaseModel] | None, key: str) -> Any:
    """``raw`` JSON-decoded, unless option ``key`` of ``model`` refuses the decoded value and
    takes the text as written (a string option given ``true``, ``2024`` or ``[x]``)."""
    value = _value(raw)
    field = model.model_fields.get(key) if model is not None else None
    if field is None or field.annotation is None or isinstance(value, str):
        return value
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(field.annotation)
    except Exception:  # a type pydantic cannot check alone: the model decides
        return value
    for candidate in (value, raw):
        try:
            adapter.validate_python(candidate)
        except ValidationError:
            continue
        return candidate
    return value  # neither: the option's own error names what it wants


def _options_model(provider: str | None) -> type[BaseModel] | None:
    if provider is None:
        return None
    try:
        spec = available_providers().get(provider)
    except Exception:  # a broken plugin: load_provider says so
        return None
    return spec.options if spec is not None else None


def parse_provider_options(pairs: list[str], *, provider: str | None = None) -> dict[str, Any]:
    """``["a=1", "b=x", "b=y"]`` -> ``{"a": 1, "b": ["x", "y"]}``.

    With ``provider``, an option of that provider that takes a string gets the value as
    written (``label_value=true`` is ``"true"``, not ``True``); other values are JSON-decoded.
    """
    options: dict[str, Any] = {}
    model = _options_model(provider)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ProviderError(f"--provider-option {pair!r}: expected KEY=VALUE")
        value = _typed_value(raw, model, key)
        if key in options:
            prev = options[key]
            options[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            options[key] = value
    return options


def provider_from_args(args: argparse.Namespace) -> Provider | None:
    """The provider the arguments name, or None for ``--provider none``."""
    if not args.provider or args.provider == NO_PROVIDER:
        return None
    options = parse_provider_options(args.provider_option, provider=args.provider)
    return load_provider(args.provider, **options)


def wants_local_cluster(args: argparse.Namespace, provider: Provider | None) -> bool:
    """Whether ``--local-cluster`` (auto, yes, no) asks for a local cluster."""
    choice = getattr(args, "local_cluster", "auto")
    if choice != "auto":
        return bool(choice == "yes")
    # a pod whose service account token is not mounted is no more inside its cluster than
    # a laptop is: --kubeconfig (or yes) asks for a local cluster there
    in_pod = in_cluster_problem() is None
    return provider is None or bool(args.kubeconfig or args.context) or in_pod


def manager_from_args(
    args: argparse.Namespace,
    *,
    parser: argparse.ArgumentParser | None = None,
    options: ManagerOptions | None = None,
) -> Manager:
    """A [`Manager`][mcruntime.Manager] for the arguments: local cluster and provider.

    With ``parser``, a bad provider name or option, or a local kubeconfig that cannot be
    loaded, ends the program as a bad argument does (``parser.error``: the usage and
    ``error: ...``, exit status 2) instead of raising
    [`MCRuntimeError`][mcruntime.errors.MCRuntimeError]. ``options`` are the manager's.
    """
    from mcruntime.errors import ConfigError, MCRuntimeError
    from mcruntime.manager import Manager

    try:
        provider = provider_from_args(args)
        config: Any = None
        if provider is None and getattr(args, "local_cluster", "auto") == "no":
            # Manager(None, provider=None) would load the default kubeconfig instead
            raise ConfigError(
                "nothing to run: --provider none with --local-cluster no leaves no cluster "
                "(give a provider, or a local cluster)"
            )
        if wants_local_cluster(args, provider):
            from mcruntime.cluster import Cluster

            config = Cluster.from_kubeconfig(args.kubeconfig, context=args.context)
        return Manager(config, provider=provider, options=options)
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
