"""
``application/json``.

Encoding uses orjson (several times faster than the stdlib encoder on our objects; see
bench/).  Decoding uses the stdlib parser because only it can report duplicate keys
(orjson silently keeps the last one), which field validation must name.
"""

import json
import re

import orjson
from zope.interface import implementer

from platformd.goformat import gonumbers
from platformd.codecs import limits
from platformd.codecs.duplicates import from_pairs
from platformd.codecs.interface import CodecError, ICodec

JSON = "application/json"

def _no_constant(name: str):
    raise CodecError(f"invalid JSON: {name} is not a JSON value")


#: The stdlib parser (it reports repeated keys; see the module docstring), refusing the
#: NaN/Infinity extensions it accepts by default, and reading a number of any length
#: (past int64 or float64 a ``gonumbers.BigNumber``, for the schema to judge).
_decoder = json.JSONDecoder(object_pairs_hook=from_pairs, parse_constant=_no_constant,
                            **gonumbers.json_number_hooks)


#: An escaped UTF-16 surrogate: the only way a JSON text can hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _without_lone_surrogates(value):
    """
    ``value`` with every lone surrogate (``"\\ud800"`` unpaired) replaced by U+FFFD, as
    Go's encoding/json decodes it; pairs were already joined by the parser.
    """
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def _as_written(value):
    """A ``BigNumber`` (a request's value not yet refused) is written as it came."""
    if isinstance(value, gonumbers.BigNumber):
        return orjson.Fragment(value.text)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value) -> bytes:
    """Compact JSON bytes; the one encoder the whole server uses."""
    return orjson.dumps(value, default=_as_written)


@implementer(ICodec)
class JSONCodec:
    media_type = JSON

    def decode(self, data: bytes):
        try:
            text = data.decode("utf-8")
            value, end = _decoder.raw_decode(text, _skip_ws(text, 0))
        except UnicodeDecodeError as e:
            raise CodecError(f"invalid UTF-8 in JSON body: {e.reason}") from None
        except json.JSONDecodeError as e:
            raise CodecError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:
            raise limits.too_deep() from None
        if _skip_ws(text, end) != len(text):
            raise CodecError("invalid JSON: extra data after the object")
        if _SURROGATE_ESCAPE.search(text):
            value = _without_lone_surrogates(value)
        limits.check_value(value)
        return value

    def encode(self, value, pretty: bool = False) -> bytes:
        if pretty:
            return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
        return orjson.dumps(value)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
