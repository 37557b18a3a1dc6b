"""Calling a webhook from the envtest loop: HTTPS POST of a review, trusting the configured caBundle.

The call runs in a short-lived thread of its own (``mcruntime/envtest/<server>/webhook``)
so the event loop never blocks; it is bounded by the webhook's timeout, and so is its
thread: a call that ran out of time (or whose request was cancelled: the server stopping)
has its connection shut down, so a webhook that answers a byte at a time, or holds its TLS
handshake, does not keep the thread reading (each read within the socket's timeout) long
after kube-apiserver would have given up.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import http.client
import math
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from mcruntime import _json
from mcruntime._memfile import verify_as_go

__all__ = ["WebhookCallError", "call_webhook"]


class WebhookCallError(Exception):
    """The webhook could not be called or gave no usable answer (failurePolicy decides)."""


def _context(ca_bundle: str | None) -> ssl.SSLContext:
    if not ca_bundle:
        return verify_as_go(ssl.create_default_context())
    try:
        pem = base64.b64decode(ca_bundle, validate=True).decode()
        return verify_as_go(ssl.create_default_context(cadata=pem))
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError):
        raise WebhookCallError("clientConfig.caBundle is not a base64-encoded PEM bundle") from None


class _Call:
    """The connection of one webhook call, shut down by `cut` (from the loop) when the call
    ran out of time: its thread, blocked reading, ends at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: http.client.HTTPSConnection | None = None
        self._cut = False

    def hold(self, conn: http.client.HTTPSConnection) -> None:
        with self._lock:
            self._conn = conn

    def connected(self) -> None:
        """Shut the new connection down at once if the call was cut while it connected."""
        with self._lock:
            cut = self._cut
        if cut:
            self.cut()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sock = None if self._conn is None else self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Connection(http.client.HTTPSConnection):
    """An HTTPS connection that tells its `_Call` once connected (a cut may have come)."""

    call: _Call | None = None

    def connect(self) -> None:
        super().connect()
        if self.call is not None:
            self.call.connected()


def _post(
    url: str, ctx: ssl.SSLContext, body: bytes, timeout: float, call: _Call | None = None
) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise WebhookCallError(f'bad webhook URL "{url}": must be https://host[:port]/path')
    conn = _Connection(parts.hostname, parts.port or 443, context=ctx, timeout=timeout)
    conn.call = call
    if call is not None:
        call.hold(conn)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        resp = conn.getresponse()
        data = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise WebhookCallError(f'Post "{url}": {type(exc).__name__}: {exc}') from None
    finally:
        conn.close()
    if resp.status != 200:
        raise WebhookCallError(f'Post "{url}": the server responded with status {resp.status}')
    try:
        out = _json.loads(data)
    except _json.JSONDecodeError:
        raise WebhookCallError(f'Post "{url}": the response is not JSON') from None
    if not isinstance(out, dict):
        raise WebhookCallError(f'Post "{url}": the response is not a JSON object')
    return out


def _go_seconds(seconds: float) -> str:
    """``seconds``, rounded up to whole seconds, as Go's ``time.Duration.String`` writes them."""
    whole = max(1, math.ceil(seconds))
    minutes, rest = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m{rest}s"
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


async def call_webhook(
    client_config: Any,
    review: dict[str, Any],
    timeout: float,
    server_name: str,
    *,
    tell_timeout: bool = False,
) -> dict[str, Any]:
    """POST ``review`` to the webhook ``client_config`` names; its decoded answer.

    ``tell_timeout``: the URL says the call's deadline, ``?timeout=10s``, as kube-apiserver's
    admission dispatchers tell every admission webhook (``r.Timeout``, whole seconds rounded
    up); its errors quote the URL with it, as theirs do."""
    if not isinstance(client_config, dict):
        raise WebhookCallError("the webhook has no clientConfig")
    url = client_config.get("url")
    if not isinstance(url, str) or not url:
        raise WebhookCallError(
            "envtest calls webhooks by clientConfig.url only (no Service routing without a cluster network)"
        )
    if tell_timeout:
        url += ("&" if urlsplit(url).query else "?") + f"timeout={_go_seconds(timeout)}"
    ctx = _context(client_config.get("caBundle"))
    body = _json.dumps(review)
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[dict[str, Any]] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    call = _Call()

    def run() -> None:
        result, error = None, None
        try:
            result = _post(url, ctx, body, timeout, call)
        except BaseException as exc:  # handed to the loop, never lost
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(
        target=run, name=f"mcruntime/envtest/{server_name}/webhook", daemon=True
    ).start()
    try:
        return await asyncio.wait_for(fut, timeout)
    except TimeoutError:
        raise WebhookCallError(
            f'Post "{url}": context deadline exceeded (timeout {timeout:g}s)'
        ) from None
    finally:
        # out of time, or cancelled (wait_for cancels the future then): its thread stops
        # reading now; after an answer, its connection is closed already (nothing to cut)
        call.cut()
