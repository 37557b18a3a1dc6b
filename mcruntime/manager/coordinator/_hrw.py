"""Weighted rendezvous (highest-random-weight) hashing: which peer owns a key."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Peer", "hash01", "owner", "score"]

_SCALE = float(1 << 64)


@dataclass(frozen=True)
class Peer:
    """A replica taking part in sharding: its ``id`` and its relative capacity ``weight`` (> 0)."""

    id: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a peer needs an id")
        if not self.weight > 0 or math.isinf(self.weight):
            raise ValueError(
                f"peer {self.id!r}: weight must be a positive number, got {self.weight}"
            )


def hash01(peer_id: str, key: str) -> float:
    """A stable hash of ``peer_id|key`` mapped uniformly into the open interval (0, 1)."""
    digest = hashlib.blake2b(f"{peer_id}|{key}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / _SCALE


def score(peer: Peer, key: str) -> float:
    """The weighted rendezvous score ``-weight / ln(hash01)``; the highest score wins.

    With this logarithmic form a peer wins a key with probability
    ``weight / sum(weights)``: shares are exactly proportional to weights.
    """
    return -peer.weight / math.log(hash01(peer.id, key))


def owner(key: str, peers: Iterable[Peer]) -> str | None:
    """The id of the peer that owns ``key`` (None without peers); ties go to the smaller id.

    Every process computes the same answer from the same peer set, and a
    peer joining or leaving moves only the keys it wins or held.
    """
    best: tuple[float, str] | None = None
    for p in peers:
        s = score(p, key)
        if best is None or s > best[0] or (s == best[0] and p.id < best[1]):
            best = (s, p.id)
    return best[1] if best is not None else None
