"""
``application/yaml``.

Parsing uses PyYAML's C loader (libyaml) with a mapping constructor that marks repeated
keys (see ``duplicates.py``); timestamps stay strings, as they do in JSON, so a YAML body
decodes to exactly what the equivalent JSON body would.
"""

import yaml
from zope.interface import implementer

from platformd.codecs.duplicates import from_pairs
from platformd.codecs.interface import CodecError, ICodec

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_BaseLoader):
    """Safe loading; mappings report duplicate keys; timestamps stay strings."""


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
        return yaml.dump(value, Dumper=_BaseDumper, default_flow_style=False,
                         sort_keys=False, allow_unicode=True).encode("utf-8")


def _describe(error) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return problem
