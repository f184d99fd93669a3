"""
Carrying duplicate keys from the parser to field validation.

JSON and YAML parsers keep the last of several equal keys.  Upstream reports such keys
as ``duplicate field "..."`` (a warning, or an error under ``fieldValidation=Strict``),
so our parsers build this dict subclass whenever a mapping repeats a key; the schema
walk, which knows the path, reports them.  Mappings without repeats stay plain dicts, so
the common case costs nothing.
"""


class DuplicateKeysDict(dict):
    """A dict that remembers which of its keys appeared more than once."""

    __slots__ = ("duplicates",)
    duplicates: list


def from_pairs(pairs):
    """``object_pairs_hook`` for ``json.loads``: a dict, marking repeated keys."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen, repeated = set(), []
        for key, _ in pairs:
            if key in seen and key not in repeated:
                repeated.append(key)
            seen.add(key)
        marked = DuplicateKeysDict(out)
        marked.duplicates = repeated
        return marked
    return out


def duplicate_paths(value, path: str = "") -> list:
    """
    Every repeated key anywhere in a parsed document, as ``a.b[0].c`` paths, in the
    order sigs.k8s.io/json meets them: a key where it repeats, before its (last) value.
    """
    found = []
    if isinstance(value, dict):
        repeated = getattr(value, "duplicates", ())
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key in repeated:
                found.append(child)
            found.extend(duplicate_paths(item, child))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(duplicate_paths(item, f"{path}[{i}]"))
    return found
