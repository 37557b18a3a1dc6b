"""Calling a webhook from the envtest loop: HTTPS POST of a review, trusting the configured caBundle.

The call runs in a short-lived thread of its own (``mcruntime/envtest/<server>/webhook``)
so the event loop never blocks; it is bounded by the webhook's timeout (the
socket's timeout bounds the thread too).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import http.client
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


def _post(url: str, ctx: ssl.SSLContext, body: bytes, timeout: float) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise WebhookCallError(f'bad webhook URL "{url}": must be https://host[:port]/path')
    conn = http.client.HTTPSConnection(
        parts.hostname, parts.port or 443, context=ctx, timeout=timeout
    )
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


async def call_webhook(
    client_config: Any, review: dict[str, Any], timeout: float, server_name: str
) -> dict[str, Any]:
    """POST ``review`` to the webhook ``client_config`` names; its decoded answer."""
    if not isinstance(client_config, dict):
        raise WebhookCallError("the webhook has no clientConfig")
    url = client_config.get("url")
    if not isinstance(url, str) or not url:
        raise WebhookCallError(
            "envtest calls webhooks by clientConfig.url only (no Service routing without a cluster network)"
        )
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

    def run() -> None:
        result, error = None, None
        try:
            result = _post(url, ctx, body, timeout)
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
