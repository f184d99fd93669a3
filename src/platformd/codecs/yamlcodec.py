"""
``application/yaml``.

Parsing uses PyYAML's C loader (libyaml) with a mapping constructor that sorts keys and
notes repeated ones as go-yaml's strict mode words them (``decode_strict``); timestamps
stay strings, as they do in JSON, so a YAML body decodes to exactly what the equivalent
JSON body would.  Before composing, the event
stream's nesting is checked against ``limits.MAX_DEPTH`` (libyaml's composer recurses in
C and crashes the process on deep enough input); before constructing, the node graph is
checked for alias bombs as go-yaml checks it (``document contains excessive aliasing``:
past 100 aliased nodes, at most 99 % of a document of up to 400,000 nodes may come
from alias expansion, falling to 10 % at 4,000,000) and for anchors containing
themselves.  Scalars resolve as go-yaml v2 resolves them (``y``/``n`` are booleans
too; an integer past 64 bits is a float, or past that its text, a string), and mapping
keys become JSON's strings as ``sigs.k8s.io/yaml``'s ``yamlToJSON`` makes them: ``yes:
1`` is ``{"true": 1}``, an integer key its digits, a float key Go's ``FormatFloat(f,
'g', -1, 32)``; a null key is refused as there.

Writing uses PyYAML's C emitter with the choices upstream's encoder makes
(``sigs.k8s.io/yaml``: JSON through go-yaml v2): mapping keys sorted in go-yaml's order
(runes compared, non-letters before letters, digit runs by value), a string that would
read back as another type (``""``, ``"true"``, ``"12"``, a timestamp) double-quoted, a
multi-line string as a literal block, anything else plain where YAML allows it.
"""

import functools
import itertools
import math
import re
import struct

import yaml
from zope.interface import implementer

from platformd.goformat import gonumbers, gotext
from platformd.codecs import limits
from platformd.codecs.interface import CodecError, ICodec

# libyaml's classes when PyYAML was built with it.
try:
    from yaml import CSafeDumper as _BaseDumper, CSafeLoader as _BaseLoader
except ImportError:
    from yaml import SafeDumper as _BaseDumper, SafeLoader as _BaseLoader
_SafeConstructor = yaml.constructor.SafeConstructor


class _Loader(_BaseLoader):
    """Safe loading; repeated keys noted in ``repeated``; timestamps stay strings."""

    def __init__(self, stream):
        super().__init__(stream)
        self.repeated: list = []

    def construct_document(self, node):
        _check_aliases(node)
        return super().construct_document(node)


def _check_nesting(data: bytes) -> None:
    """Refuse input nesting deeper than ``limits.MAX_DEPTH`` (libyaml's parser is iterative)."""
    depth = 0
    for event in yaml.parse(data, Loader=_BaseLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > limits.MAX_DEPTH:
                raise limits.too_deep()
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _allowed_alias_ratio(decoded: int) -> float:
    """go-yaml's ``allowedAliasRatio``."""
    low, high = 400_000, 4_000_000
    if decoded <= low:
        return 0.99
    if decoded >= high:
        return 0.10
    return 0.99 - 0.89 * (decoded - low) / (high - low)


def _check_aliases(root) -> None:
    """
    Count the nodes the document expands to (each node once per reference to it) in
    time linear in its distinct nodes, and refuse excessive aliasing and cycles.
    """
    sizes: dict = {}
    on_path: set = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise CodecError("yaml: anchor value contains itself")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    decoded = sizes[id(root)]
    aliased = decoded - len(sizes)
    if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded):
        raise CodecError("yaml: document contains excessive aliasing")


class _Dumper(_BaseDumper):
    """Safe dumping in upstream's layout (see the module docstring)."""


def _run_value(digits: str) -> int:
    """A digit run's value as ``keyList.Less`` computes it (``n = n*10 + r - '0'``):
    int64 arithmetic, wrapping past 19 digits, in time linear in any length."""
    value = 0
    for digit in digits:
        value = (value * 10 + ord(digit) - ord("0")) & 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >> 63 else value


def _go_key_order(a: str, b: str) -> int:
    """go-yaml v2's ``keyList.Less`` for string keys, as a comparison."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            continue
        if x.isalpha() and y.isalpha():
            return -1 if x < y else 1
        if x.isalpha() or y.isalpha():
            return 1 if x.isalpha() else -1
        na = "".join(itertools.takewhile(str.isdecimal, a[i:]))
        nb = "".join(itertools.takewhile(str.isdecimal, b[i:]))
        an, bn = _run_value(na), _run_value(nb)
        if na and nb and na[0] != "0" and nb[0] != "0" and an != bn:
            return -1 if an < bn else 1
        if len(na) != len(nb):
            return -1 if len(na) < len(nb) else 1
        return -1 if x < y else 1
    return (len(a) > len(b)) - (len(a) < len(b))


_go_key = functools.cmp_to_key(_go_key_order)
_STR_TAG = "tag:yaml.org,2002:str"


def _represent_mapping(dumper, value):
    items = sorted(value.items(), key=lambda item: _go_key(item[0]))
    return dumper.represent_mapping("tag:yaml.org,2002:map", items)


def _represent_str(dumper, value):
    if "\n" in value:
        style = "|"
    elif dumper.resolve(yaml.ScalarNode, value, (True, False)) != _STR_TAG:
        style = '"'
    else:
        style = None
    return dumper.represent_scalar(_STR_TAG, value, style=style)


_Dumper.add_representer(dict, _represent_mapping)
_Dumper.add_representer(str, _represent_str)


def _json_key(key, line: int) -> str:
    """A mapping key as yamlToJSON writes it (sigs.k8s.io/yaml, yaml.go)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _go_float32_key(key)
    kind = "<nil>" if key is None else type(key).__name__
    raise CodecError(f"invalid YAML: unsupported map key of type: {kind} (line {line})")


