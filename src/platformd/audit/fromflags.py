"""
The daemon's audit stages from its flags (upstream's ``AuditOptions.ApplyTo``): the
policy from ``--audit-policy-file``, the log file from ``--audit-log-path`` (made at
startup, 0600), the writer thread in ``--audit-log-mode``.  Auditing needs both a
policy and a log path; either alone records nothing (upstream logs the same).

The policy, filter, sink and log file modules are imported only when auditing is
configured: a server without it does not load them at startup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from twisted.logger import Logger

from platformd.process.startup import StartupError

if TYPE_CHECKING:
    from platformd.audit.record import Auditor

log = Logger()


def build(options, reactor) -> Optional[Auditor]:
    """The ``Auditor`` (its sink not yet started), or None; ``StartupError`` for a bad
    policy or a log file that cannot be made."""
    policy_file, path = options["audit-policy-file"], options["audit-log-path"]
    if not policy_file or not path:
        if policy_file or path:
            log.warn("No audit policy file or log path: no audit events will be recorded")
        return None
    from platformd.audit import event, policy, rotation
    from platformd.audit.record import Auditor
    from platformd.audit.sink import LogSink, Pipe, Stdout
    from platformd.process.workers import AUDIT_FD
    try:
        rules = policy.load_file(policy_file)
    except policy.PolicyError as e:
        raise StartupError(f"loading audit policy file: {e}") from None
    if options["worker"]:
        out: object = Pipe(AUDIT_FD)  # the first worker writes the log
    elif path == "-":
        out = Stdout()
    else:
        try:
            rotation.ensure(path)
        except OSError as e:
            raise StartupError(f"--audit-log-path {path}: {e.strerror or e}") from None
        out = rotation.RotatingFile(path, options["audit-log-maxsize"],
                                    options["audit-log-maxbackup"],
                                    options["audit-log-maxage"], options["audit-log-compress"])
    encode = event.encode_legacy if options["audit-log-format"] == "legacy" else \
        event.encode_json
    sink = LogSink(reactor, out, encode, options["audit-log-mode"],
                   options["audit-log-batch-buffer-size"], options["audit-log-batch-max-size"],
                   options["audit-log-batch-max-wait"])
    return Auditor(rules, sink)
