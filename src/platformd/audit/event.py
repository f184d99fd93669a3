"""
Upstream's audit ``Event`` (``audit.platform.io/v1``) as the log backend writes it:
one JSON document per line, the fields in the Go struct's order with its ``omitempty``
rules, ``MicroTime`` timestamps, and Go's HTML-safe string escaping; or the ``legacy``
one-line text (``audit.EventString``).
"""

from __future__ import annotations

import ipaddress
from datetime import datetime, timezone

import orjson

from platformd.goformat.gotext import go_quote

API_VERSION = "audit.platform.io/v1"

#: ``maxUserAgentLength`` and ``userAgentTruncateSuffix``.
MAX_USER_AGENT = 1024
TRUNCATED = "...TRUNCATED"

#: Go's encoding/json escapes these inside strings (``SetEscapeHTML``, on by default);
#: outside strings none of them can appear, so replacing the bytes is exact.
_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def microtime(seconds: float) -> str:
    """``metav1.MicroTime`` as JSON writes it: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _nano(micro: str) -> str:
    """A ``microtime`` as Go's ``time.RFC3339Nano`` writes it (the fraction's trailing
    zeros dropped, and its dot with them)."""
    whole, _, fraction = micro[:-1].partition(".")
    fraction = fraction.rstrip("0")
    return whole + (f".{fraction}" if fraction else "") + "Z"


def user_json(user) -> dict:
    """``authenticationv1.UserInfo`` (every field omitempty)."""
    out: dict = {}
    if user is None:
        return out
    if user.name:
        out["username"] = user.name
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {key: list(values) for key, values in sorted(user.extra)}
    return out


def status_json(status: dict, code: int) -> dict:
    """
    The ``responseStatus``: the bounded fields of a ``Status`` (upstream copies status,
    message, reason, details and code, never the whole object), ``metadata`` always.
    """
    out: dict = {"metadata": {}}
    for field in ("status", "message", "reason", "details"):
        if status.get(field):
            out[field] = status[field]
    if code:
        out["code"] = code
    return out


def user_agent(request) -> str:
    agent = (request.getHeader(b"user-agent") or b"").decode("utf-8", "replace")
    if len(agent) > MAX_USER_AGENT:
        agent = agent[:MAX_USER_AGENT] + TRUNCATED
    return agent


def source_ips(request) -> list:
    """
    Upstream's ``utilnet.SourceIPs``: every valid ``X-Forwarded-For`` entry, then
    ``X-Real-Ip`` unless already there, then the peer's address unless it is the last.
    """
    ips: list = []
    forwarded = request.getHeader(b"x-forwarded-for")
    if forwarded:
        for part in forwarded.decode("latin-1").split(","):
            ip = _ip(part.strip())
            if ip is not None:
                ips.append(ip)
    real = request.getHeader(b"x-real-ip")
    if real:
        ip = _ip(real.decode("latin-1"))
        if ip is not None and ip not in ips:
            ips.append(ip)
    peer = _ip(getattr(request.getClientAddress(), "host", "") or "")
    if peer is not None and (not ips or ips[-1] != peer):
        ips.append(peer)
    return [str(ip) for ip in ips]


def _ip(text: str):
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    # Go's net.IP prints an IPv4-mapped IPv6 address as IPv4.
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def encode_json(event: dict) -> bytes:
    """One line of the ``json`` format."""
    line = orjson.dumps(event)
    for raw, escaped in _GO_ESCAPES:
        if raw in line:
            line = line.replace(raw, escaped)
    return line + b"\n"


def encode_legacy(event: dict) -> bytes:
    """One line of the ``legacy`` format (``audit.EventString``)."""
    user = event["user"]
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = _string_slice(user["groups"])
    as_user, as_groups = "<self>", "<lookup>"
    impersonated = event.get("impersonatedUser")
    if impersonated is not None:
        as_user = impersonated.get("username", "")
        if "groups" in impersonated:
            as_groups = _string_slice(impersonated["groups"])
    namespace = event.get("objectRef", {}).get("namespace") or "<none>"
    status = event.get("responseStatus")
    response = str(status.get("code", 0)) if status is not None else "<deferred>"
    ips = event.get("sourceIPs") or ["<unknown>"]
    fields = (("id", event["auditID"]), ("stage", event["stage"]), ("ip", ips[0]),
              ("method", event["verb"]), ("user", username), ("groups", groups),
              ("as", as_user), ("asgroups", as_groups),
              ("user-agent", event.get("userAgent", "")), ("namespace", namespace),
              ("uri", event["requestURI"]))
    text = " ".join(f"{name}={go_quote(value)}" for name, value in fields)
    return f'{_nano(event["requestReceivedTimestamp"])} AUDIT: {text} response="{response}"\n'.encode()


def _string_slice(values) -> str:
    return ",".join(go_quote(v) for v in values)

