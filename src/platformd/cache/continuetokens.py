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
words (its JSON read as Go's decoder reads it into upstream's struct, ``t`` an int64
beside ``rv``: ``gojson``).  Tokens are not signed, as upstream's are not: a client can
write any ``t``, so one dated after now counts from now (``reads.CacheReader``) and
what finally bounds any token is the history it points into.

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

from platformd import errors
from platformd.goformat import gojson, gotext
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


#: The fields of a token and their Go types (upstream's ``continueToken`` and ``t``).
_FIELDS = {"v": str, "rv": int, "start": str, "t": int}


def _type_error(payload: dict) -> Optional[str]:
    """
    Go's decoder's first complaint about a field of the wrong type, in the document's
    order, as decoding into ``continueToken`` would report it (null leaves a field
    unset): an int64 takes only a whole number within its range.
    """
    for name, value in payload.items():
        want = _FIELDS.get(name)
        if want is None or value is None:
            continue
        if want is int and isinstance(value, int) and not isinstance(value, bool):
            continue
        if want is str and isinstance(value, str):
            continue
        kind = gotext.json_kind(value)
        if kind == "number" and want is int:
            kind = f"number {gotext.json_number(value)}"
        return (f"json: cannot unmarshal {kind} into Go struct field continueToken.{name} "
                f"of type {'int64' if want is int else 'string'}")
    return None


def decode(text: str, prefix: str) -> Token:
    """
    Parse a continue token for the collection under ``prefix`` (400 if malformed, in
    the words of upstream's DecodeContinue and of Go's decoder into its struct).
    """
    bad = _NOT_RAW_URL_BASE64.search(text)
    if bad is not None or len(text) % 4 == 1:
        # Go's base64.RawURLEncoding names the first byte it cannot take.
        at = bad.start() if bad is not None else len(text) - 1
        raise _invalid(f"illegal base64 data at input byte {at}")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    try:
        payload = gojson.loads(data)
    except ValueError as e:
        raise _invalid(str(e)) from None
    if not isinstance(payload, dict):
        raise _invalid(f"json: cannot unmarshal {gotext.json_kind(payload)} into Go value of "
                       "type storage.continueToken")
    problem = _type_error(payload)
    if problem:
        raise _invalid(problem)
    version = payload.get("v") or ""
    revision = payload.get("rv") or 0
    start = payload.get("start") or ""
    if version != TOKEN_VERSION:
        raise _invalid(f"server does not recognize this encoded version {version}")
    if revision <= 0:
        raise _invalid(f"incorrect encoded start resourceVersion (version {TOKEN_VERSION})")
    if not start:
        raise _invalid(f"encoded start key empty (version {TOKEN_VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _clean(key) != key:
        raise _invalid(start)  # upstream's guard against "../" escaping the prefix
    return Token(revision, prefix + key[1:], payload.get("t") or 0)


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

    def drop(self, prefix: str) -> None:
        """Forget every snapshot under ``prefix`` (a kind no longer served)."""
        for key in [k for k in self._entries if k[0].startswith(prefix)]:
            del self._entries[key]

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
