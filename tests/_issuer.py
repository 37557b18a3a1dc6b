"""A scripted OIDC issuer over HTTPS: a discovery document and a token endpoint.

For the ``auth-provider: oidc`` tests: it records each refresh request's form and
``Authorization`` header, and can hang before answering (``hang``) until `stop`, or
trickle its answer in a byte at a time (``drip``).
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
from pathlib import Path
from urllib.parse import parse_qs

from mcruntime._certs import CertificateAuthority
from tests import _httpserver


class Issuer:
    """An OIDC issuer over HTTPS: discovery, and a token endpoint handing out ``token``."""

    def __init__(self, folder: Path, token: str, host: str = "127.0.0.1") -> None:
        self.token = token
        self.forms: list[dict[str, list[str]]] = []
        self.authorizations: list[str] = []
        self.release = threading.Event()
        self.hang = False
        self.drip = False
        ca = CertificateAuthority("test-issuer-ca")
        self.ca_pem = ca.cert_pem
        pair = ca.issue(host, server=True, hosts=["127.0.0.1", host])
        (folder / "idp.pem").write_bytes(pair.cert_pem + pair.key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / "idp.pem")
        issuer = self

        class Handler(_httpserver.Handler):
            def do_GET(self) -> None:
                doc = {"issuer": issuer.url, "token_endpoint": f"{issuer.url}/token"}
                self.answer(200, json.dumps(doc).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                issuer.forms.append(parse_qs(self.rfile.read(length).decode()))
                issuer.authorizations.append(self.headers.get("Authorization") or "")
                if issuer.hang:
                    issuer.release.wait(30)
                answer = {
                    "access_token": "access",
                    "token_type": "Bearer",
                    "expires_in": 60,
                    "id_token": issuer.token,
                    "refresh_token": "renewed",
                }
                if not issuer.drip:
                    self.answer(200, json.dumps(answer).encode())
                    return
                body = json.dumps(answer).encode()
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                for byte in head + body:  # 0.05 s apart: each well within a read's timeout
                    if issuer.release.wait(0.05):
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return  # the client gave up
                self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://{host}:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="test-issuer")
        self.thread.start()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def user(self, **config: str | None) -> dict[str, object]:
        """A kubeconfig user with ``auth-provider: oidc`` at this issuer: client
        ``mcruntime``, a refresh token, this issuer's CA; ``config`` sets fields (None
        removes one)."""
        fields: dict[str, str] = {
            "idp-issuer-url": self.url,
            "client-id": "mcruntime",
            "refresh-token": "refresh-1",
            "idp-certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
        }
        for key, value in config.items():
            if value is None:
                fields.pop(key, None)
            else:
                fields[key] = value
        return {"auth-provider": {"name": "oidc", "config": fields}}
