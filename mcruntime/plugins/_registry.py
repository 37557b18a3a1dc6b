from __future__ import annotations

import importlib.metadata
import logging
import threading
from typing import Any

import pluggy
from pydantic import BaseModel, ValidationError

from mcruntime.errors import MCRuntimeError
from mcruntime.multicluster import PROVIDER_API_VERSION, Provider
from mcruntime.plugins import hookspecs
from mcruntime.plugins._checks import did_you_mean
from mcruntime.plugins._spec import ProviderSpec

log = logging.getLogger("mcruntime.plugins")


class ProviderError(MCRuntimeError):
    """An unknown provider name, bad provider options, or a provider that failed to load."""


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_broken: dict[str, str] = {}


def incompatibility(api_version: str, installed: str = PROVIDER_API_VERSION) -> str | None:
    """Why a provider built for ``api_version`` cannot run on ``installed``, or None if it can.

    Same major version, and a minor version no newer than the installed one.
    """
    try:
        major, minor = (int(p) for p in api_version.split("."))
    except ValueError:
        return f"its api_version {api_version!r} is not 'MAJOR.MINOR'"
    have_major, have_minor = (int(p) for p in installed.split("."))
    if major != have_major or minor > have_minor:
        return (
            f"it was built for provider API {api_version} and this mcruntime implements "
            f"{installed} (compatible: {have_major}.0 to {installed}); install a version of "
            "the plugin built for this mcruntime"
        )
    return None


def _load_entry_points(pm: pluggy.PluginManager) -> dict[str, str]:
    """Register every entry point of the group; a plugin that fails to import is skipped, not fatal."""
    broken: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:
            broken[ep.name] = f"failed to load: {type(exc).__name__}: {exc}"
            log.error("provider plugin %r (%s) %s", ep.name, ep.value, broken[ep.name])
    return broken


def plugin_manager(*, reload: bool = False) -> pluggy.PluginManager:
    """The process's plugin manager, with every ``mcruntime.providers`` entry point loaded."""
    global _manager, _broken
    with _lock:
        if _manager is None or reload:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            _broken = _load_entry_points(pm)
            _manager = pm
        return _manager


def available_providers(*, reload: bool = False) -> dict[str, ProviderSpec]:
    """Every installed provider by name (built-ins and plugins alike)."""
    specs: dict[str, ProviderSpec] = {}
    for result in plugin_manager(reload=reload).hook.mcruntime_providers():
        for spec in result or ():
            reason = incompatibility(spec.api_version)
            if reason is not None:
                reason = f"cannot be used: {reason}"
                if _broken.get(spec.name) != reason:
                    log.warning("provider %r %s", spec.name, reason)
                _broken[spec.name] = reason
                continue
            specs.setdefault(spec.name, spec)
    return dict(sorted(specs.items()))


# the providers of this project that are distributions of their own, under providers/
_DISTRIBUTIONS = {
    "kubeconfig": "mcruntime-provider-kubeconfig",
    "cluster-api": "mcruntime-provider-cluster-api",
    "kind": "mcruntime-provider-kind",
    "cluster-inventory": "mcruntime-provider-cluster-inventory",
}


def _describe(err: ValidationError, provider: str) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        # a validator's own ValueError, without pydantic's "Value error, " in front
        cause = (e.get("ctx") or {}).get("error") if e["type"] == "value_error" else None
        msg = str(cause) if cause is not None else e["msg"]
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown option {loc!r}")
        elif loc:
            parts.append(f"option {loc!r}: {msg}")
        else:  # a check across options (the model's validator): its message names them
            parts.append(msg)
    return f"provider {provider!r}: " + "; ".join(parts)


def _resolve(name: str, options: dict[str, Any]) -> tuple[ProviderSpec, BaseModel]:
    specs = available_providers()
    spec = specs.get(name)
    if spec is None:
        if name in _broken:
            raise ProviderError(f"provider {name!r} is installed but {_broken[name]}")
        installed = ", ".join(specs) or "none"
        guess = did_you_mean(name, specs)
        hint = ""
        if name in _DISTRIBUTIONS:
            hint = (
                f"; {name!r} is a distribution of its own, {_DISTRIBUTIONS[name]}: "
                f"pip install ./providers/{name} from a checkout of mcruntime"
            )
        raise ProviderError(
            f"unknown provider {name!r}{guess}; installed providers: {installed}{hint}"
        )
    try:
        return spec, spec.options.model_validate(options)
    except ValidationError as exc:
        known = ", ".join(spec.options.model_fields) or "none"
        raise ProviderError(f"{_describe(exc, name)} (options of {name!r}: {known})") from None


def validate_options(name: str, /, **options: Any) -> BaseModel:
    """Provider ``name``'s options model built from ``options``; errors name the option and provider.

    ``name`` is positional-only, so a provider may have an option called ``name``.
    """
    return _resolve(name, options)[1]


def load_provider(name: str, /, **options: Any) -> Provider:
    """Build provider ``name`` with ``options`` (validated by the provider's pydantic model).

    ``name`` is positional-only, so a provider may have an option called ``name``
    (``load_provider("single", name="prod")``).
    """
    spec, validated = _resolve(name, options)
    try:
        return spec.factory(validated)
    except MCRuntimeError:
        raise
    except Exception as exc:
        raise ProviderError(f"provider {name!r} failed to start: {exc}") from exc
