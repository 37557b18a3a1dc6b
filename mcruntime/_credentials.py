"""Credentials that change while a cluster runs: exec plugins, oidc id-tokens and token files.

A kubeconfig user's credential may come from a plugin (``exec``) or a file another
process rotates (``tokenFile``: a projected service account token, a sidecar's). The
`kubernetes` loader reads a token file once, when the context is loaded: a rotated
token then fails every request with 401 until the process restarts. mcruntime reads it
again, as client-go does, when the token read is a minute old and at once after a 401;
a re-read that fails keeps the token read before, with one warning per failure streak.

The `kubernetes` loader runs a context's exec plugin when the context is loaded, and
again inside the auth step of every request once the credential expires: with no time
bound (a plugin waiting on its network or on a login in a browser holds the request, or
the provider loading the context, for ever), once per concurrent request, and with the
plugin's failure written to the root logger. mcruntime takes ``exec`` out of the context
before the loader sees it and runs the plugin itself, as client-go does:

- at the first call that needs the credential, not at load, and again when it expires or
  the server answers 401;
- once at a time, on a thread of its own: calls that need the credential meanwhile wait
  for that run, each within its own deadline, and share its failure;
- while a call waits for it: once the last waiting call's deadline passed or its cluster
  left, the plugin is killed with its process group. A call with a short deadline that
  started the run does not end it for the calls with more time that joined it;
- never interactively: no standard input, ``spec.interactive`` false; a plugin that
  says ``interactiveMode: Always`` is refused when the context is loaded;
- never past the process: a plugin still running when the interpreter exits is killed.

An ``auth-provider: oidc`` id-token is refreshed the same way, one run being the requests
to its issuer (see `OidcCredential`).

Errors name the plugin by its command's file name, and the user, context and kubeconfig:
never its arguments or environment. A missing command shows its ``installHint``; a failing
one the last line of its standard error, with its configured environment values masked.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import datetime
import functools
import logging
import math
import os
import re
import selectors
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, Self
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import getproxies

import urllib3
from urllib3.connectionpool import HTTPConnectionPool

from mcruntime import _json
from mcruntime._bounded import BoundedResponse, answer_by
from mcruntime._forked import in_a_forked_child
from mcruntime._keypair import KeyProblem, check_pair
from mcruntime._memfile import client_certificate_file
from mcruntime._noproxy import direct
from mcruntime._process import kill_group, kill_process_group
from mcruntime._resolve import new_socket
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.errors import ConfigError, CredentialError

__all__ = [
    "API_VERSIONS",
    "CREDENTIAL_ATTRIBUTE",
    "HOOK_TIMEOUT",
    "MAX_PLUGIN_OUTPUT",
    "TOKEN_FILE_PERIOD",
    "Credential",
    "CredentialCancelled",
    "CredentialSource",
    "CredentialTimeout",
    "ExecCredential",
    "OidcCredential",
    "TokenFile",
    "credential_of",
]

log = logging.getLogger("mcruntime.client")

#: the ExecCredential versions client-go speaks (v1alpha1 was removed in 1.24)
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: a credential counts as expired this many seconds before its ``expirationTimestamp``
EXPIRY_MARGIN = 10.0
#: deadline of a run started by the ``kubernetes`` refresh hook (its own API classes)
HOOK_TIMEOUT = 30.0
#: a token file's token is read again once it is this old (seconds), as client-go does
TOKEN_FILE_PERIOD = 60.0
#: how often a waiting call checks whether its cluster left, and a plugin's run whether
#: a call still waits for it (a process and an Event cannot be waited on together)
_CANCEL_POLL = 0.05
#: after a failed fetch, calls share its failure at once for this long (seconds), doubled
#: for each failure in a row up to `_FAILURE_HOLD_MAX`: a plugin (an IdP) that fails is not
#: run again by every call (an unhealthy cluster's health probe each second, each
#: informer's retry, each reconcile), each run printing its error on standard error
_FAILURE_HOLD = 1.0
_FAILURE_HOLD_MAX = 30.0
#: an RFC 3339 time as Go's ``time.Parse(time.RFC3339, ...)`` reads it (what metav1.Time
#: decodes an ExecCredential's ``status.expirationTimestamp`` with): a date, ``T``, a time
#: to the second with an optional fraction, and a zone, ``Z`` or an offset (required)
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
#: what an ExecCredential's apiVersion that is one looks like (a group, a Kubernetes version)
_API_VERSION = re.compile(r"[a-z0-9.-]{1,253}/v[0-9]+(?:(?:alpha|beta)[0-9]+)?")
#: most bytes an exec plugin may write to its standard output (an ExecCredential is a few KiB)
MAX_PLUGIN_OUTPUT = 1 << 20
#: bytes read from a plugin's standard output at once
_READ_SIZE = 1 << 16


class Flag(Protocol):
    """What says a call was cancelled: a `threading.Event`, or any object that tells."""

    def is_set(self) -> bool: ...


#: the cluster fields an exec plugin sees with ``provideClusterInfo``
_CLUSTER_INFO = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
_EXTENSION = "client.authentication.k8s.io/exec"


class CredentialTimeout(Exception):
    """The fetch did not end before the call's deadline (a plugin was killed, a request to
    an issuer abandoned)."""


class CredentialCancelled(Exception):
    """The call's cluster left while the fetch ran (a plugin was killed)."""