def _go_float32_key(value: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 32), with go-yaml's names for the specials."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    for digits in range(1, 10):  # the shortest form that reads back as the same float32
        text = f"{value:.{digits}g}"
        if _as_float32(float(text)) == _as_float32(value):
            break
    mantissa, _, exponent = text.partition("e")
    if exponent:
        sign, number = exponent[0], exponent[1:].lstrip("0")
        text = f"{mantissa}e{sign}{number.zfill(2)}"
    return text


def _as_float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _construct_mapping(loader, node):
    """
    A mapping as ``sigs.k8s.io/yaml`` hands it on: the last of repeated keys wins, and
    the keys are sorted, as the JSON it writes from a Go map has them (so a YAML body's
    unknown fields are named in that order, as upstream names them).  A repeated key is
    noted in go-yaml v2's strict words (``setMapIndex``: the line of the repeated
    value, once that value is read, the key as ``%#v`` prints it).
    """
    loader.flatten_mapping(node)
    out: dict = {}
    seen: set = set()
    for key_node, value_node in node.value:
        raw = loader.construct_object(key_node, deep=True)
        key = _json_key(raw, key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        if (type(raw), raw) in seen:
            loader.repeated.append(f"line {value_node.start_mark.line + 1}: key "
                                   f"{_go_syntax(raw)} already set in map")
        seen.add((type(raw), raw))
    return dict(sorted(out.items()))


def _go_syntax(key) -> str:
    """A scalar mapping key as Go's ``%#v`` prints it."""
    if isinstance(key, str):
        return gotext.go_quote(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


#: go-yaml v2's booleans beyond YAML 1.1's that PyYAML knows: y, Y, n, N.
_GO_YAML_BOOL = re.compile(r"^(?:y|Y|n|N)$")
_TRUE = frozenset({"y", "yes", "true", "on"})


def _construct_bool(loader, node) -> bool:
    return loader.construct_scalar(node).lower() in _TRUE


_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _GO_YAML_BOOL, list("yYnN"))
_Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)

#: go-yaml v2's ``yamlStyleFloat``: what it reads as a float once no integer fits.
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
#: Octal digits past which a value is beyond 64 bits (2**64 has 22), so never converted.
_MAX_DIGITS = 22


def _construct_int(loader, node):
    """
    An integer as go-yaml v2's ``resolve`` reads it: within int64 an int, within uint64
    the number (a ``BigNumber``: yamlToJSON writes it as one), beyond both a float if
    the text reads as one and fits (``yamlStyleFloat``, ``ParseFloat``), else the text
    itself, a string; and base 60 (``1:30``) is a string too.  Never more digits than 64
    bits hold are converted (Python's ``int()`` refuses past 4,300).
    """
    text = loader.construct_scalar(node)
    if ":" in text:
        return text
    plain = text.replace("_", "")
    digits = plain.lstrip("+-")
    if digits[:2] in ("0b", "0x") or len(digits.lstrip("0")) <= _MAX_DIGITS:
        value = _SafeConstructor.construct_yaml_int(loader, node)
        if value in gonumbers.INT64:
            return value
        if 0 <= value < 1 << 64:
            return gonumbers.BigNumber(str(value))
    if _YAML_STYLE_FLOAT.match(plain):
        as_float = float(plain)
        if math.isfinite(as_float):
            return as_float
    return text


def _construct_float(loader, node):
    """A float as go-yaml v2 reads one: text past float64's range (``1.5e400``, which
    ``ParseFloat`` refuses) and base 60 stay strings; ``.inf`` and ``.nan`` are floats."""
    text = loader.construct_scalar(node)
    if ":" in text:
        return text
    value = _SafeConstructor.construct_yaml_float(loader, node)
    if math.isinf(value) and not text.lstrip("+-").startswith("."):
        return text
    return value


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Dumper.add_implicit_resolver("tag:yaml.org,2002:bool", _GO_YAML_BOOL, list("yYnN"))


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp",
                        lambda loader, node: loader.construct_scalar(node))


@implementer(ICodec)
class YAMLCodec:
    media_type = "application/yaml"

    def decode(self, data: bytes):
        return self.decode_strict(data)[0]

    def decode_strict(self, data: bytes) -> tuple:
        """
        ``(value, problems)``: the document, and go-yaml v2's strict error for its
        repeated keys when it has any (``yaml: unmarshal errors:\n  line 5: key "name"
        already set in map``, as ``sigs.k8s.io/yaml.YAMLToJSONStrict`` returns it), the
        one strict problem a YAML body's parser finds itself.
        """
        try:
            _check_nesting(data)
            loader = _Loader(data)
            try:
                documents = []
                while loader.check_data():
                    document = loader.get_data()
                    if document is not None:
                        documents.append(document)
            finally:
                loader.dispose()
        except yaml.YAMLError as e:
            raise CodecError(f"invalid YAML: {_describe(e)}") from None
        except RecursionError:
            raise limits.too_deep() from None
        if len(documents) != 1:
            raise CodecError(f"expected one YAML document, found {len(documents)}")
        limits.check_value(documents[0])
        problems = []
        if loader.repeated:
            problems.append("yaml: unmarshal errors:\n  " + "\n  ".join(loader.repeated))
        return documents[0], problems

    def encode(self, value, pretty: bool = False) -> bytes:
        return yaml.dump(value, Dumper=_Dumper, default_flow_style=False,
                         sort_keys=False, allow_unicode=True).encode("utf-8")


def _describe(error) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem
