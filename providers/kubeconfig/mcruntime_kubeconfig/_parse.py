"""Kubeconfig bytes from a Secret -> a kubeconfig dict, with errors that never quote the content."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import yaml

from mcruntime.errors import ConfigError


def decode_secret_value(secret: dict[str, Any], key: str) -> bytes | None:
    """The decoded bytes of ``data[key]`` (or ``stringData[key]``); None when absent.

    A key that is there with nothing in it is a `ConfigError` saying it is empty (not that
    it is missing)."""
    data = secret.get("data") or {}
    value = data.get(key)
    if value:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"data key {key!r} is not valid base64") from None
        if raw:
            return raw
    string_data = secret.get("stringData") or {}
    text = string_data.get(key)
    if text:
        return str(text).encode()
    if key in data or key in string_data:
        raise ConfigError(f"data key {key!r} is empty")
    return None


def digest(raw: bytes) -> str:
    """The sha256 hex digest used to notice a changed kubeconfig."""
    return hashlib.sha256(raw).hexdigest()


def parse_kubeconfig(raw: bytes, source: str) -> dict[str, Any]:
    """Parse ``raw`` as a kubeconfig mapping; ``source`` names it in errors (content never does)."""
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{source}: kubeconfig is not valid YAML{where}", path=source) from None
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{source}: not a kubeconfig (expected a mapping with clusters, contexts and users)",
            path=source,
        )
    return doc
