"""
Value validation of a custom object against its schema: kube-openapi's
``validate.SchemaValidator`` (the go-openapi validator upstream's
``apiservervalidation.NewSchemaValidator`` builds) and its messages, turned into field
errors as upstream's ``kubeOpenAPIResultToFieldErrors`` turns them
(``spec.x: Invalid value: "string": spec.x in body must be of type integer: "string"``).

The validators run in kube-openapi's order for every node: type (and format), the
junctions (anyOf, oneOf, allOf, not), string (maxLength, minLength, pattern), format,
number (multipleOf, maximum, minimum), array (items, minItems, maxItems, uniqueItems),
enum, object (min/maxProperties, additionalProperties, properties, required).  Each
applies to the value's own JSON type, as kube-openapi's ``Applies`` decide.  Where Go
walks a map (properties, a value's keys), the order here is the schema's and the
value's: upstream's order of such errors is random.

``x-kubernetes-int-or-string`` is the type ``integer,string``; formats upstream does
not support are ignored (``StripUnsupportedFormatsPostProcessor``).
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import re
import unicodedata
from typing import Optional

from platformd.apiextensions.schema import causes
from platformd.cel import re2
from platformd.goformat.durations import go_parse_duration
from platformd.goformat.gotext import go_value

IN = "body"


class Error:
    """One kube-openapi ``errors.Validation``: its code, name (path), value, message."""

    __slots__ = ("code", "name", "value", "message", "valid", "values")

    def __init__(self, code: str, name: str, message: str, value=None, valid=None,
                 values=None):
        self.code, self.name, self.message = code, name, message
        self.value, self.valid, self.values = value, valid, values


class Result:
    __slots__ = ("errors", "matches")

    def __init__(self):
        self.errors: list = []
        self.matches = 0

    def merge(self, other: "Result") -> "Result":
        self.errors.extend(other.errors)
        self.matches += other.matches
        return self


def _where(name: str) -> str:
    return f"{name} in {IN}"


def _types(schema: dict) -> list:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    kind = schema.get("type")
    return [kind] if kind else []


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return ""


def _invalid_type(name: str, expected: str, value) -> Error:
    if isinstance(value, str):
        message = f'{_where(name)} must be of type {expected}: "{value}"'
    else:
        message = f"{_where(name)} must be of type {expected}"
    return Error("type", name, message, value=value)


# -- formats (kube-openapi's strfmt registry) -------------------------------------------

_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


def _date(text: str) -> bool:
    """``time.Parse("2006-01-02", text)``."""
    match = _DATE.match(text)
    if not match:
        return False
    try:
        datetime.date(*map(int, match.groups()))
    except ValueError:
        return False
    return True


def _datetime(text: str) -> bool:
    """strfmt's ``IsDateTime``: a date, ``t``, a time with a zone, split on ``t``."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _date(parts[0]):
        return False
    match = _TIME.match(parts[1])
    if not match:
        return False
    return match.group(1) <= "23" and match.group(2) <= "59" and match.group(3) <= "59"


def _sloppy(text: str) -> str:
    """An IPv4 part of ``text`` without leading zeros (``netutils.ParseIPSloppy``)."""
    head, _, tail = text.rpartition(":")
    if "." not in tail:
        return text
    parts = tail.split(".")
    if any(not p.isdigit() or not p.isascii() for p in parts):
        return text
    tail = ".".join(str(int(p)) if len(p) < 10 else p for p in parts)
    return f"{head}:{tail}" if head or text.startswith(":") else tail


def _ip(text: str):
    try:
        return ipaddress.ip_address(_sloppy(text))
    except ValueError:
        return None


def _ipv4(text: str) -> bool:
    return "%" not in text and _ip(text) is not None and "." in text


def _ipv6(text: str) -> bool:
    return "%" not in text and _ip(text) is not None and ":" in text


