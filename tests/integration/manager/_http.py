"""GET on the manager's own HTTP servers (probes, metrics, debug pages)."""

from __future__ import annotations

import urllib.error
import urllib.request


def get(address: tuple[str, int] | None, path: str) -> tuple[int, str]:
    """Status and text of ``GET path`` on the server at ``address`` (loopback)."""
    assert address is not None, "the server is not running"
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{address[1]}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
