"""
``/healthz``, ``/livez`` and ``/readyz`` as upstream's ``pkg/server/healthz``: each a
list of named checks, answered at the root (every check; ``?verbose`` lists them,
``?exclude=<name>`` skips one) and one per check at ``/<root>/<name>``.

The texts are upstream's, byte for byte: ``ok``; with ``?verbose`` one ``[+]<name> ok``
line per check then ``<root> check passed``; on failure a 500 whose body lists every
check, a failed one as ``[-]<name> failed: reason withheld`` (the reason goes to the log
only: these paths answer anyone), then ``<root> check failed``.  A check's own path
answers ``ok`` or 500 ``internal server error: <reason>``.

A check is ``check() -> None | str`` — None when healthy, else the reason — or a
Deferred of that; ``add_check`` is the seam other parts (a storage backend, the
shutdown logic) add theirs through.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs
from twisted.internet.defer import CancelledError, Deferred, gatherResults, maybeDeferred
from twisted.logger import Logger

from platformd.api import query, responses

log = Logger()

HEALTHZ, LIVEZ, READYZ = "healthz", "livez", "readyz"
ROOTS = (HEALTHZ, LIVEZ, READYZ)
TEXT = "text/plain; charset=utf-8"


@attrs.frozen
class Check:
    name: str
    check: Callable


class HealthChecks:
    """The checks of each root, in the order added (the order ``?verbose`` lists them)."""

    def __init__(self):
        self.roots: dict = {root: [] for root in ROOTS}

    def add_check(self, name: str, check: Callable, roots: Iterable[str] = ROOTS) -> None:
        """Add ``check`` as ``name`` to each of ``roots`` (a name is unique per root)."""
        self.add_checks([(name, check)], roots)

    def add_checks(self, checks: Iterable[tuple], roots: Iterable[str] = ROOTS,
                   after: Iterable[str] = ()) -> None:
        """
        Add the ``(name, check)`` pairs in their order to each of ``roots``: at the end,
        or right after the last check of the root named in ``after`` (upstream adds the
        encryption checks after the storage's, before those added later in its start).
        """
        checks, after = list(checks), set(after)
        for root in roots:
            present = self.roots[root]
            for name, _ in checks:
                if any(c.name == name for c in present):
                    raise ValueError(f"health check {name!r} already installed at /{root}")
            anchors = [index for index, c in enumerate(present) if c.name in after]
            at = anchors[-1] + 1 if anchors else len(present)
            present[at:at] = [Check(name, check) for name, check in checks]

    def path(self, path: str):
        """``(root, check or None)`` that ``path`` names, or None for other paths."""
        root, _, rest = path.lstrip("/").partition("/")
        checks = self.roots.get(root)
        if checks is None:
            return None
        if not rest:
            return root, None
        for check in checks:
            if check.name == rest:
                return root, check
        return None

    def answer(self, request, root: str, check) -> Deferred:
        """The response to ``request`` for ``/root`` or one check (a Deferred of the body)."""
        if check is not None:
            return _run(check).addCallback(_one, request)
        excluded = {v.decode("utf-8", "replace") for v in request.args.get(b"exclude", ())}
        verbose = query.values(request, b"verbose") is not None
        checks = [c for c in self.roots[root] if c.name not in excluded]
        results = gatherResults([_run(c) for c in checks])
        return results.addCallback(self._root, request, root, checks, excluded, verbose)

    def _root(self, reasons, request, root, checks, excluded, verbose):
        outcome = dict(zip((c.name for c in checks), reasons))
        lines, failed = [], []
        unmatched = set(excluded)
        for check in self.roots[root]:
            if check.name in excluded:
                unmatched.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok\n")
            elif outcome[check.name] is not None:
                lines.append(f"[-]{check.name} failed: reason withheld\n")
                failed.append(check.name)
            else:
                lines.append(f"[+]{check.name} ok\n")
        if unmatched:
            quoted = ",".join(_go_quote(name) for name in sorted(unmatched))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}\n")
        _nosniff(request)
        if failed:
            log.info("{checks} check failed: {root}\n{reasons}", checks=",".join(failed),
                     root=root, reasons="".join(f"[-]{name} failed: {outcome[name]}\n"
                                                for name in failed))
            return _error(request, "".join(lines) + f"{root} check failed")
        if not verbose:
            return responses.write(request, 200, b"ok", TEXT)
        return responses.write(request, 200, ("".join(lines) + f"{root} check passed\n")
                               .encode("utf-8"), TEXT)


def _run(check: Check) -> Deferred:
    """A check's reason (None: healthy); an exception is a failure with its text."""
    return maybeDeferred(check.check).addErrback(lambda f: str(f.value) or repr(f.value))


def _one(reason, request) -> bytes:
    if reason is not None:
        _nosniff(request)
        return _error(request, f"internal server error: {reason}")
    return responses.write(request, 200, b"ok", TEXT)


def _error(request, message: str) -> bytes:
    """Go's ``http.Error``: the message and a newline, as plain text."""
    return responses.write(request, 500, (message + "\n").encode("utf-8"), TEXT)


def _nosniff(request) -> None:
    request.responseHeaders.setRawHeaders(b"X-Content-Type-Options", [b"nosniff"])


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the names a client gave (quotes and backslashes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ping() -> None:
    """Upstream's ``PingHealthz``: healthy whenever the server answers."""
    return None


@attrs.define
class Flag:
    """A check that fails with ``reason`` until ``done`` (a boot step has finished)."""

    reason: str
    done: bool = False

    def __call__(self):
        return None if self.done else self.reason

    def set(self) -> None:
        self.done = True


#: Upstream's post-start hooks that have a counterpart in the boot sequence
#: (``compose.boot_sequence`` marks each done).
INFORMERS = "generic-apiserver-start-informers"
NAMESPACES = "start-system-namespaces-controller"
BOOTSTRAP_ROLES = "rbac/bootstrap-roles"
POST_START_HOOKS = (INFORMERS, NAMESPACES, BOOTSTRAP_ROLES)
#: Upstream's ``--etcd-healthcheck-timeout`` default.
STORAGE_TIMEOUT = 2.0
#: The storage's checks, which upstream's encryption checks follow.
STORAGE_CHECKS = ("etcd", "etcd-readiness")


@attrs.define
class StorageCheck:
    """
    Upstream's ``etcd`` check: one read of the storage answered in time (here any
    ``IStorage``: SQLite reads a key in its reader pool, etcd asks the cluster).
    """

    storage: Any
    clock: Any
    timeout: float = STORAGE_TIMEOUT

    def __call__(self) -> Deferred:
        d = maybeDeferred(self.storage.get, "/registry/health")
        timer = self.clock.callLater(self.timeout, d.cancel)

        def done(result):
            if timer.active():
                timer.cancel()
            return result
        d.addBoth(done)
        return d.addCallbacks(lambda _: None, _storage_failed)


@attrs.define
class StorageReadiness:
    """
    Upstream's ``etcd-readiness``: the storage read, and first (a store with a watch of
    its own, etcd's ``EtcdStorage.connected``) that watch is connected: a server whose
    watch is down serves its cache's last knowledge, so a load balancer should send
    requests elsewhere.  Upstream's readiness check is its read alone.
    """

    read: StorageCheck

    def __call__(self):
        if not getattr(self.read.storage, "connected", True):
            return "etcd watch is not connected"
        return self.read()


def _storage_failed(failure) -> str:
    if failure.check(CancelledError):
        return "storage did not answer in time"
    return f"error reading storage: {failure.value}"


@attrs.define
class Shutdown:
    """Upstream's ``shutdown`` readiness check: fails once shutting down has begun."""

    initiated: bool = False

    def __call__(self):
        return "process is shutting down" if self.initiated else None


@attrs.define(eq=False)
class StandardChecks:
    """The checks every server has and the switches that make them pass."""

    checks: HealthChecks
    #: ``informer-sync``: the watch cache has loaded.
    informers: Flag
    #: ``poststarthook/<name>`` by name.
    hooks: dict
    shutdown: Shutdown


def standard_checks(storage, clock) -> StandardChecks:
    """
    Upstream's checks in its order: ``ping``, ``log``, ``etcd`` everywhere,
    ``etcd-readiness`` and ``informer-sync`` for readiness, the post-start hooks, and
    ``shutdown`` last for readiness.
    """
    checks = HealthChecks()
    checks.add_check("ping", ping)
    # Upstream's "log" check fails when klog cannot flush for two minutes; Twisted's
    # log observers write synchronously, so a server that answers can log.
    checks.add_check("log", ping)
    storage_check = StorageCheck(storage, clock)
    checks.add_check("etcd", storage_check)
    checks.add_check("etcd-readiness", StorageReadiness(storage_check), (READYZ,))
    informers = Flag("the watch cache has not loaded")
    checks.add_check("informer-sync", informers, (READYZ,))
    hooks = {name: Flag("not finished") for name in POST_START_HOOKS}
    for name, flag in hooks.items():
        checks.add_check(f"poststarthook/{name}", flag)
    shutdown = Shutdown()
    checks.add_check("shutdown", shutdown, (READYZ,))
    return StandardChecks(checks, informers, hooks, shutdown)