@dataclass(frozen=True, slots=True)
class Credential:
    """What a source gave: a bearer token, or (from an exec plugin) a client certificate.

    Its repr leaves the token out (it is no tuple either, whose items error trackers record
    one by one): a call's frames hold it, and their locals end up in error trackers."""

    token: str | None = field(repr=False)
    #: the certificate and key in one file (``.path``), open while this object is held
    cert_file: Any
    #: which run of the plugin (or read of the file) gave it: a 401 invalidates that one only
    run: int


class _Held(NamedTuple):
    credential: Credential
    #: time.time() after which it must not be used (None: until the server refuses it)
    expires: float | None


class CredentialSource(Protocol):
    """Where a configuration's requests get their credential (an exec plugin, an oidc
    auth-provider, a token file)."""

    def get(self, end: float, cancelled: Flag | None = None, cluster: str = "") -> Credential:
        """The credential to send, fetched first if need be, by ``end`` (``time.monotonic()``)."""
        ...

    def invalidate(self, used: Credential) -> None:
        """The server refused ``used`` (401): the next `get` fetches a new one."""
        ...

    def describe(self) -> str:
        """The source as errors name it."""
        ...

    #: what became of a fetch its caller's deadline ended (said after the error)
    abandoned: str


def _text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


class _Shared:
    """A credential source that copies of a ``Configuration`` share, as they share the user."""

    #: what became of a fetch its caller's deadline ended (said after the error)
    abandoned = "it was abandoned"

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self


class _Run:
    """One fetch in flight, on a thread of its own, and the calls that wait for it.

    The fetch lasts while one of them still waits: until the latest of their deadlines,
    and no longer once every one of them gave up (its deadline passed, its cluster left).
    A call with a short deadline (a health probe) that happened to start a plugin does
    not stop it for the calls with more time that joined it.
    """

    def __init__(self, number: int, cond: threading.Condition) -> None:
        self.number = number
        self._cond = cond
        #: the waiting calls' deadlines (``time.monotonic()``), by call
        self.waiting: dict[object, float] = {}
        self.done = False
        self.thread: threading.Thread | None = None
        self.held: _Held | None = None
        self.failure: CredentialError | None = None

    def end(self) -> float:
        """The latest deadline of the calls still waiting; in the past once none waits."""
        with self._cond:
            return max(self.waiting.values(), default=-math.inf)