def _cidr(text: str) -> bool:
    address, slash, bits = text.partition("/")
    if not slash or not bits.isdigit() or not bits.isascii():
        return False
    ip = _ip(address)
    return ip is not None and "%" not in address and int(bits) <= ip.max_prefixlen


_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|"
                     r"[A-Za-z0-9+/]{4})$")
_SHORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LONG_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_UUID = {
    "uuid": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid3": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid4": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?"
                        r"[0-9a-f]{12}$"),
    "uuid5": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?"
                        r"[0-9a-f]{12}$"),
}
_MAC = re.compile(r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]"
                  r"{2}){7}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\."
                  r"[0-9a-fA-F]{4}){2}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){3}|[0-9a-fA-F]{4}"
                  r"(?:\.[0-9a-fA-F]{4}){9})$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")
_HOST = re.compile(r"^([a0]((-?[a0]{0,62})?)|([a0](([a0-]{0,61}[a0])?)(\.)){1,}([a]){2,63})$")


def _host_class(char: str) -> str:
    """A hostname character as strfmt's pattern classes it: letters (\\p{L}) ``a``,
    digits and symbols (\\p{S}) ``0``, ``-`` and ``.`` themselves."""
    if char in "-.":
        return char
    if char.isascii():
        return "a" if char.isalpha() else "0" if char.isdigit() else "!"
    category = unicodedata.category(char)
    return "a" if category[0] == "L" else "0" if category[0] == "S" else "!"


def _hostname(text: str) -> bool:
    """strfmt's ``IsHostname``."""
    if not _HOST.match("".join(map(_host_class, text))) or len(text.encode()) > 255:
        return False
    return all(len(part.encode()) <= 63 for part in text.split("."))


_DURATION_PART = re.compile(r"((\d+)\s*([A-Za-zµ]+))")
_UNITS = (("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"),
          ("m", "min"), ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))


def _duration(text: str) -> bool:
    """strfmt's ``ParseDuration``: Go's, else numbers with units anywhere in the text."""
    try:
        go_parse_duration(text)
        return True
    except ValueError:
        pass
    for match in _DURATION_PART.finditer(text):
        unit = match.group(3).strip().lower()
        for variants in _UNITS:
            last = len(variants) - 1
            if any(i == last and unit.startswith(v) or v.lower() == unit
                   for i, v in enumerate(variants)):
                return True
    return False


def _uri(text: str) -> bool:
    """``url.ParseRequestURI``, roughly: an absolute URI or an absolute path."""
    if not text or " " in text:
        return False
    return text.startswith("/") or bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", text))


#: The string formats upstream's CRD validation checks (``supportedVersionedFormats``,
#: strfmt's checkers); isbn, isbn10, isbn13, creditcard, rgbcolor and email pass here.
FORMATS = {
    "date-time": _datetime, "datetime": _datetime, "date": _date,
    "byte": lambda t: bool(_BASE64.match(t)), "ipv4": _ipv4, "ipv6": _ipv6, "cidr": _cidr,
    "mac": lambda t: bool(_MAC.match(t)),
    "uuid": lambda t: bool(_UUID["uuid"].match(t)),
    "uuid3": lambda t: bool(_UUID["uuid3"].match(t)),
    "uuid4": lambda t: bool(_UUID["uuid4"].match(t)),
    "uuid5": lambda t: bool(_UUID["uuid5"].match(t)),
    "hostname": _hostname, "uri": _uri,
    "hexcolor": lambda t: bool(_HEXCOLOR.match(t)),
    "ssn": lambda t: bool(_SSN.match(t)),
    "bsonobjectid": lambda t: bool(_BSON.match(t)),
    "duration": _duration,
    "k8s-short-name": lambda t: len(t) <= 63 and bool(_SHORT_NAME.match(t)),
    "k8s-long-name": lambda t: len(t) <= 253 and bool(_LONG_NAME.match(t)),
    "password": lambda t: True,
}

