"""A request with a cluster, as the queue tests queue them, and its fair key."""

from __future__ import annotations

from typing import NamedTuple


class Req(NamedTuple):
    cluster_name: str
    name: str


def by_cluster(r: Req) -> str:
    return r.cluster_name
