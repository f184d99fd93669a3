"""A real platformd writing an audit log, and a reader that waits for its lines."""

from __future__ import annotations

import json
import os

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks, returnValue
from twisted.internet.task import deferLater

from tests.e2e.harness import Client, start_server


@inlineCallbacks
def start_audited(testcase, policy: str, *args, log_path: str = ""):
    """A server with ``policy`` (YAML text) and ``--audit-log-path`` (default: under its
    data dir); ``server.audit_log`` is the log's path."""
    data_dir = os.path.abspath(testcase.mktemp())
    os.makedirs(data_dir)
    policy_file = os.path.join(data_dir, "policy.yaml")
    with open(policy_file, "w") as f:
        f.write(policy)
    log_path = log_path or os.path.join(data_dir, "audit", "audit.log")
    server = yield start_server(testcase, "--audit-policy-file", policy_file,
                                "--audit-log-path", log_path, *args, data_dir=data_dir)
    server.audit_log = log_path
    returnValue(server)


def read_events(path: str) -> list:
    """Every event of the log at ``path``, or of every file in the directory ``path``
    (oldest first: rotated backups sort before the live ``audit.log``)."""
    if os.path.isdir(path):
        return [e for name in sorted(os.listdir(path), key=lambda n: (n == "audit.log", n))
                for e in read_events(os.path.join(path, name))]
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().splitlines() if line.strip()]


@inlineCallbacks
def wait_events(path: str, predicate, count: int, timeout: float = 10.0):
    """The first ``count`` events ``predicate`` accepts, once written (in file order)."""
    deadline = reactor.seconds() + timeout
    while True:
        found = [e for e in read_events(path) if predicate(e)]
        if len(found) >= count:
            returnValue(found[:count])
        if reactor.seconds() > deadline:
            raise AssertionError(f"{len(found)} of {count} audit events: "
                                 f"{[(e['auditID'], e['stage']) for e in found]}")
        yield deferLater(reactor, 0.02, lambda: None)


def admin(testcase, server) -> Client:
    return Client(testcase, server.pki_dir, server.port_number)
