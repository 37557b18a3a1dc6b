"""``APIServer``: one embedded Kubernetes API server (one simulated cluster)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import pathlib
import secrets
import socket
import ssl
import threading
from types import TracebackType
from typing import Any, Literal

from mcruntime._certs import write_private
from mcruntime.envtest import _loop, _tls
from mcruntime.envtest._api import ADMIN_GROUP, ADMIN_USER, API, READ_ONLY_USER
from mcruntime.envtest._defaults import ensure_kubernetes_service, populate_namespace
from mcruntime.envtest._http import Connection, serve_connection
from mcruntime.envtest._objects import CRD_CLEANUP_TIMEOUT, Objects
from mcruntime.envtest._outage import DEFAULT_REQUEST_TIMEOUT, StorageOutage
from mcruntime.envtest._registry import Registry
from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore, StoreState
from mcruntime.envtest._tokens import ISSUER

__all__ = [
    "APIServer",
    "Snapshot",
    "Auth",
    "ADMIN_USER",
    "ADMIN_GROUPS",
    "DEFAULT_HISTORY",
    "DEFAULT_BOOKMARK_INTERVAL",
    "DEFAULT_REQUEST_TIMEOUT",
    "READ_ONLY_USER",
    "READ_ONLY_GROUPS",
]

DEFAULT_HISTORY = 10000
DEFAULT_BOOKMARK_INTERVAL = 1.0
HOST = "127.0.0.1"
log = logging.getLogger("mcruntime.envtest")
#: the lifetime of `APIServer.service_account_token()`'s tokens: a day, longer than any test
SERVICE_ACCOUNT_TOKEN_SECONDS = 86400
Auth = Literal["token", "certificate"]
"""How a kubeconfig authenticates: a bearer ``"token"`` or a client ``"certificate"``."""
ADMIN_GROUPS = (ADMIN_GROUP,)
READ_ONLY_GROUPS = ("system:authenticated",)


class _StreamProtocol(asyncio.StreamReaderProtocol):
    """``asyncio.StreamReaderProtocol`` whose ``eof_received`` returns False on a TLS
    connection from its first byte. asyncio's learns the connection is TLS only once
    ``start_tls`` returns to its caller, so a client's close_notify read in the same turn as
    its last handshake message (a Go client dialing a connection it then drops) made it
    return True and asyncio log "returning true from eof_received() has no effect when
    using ssl", one line per such connection."""

    def __init__(self, *args: Any, tls: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tls = tls

    def eof_received(self) -> bool:
        keep_open = bool(super().eof_received())
        return keep_open and not self._tls


class APIServer:
    """A Kubernetes API server on a loopback port, served by the process-wide envtest loop.

    Behaves like kube-apiserver for what controllers rely on (CRUD, list,
    watch, CRDs, finalizers, garbage collection, namespaces, authentication)
    and adds fault injection: `stop()`/`start()` keep port and data,
    `freeze()`/`thaw()` (a hung server: connections accepted, requests read,
    nothing answered, sockets kept open), `storage_outage()`/`storage_restored()`
    (etcd down: what needs storage waits up to ``request_timeout``, then 504),
    `drop_watches()`, `compact()`, `latency`, and `snapshot()`/`restore()` (etcd
    restored from a backup).

    It serves HTTPS (``tls=True``, the default) with a certificate from the
    process's envtest CA ([`ca_data`][mcruntime.envtest.APIServer.ca_data]),
    or plain HTTP with ``tls=False``. Clients authenticate with a bearer token
    (`token`, or `read_only_token` for a user that may only read) or, over
    TLS, with a client certificate of that CA: common name = user,
    organizations = groups; members of ``system:masters`` may write, any
    other user only read. `kubeconfig()` writes either kind of credential.

    Like a real cluster it starts with the namespaces ``default``,
    ``kube-system``, ``kube-public`` and ``kube-node-lease``, and every
    namespace gets the ``default`` ServiceAccount; with
    ``root_ca_configmap=True`` also the ``kube-root-ca.crt`` ConfigMap that
    kube-controller-manager publishes into every namespace (off by default:
    many tests count the ConfigMaps of a fresh namespace).

    A deleted CRD whose custom resources a finalizer holds stays ``Terminating``; its
    cleanup waits ``crd_cleanup_timeout`` seconds (kube-apiserver's minute) for them, then
    reports ``InstanceDeletionCheck`` and starts again. Shorten it to see that sooner.
    """

    def __init__(
        self,
        name: str = "envtest",
        *,
        port: int = 0,
        history: int = DEFAULT_HISTORY,
        latency: float = 0.0,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
        tls: bool = True,
        root_ca_configmap: bool = False,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        crd_cleanup_timeout: float = CRD_CLEANUP_TIMEOUT,
    ) -> None:
        if not name:
            raise ValueError("an APIServer needs a non-empty name")
        if history < 1:
            raise ValueError(f"history must be at least 1, got {history}")
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive, got {request_timeout}")
        if not crd_cleanup_timeout > 0:
            raise ValueError(f"crd_cleanup_timeout must be positive, got {crd_cleanup_timeout}")
        self.name = name
        self.host = HOST
        self.port = port
        self.history = history
        self.latency = float(latency)
        self.bookmark_interval = float(bookmark_interval)
        self.tls = bool(tls)
        self.root_ca_configmap = bool(root_ca_configmap)
        #: kube-apiserver's ``--request-timeout``: how long a request waits for storage
        self.request_timeout = float(request_timeout)
        self._crd_cleanup_timeout = float(crd_cleanup_timeout)
        self.token = secrets.token_urlsafe(32)
        self.read_only_token = secrets.token_urlsafe(32)
        self._server: asyncio.base_events.Server | None = None
        self._lifecycle = threading.RLock()
        #: the task of every accepted connection; ``None`` until its TLS handshake is done
        self._conns: dict[asyncio.Task[Any], Connection | None] = {}
        #: whether a connection handed over now is served (read and written on the loop only):
        #: one accepted before `stop()` may finish its TLS handshake after it
        self._accepting = False
        #: set while the server answers; cleared by freeze()
        self._gate = asyncio.Event()
        self._gate.set()
        self._reset()

    def _reset(self) -> None:
        self._outage = StorageOutage()
        self._store = ObjectStore(self.history)
        self._registry = Registry()
        self._objects = Objects(self._store, self._registry)
        self._objects.crd_cleanup_timeout = self._crd_cleanup_timeout
        outage = self._outage
        self._objects.storage_down = lambda: outage.down
        self._objects.frozen = lambda: not self._gate.is_set()
        objects = self._objects
        ca = _tls.authority().cert_pem.decode() if self.root_ca_configmap else None
        self._objects.on_namespace_created = lambda ns: populate_namespace(objects, ns, ca)
        self._objects.bootstrap()
        self._api = API(self, self._store, self._registry, self._objects)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<APIServer {self.name!r} {self.url} {state}>"

    # ----------------------------------------------------------------- properties

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT`` (``http://`` with ``tls=False``; the port is known once started)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def ca_data(self) -> bytes | None:
        """The PEM certificate of the CA that signed the serving certificate (``None`` without TLS)."""
        return _tls.authority().cert_pem if self.tls else None

    def client_ssl_context(self) -> ssl.SSLContext:
        """An ``ssl.SSLContext`` that trusts this server, for raw HTTPS clients (``http.client``, ``urllib3``)."""
        if not self.tls:
            raise ValueError(f"APIServer {self.name!r} serves plain HTTP (tls=False)")
        return ssl.create_default_context(cadata=_tls.authority().cert_pem.decode())

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def resource_version(self) -> str:
        """The current resourceVersion counter."""
        return str(self._store.rv)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> APIServer:
        """Listen and serve; returns once connections are accepted.

        Restarting after [`stop()`][mcruntime.envtest.APIServer.stop] reuses the same port and keeps the data.
        """
        with self._lifecycle:
            if self._server is not None:
                return self
            _loop.acquire()
            try:
                self._server = _loop.run(self._listen())
            except BaseException:
                _loop.release()
                raise
            return self

    async def _listen(self) -> asyncio.base_events.Server:
        loop = asyncio.get_running_loop()
        tls = self.tls

        def protocol() -> _StreamProtocol:
            reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
            return _StreamProtocol(reader, self._on_connection, loop=loop, tls=tls)

        # asyncio.start_server, but with a protocol that knows its connection is TLS from the
        # start (see _StreamProtocol); no ssl= here: _on_connection does the TLS handshake
        # itself (start_tls), so a connection whose handshake is still to come is one stop()
        # can see and cut
        server = await loop.create_server(protocol, self.host, self.port, reuse_address=True)
        self.port = server.sockets[0].getsockname()[1]
        ensure_kubernetes_service(self._objects, self.host, self.port)
        self._objects.start_crd_cleanup()
        self._accepting = True
        return server

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if not self._accepting:  # stopped while this one was being accepted: cut, as stop() does
            writer.transport.abort()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.current_task()
        assert task is not None
        # tracked from the accept on, TLS handshake included, until the socket is closed:
        # since Python 3.12.1 Server.wait_closed() waits for every accepted connection, so
        # stop() must be able to cut each one, even one whose client has not said hello yet
        self._conns[task] = None  # handshaking: stop() cancels the task, which closes the socket
        try:
            if self.tls:
                try:
                    await writer.start_tls(_tls.authority().server_context())
                except (OSError, TimeoutError):  # a failed handshake: nothing to serve
                    return
            conn = Connection(
                reader, writer, self._gate, _tls.peer_identity(writer.get_extra_info("peercert"))
            )
            self._conns[task] = conn
            await serve_connection(conn, self._api.handle)
            with contextlib.suppress(OSError):
                await writer.wait_closed()  # a TLS close waits for the client's close_notify
        except asyncio.CancelledError:
            pass
        finally:
            writer.transport.abort()  # a no-op once closed; the server forgets it only then
            self._conns.pop(task, None)

    def stop(self) -> None:
        """Stop listening (connections are refused) and cut open connections and watches.

        Data and port are kept for a later [`start()`][mcruntime.envtest.APIServer.start].
        It ends a [`freeze()`][mcruntime.envtest.APIServer.freeze] too: a restarted
        kube-apiserver answers, whatever hung the process before.
        """
        with self._lifecycle:
            if self._server is None:
                return
            try:
                _loop.run(self._shutdown())
            finally:
                self._server = None
                self._gate.set()
                _loop.release()

    async def _shutdown(self) -> None:
        server = self._server
        assert server is not None
        self._accepting = False
        self._objects.stop_crd_cleanup()
        server.close()
        self._outage.cut()  # requests waiting for storage end with their connections
        self._store.cut_waiting()  # and those waiting for a resourceVersion
        for w in self._store.all_watchers():
            w.close()
        tasks = list(self._conns)
        for task, conn in self._conns.items():
            if conn is None:
                task.cancel()  # mid-handshake (aborting its socket would end it with no error)
            else:
                conn.abort()
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=1)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        # every accepted socket was cut above or is cut by its own task (``_accepting``)
        try:
            await asyncio.wait_for(server.wait_closed(), timeout=5)
        except TimeoutError:
            log.warning("APIServer %r: a connection is still open 5s after stop()", self.name)

    def close(self) -> None:
        """Stop for good and drop all data (a later [`start()`][mcruntime.envtest.APIServer.start] begins empty)."""
        with self._lifecycle:
            self.stop()
            self._gate.set()
            self._reset()

    def __enter__(self) -> APIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------- faults

    def _call(self, fn: Any) -> None:
        if self._server is not None and _loop.loop_or_none() is not None:

            async def call() -> None:
                fn()

            _loop.run(call())
        else:
            fn()

    def drop_watches(self) -> None:
        """End every open watch stream cleanly; clients must reconnect."""

        def drop() -> None:
            for w in self._store.all_watchers():
                w.close()

        self._call(drop)

    @property
    def crd_cleanup_timeout(self) -> float:
        """Seconds a deleted CRD's cleanup waits for its custom resources to go before its
        ``Terminating`` condition says ``InstanceDeletionCheck`` and the cleanup starts
        again (60, as kube-apiserver); a change applies to the cleanups that start next."""
        return self._crd_cleanup_timeout

    @crd_cleanup_timeout.setter
    def crd_cleanup_timeout(self, seconds: float) -> None:
        self._crd_cleanup_timeout = float(seconds)
        self._objects.crd_cleanup_timeout = self._crd_cleanup_timeout

    @property
    def frozen(self) -> bool:
        """True between `freeze()` and `thaw()`."""
        return not self._gate.is_set()

    def freeze(self) -> None:
        """Hang, as a SIGSTOPped kube-apiserver or a black-holed network path does.

        New connections are still accepted and requests are read, but nothing
        is handled or answered; open watches send nothing more; every socket
        stays open. Clients see only their own timeouts. `thaw()` resumes:
        requests that waited are then handled, watches go on.
        """
        self._call(self._gate.clear)

    def thaw(self) -> None:
        """End `freeze()`: waiting requests are handled and answered, watches resume, and
        the CRD cleanup and garbage collection go on."""
        self._call(self._thawed)

    def _thawed(self) -> None:
        self._gate.set()
        self._objects.run_waiting_crd_steps()  # the CRD cleanup's steps that waited for it

    @property
    def storage_down(self) -> bool:
        """True between `storage_outage()` and `storage_restored()`."""
        return self._outage.down

    def storage_outage(self) -> None:
        """Lose storage, as a kube-apiserver whose etcd is down or cut off does.

        The server still answers what it serves from memory: ``/version``,
        discovery, OpenAPI, reviews, and from its watch cache watches (silent:
        nothing changes) and lists and gets with a ``resourceVersion`` (``"0"``,
        say). Every other request (writes, and reads that must be current:
        no ``resourceVersion``, ``resourceVersionMatch=Exact``, a ``continue``)
        waits for storage until its deadline, ``request_timeout`` or a shorter
        ``?timeout=``, then gets kube's 504 (reason ``Timeout``). ``/readyz``,
        ``/livez`` and ``/healthz`` answer 500: ``[-]etcd failed: reason
        withheld`` (and ``etcd-readiness`` in ``/readyz``). The server's own CRD
        cleanup writes nothing meanwhile and goes on once storage is back. It lasts across
        `stop()` and `start()` (storage is still down), which end the waiting
        requests with their connections; `close()` ends it.
        """
        self._call(self._outage.begin)

    def storage_restored(self) -> None:
        """End `storage_outage()`: waiting requests are served at once, health checks pass."""
        self._call(self._storage_back)

    def _storage_back(self) -> None:
        self._outage.end()
        self._objects.run_waiting_crd_steps()  # the CRD cleanup's writes that waited for it

    def snapshot(self) -> Snapshot:
        """The server's data now, as a backup of its etcd (``etcdutl snapshot save``) holds it,
        for [`restore()`][mcruntime.envtest.APIServer.restore]. Cheap: it shares the stored
        objects, which are never changed in place."""
        box: list[StoreState] = []
        self._call(lambda: box.append(self._store.state()))
        return Snapshot(self.name, box[0])

    def restore(self, snapshot: Snapshot, *, bump_revision: int = 0) -> None:
        """Bring the stopped server back to ``snapshot``, as restoring its etcd from a backup and
        starting kube-apiserver again does; `start()` it afterwards.

        Every object is as it was in the snapshot: objects changed since are back to how they
        were, deleted ones are back, created ones are gone, and the CRDs served are those of the
        snapshot. The resourceVersion is the snapshot's plus ``bump_revision`` (``etcdutl
        snapshot restore --bump-revision``), and the event history is empty, as a restarted
        kube-apiserver's watch cache is: resuming a watch from a resourceVersion older than
        that gets 410 Gone (informers list again and find what changed), and from a newer one
        waits for events newer than it. Without a bump the resourceVersions go backwards:
        clients that saw the newer ones wait, silent, until the server's writes pass them
        (why etcd's restore procedure for Kubernetes bumps the revision). Raises RuntimeError
        while the server runs.
        """
        if (
            isinstance(bump_revision, bool)
            or not isinstance(bump_revision, int)
            or bump_revision < 0
        ):
            raise ValueError(
                f"bump_revision must be a whole number, 0 or more, got {bump_revision!r}"
            )
        if not isinstance(snapshot, Snapshot):
            raise TypeError(
                f"restore() takes what snapshot() returned, not {type(snapshot).__name__}"
            )
        with self._lifecycle:
            if self._server is not None:
                raise RuntimeError(
                    f"APIServer {self.name!r} is running: stop() it before restore() "
                    "(kube-apiserver starts again over restored etcd), then start() it"
                )
            self._store.restore(snapshot._state, bump_revision)
            self._objects.serve_stored_crds()

    def compact(self) -> None:
        """Forget the event history: resuming a watch or list from any earlier resourceVersion gets 410."""
        self._call(self._store.compact)

    # ----------------------------------------------------------------- kubeconfig

    def kubeconfig(
        self,
        context: str | None = None,
        *,
        read_only: bool = False,
        auth: Auth = "token",
        service_account: str | None = None,
    ) -> dict[str, Any]:
        """A kubeconfig dict with one cluster, user and context (named ``context`` or the server name).

        Over TLS the cluster carries ``certificate-authority-data``. ``auth``
        picks the credential: the bearer ``"token"`` or a client
        ``"certificate"`` (user ``kubernetes-admin`` in group
        ``system:masters``, as kind and kubeadm write; with ``read_only``, the
        read-only user). Client certificates need TLS. With
        ``service_account="namespace/name"``, the token of that ServiceAccount
        instead (see [`service_account_token()`][mcruntime.envtest.APIServer.service_account_token]):
        the kubeconfig has the rights the server's RBAC objects give it.
        """
        if not self.port:
            raise RuntimeError(f"APIServer {self.name!r} has no port yet: start() it first")
        ctx = context or self.name
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = _b64(_tls.authority().cert_pem)
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": ctx, "cluster": cluster}],
            "users": [
                {
                    "name": ctx,
                    "user": {"token": self.service_account_token(service_account)}
                    if service_account is not None
                    else self.credentials(read_only=read_only, auth=auth),
                }
            ],
            "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": ctx}}],
            "current-context": ctx,
        }

    def service_account_token(
        self, service_account: str, *, expiration_seconds: int = SERVICE_ACCOUNT_TOKEN_SECONDS
    ) -> str:
        """A token of ServiceAccount ``"namespace/name"``, as a TokenRequest issues it.

        The ServiceAccount is created if it does not exist (its namespace must).
        Its bearer is ``system:serviceaccount:<namespace>:<name>`` and may do
        what the server's Roles, ClusterRoles and bindings allow, so a test can
        run a controller with the rights its manifests grant and no more.
        """
        namespace, _, name = service_account.partition("/")
        if not namespace or not name or "/" in name:
            raise ValueError(f"service_account must be 'namespace/name', got {service_account!r}")
        box: list[str] = []

        def issue() -> None:
            res = self._registry.get("", "v1", "serviceaccounts")
            assert res is not None
            sa = self._store.get(res.key, namespace, name)
            if sa is None:
                try:
                    sa = self._objects.create(res, namespace, {"metadata": {"name": name}})
                except StatusError as e:
                    raise ValueError(
                        f"cannot create serviceaccount {service_account} in {self.name}: {e}"
                    ) from None
            box.append(self._api.tokens.issue(sa, [ISSUER], expiration_seconds)[0])

        self._call(issue)
        return box[0]

    def credentials(self, *, read_only: bool = False, auth: Auth = "token") -> dict[str, str]:
        """The ``user`` entry of a kubeconfig for this server (see `kubeconfig()`)."""
        if auth == "token":
            return {"token": self.read_only_token if read_only else self.token}
        if auth != "certificate":
            raise ValueError(f"auth must be 'token' or 'certificate', got {auth!r}")
        if not self.tls:
            raise ValueError(
                f"APIServer {self.name!r} serves plain HTTP (tls=False): "
                "client certificates need TLS"
            )
        user, groups = (
            (READ_ONLY_USER, READ_ONLY_GROUPS) if read_only else (ADMIN_USER, ADMIN_GROUPS)
        )
        pair = _tls.authority().client_pair(user, groups)
        return {
            "client-certificate-data": _b64(pair.cert_pem),
            "client-key-data": _b64(pair.key_pem),
        }

    def write_kubeconfig(
        self, path: str | os.PathLike[str], context: str | None = None, *, auth: Auth = "token"
    ) -> pathlib.Path:
        """Write [`kubeconfig()`][mcruntime.envtest.APIServer.kubeconfig] to ``path`` (mode 0600) and return the path."""
        return write_kubeconfig_file(path, self.kubeconfig(context, auth=auth))


class Snapshot:
    """An [`APIServer`][mcruntime.envtest.APIServer]'s data at one moment, from
    [`snapshot()`][mcruntime.envtest.APIServer.snapshot], for
    [`restore()`][mcruntime.envtest.APIServer.restore]: a backup of its etcd."""

    __slots__ = ("server_name", "_state")

    def __init__(self, server_name: str, state: StoreState) -> None:
        #: the name of the server it was taken of
        self.server_name = server_name
        self._state = state

    @property
    def resource_version(self) -> str:
        """The server's resourceVersion when it was taken."""
        return str(self._state.rv)

    def __repr__(self) -> str:
        return f"<Snapshot of {self.server_name!r} at resourceVersion {self.resource_version}>"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig_file(path: str | os.PathLike[str], config: dict[str, Any]) -> pathlib.Path:
    """Write a kubeconfig dict as YAML, readable by the owner only (it holds tokens)."""
    import yaml

    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_private(p, yaml.safe_dump(config, sort_keys=False).encode())
    return p
