"""
Command-line flags of ``twistd platformd``.  Names follow kube-apiserver's where one
exists.  Every value is checked here, so a bad flag is one clear line at startup.
"""

from __future__ import annotations

import os
import socket
import sys

from twisted.python import usage

from platformd.goformat.durations import parse_duration
from platformd.featuregates import FeatureGateError, FeatureGates
from platformd.goformat.gotext import aggregate, quote_list
from platformd.util.servicenetwork import (
    DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_IP_RANGE, ServiceNetwork,
)


#: Upstream's ``authzmodes.AuthorizationModeChoices`` that apply here (no ABAC, no Node).
AUTHORIZATION_MODES = ("AlwaysAllow", "AlwaysDeny", "RBAC", "Webhook")
OIDC_FLAGS = ("oidc-issuer-url", "oidc-client-id", "oidc-ca-file", "oidc-username-claim",
              "oidc-username-prefix", "oidc-groups-claim", "oidc-groups-prefix",
              "oidc-required-claim")
WEBHOOK_FLAGS = ("authorization-webhook-config-file", "authorization-webhook-version",
                 "authorization-webhook-cache-authorized-ttl",
                 "authorization-webhook-cache-unauthorized-ttl")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise usage.UsageError(f"--secure-port: {value!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise usage.UsageError(f"--secure-port: {port} is not between 0 and 65535")
    return port


def _count(flag: str):
    """A non-negative integer flag, upstream's words when negative."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise usage.UsageError(f"--{flag}: {value!r} is not an integer") from None
        if number < 0:
            raise usage.UsageError(f"--{flag} can not be negative value")
        return number
    return parse


#: ``--workers``' bound: each worker holds every object in its cache.
MAX_WORKERS = 64


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "Serve the platform resource API over HTTPS (see README.md)."

    optFlags = [
        ["enable-http2-serving", None,
         "Offer HTTP/2 (ALPN h2, then http/1.1); off by default: HTTP/1.1 is faster here "
         "(docs/operations.md)."],
        ["disable-http2-serving", None,
         "Upstream's flag: serve HTTP/1.1 only (the default here; wins over "
         "--enable-http2-serving)."],
        ["encryption-provider-config-automatic-reload", None,
         "Reload --encryption-provider-config when the file changes (checked every minute)."],
        ["audit-log-compress", None, "Gzip rotated audit log files."],
        ["shared-data-dir", None,
         "Other platformd processes serve this --data-dir too (each on its own port, or as "
         "--workers): its SQLite database is opened shared (docs/storage.md)."],
    ]

    optParameters = [
        ["data-dir", None, "./platformd-data",
         "Directory of the SQLite database, pki/ and admin.kubeconfig."],
        ["bind-address", None, "127.0.0.1", "The IP address to serve HTTPS on."],
        ["secure-port", None, 6443, "The port to serve HTTPS on (0: any free port).", _port],
        ["token-auth-file", None, None,
         'Static bearer tokens, CSV lines: token,user,uid,"group1,group2".'],
        ["tls-cert-file", None, None, "Serving certificate (PEM; may hold intermediates)."],
        ["tls-private-key-file", None, None, "Private key of --tls-cert-file (PEM)."],
        ["client-ca-file", None, None,
         "CA bundle that verifies client certificates (CN = user, O = groups)."],
        ["feature-gates", None, "", "NAME=true|false,... (see docs/configuration.md)."],
        ["watch-history-ttl", None, "5m",
         "How long watch history is kept (and the store compacted behind it)."],
        ["continue-token-ttl", None, "5m", "How long a list's continue token stays valid."],
        ["event-ttl", None, "1h", "How long a stored Event is kept after its last write."],
        ["workers", None, 1,
         "Processes serving HTTPS on the one port and --data-dir: this one and N-1 it "
         "starts and supervises (docs/workers.md).  Up to the cores platformd may use.",
         _count("workers")],
        ["worker", None, 0,
         "Internal, set by --workers for the processes it starts: this process is that "
         "worker (its listening socket is descriptor 3).", _count("worker")],
        ["shutdown-delay-duration", None, "0s",
         "On SIGTERM, how long /readyz fails while requests are still served, before the "
         "server stops accepting (docs/operations.md)."],
        # The node-local pods socket (feature gate PodsAPI; docs/pods-api.md).
        ["pods-socket", None, "/var/lib/nodeagent/pods/nodeagent.sock",
         "UNIX socket of the node-local pods gRPC API."],
        ["node-name", None, socket.gethostname().lower(),
         "This node's name: the pods API serves pods whose spec.nodeName equals it."],
        # Authentication (docs/authentication.md), as kube-apiserver's flags.
        ["anonymous-auth", None, None,
         "true: requests without credentials are system:anonymous (default false: 401)."],
        ["authentication-config", None, None,
         "AuthenticationConfiguration file: JWT issuers, anonymous (excludes --oidc-*)."],
        ["oidc-issuer-url", None, None, "The OIDC issuer whose ID tokens authenticate."],
        ["oidc-client-id", None, None, "The audience the ID tokens must carry."],
        ["oidc-ca-file", None, None, "CA bundle of the issuer (default: the system roots)."],
        ["oidc-username-claim", None, None, "The claim naming the user (default sub)."],
        ["oidc-username-prefix", None, None,
         "Prefix of user names ('-': none; unset with a claim other than email: "
         "'<issuer>#')."],
        ["oidc-groups-claim", None, None, "The claim listing the user's groups."],
        ["oidc-groups-prefix", None, None, "Prefix of group names."],
        ["oidc-required-claim", None, None,
         "key=value[,key=value...]: claims the ID token must carry with these values."],
        ["service-account-issuer", None, None,
         "Issuer (iss) of service-account tokens (default https://platform.default.svc)."],
        ["service-account-key-file", None, None,
         "Extra PEM public keys that verify service-account tokens."],
        ["service-account-signing-key-file", None, None,
         "PEM private key signing service-account tokens (default: generated under "
         "--data-dir)."],
        # Authorization (docs/authorization.md), as kube-apiserver's flags.
        ["authorization-mode", None, None,
         "Ordered, comma-separated authorizers: AlwaysAllow, AlwaysDeny, RBAC, Webhook "
         "(default RBAC; system:masters is always allowed)."],
        ["authorization-config", None, None,
         "AuthorizationConfiguration file (excludes --authorization-mode and "
         "--authorization-webhook-*)."],
        ["authorization-webhook-config-file", None, None,
         "kubeconfig of the authorization webhook (--authorization-mode Webhook)."],
        ["authorization-webhook-version", None, None,
         "SubjectAccessReview version the webhook speaks: v1 or v1beta1 (default v1beta1)."],
        ["authorization-webhook-cache-authorized-ttl", None, None,
         "How long the webhook's allow answers are cached (default 5m)."],
        ["authorization-webhook-cache-unauthorized-ttl", None, None,
         "How long the webhook's deny answers are cached (default 30s)."],
        # Admission (docs/admission.md), as kube-apiserver's flags; the names are checked
        # by the daemon against the plugins served.
        ["enable-admission-plugins", None, None,
         "Admission plugins to enable besides the default ones (comma-separated; the "
         "order does not matter): NamespaceLifecycle, ServiceAccount, "
         "MutatingAdmissionWebhook, ValidatingAdmissionWebhook."],
        ["disable-admission-plugins", None, None,
         "Default admission plugins to disable (comma-separated)."],
        ["admission-control-config-file", None, None,
         "AdmissionConfiguration file: each plugin's configuration."],
        # Overload protection (docs/operations.md), as kube-apiserver's flags.
        ["max-requests-inflight", None, 400,
         "Most non-mutating requests in flight (watches not counted); beyond: 429. 0: no "
         "limit.", _count("max-requests-inflight")],
        ["max-mutating-requests-inflight", None, 200,
         "Most mutating requests in flight; beyond: 429. 0: no limit.",
         _count("max-mutating-requests-inflight")],
        ["request-timeout", None, "1m0s",
         "Longest time a non-long-running request may take (504 after); a request's "
         "?timeout= may only shorten it."],
        # Encryption at rest (docs/encryption.md), as kube-apiserver's flags.
        ["encryption-provider-config", None, None,
         "EncryptionConfiguration file: how resources are encrypted in storage."],
        # Tracing and egress selection (docs/tracing.md, docs/egress.md).
        ["tracing-config-file", None, None, "File with apiserver tracing configuration."],
        ["egress-selector-config-file", None, None,
         "File with apiserver egress selector configuration."],
        # Storage (docs/storage.md, docs/etcd.md), as kube-apiserver's flags.
        ["storage-backend", None, "sqlite",
         "The storage backend for persistence: 'sqlite' (one server, in --data-dir) or "
         "'etcd3' (several servers over one etcd cluster, --etcd-servers)."],
        ["etcd-servers", None, None,
         "List of etcd servers to connect with (scheme://ip:port), comma separated."],
        ["etcd-prefix", None, "/registry",
         "The prefix to prepend to all resource paths in etcd."],
        ["etcd-cafile", None, None,
         "SSL Certificate Authority file used to secure etcd communication."],
        ["etcd-certfile", None, None,
         "SSL certification file used to secure etcd communication."],
        ["etcd-keyfile", None, None, "SSL key file used to secure etcd communication."],
        ["etcd-compaction-interval", None, "5m",
         "The interval of compaction requests. If 0, the compaction request from "
         "apiserver is disabled."],
        # The audit log (docs/audit.md), as kube-apiserver's flags.
        ["audit-policy-file", None, None,
         "audit.platform.io/v1 Policy: which requests are audited, at which level."],
        ["audit-log-path", None, None,
         "Write audit events to this file ('-': standard output); needs a policy."],
        ["audit-log-maxage", None, 0, "Days rotated audit files are kept (0: any).", int],
        ["audit-log-maxbackup", None, 0, "Rotated audit files kept (0: all).", int],
        ["audit-log-maxsize", None, 0,
         "Megabytes an audit file grows to before it is rotated (0: 100).", int],
        ["audit-log-format", None, "json", "Audit line format: json or legacy."],
        ["audit-log-mode", None, "blocking",
         "What a full audit queue does: blocking (requests wait), blocking-strict (and "
         "fail when the event cannot be written), batch (events are dropped)."],
        ["audit-log-batch-buffer-size", None, 10000,
         "Events the audit queue holds (every mode).", int],
        ["audit-log-batch-max-size", None, 1, "batch mode: events written per batch.", int],
        ["audit-log-batch-max-wait", None, "0s",
         "batch mode: how long to wait to fill a batch."],
        # Services (docs/kinds.md), as kube-apiserver's flags.
        ["service-cluster-ip-range", None, DEFAULT_SERVICE_IP_RANGE,
         "A CIDR notation IP range from which to assign service cluster IPs; two "
         "comma-separated CIDRs (one IPv4, one IPv6) for dual-stack."],
        ["service-node-port-range", None, DEFAULT_NODE_PORT_RANGE,
         "A port range to reserve for services with NodePort visibility (min-max or "
         "base+size, both ends included)."],
        ["advertise-address", None, None,
         "The IP address the server's own Service's endpoints name (default: "
         "--bind-address unless unspecified or loopback, else the host's default "
         "interface address)."],
    ]

    #: The arguments parsed (``--workers`` starts its workers with them).
    argv: tuple = ()

    def parseOptions(self, options=None):
        self.argv = tuple(sys.argv[1:] if options is None else options)
        super().parseOptions(options)

    def postOptions(self):
        try:
            self["feature-gates"] = FeatureGates.parse(self["feature-gates"] or "")
        except FeatureGateError as e:
            raise usage.UsageError(f"--feature-gates: {e}") from None
        for flag in ("watch-history-ttl", "continue-token-ttl", "event-ttl"):
            try:
                self[flag] = parse_duration(self[flag])
            except ValueError as e:
                raise usage.UsageError(f"--{flag}: {e}") from None
            if self[flag] <= 0:
                raise usage.UsageError(f"--{flag}: must be positive")
        try:
            self["request-timeout"] = parse_duration(self["request-timeout"])
        except ValueError as e:
            raise usage.UsageError(f"--request-timeout: {e}") from None
        self._storage()
        self._workers()
        try:
            self["shutdown-delay-duration"] = parse_duration(self["shutdown-delay-duration"])
        except ValueError as e:
            raise usage.UsageError(f"--shutdown-delay-duration: {e}") from None
        cert, key = self["tls-cert-file"], self["tls-private-key-file"]
        if bool(cert) != bool(key):
            raise usage.UsageError(
                "--tls-cert-file and --tls-private-key-file must be given together")
        for flag in ("tls-cert-file", "tls-private-key-file", "client-ca-file",
                     "token-auth-file"):
            path = self[flag]
            if path and not os.access(path, os.R_OK):
                raise usage.UsageError(f"--{flag}: cannot read {path}")
        if self["client-ca-file"] and not cert:
            raise usage.UsageError("--client-ca-file needs --tls-cert-file and "
                                   "--tls-private-key-file")
        self._authentication()
        self._authorization()
        self._audit()
        try:
            self["service-network"] = ServiceNetwork.parse(
                self["service-cluster-ip-range"], self["service-node-port-range"])
        except ValueError as e:
            raise usage.UsageError(str(e)) from None
        address = self["advertise-address"]
        if address is not None:
            import ipaddress
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                raise usage.UsageError(f"--advertise-address: {address!r} is not an IP "
                                       "address") from None
            if ip.is_unspecified or ip.is_loopback:
                raise usage.UsageError(f"--advertise-address: {address} is not an address "
                                       "other hosts can reach")
        # pflag's string slices: comma-separated, spaces kept (" B" is not "B").
        for flag in ("enable-admission-plugins", "disable-admission-plugins"):
            self[flag] = self[flag].split(",") if self[flag] else []

    def _storage(self) -> None:
        """The storage flags: a backend, and for etcd3 its servers (upstream's words)."""
        if self["storage-backend"] not in ("sqlite", "etcd3"):
            raise usage.UsageError(f"--storage-backend invalid, allowed values: sqlite, etcd3."
                                   f" got {self['storage-backend']!r}")
        servers = [s.strip() for s in (self["etcd-servers"] or "").split(",") if s.strip()]
        self["etcd-servers"] = servers
        if self["storage-backend"] == "etcd3" and not servers:
            raise usage.UsageError("--etcd-servers must be specified")
        try:
            # Go's time.ParseDuration takes a bare "0": the documented way to turn it off.
            interval = self["etcd-compaction-interval"]
            self["etcd-compaction-interval"] = 0 if interval == "0" else parse_duration(interval)
        except ValueError as e:
            raise usage.UsageError(f"--etcd-compaction-interval: {e}") from None
        for flag in ("etcd-cafile", "etcd-certfile", "etcd-keyfile"):
            path = self[flag]
            if path and not os.access(path, os.R_OK):
                raise usage.UsageError(f"--{flag}: cannot read {path}")
        if bool(self["etcd-certfile"]) != bool(self["etcd-keyfile"]):
            raise usage.UsageError("--etcd-certfile and --etcd-keyfile must be given together")

    def _workers(self) -> None:
        """``--workers``: at least one, at most ``MAX_WORKERS``; workers share the data
        directory."""
        if not 1 <= self["workers"] <= MAX_WORKERS:
            raise usage.UsageError(f"--workers: {self['workers']} is not between 1 and "
                                   f"{MAX_WORKERS}")
        if self["workers"] > 1 or self["worker"]:
            self["shared-data-dir"] = True

    def _audit(self) -> None:
        """Upstream's ``AuditLogOptions.Validate`` and ``AuditBatchOptions.Validate``."""
        if self["audit-policy-file"] and not os.access(self["audit-policy-file"], os.R_OK):
            raise usage.UsageError(f"--audit-policy-file: cannot read "
                                   f"{self['audit-policy-file']}")
        try:
            self["audit-log-batch-max-wait"] = parse_duration(self["audit-log-batch-max-wait"])
        except ValueError as e:
            raise usage.UsageError(f"--audit-log-batch-max-wait: {e}") from None
        if not self["audit-log-path"]:
            return
        problems = []
        if self["audit-log-mode"] not in ("batch", "blocking", "blocking-strict"):
            problems.append(f"invalid audit log mode {self['audit-log-mode']}, allowed modes "
                            'are "batch,blocking,blocking-strict"')
        for flag, what in (("audit-log-batch-buffer-size", "buffer size"),
                           ("audit-log-batch-max-size", "max batch size")):
            if self[flag] <= 0:
                problems.append(f"invalid audit batch log {what} {self[flag]}, must be a "
                                "positive number")
        if self["audit-log-format"] not in ("legacy", "json"):
            problems.append(f"invalid audit log format {self['audit-log-format']}, allowed "
                            'formats are "legacy,json"')
        for flag in ("audit-log-maxage", "audit-log-maxbackup", "audit-log-maxsize"):
            if self[flag] < 0:
                problems.append(f"--{flag} {self[flag]} can't be a negative number")
        if problems:
            raise usage.UsageError(aggregate(problems))

    def _authentication(self) -> None:
        """Upstream's authentication option checks, their words."""
        anonymous = self["anonymous-auth"]
        if anonymous is not None:
            if anonymous.lower() not in ("true", "false", "1", "0"):
                raise usage.UsageError(f'--anonymous-auth: invalid value "{anonymous}": '
                                       "must be true or false")
            self["anonymous-auth"] = anonymous.lower() in ("true", "1")
        oidc = [f for f in OIDC_FLAGS if self[f] is not None]
        if self["authentication-config"] is not None and oidc:
            raise usage.UsageError(
                "authentication-config file and oidc-* flags are mutually exclusive")
        if oidc and (self["oidc-issuer-url"] is None) != (self["oidc-client-id"] is None):
            raise usage.UsageError(
                "oidc-issuer-url and oidc-client-id must be specified together")
        claims = {}
        for pair in filter(None, (self["oidc-required-claim"] or "").split(",")):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise usage.UsageError(f'--oidc-required-claim: "{pair}" is not key=value')
            claims[key] = value
        self["oidc-required-claim"] = claims
        for flag in ("authentication-config", "oidc-ca-file", "service-account-key-file",
                     "service-account-signing-key-file"):
            path = self[flag]
            if path and not os.access(path, os.R_OK):
                raise usage.UsageError(f"--{flag}: cannot read {path}")

    def _authorization(self) -> None:
        """Upstream's ``BuiltInAuthorizationOptions.Validate``, its rules and words."""
        webhook_flags = [f for f in WEBHOOK_FLAGS if self[f] is not None]
        if self["authorization-config"] is not None:
            if self["authorization-mode"] is not None or webhook_flags:
                raise usage.UsageError(
                    "--authorization-config can not be specified when --authorization-mode "
                    "or --authorization-webhook-* flags are defined")
            if not os.access(self["authorization-config"], os.R_OK):
                raise usage.UsageError(
                    f"--authorization-config: cannot read {self['authorization-config']}")
            self["authorization-mode"] = []
            return
        text = self["authorization-mode"]
        modes = text.split(",") if text is not None else ["RBAC"]
        if text is not None and not text:
            raise usage.UsageError("at least one authorization-mode must be passed")
        for mode in modes:
            if mode not in AUTHORIZATION_MODES:
                raise usage.UsageError(f'authorization-mode "{mode}" is not a valid mode')
        if len(set(modes)) != len(modes):
            raise usage.UsageError(f"authorization-mode {quote_list(modes)} has mode specified "
                                   "more than once")
        webhook_file = self["authorization-webhook-config-file"]
        if "Webhook" in modes and not webhook_file:
            raise usage.UsageError(
                "authorization-mode Webhook's authorization config file not passed")
        if webhook_file and "Webhook" not in modes:
            raise usage.UsageError(
                "cannot specify --authorization-webhook-config-file without mode Webhook")
        if webhook_file and not os.access(webhook_file, os.R_OK):
            raise usage.UsageError(
                f"--authorization-webhook-config-file: cannot read {webhook_file}")
        version = self["authorization-webhook-version"] or "v1beta1"
        if version not in ("v1", "v1beta1"):
            raise usage.UsageError(f'--authorization-webhook-version: unsupported version '
                                   f'"{version}": must be v1 or v1beta1')
        self["authorization-webhook-version"] = version
        for flag, default in (("authorization-webhook-cache-authorized-ttl", "5m"),
                              ("authorization-webhook-cache-unauthorized-ttl", "30s")):
            try:
                self[flag] = parse_duration(self[flag] or default)
            except ValueError as e:
                raise usage.UsageError(f"--{flag}: {e}") from None
        self["authorization-mode"] = modes


class CommandLineOptions(Options):
    """
    The options as ``twistd`` sees them.  twistd answers a usage error by printing the
    whole help text; an operator reading a journal wants one line saying what is wrong,
    so this prints that line and exits with status 2.
    """

    def parseOptions(self, options=None):
        try:
            super().parseOptions(options)
        except usage.UsageError as e:
            sys.stderr.write(f"platformd: {e} (see --help)\n")
            raise SystemExit(2) from None