class _Fetched(_Shared):
    """A credential fetched by a run that may block (a process, a request).

    The runs of one source are one at a time, each on a thread of its own that ends with
    it; the calls that need the credential meanwhile wait for that run, each within its
    own deadline, and share its failure. A run is stopped once no call waits for it.
    Subclasses fetch in `_fetch`. Thread-safe.
    """

    #: how long the last call to give up on a run waits for it to stop (0: it cannot be
    #: stopped, it ends by its own deadline)
    _stop_wait = 0.0

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._held: _Held | None = None
        self._run: _Run | None = None
        self._runs = 0
        #: the last run's failure and until when calls share it (``time.monotonic()``)
        self._failure: tuple[CredentialError, float] | None = None
        self._failures = 0  # failed runs in a row

    def describe(self) -> str:
        raise NotImplementedError

    def _fetch(self, run: int, end: Callable[[], float]) -> _Held:
        """One run, until ``end()`` (it moves while calls join and leave): the credential,
        or `CredentialError`, or `CredentialTimeout` once ``end()`` has passed."""
        raise NotImplementedError

    def _current(self) -> Credential | None:
        held = self._held
        if held is None:
            return None
        if held.expires is not None and time.time() >= held.expires - EXPIRY_MARGIN:
            return None
        return held.credential

    def get(self, end: float, cancelled: Flag | None = None, cluster: str = "") -> Credential:
        """The current credential, fetched first if there is none.

        ``end`` is the call's ``time.monotonic()`` deadline; ``cancelled`` is set when the
        call's cluster leaves, ``cluster`` is its name (a run's thread carries it). Raises
        `CredentialTimeout`, `CredentialCancelled`, or
        [`CredentialError`][mcruntime.errors.CredentialError] when the fetch fails.
        """
        found = self._current()  # most calls: a current credential, read without the lock
        if found is not None:
            return found
        me = object()
        with self._cond:
            while True:
                found = self._current()
                if found is not None:
                    return found
                if cancelled is not None and cancelled.is_set():
                    raise CredentialCancelled()
                if end - time.monotonic() <= 0:
                    raise CredentialTimeout()
                run = self._run
                failed = self._failure
                if run is None and failed is not None and time.monotonic() < failed[1]:
                    # a run failed a moment ago: its failure, not one more run
                    raise CredentialError(str(failed[0]))
                if run is None:
                    self._runs += 1
                    run = self._run = _Run(self._runs, self._cond)
                    run.waiting[me] = end
                    run.thread = start_thread(self._drive, thread_name("credential", cluster), run)
                else:
                    run.waiting[me] = end
                while not run.done:
                    left = end - time.monotonic()
                    gone = cancelled is not None and cancelled.is_set()
                    if left <= 0 or gone:
                        self._leave(run, me)
                        raise CredentialCancelled() if gone else CredentialTimeout()
                    self._cond.wait(left if cancelled is None else min(left, _CANCEL_POLL))
                run.waiting.pop(me, None)
                if run.held is not None:
                    return run.held.credential
                if run.failure is not None:
                    # the run this call waited for failed: its failure, not one more run
                    raise CredentialError(str(run.failure))
                # the run was stopped as this call joined it (its callers had given up): again

    def _leave(self, run: _Run, me: object) -> None:
        """This call gives up on ``run`` (lock held); the last to leave waits until the run
        has stopped, so that nothing of it (a plugin process) outlives the call."""
        run.waiting.pop(me, None)
        until = time.monotonic() + self._stop_wait
        while not run.waiting and not run.done:
            left = until - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(min(left, _CANCEL_POLL))
        if run.done and run.thread is not None:
            run.thread.join(max(until - time.monotonic(), 0.0))  # past the lock: it ends now

    def _drive(self, run: _Run) -> None:
        """The run's thread: fetch, then hand the outcome to the calls waiting for it."""
        held: _Held | None = None
        failure: CredentialError | None = None
        try:
            held = self._fetch(run.number, run.end)
        except CredentialError as exc:
            failure = exc
        except CredentialTimeout:
            pass  # every call waiting for it gave up
        except Exception as exc:  # a fault in the fetch itself: fail its calls, keep the cause
            log.error("the %s failed", self.describe(), exc_info=True)
            failure = CredentialError(f"the {self.describe()} failed: {type(exc).__name__}")
        finally:
            with self._cond:
                run.done = True
                run.held, run.failure = held, failure
                if held is not None:
                    self._held = held
                    self._failure, self._failures = None, 0
                elif failure is not None:
                    hold = min(_FAILURE_HOLD * 2**self._failures, _FAILURE_HOLD_MAX)
                    self._failures += 1
                    self._failure = (failure, time.monotonic() + hold)
                if self._run is run:
                    self._run = None
                self._cond.notify_all()

    def invalidate(self, used: Credential) -> None:
        """The server refused ``used`` (401): the next call fetches again, unless another run
        has given a newer credential meanwhile."""
        with self._cond:
            if self._held is not None and self._held.credential.run == used.run:
                self._held = None


