"""
``application/yaml``.

Parsing uses PyYAML's C loader (libyaml) with a mapping constructor that marks repeated
keys (see ``duplicates.py``); timestamps stay strings, as they do in JSON, so a YAML body
decodes to exactly what the equivalent JSON body would.

Writing uses PyYAML's C emitter with the choices upstream's encoder makes
(``sigs.k8s.io/yaml``: JSON through go-yaml v2): mapping keys sorted in go-yaml's order
(runes compared, non-letters before letters, digit runs by value), a string that would
read back as another type (``""``, ``"true"``, ``"12"``, a timestamp) double-quoted, a
multi-line string as a literal block, anything else plain where YAML allows it.
"""

import functools
import itertools

import yaml
from zope.interface import implementer

from platformd.codecs.duplicates import from_pairs
from platformd.codecs.interface import CodecError, ICodec

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_BaseLoader):
    """Safe loading; mappings report duplicate keys; timestamps stay strings."""


class _Dumper(_BaseDumper):
    """Safe dumping in upstream's layout (see the module docstring)."""


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
        if na and nb and na[0] != "0" and nb[0] != "0" and int(na) != int(nb):
            return -1 if int(na) < int(nb) else 1
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


def _construct_mapping(loader, node):
    loader.flatten_mapping(node)
    pairs = []
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise CodecError(f"invalid YAML: mapping key {key!r} is not a string "
                             f"(line {key_node.start_mark.line + 1})")
        pairs.append((key, loader.construct_object(value_node, deep=True)))
    return from_pairs(pairs)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp",
                        lambda loader, node: loader.construct_scalar(node))


@implementer(ICodec)
class YAMLCodec:
    media_type = "application/yaml"

    def decode(self, data: bytes):
        try:
            documents = [d for d in yaml.load_all(data, Loader=_Loader) if d is not None]
        except yaml.YAMLError as e:
            raise CodecError(f"invalid YAML: {_describe(e)}") from None
        if len(documents) != 1:
            raise CodecError(f"expected one YAML document, found {len(documents)}")
        return documents[0]

    def encode(self, value, pretty: bool = False) -> bytes:
        return yaml.dump(value, Dumper=_Dumper, default_flow_style=False,
                         sort_keys=False, allow_unicode=True).encode("utf-8")


def _describe(error) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem
