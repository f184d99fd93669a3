"""
``values.validate`` compiled once per schema: what every custom object's create and
update runs (issue 31: a custom object must cost no more than a built-in one).

``values`` interprets the schema for each value: eight validators per node, each
reading its keywords from the schema dict and returning a ``Result`` merged into its
parent's.  ``compile_schema`` reads the keywords once and makes, per schema node, the
steps that can report something for each JSON type of value (a ``string`` node's value
of type string needs no type step, an object without ``minProperties`` no count), so a
valid object costs a type lookup and its fields' steps; errors are appended to one
list.  The messages, their order and ratcheting are ``values.validate``'s exactly
(``tests/apiextensions/schema/test_compiledvalues.py`` compares the two on a corpus):
the steps call the same message builders, and what is rare or subtle stays the
interpreter's (the junctions anyOf/oneOf/allOf/not, whose branches compare their
``Result.matches``; number limits and ranges; a value of a type JSON does not have).
"""

from __future__ import annotations

from typing import Callable, Optional

from platformd.apiextensions.schema import values
from platformd.apiextensions.schema.values import NO_OLD, Error, _where
from platformd.goformat.gotext import go_value

#: ``check(data, name, old, errors)``: ``values.validate(schema, data, name, old)``'s
#: errors appended to ``errors``.
Check = Callable[[object, str, object, list], None]

#: A value's JSON type by its Python type; a type missing here goes to the interpreter.
_KINDS = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
          bool: "boolean", type(None): "null"}


def _nothing(data, name, old, errors) -> None:
    return None


def compile_schema(schema: Optional[dict]) -> Check:
    """The check of ``schema`` (a node as written: its ``raw``)."""
    if schema is None:
        return _nothing
    return _Node(schema).check


class _Node:
    """One schema node's steps per JSON type of value (``steps``), in kube-openapi's
    order: type, junctions, string, format, number, array, enum, object."""

    __slots__ = ("schema", "steps")

    def __init__(self, schema: dict):
        self.schema = schema
        junctions = any(schema.get(k) for k in ("anyOf", "oneOf", "allOf")) or \
            schema.get("not") is not None
        enum = _enum_step(schema)
        string = [s for s in (_string_step(schema), _format_step(schema)) if s is not None]
        slice_ = _slice_step(schema)
        object_ = _object_step(schema)
        self.steps: dict = {}
        for kind in ("object", "array", "string", "integer", "number", "boolean"):
            steps = []
            type_step = _type_step(schema, kind)
            if type_step is not None:
                steps.append(type_step)
            if junctions:
                steps.append(_junctions)
            if kind == "string":
                steps.extend(string)
            elif kind in ("integer", "number"):
                steps.append(_number)
            elif kind == "array" and slice_ is not None:
                steps.append(slice_)
            if enum is not None:
                steps.append(enum)
            if kind == "object" and object_ is not None:
                steps.append(object_)
            self.steps[kind] = tuple(steps)
        self.steps["null"] = tuple(s for s in (_null_step(schema), enum) if s is not None)

    def check(self, data, name: str, old, errors: list) -> None:
        steps = self.steps.get(_KINDS.get(type(data)))
        if steps is None:
            errors.extend(values.validate(self.schema, data, name, old).errors)
            return
        if old is not NO_OLD and old == data:
            return  # ratcheting: an unchanged value keeps passing, whatever its errors
        for step in steps:
            step(self.schema, data, name, old, errors)


# -- the steps: step(schema, data, name, old, errors) ------------------------------------


def _type_step(schema: dict, kind: str):
    """``values._type`` for a value of JSON type ``kind``; None where it cannot fail
    (the schema allows ``kind``, or names no type or format)."""
    types = values._types(schema)
    if kind in types or not types and not values.effective_format(schema):
        return None
    return _interpreted(values._type)


def _null_step(schema: dict):
    """``values._type`` of null: an error unless the schema allows null."""
    types = values._types(schema)
    if not types or "null" in types or schema.get("nullable"):
        return None
    expected = ",".join(types)

    def step(schema, data, name, old, errors):
        errors.append(values._invalid_type(name, expected, "null"))
    return step