_STRING_FORMATS = set(FORMATS) | {"uri", "email", "isbn", "isbn10", "isbn13", "creditcard",
                                  "rgbcolor"}


def effective_format(schema: dict) -> str:
    """The format upstream keeps (``StripUnsupportedFormatsPostProcessor``)."""
    fmt = schema.get("format") or ""
    if not fmt:
        return ""
    kind = schema.get("type") or ""
    if kind == "string":
        return fmt if fmt.replace("-", "") in {f.replace("-", "") for f in _STRING_FORMATS} \
            else ""
    if kind == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if kind == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


# -- the validators --------------------------------------------------------------------


#: No previous version (a create, or a value that does not correlate with an old one).
NO_OLD = object()


def validate(schema: Optional[dict], data, name: str = "", old=NO_OLD) -> Result:
    """
    kube-openapi's ``SchemaValidator.Validate`` of ``data`` at ``name``; with ``old``
    (the correlated previous value), upstream's ratcheting (``CRDValidationRatcheting``):
    a value equal to its old one keeps passing whatever its errors (upstream turns them
    into warnings).  Properties correlate by name, items of ``map`` lists by their keys;
    the root's ``apiVersion`` and ``kind`` and other lists' items do not.
    """
    result = Result()
    if schema is None:
        return result
    if data is None:
        result.merge(_type(schema, data, name))
        result.merge(_enum(schema, data, name))
    else:
        for check in (_type, _props, _string, _format, _number):
            result.merge(check(schema, data, name))
            result.matches += 1
        result.merge(_slice(schema, data, name, old))
        result.matches += 1
        result.merge(_enum(schema, data, name))
        result.matches += 1
        result.merge(_object(schema, data, name, old))
        result.matches += 1
        result.matches += 1
    if result.errors and old is not NO_OLD and old == data:
        return Result()
    return result


def _type(schema: dict, data, name: str) -> Result:
    result = Result()
    types = _types(schema)
    fmt = effective_format(schema)
    if not types and not fmt:
        return result
    result.matches += 1
    if data is None:
        if types and "null" not in types and not schema.get("nullable"):
            result.errors.append(_invalid_type(name, ",".join(types), "null"))
        return result
    kind = _json_type(data)
    data_format = {"integer": "int64", "number": "float64"}.get(kind, "")
    float_int = kind == "number" and float(data).is_integer() and "integer" in types
    int_float = kind == "integer" and "number" in types
    if not isinstance(data, (str, list)) and fmt and not (
            kind in types or data_format == fmt or float_int or int_float):
        result.errors.append(_invalid_type(name, fmt, data_format))
        return result
    if "number" not in types and "integer" not in types and fmt and isinstance(data, (str, list)):
        return result
    if not (kind in types or float_int or int_float):
        result.errors.append(_invalid_type(name, ",".join(types), kind))
    return result


def _props(schema: dict, data, name: str) -> Result:
    any_of, one_of = schema.get("anyOf") or [], schema.get("oneOf") or []
    all_of, not_ = schema.get("allOf") or [], schema.get("not")
    main = Result()
    if not (any_of or one_of or all_of or not_ is not None):
        return main
    if any_of:
        best: Optional[Result] = None
        first: Optional[Result] = None
        ok = False
        for sub in any_of:
            r = validate(sub, data, name)
            if not r.errors:
                best, ok = None, True
                first = first or r
                break
            if best is None or r.matches > best.matches:
                best = r
        if not ok:
            main.errors.append(Error("composite", "", f'"{name}" must validate at least one '
                                     "schema (anyOf)"))
        if best is not None:
            main.merge(best)
        elif first is not None:
            main.merge(first)
    if one_of:
        best = first = None
        valid = 0
        for sub in one_of:
            r = validate(sub, data, name)
            if not r.errors:
                valid += 1
                best = None
                first = first or r
                continue
            if valid == 0 and (best is None or r.matches > best.matches):
                best = r
        if valid != 1:
            extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            main.errors.append(Error("composite", "", f'"{name}" must validate one and only one '
                                     f"schema (oneOf). {extra}"))
            if best is not None:
                main.merge(best)
        elif first is not None:
            main.merge(first)
    if all_of:
        valid = 0
        for sub in all_of:
            r = validate(sub, data, name)
            if not r.errors:
                valid += 1
            main.merge(r)
        if valid != len(all_of):
            extra = ". None validated" if valid == 0 else ""
            main.errors.append(Error("composite", "", f'"{name}" must validate all the schemas '
                                     f"(allOf){extra}"))
    if not_ is not None:
        if not validate(not_, data, name).errors:
            main.errors.append(Error("composite", "", f'"{name}" must not validate the schema '
                                     "(not)"))
    main.matches += 1
    return main


