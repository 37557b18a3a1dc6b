"""Every log record of a soak run, scanned for secrets as it is emitted."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

#: what a secret looks like in a log line, whatever its origin
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("PEM block", re.compile(r"-----BEGIN [A-Z ]+-----")),
    ("base64 PEM block (kubeconfig data)", re.compile(r"LS0tLS1CRUdJTi")),
    (
        "kubeconfig credential field",
        re.compile(
            r"(client-key-data|client-certificate-data|certificate-authority-data|"
            r"client_key_data|client_certificate_data)"
        ),
    ),
    ("bearer token", re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}")),
    ("authorization header", re.compile(r"(?i)['\"]?authorization['\"]?\s*[:=]\s*\S{8,}")),
)


class SecretScanner(logging.Handler):
    """A handler that formats every record (with its traceback) and looks for secrets.

    ``secrets`` are exact values that must never appear (the servers' bearer
    tokens, private keys); `PATTERNS` catch the shapes of others. A finding
    keeps the logger, the kind of secret and a redacted excerpt, never the
    secret itself.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self._secrets = [s for s in secrets if s]
        self._lock = threading.Lock()
        self.records = 0
        self.findings: list[str] = []

    def add_secrets(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._secrets.extend(s for s in secrets if s)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception as exc:  # a record that cannot be formatted is still scanned by its parts
            text = f"{record.msg!r} {record.args!r} {exc!r}"
        with self._lock:
            self.records += 1
            secrets = list(self._secrets)
        found = [what for what, pattern in PATTERNS if pattern.search(text)]
        found += ["a server's bearer token or key" for s in secrets if s in text]
        if found:  # the message template only: its arguments may hold the secret
            excerpt = str(record.msg)[:120]
            with self._lock:
                self.findings.append(f"{record.name}: {', '.join(found)}: {excerpt!r}")
