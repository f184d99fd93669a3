"""
Continue tokens for paged lists (spec 4.4) and the snapshots behind them.

A token says where the next page starts and at which revision the list was taken, as
upstream's does (``storage/continue.go``: unpadded URL-safe base64 of ``{"v", "rv",
"start"}``, the start key relative to the collection's key prefix and path-cleaned, so a
token can never range outside the collection it is used on), plus when the first page
was served (``t``): a token older than ``--continue-token-ttl`` is refused with 410
Gone, and so is one whose revision has left the watch cache's history.  The pages of one
list therefore show one consistent snapshot while writes go on.  A token that does not
decode is 400 ``invalid continue token: continue key is not valid: …`` in upstream's
words.

The snapshot itself (the objects in key order at that revision) is kept in a small
bounded cache so that later pages cost only their own items; when it has been evicted it
is rebuilt from the event history.  Expiry runs from the same LoopingCall as history
expiry (``expiry.py``).
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
from collections import OrderedDict
from typing import Optional

import attrs

from platformd import errors, gonumbers, gotext

TOKEN_VERSION = "meta.platform.io/v1"

EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


@attrs.frozen
class Token:
    revision: int
    start: str
    issued: float


def encode(token: Token, prefix: str) -> str:
    """The token for ``token`` (whose ``start`` is a full key under ``prefix``)."""
    payload = {"v": TOKEN_VERSION, "rv": token.revision, "start": token.start[len(prefix):],
               "t": int(token.issued)}
    data = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _invalid(detail: str = "") -> errors.StatusError:
    return errors.bad_request("invalid continue token: continue key is not valid"
                              + (f": {detail}" if detail else ""))


_NOT_RAW_URL_BASE64 = re.compile(r"[^A-Za-z0-9_-]")


def _clean(path: str) -> str:
    """Go's path.Clean for an absolute path (POSIX normpath keeps a leading "//")."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def decode(text: str, prefix: str) -> Token:
    """Parse a continue token for the collection under ``prefix`` (400 if malformed)."""
    bad = _NOT_RAW_URL_BASE64.search(text)
    if bad is not None or len(text) % 4 == 1:
        # Go's base64.RawURLEncoding names the first byte it cannot take.
        at = bad.start() if bad is not None else len(text) - 1
        raise _invalid(f"illegal base64 data at input byte {at}")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    try:
        payload = json.loads(data, **gonumbers.json_number_hooks)
    except (ValueError, UnicodeDecodeError) as e:
        raise _invalid(str(e)) from None
    if not isinstance(payload, dict):
        raise _invalid("json: cannot unmarshal into Go value of type storage.continueToken")
    version, revision, start = payload.get("v"), payload.get("rv"), payload.get("start")
    if isinstance(revision, (float, gonumbers.BigNumber)):
        # Go's decoder into continueToken's int64: past its range, or not whole.
        raise _invalid(f"json: cannot unmarshal number {gotext.json_number(revision)} into "
                       "Go struct field continueToken.rv of type int64")
    issued = payload.get("t", 0)
    if version != TOKEN_VERSION:
        raise _invalid(f"server does not recognize this encoded version {version or ''}")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision <= 0:
        raise _invalid(f"incorrect encoded start resourceVersion (version {TOKEN_VERSION})")
    if not isinstance(start, str) or not start:
        raise _invalid(f"encoded start key empty (version {TOKEN_VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _clean(key) != key:
        raise _invalid(start)  # upstream's guard against "../" escaping the prefix
    if not isinstance(issued, (int, float)) or isinstance(issued, bool):
        issued = 0
    return Token(revision, prefix + key[1:], issued)


class Snapshots:
    """
    The snapshots paged lists read from, keyed by (key prefix, revision); bounded (the
    least recently used goes first) and expired after the token TTL.
    """

    def __init__(self, clock, ttl: float, capacity: int = 256):
        self.clock = clock
        self.ttl = ttl
        self.capacity = capacity
        self._entries: OrderedDict = OrderedDict()  # (prefix, rev) -> (created, entries)

    def get(self, prefix: str, revision: int) -> Optional[list]:
        found = self._entries.get((prefix, revision))
        if found is None:
            return None
        self._entries.move_to_end((prefix, revision))
        return found[1]

    def put(self, prefix: str, revision: int, entries: list) -> None:
        self._entries[(prefix, revision)] = (self.clock.seconds(), entries)
        self._entries.move_to_end((prefix, revision))
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def expired(self, token: Token) -> bool:
        return self.clock.seconds() - token.issued > self.ttl

    def expire(self) -> None:
        cutoff = self.clock.seconds() - self.ttl
        for key in [k for k, (created, _) in self._entries.items() if created < cutoff]:
            del self._entries[key]

    def __len__(self):
        return len(self._entries)


def gone() -> errors.StatusError:
    return errors.gone(EXPIRED_MESSAGE)