def _string(schema: dict, data, name: str) -> Result:
    result = Result()
    if not isinstance(data, str):
        return result
    length = len(data)
    max_length, min_length = schema.get("maxLength"), schema.get("minLength")
    if max_length is not None and length > max_length:
        result.errors.append(Error("too_long", name, f"{_where(name)} should be at most "
                                   f"{max_length} chars long", value=data, valid=max_length))
    if min_length is not None and length < min_length:
        result.errors.append(Error("other", name, f"{_where(name)} should be at least "
                                   f"{min_length} chars long", value=data))
    pattern = schema.get("pattern")
    if pattern and not _search(pattern, data):
        result.errors.append(Error("other", name, f"{_where(name)} should match '{pattern}'",
                                   value=data))
    return result


def _search(pattern: str, text: str) -> bool:
    """RE2's answer (linear in the text: a user's pattern may be catastrophic for a
    backtracking engine); True for a pattern it does not compile, which ``check``
    refused when the definition was written."""
    try:
        return re2.search(pattern, text)
    except ValueError:
        return True


def _format(schema: dict, data, name: str) -> Result:
    result = Result()
    fmt = effective_format(schema)
    if not isinstance(data, str) or not fmt:
        return result
    check = FORMATS.get(fmt) or FORMATS.get(fmt.replace("-", ""))
    if check is not None and not check(data):
        result.errors.append(_invalid_type(name, fmt, data))
    return result


_MAX_JSON_FLOAT = float((1 << 53) - 1)
_EPSILON = 1e-9
_TINY = 5e-324  # math.SmallestNonzeroFloat64


def _json_integer(f: float) -> bool:
    """swag's ``IsFloat64AJSONInteger``."""
    if math.isnan(f) or math.isinf(f) or f < -_MAX_JSON_FLOAT or f > _MAX_JSON_FLOAT:
        return False
    g = float(int(f)) if f >= 0 else 9223372036854775808.0  # Go's uint64(f) on amd64
    diff = abs(f - g)
    if f == g or f == float(int(f)):
        return True
    if f == 0 or g == 0 or diff < _TINY:
        return diff < _EPSILON * _TINY
    return diff / min(abs(f) + abs(g), 1.7976931348623157e308) < _EPSILON