class ExecCredential(_Fetched):
    """One kubeconfig user's exec plugin and the credential it last gave (thread-safe)."""

    #: what became of a run its caller's deadline ended (said after the error)
    abandoned = "it was stopped"
    #: a plugin is killed once no call waits for it: the last call waits until it is dead
    _stop_wait = 3.0

    def __init__(
        self,
        config: dict[str, Any],
        *,
        where: str,
        base_dir: str,
        cluster: dict[str, Any],
        source: str,
        context: str,
    ) -> None:
        def bad(what: str) -> ConfigError:
            return ConfigError(f"{where}: exec {what}", path=source, context=context)

        command = config.get("command")
        if not isinstance(command, str) or not command:
            raise bad("names no command")
        api_version = config.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise bad(
                f"apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}"
                if api_version
                else "sets no apiVersion"
            )
        args = config.get("args") or []
        env = config.get("env") or []
        if not _text_list(args):
            raise bad("args must be a list of strings")
        if not isinstance(env, list) or not all(
            isinstance(e, dict)
            and isinstance(e.get("name"), str)
            and isinstance(e.get("value"), str)
            for e in env
        ):
            raise bad("env must be a list of {name, value} strings")
        mode = config.get("interactiveMode")
        if not mode:
            if api_version == API_VERSIONS[0]:
                # client-go defaults it for v1beta1 only: kubectl refuses this entry too
                raise bad(
                    f"sets no interactiveMode, which {api_version} requires (Never or IfAvailable)"
                )
            mode = "IfAvailable"
        if mode not in ("Never", "IfAvailable", "Always"):
            raise bad(f"interactiveMode {mode!r} is not Never, IfAvailable or Always")
        self.name = os.path.basename(command)
        if mode == "Always":
            raise bad(
                f"plugin {self.name!r} needs an interactive terminal (interactiveMode: "
                "Always); mcruntime runs plugins without one"
            )
        # a command with a path separator is relative to the kubeconfig's folder, as in
        # client-go; a bare name is looked up in PATH
        if os.sep in command and not os.path.isabs(command) and base_dir:
            command = str(Path(base_dir) / command)
        self._argv = [command, *args]
        self._env = {e["name"]: e["value"] for e in env}
        self._api_version: str = api_version
        hint = config.get("installHint")
        self._install_hint = hint.strip() if isinstance(hint, str) else ""
        self._where = where
        info: dict[str, Any] = {"interactive": False}
        if config.get("provideClusterInfo") is True:
            info["cluster"] = _cluster_info(cluster, base_dir)
        self._exec_info = _json.dumps(
            {"apiVersion": api_version, "kind": "ExecCredential", "spec": info}
        ).decode()
        super().__init__()

    def __repr__(self) -> str:
        return f"ExecCredential(plugin={self.name!r})"

    def describe(self) -> str:
        """The plugin as errors name it: its command's file name, user, context and file."""
        return f"exec plugin {self.name!r} of {self._where}"

    # -- one run ----------------------------------------------------------------------

    def _failed(self, what: str) -> CredentialError:
        return CredentialError(f"the {self.describe()} {what}")

    def _fetch(self, run: int, end: Callable[[], float]) -> _Held:
        if end() - time.monotonic() <= 0:
            raise CredentialTimeout()
        env = {**os.environ, **self._env, "KUBERNETES_EXEC_INFO": self._exec_info}
        try:
            proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                # its standard error is this process's, as client-go passes it: what a plugin
                # says of a failure may hold a secret (a refresh token it was refused), so it
                # is never put in an error or a log line
                stderr=None,
                env=env,
                start_new_session=True,  # its own process group: killed whole at the deadline
            )
        except FileNotFoundError:
            hint = f"; {self._install_hint}" if self._install_hint else ""
            raise self._failed(f"was not found{hint}") from None
        except OSError as exc:
            raise self._failed(f"cannot be run: {exc.strerror or type(exc).__name__}") from None
        with _running_lock:
            _running.add(proc)
        try:
            out = _communicate(proc, end)
        except BaseException as exc:
            kill_process_group(proc)
            if isinstance(exc, _TooMuchOutput):
                raise self._failed(
                    f"wrote more than {MAX_PLUGIN_OUTPUT >> 20} MiB to its standard output "
                    "(an ExecCredential is a few KiB); it was stopped"
                ) from None
            raise
        finally:
            with _running_lock:
                _running.discard(proc)
        if proc.returncode != 0:
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            raise self._failed(f"{how} (what it wrote to standard error is this process's)")
        return self._parse(run, out)

    def _parse(self, run: int, out: bytes) -> _Held:
        def bad(why: str) -> CredentialError:
            return self._failed(f"wrote no ExecCredential of {self._api_version} ({why})")

        try:
            doc = _json.loads(out)
        except _json.JSONDecodeError:
            raise bad("its output is not JSON") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise bad("its output is not an ExecCredential")
        version = doc.get("apiVersion")
        if version != self._api_version:
            if isinstance(version, str) and _API_VERSION.fullmatch(version):
                raise bad(f"its apiVersion is {version!r}")  # (as client-go says it)
            # anything else is not said: it is the plugin's output, as the token is (a
            # plugin's template that put the token there)
            raise bad(f"its apiVersion is not a version, such as {self._api_version}")
        status = doc.get("status")
        if not isinstance(status, dict):
            raise bad("it has no status")
        expires: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp is not None:
            expires = _rfc3339(stamp)
            if expires is None:
                # (the value is not said: it is the plugin's output, as the token is)
                raise bad(
                    "its expirationTimestamp is not an RFC 3339 time with a zone, such as "
                    "2006-01-02T15:04:05Z"
                )
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if isinstance(token, str) and token:
            return _Held(Credential(token, None, run), expires)
        if isinstance(cert, str) and cert and isinstance(key, str) and key:
            # checked here, as kubeconfig keys are at load: a bad pair would fail each
            # handshake with an ssl error that names neither the plugin nor what is wrong
            try:
                check_pair(
                    cert.encode(),
                    "its clientCertificateData",
                    key.encode(),
                    "its clientKeyData",
                    "its clientCertificateData",
                )
            except KeyProblem as exc:
                raise self._failed(
                    f"returned a client certificate that cannot be used: {exc}"
                ) from None
            file = client_certificate_file(cert.encode(), key.encode())
            return _Held(Credential(None, file, run), expires)
        if cert or key:
            raise bad("it has clientCertificateData or clientKeyData without the other")
        raise bad("it has neither a token nor a client certificate")