def _interpreted(validator):
    """A step running one of the interpreter's validators (``validator(schema, data,
    name)``, a ``Result``)."""
    def step(schema, data, name, old, errors):
        errors.extend(validator(schema, data, name).errors)
    return step


#: The junctions (their branches' best match decides what is reported) and number
#: limits and ranges, as the interpreter checks them.
_junctions = _interpreted(values._props)
_number = _interpreted(values._number)


def _string_step(schema: dict):
    if schema.get("maxLength") is None and schema.get("minLength") is None and \
            not schema.get("pattern"):
        return None
    return _interpreted(values._string)


def _format_step(schema: dict):
    fmt = values.effective_format(schema)
    if not fmt:
        return None
    valid = values.FORMATS.get(fmt) or values.FORMATS.get(fmt.replace("-", ""))
    if valid is None:
        return None

    def step(schema, data, name, old, errors):
        if not valid(data):
            errors.append(values._invalid_type(name, fmt, data))
    return step


def _enum_step(schema: dict):
    """``values._enum`` with the allowed values' canonical forms in a set."""
    enum = schema.get("enum")
    if not enum:
        return None
    allowed = frozenset(values._canonical(e) for e in enum if e is not None)
    shown = f"should be one of {go_value(list(enum))}"

    def step(schema, data, name, old, errors):
        if data is not None:
            try:
                if values._canonical(data) in allowed:
                    return
            except TypeError:  # not hashable: no JSON value is equal to it
                pass
        errors.append(Error("enum", name, f"{_where(name)} {shown}", value=data,
                            values=enum))
    return step


def _slice_step(schema: dict):
    """``values._slice``: the items (``map`` lists' correlated by their keys), then
    minItems, maxItems, uniqueItems."""
    items = schema.get("items")
    item_check = compile_schema(items) if isinstance(items, dict) else None
    bounds = {k: schema[k] for k in ("minItems", "maxItems", "uniqueItems") if k in schema}
    if item_check is None and not bounds:
        return None
    keys = schema.get("x-kubernetes-list-map-keys") or ()

    def step(schema, data, name, old, errors):
        if item_check is not None:
            olds = values._map_list(schema, old) if old is not NO_OLD else None
            for i, item in enumerate(data):
                previous = olds.get(values._item_key(item, keys), NO_OLD) if olds else NO_OLD
                item_check(item, f"{name}[{i}]", previous, errors)
        if bounds:
            errors.extend(values._slice(bounds, data, name).errors)
    return step


def _object_step(schema: dict):
    """``values._object``: property counts, additionalProperties, the properties in
    the schema's order, then required."""
    counts = schema.get("minProperties") is not None or schema.get("maxProperties") is not None
    properties = schema.get("properties") or {}
    fields = tuple((key, compile_schema(sub)) for key, sub in properties.items())
    additional = schema.get("additionalProperties")
    forbid = additional is False
    extra = compile_schema(additional) if isinstance(additional, dict) else None
    required = tuple(schema.get("required") or ())
    if not (counts or fields or forbid or extra is not None or required):
        return None
    bare = {k: v for k, v in schema.items() if k in ("minProperties", "maxProperties")}

    def step(schema, data, name, old, errors):
        if counts:
            errors.extend(values._object(bare, data, name).errors)
        if forbid:
            for key in data:
                if key not in properties:
                    errors.append(Error("other", name, f"{name}.{key} in {values.IN} is a "
                                        "forbidden property", value=key))
        elif extra is not None:
            for key, value in data.items():
                if key not in properties:
                    extra(value, f"{name}.{key}", _child(old, key, name), errors)
        for key, check in fields:
            if key in data:
                check(data[key], f"{name}.{key}" if name else key, _child(old, key, name),
                      errors)
        for key in required:
            if key not in data:
                where = f"{name}.{key}"
                errors.append(Error("required", where, f"{_where(where)} is required"))
    return step


def _child(old, key: str, name: str):
    if old is NO_OLD:
        return NO_OLD
    return values._child(old, key, name)