def _go_float_text(value: float) -> str:
    """``strconv.FormatFloat(value, 'f', -1, 64)`` (swag's ``FormatFloat64``)."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        from decimal import Decimal
        text = format(Decimal(text), "f")
    return text.removesuffix(".0")


_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


def _in_range(value, schema: dict) -> bool:
    """``IsValueValidAgainstRange``: ``value`` converts to the schema's type and format
    without loss (integers: the text of the value parses as an int of the format;
    numbers of format float: within float32's range)."""
    kind, fmt = schema.get("type") or "", effective_format(schema)
    if kind == "integer":
        text = str(value) if isinstance(value, int) else _go_float_text(value)
        try:
            number = int(text)
        except ValueError:
            return False
        low, high = _RANGES.get(fmt, _RANGES["int64"])
        return low <= number <= high
    if fmt == "float":
        return abs(float(value)) <= 3.4028234663852886e38
    return True


def _range_error(prefix: str, schema: dict, name: str) -> Error:
    kind, fmt = schema.get("type") or "", effective_format(schema)
    if fmt:
        text = f"{prefix} value must be of type {kind} with format {fmt} in {name}"
    else:
        text = f"{prefix} value must be of type {kind} (default format) in {name}"
    return Error("plain", "", text)


def _go_int(value: float) -> int:
    """Go's ``int64(f)``: truncation toward zero."""
    return int(value)


def _number(schema: dict, data, name: str) -> Result:
    """kube-openapi's ``numberValidator``: a limit that fits the schema's type and
    format is applied natively (to an integer as an integer: ``int64(limit)``), else as
    float64s; multipleOf, then minimum, then maximum."""
    result = Result()
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        return result
    if not _in_range(data, schema):
        result.errors.append(_range_error("Checked", schema, name))
    native_int = isinstance(data, int)
    multiple = schema.get("multipleOf")
    if multiple is not None:
        if _in_range(multiple, schema) and native_int:
            factor = _go_int(multiple)
            if factor <= 0:
                result.errors.append(Error("other", name, f"factor MultipleOf declared for "
                                           f"{name} must be positive: {factor}", value=factor))
            elif (abs(data) // factor) * factor != abs(data):  # Go: data/factor*factor
                result.errors.append(Error("other", name, f"{_where(name)} should be a multiple "
                                           f"of {factor}", value=data))
        else:
            factor_f = float(multiple)
            if factor_f <= 0:
                result.errors.append(Error("other", name, f"factor MultipleOf declared for "
                                           f"{name} must be positive: {go_value(factor_f)}",
                                           value=factor_f))
            else:
                quotient = 1 / factor_f * data if factor_f < 1 else data / factor_f
                if not _json_integer(quotient):
                    result.errors.append(Error("other", name, f"{_where(name)} should be a "
                                               f"multiple of {go_value(factor_f)}", value=data))
    for key, exclusive_key, words in (
            ("minimum", "exclusiveMinimum", ("greater than", "greater than or equal to")),
            ("maximum", "exclusiveMaximum", ("less than", "less than or equal to"))):
        limit = schema.get(key)
        if limit is None:
            continue
        exclusive = bool(schema.get(exclusive_key))
        if _in_range(limit, schema) and native_int:
            bound: float = _go_int(limit)
            shown = str(_go_int(limit))
        else:
            bound, shown = float(limit), go_value(float(limit))
        if key == "minimum":
            failed = data < bound or exclusive and data == bound
        else:
            failed = data > bound or exclusive and data == bound
        if failed:
            result.errors.append(Error("other", name, f"{_where(name)} should be "
                                       f"{words[0] if exclusive else words[1]} {shown}",
                                       value=data))
    return result


def _canonical(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", tuple(_canonical(v) for v in value))
    if isinstance(value, bool):
        return ("b", value)
    return value


def _slice(schema: dict, data, name: str, old=NO_OLD) -> Result:
    result = Result()
    if not isinstance(data, list):
        return result
    items = schema.get("items")
    if isinstance(items, dict):
        olds = _map_list(schema, old)
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        for i, item in enumerate(data):
            previous = olds.get(_item_key(item, keys), NO_OLD) if olds else NO_OLD
            result.merge(validate(items, item, f"{name}[{i}]", previous))
    size = len(data)
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    if min_items is not None and size < min_items:
        result.errors.append(Error("other", name, f"{_where(name)} should have at least "
                                   f"{min_items} items", value=size))
    if max_items is not None and size > max_items:
        result.errors.append(Error("max_items", name, f"{_where(name)} should have at most "
                                   f"{max_items} items", value=size, valid=max_items))
    if schema.get("uniqueItems"):
        seen = set()
        for item in data:
            key = _canonical(item)
            if key in seen:
                result.errors.append(Error("other", name, f"{_where(name)} shouldn't contain "
                                           "duplicates"))
                break
            seen.add(key)
    return result


def _item_key(item, keys) -> tuple:
    if not isinstance(item, dict):
        return ("", id(item))
    return tuple(_canonical(item.get(k)) for k in keys)


def _map_list(schema: dict, old) -> dict:
    """The old items of a ``map`` list by their keys (nothing for other lists)."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return {}
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    return {_item_key(item, keys): item for item in old if isinstance(item, dict)}


def _enum(schema: dict, data, name: str) -> Result:
    result = Result()
    enum = schema.get("enum")
    if not enum:
        return result
    wanted = _canonical(data)
    # Go compares after converting the value to each enum value's type: null never matches
    if data is None or not any(e is not None and _canonical(e) == wanted for e in enum):
        result.errors.append(Error("enum", name, f"{_where(name)} should be one of "
                                   f"{go_value(list(enum))}", value=data, values=enum))
    return result


def _child(old, key: str, name: str):
    if not isinstance(old, dict) or key not in old or not name and key in ("apiVersion",
                                                                            "kind"):
        return NO_OLD
    return old[key]


def _object(schema: dict, data, name: str, old=NO_OLD) -> Result:
    result = Result()
    if not isinstance(data, dict):
        return result
    count = len(data)
    min_props, max_props = schema.get("minProperties"), schema.get("maxProperties")
    if min_props is not None and count < min_props:
        result.errors.append(Error("other", name, f"{_where(name)} should have at least "
                                   f"{min_props} properties", value=count))
    if max_props is not None and count > max_props:
        result.errors.append(Error("too_many_properties", name, f"{_where(name)} should have at "
                                   f"most {max_props} properties", value=count,
                                   valid=max_props))
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    if additional is False:
        for key in data:
            if key not in properties:
                result.errors.append(Error("other", name, f"{name}.{key} in {IN} is a forbidden "
                                           "property", value=key))
    elif isinstance(additional, dict):
        for key, value in data.items():
            if key not in properties:
                result.merge(validate(additional, value, f"{name}.{key}",
                                      _child(old, key, name)))
    for key, sub in properties.items():
        if key in data:
            result.merge(validate(sub, data[key], f"{name}.{key}" if name else key,
                                  _child(old, key, name)))
    for key in schema.get("required") or ():
        if key not in data:
            result.errors.append(Error("required", f"{name}.{key}",
                                       f"{_where(f'{name}.{key}')} is required"))
    return result


# -- to field errors -------------------------------------------------------------------


def to_causes(path: str, errors: list) -> list:
    """``kubeOpenAPIResultToFieldErrors``: each error at ``path`` + its name."""
    out = []
    for error in errors:
        if error.code == "plain":
            # not an errors.Validation: reported at the root, as upstream
            out.append(causes.invalid(path, "", error.message))
            continue
        where = path
        if error.name and error.name != ".":
            name = error.name.removeprefix(".")
            where = f"{path}.{name}" if path else name
        value = "" if error.value is None else error.value
        if error.code == "required":
            out.append(causes.required(where))
        elif error.code == "enum":
            allowed = [v if isinstance(v, str) else causes.show(v) for v in error.values]
            out.append(causes.not_supported(where, error.value, allowed))
        elif error.code == "too_long":
            out.append(causes.too_long(where, error.valid))
        elif error.code in ("max_items", "too_many_properties"):
            out.append(causes.too_many(where, error.value, error.valid))
        elif error.code == "type":
            out.append(causes.type_invalid(where, value, error.message))
        else:
            out.append(causes.invalid(where, value, error.message))
    return out


def validate_value(schema: dict, value, path: str = "", old=NO_OLD) -> list:
    """Upstream's ``ValidateCustomResource(path, value, NewSchemaValidator(schema))``
    (``ValidateCustomResourceUpdate`` with ``old``)."""
    result = validate(schema, value, "", old)
    return to_causes(path, result.errors)