class _TooMuchOutput(Exception):
    """A plugin wrote more than `MAX_PLUGIN_OUTPUT` bytes to its standard output."""


def _communicate(proc: subprocess.Popen[bytes], end: Callable[[], float]) -> bytes:
    """The plugin's output once it exits; raises `CredentialTimeout` once ``end()`` passed,
    `_TooMuchOutput` past `MAX_PLUGIN_OUTPUT` bytes (a plugin printing in a loop would
    otherwise fill this process's memory until the deadline, hundreds of MB a second).

    client-go buffers the whole output (plugin/pkg/client/auth/exec/exec.go,
    ``cmd.Stdout = stdout``, a ``bytes.Buffer``): the cap is a bound beyond it, far above
    any ExecCredential."""
    stdout = proc.stdout
    assert stdout is not None
    fd = stdout.fileno()
    out = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = end() - time.monotonic()
            if left <= 0:
                raise CredentialTimeout()
            if not sel.select(min(left, _CANCEL_POLL)):
                continue
            chunk = os.read(fd, _READ_SIZE)
            if not chunk:
                break
            out += chunk
            if len(out) > MAX_PLUGIN_OUTPUT:
                raise _TooMuchOutput
    stdout.close()
    while True:  # its output ended: it exits (or did)
        left = end() - time.monotonic()
        if left <= 0:
            raise CredentialTimeout()
        try:
            proc.wait(timeout=min(left, _CANCEL_POLL))
        except subprocess.TimeoutExpired:
            continue
        return bytes(out)


#: the plugins running now: killed at exit, so that a plugin waiting for ever (a login in a
#: browser) does not outlive the process whose call started it (it has its own session)
_running: set[subprocess.Popen[bytes]] = set()
_running_lock = threading.Lock()


def _forget_the_parents_plugins() -> None:
    """In a child just forked: the plugins running are the parent's, which its calls still
    wait for; the child's exit (a pre-fork server's worker ends with ``sys.exit``, running
    `atexit` hooks) must not kill them."""
    global _running, _running_lock
    _running, _running_lock = set(), threading.Lock()


in_a_forked_child(_forget_the_parents_plugins)


@atexit.register
def _kill_running() -> None:
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        kill_group(proc)


