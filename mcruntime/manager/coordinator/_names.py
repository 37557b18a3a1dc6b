"""Lease names for peers and clusters: valid Kubernetes names, distinct for distinct keys."""

from __future__ import annotations

import hashlib
import re

__all__ = ["lease_name"]

_MAX = 253
_VALID = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_INVALID_RUN = re.compile(r"[^a-z0-9]+")
_READABLE = 40


def lease_name(prefix: str, key: str) -> str:
    """``prefix + key`` when that is a valid Lease name; otherwise a readable, hashed form.

    A key that is not already a DNS-1123 label (upper case, ``/``, ``+``, ``_``,
    too long...) becomes the tail of its sanitized form plus a hash of the
    original key, so two different keys never share a Lease.
    """
    if _VALID.fullmatch(key) and len(prefix) + len(key) <= _MAX:
        return prefix + key
    digest = hashlib.blake2b(key.encode(), digest_size=5).hexdigest()
    readable = _INVALID_RUN.sub("-", key.lower()).strip("-")[-_READABLE:].strip("-")
    return f"{prefix}{readable}-{digest}" if readable else f"{prefix}{digest}"