def _cluster_info(cluster: dict[str, Any], base_dir: str) -> dict[str, Any]:
    """The ``spec.cluster`` a plugin with ``provideClusterInfo`` reads: the kubeconfig's
    cluster fields, the CA as data, and the cluster's exec extension as ``config``."""
    found = cluster.get("cluster")
    entry: dict[str, Any] = found if isinstance(found, dict) else {}
    info = {k: entry[k] for k in _CLUSTER_INFO if k in entry}
    ca_path = entry.get("certificate-authority")
    if "certificate-authority-data" not in info and isinstance(ca_path, str) and ca_path:
        with contextlib.suppress(OSError):
            path = Path(base_dir, ca_path) if base_dir else Path(ca_path)
            info["certificate-authority-data"] = base64.b64encode(path.read_bytes()).decode()
    for ext in entry.get("extensions") or ():
        if isinstance(ext, dict) and ext.get("name") == _EXTENSION:
            info["config"] = ext.get("extension")
            break
    return info


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (``time.time()`` seconds), None when it has none."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = _json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, _json.JSONDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class OidcCredential(_Fetched):
    """A kubeconfig user's ``auth-provider: oidc``: its id-token, refreshed at its issuer.

    The `kubernetes` loader refreshes an expired id-token with no deadline and, when the
    kubeconfig names no CA for the issuer, reads its discovery document without checking
    its certificate: that document names where the refresh token and the client secret
    go. Here the issuer's certificate is
    checked (against ``idp-certificate-authority(-data)``, else the system's CAs), and its
    discovery document and token endpoint are asked within the waiting calls' deadlines (a
    call ends at once when its cluster leaves; the request in flight is not cut, its own
    deadline ends it, however slowly its answer trickles in). The refreshed
    tokens are kept in memory: the kubeconfig is not written.
    """

    #: what became of a fetch its caller's deadline ended (said after the error)
    abandoned = "its request to the issuer was abandoned"

    def __init__(
        self,
        provider: dict[str, Any],
        *,
        where: str,
        base_dir: str,
        source: str,
        context: str,
    ) -> None:
        def bad(what: str) -> ConfigError:
            return ConfigError(f"{where}: oidc auth-provider {what}", path=source, context=context)

        config = provider.get("config")
        if not isinstance(config, dict):
            raise bad("has no config")
        text = {k: v for k, v in config.items() if isinstance(v, str) and v}
        issuer, client_id = text.get("idp-issuer-url", ""), text.get("client-id", "")
        if not issuer.startswith("https://"):
            raise bad("needs idp-issuer-url, an https:// URL")
        if not client_id:
            raise bad("needs client-id")
        if "id-token" not in text and "refresh-token" not in text:
            raise bad("has neither an id-token nor a refresh-token")
        self._where = where
        self._issuer = issuer.rstrip("/")
        self._client_id = client_id
        self._client_secret = text.get("client-secret", "")
        self._refresh_token = text.get("refresh-token", "")
        self._ca: str | None = None
        if "idp-certificate-authority-data" in text:
            try:
                self._ca = base64.b64decode(text["idp-certificate-authority-data"]).decode()
            except (ValueError, UnicodeDecodeError):
                raise bad("idp-certificate-authority-data is not base64 PEM") from None
        elif "idp-certificate-authority" in text:
            path = Path(base_dir, text["idp-certificate-authority"])
            try:
                self._ca = path.read_text()
            except OSError as exc:
                raise bad(
                    f"idp-certificate-authority {path} cannot be read: {exc.strerror}"
                ) from None
        super().__init__()
        if "id-token" in text:
            token = text["id-token"]
            self._held = _Held(Credential(token, None, 0), _jwt_expiry(token))

    def __repr__(self) -> str:
        parts = urlsplit(self._issuer)
        return f"OidcCredential(issuer={f'https://{_host(self._issuer)}{parts.path}'!r})"

    def describe(self) -> str:
        return f"oidc auth-provider of {self._where}"

    def _failed(self, what: str) -> CredentialError:
        return CredentialError(f"the {self.describe()} cannot refresh its id-token: {what}")

    def _fetch(self, run: int, end: Callable[[], float]) -> _Held:
        if not self._refresh_token:
            raise self._failed("it expired or was refused, and there is no refresh-token")
        found = self._ask("GET", f"{self._issuer}/.well-known/openid-configuration", end())
        endpoint = found.get("token_endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith("https://"):
            raise self._failed("the issuer's discovery document names no https token_endpoint")
        form: dict[str, str] = {"grant_type": "refresh_token", "refresh_token": self._refresh_token}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if self._client_secret:
            pair = f"{quote(self._client_id, safe='')}:{quote(self._client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = self._client_id  # a public client
        answer = self._ask("POST", endpoint, end(), urlencode(form).encode(), headers)
        token = answer.get("id_token")
        if not isinstance(token, str) or not token:
            raise self._failed("the token endpoint's answer has no id_token")
        renewed = answer.get("refresh_token")
        if isinstance(renewed, str) and renewed:
            self._refresh_token = renewed  # runs are one at a time
        return _Held(Credential(token, None, run), _jwt_expiry(token))

    def _pool(self, url: str) -> urllib3.PoolManager:
        """A pool for ``url`` that checks the issuer's certificate, through the environment's
        proxy unless Go's rules reach the host directly (loopback, ``NO_PROXY``: see
        `mcruntime._noproxy`), as client-go reaches an issuer; its
        answers (a proxy's to ``CONNECT`` too) come in whole by the request's deadline."""
        tls: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED, "ca_cert_data": self._ca}
        proxies = getproxies()
        proxy = proxies.get("https") or proxies.get("all")
        manager: urllib3.PoolManager
        if not proxy or direct(url, proxies.get("no") or ""):
            manager = urllib3.PoolManager(retries=False, **tls)
        elif proxy.startswith("socks"):
            try:
                from urllib3.contrib.socks import SOCKSProxyManager
            except ImportError:
                where = urlsplit(proxy).netloc.rpartition("@")[2]  # never its credentials
                raise self._failed(
                    f"the environment's SOCKS proxy {where} needs PySocks: "
                    "pip install 'mcruntime[socks]'"
                ) from None
            manager = SOCKSProxyManager(proxy, retries=False, **tls)
        else:
            manager = urllib3.ProxyManager(proxy, retries=False, **tls)
        manager.pool_classes_by_scheme = {
            scheme: _bounded_pool(cls) for scheme, cls in manager.pool_classes_by_scheme.items()
        }
        return manager

    def _ask(
        self,
        method: str,
        url: str,
        end: float,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request to the issuer within ``end``, its whole answer included (an issuer
        that trickles it in a byte at a time ends there too): its JSON answer."""
        left = end - time.monotonic()
        if left <= 0:
            raise CredentialTimeout()
        host = _host(url)
        pool = self._pool(url)
        bound = answer_by.set(end)
        try:
            resp = pool.request(
                method,
                url,
                body=body,
                headers={"Accept": "application/json", **(headers or {})},
                timeout=urllib3.Timeout(connect=min(10.0, left), read=left),
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if time.monotonic() >= end:
                raise CredentialTimeout() from None
            raise self._failed(f"cannot reach {host}: {_why(exc)}") from None
        finally:
            answer_by.reset(bound)
            pool.clear()
        try:
            doc = _json.loads(resp.data)
        except _json.JSONDecodeError:
            doc = None
        if resp.status != 200 or not isinstance(doc, dict):
            # an OAuth error names itself in ``error`` (never echoing the request's secrets)
            error = doc.get("error") if isinstance(doc, dict) else None
            said = f" ({error})" if isinstance(error, str) and len(error) < 100 else ""
            raise self._failed(f"{method} {host}{urlsplit(url).path} answered {resp.status}{said}")
        return doc


@functools.cache
def _bounded_pool(cls: type[HTTPConnectionPool]) -> type[HTTPConnectionPool]:
    """urllib3's pool class ``cls``, its connections' answers read by the client's
    `BoundedResponse`: whole by the deadline the request sets (``answer_by``)."""
    base: Any = cls.ConnectionCls

    def _new_conn(self: Any) -> socket.socket:  # its lookup bounded too (a SOCKS proxy's too)
        return new_socket(self)

    conn = type(
        f"Bounded{base.__name__}",
        (base,),
        {
            "response_class": BoundedResponse,
            "_new_conn": _new_conn,
        },
    )
    return type(f"Bounded{cls.__name__}", (cls,), {"ConnectionCls": conn})


def _host(url: str) -> str:
    """``host:port`` of an issuer's ``url`` as errors name it: without a user and password."""
    return urlsplit(url).netloc.rpartition("@")[2]


def _why(exc: BaseException) -> str:
    """What a failed request to an issuer met, without its URL (urllib3 wraps the cause)."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if isinstance(found, ssl.SSLCertVerificationError):
            return f"its certificate is not trusted ({found.verify_message})"
        if isinstance(found, ConnectionRefusedError):
            return "connection refused"
        reason = getattr(found, "reason", None)
        found = (
            reason if isinstance(reason, BaseException) else found.__cause__ or found.__context__
        )
    return type(exc).__name__


class TokenFile(_Shared):
    """A kubeconfig user's ``tokenFile``, read again once a minute and after a 401 (thread-safe).

    The file is read when the context is loaded (a file that cannot be read then is a
    `ConfigError`); copies of a ``Configuration`` share it.
    """

    _streaks = FailureStreaks(log, "token file")

    def __init__(self, path: str, *, where: str, source: str, context: str) -> None:
        self.path = path
        self._where = where
        self._lock = threading.Lock()
        self._runs = 1
        token, why = self._read()
        if token is None:
            raise ConfigError(
                f"{where}: token file {path} cannot be read: {why}", path=source, context=context
            )
        self._held = _Held(Credential(token, None, self._runs), None)
        self._read_at = time.monotonic()

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r})"

    def describe(self) -> str:
        return f"token file {self.path} of {self._where}"

    def _read(self) -> tuple[str, None] | tuple[None, str]:
        """The file's token, or why there is none."""
        try:
            token = Path(self.path).read_text().strip()
        except OSError as exc:
            return None, exc.strerror or type(exc).__name__
        return (token, None) if token else (None, "it is empty")

    def get(self, end: float, cancelled: Flag | None = None, cluster: str = "") -> Credential:
        """The token, read again first when it is `TOKEN_FILE_PERIOD` old or was refused;
        a file that cannot be read then leaves the token read before in use."""
        held = self._held
        if time.monotonic() - self._read_at < TOKEN_FILE_PERIOD:
            return held.credential
        with self._lock:
            held = self._held
            if time.monotonic() - self._read_at < TOKEN_FILE_PERIOD:
                return held.credential  # read by another call meanwhile
            token, why = self._read()
            self._read_at = time.monotonic()
            what = f"reading {self.path} for {self._where}"
            if token is None:
                n = self._streaks.fail(self.path)
                self._streaks.log_failure(n, None, what, why, retry="keeping the token read before")
                return held.credential
            self._streaks.log_recovery(self._streaks.succeed(self.path), None, what)
            if held.credential.token != token:
                self._runs += 1
                held = self._held = _Held(Credential(token, None, self._runs), None)
            return held.credential

    def invalidate(self, used: Credential) -> None:
        """The server refused ``used``: the next call reads the file again."""
        with self._lock:
            if self._held.credential.run == used.run:
                self._read_at = -TOKEN_FILE_PERIOD


#: the attribute of a ``Configuration`` that carries its user's changing credential
#: the attribute of a ``Configuration`` that carries its kubeconfig user's credential source
CREDENTIAL_ATTRIBUTE = "mcruntime_credential"


def credential_of(cfg: Any) -> CredentialSource | None:
    """Where every request of ``cfg`` gets its credential (None: the loader's static one)."""
    found = getattr(cfg, CREDENTIAL_ATTRIBUTE, None)
    return found if isinstance(found, _Fetched | TokenFile) else None


def attach(cfg: Any, credential: _Fetched | TokenFile) -> None:
    """Make ``cfg``'s requests carry ``credential``'s token or certificate."""
    setattr(cfg, CREDENTIAL_ATTRIBUTE, credential)
    # the kubernetes package asks the hook only for a key that is there: a placeholder
    cfg.api_key["BearerToken"] = ""
    cfg.refresh_api_key_hook = functools.partial(_refresh_hook, credential)


def _refresh_hook(credential: CredentialSource, cfg: Any) -> None:
    """``Configuration.refresh_api_key_hook``: the token for the `kubernetes` package's own
    API classes, within `HOOK_TIMEOUT` (mcruntime's clients pass their own deadline)."""
    try:
        found = credential.get(time.monotonic() + HOOK_TIMEOUT)
    except CredentialTimeout:
        raise CredentialError(
            f"the {credential.describe()} gave no credential within {HOOK_TIMEOUT:g}s; "
            f"{credential.abandoned}"
        ) from None
    if found.token is None:
        # the ApiClient's pool was built with the certificates it had then
        raise CredentialError(
            f"the {credential.describe()} gives a client certificate, which only mcruntime's "
            "clients present (RESTClient, Client): the kubernetes package's own API classes "
            "need a token"
        )
    cfg.api_key["BearerToken"] = found.token
    cfg.api_key_prefix["BearerToken"] = "Bearer"


def _rfc3339(stamp: Any) -> float | None:
    """``stamp`` (an ExecCredential's ``expirationTimestamp``) as a POSIX time, or None when
    it is not an RFC 3339 time as client-go reads it: one without a zone (which Python's
    ``fromisoformat`` would take as this machine's local time) or in another ISO 8601
    form is refused, as ``metav1.Time`` refuses it."""
    if not isinstance(stamp, str) or not _RFC3339.fullmatch(stamp):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:  # (a month 13, a 25th hour)
        return None
