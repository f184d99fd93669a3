"""
The static checks of a CRD version's ``openAPIV3Schema`` (upstream's
``validateCustomResourceDefinitionValidation``), in upstream's order:

1. ``nullable`` at the root;
2. structurality (``schema.ValidateStructural``: invariants and completeness), its
   errors sorted by their text as upstream sorts them;
3. when structural, defaults (``defaulting.ValidateDefaults``): each must be pruned,
   validate against its schema and pass its rules;
4. the shape rules of every node (``ValidateCustomResourceDefinitionOpenAPISchema``:
   unsupported keywords, list and map types, list-map keys, x-kubernetes-validations'
   own fields), then, where a node and everything below it has no such error, its
   rules' compilation and estimated cost;
5. the estimated cost of all rules together.

A CRD created today gets every ``require*`` option upstream sets for a new CRD (valid
property types, structural schema, pruned defaults, atomic set items, map-list keys
required or defaulted).  Properties and map keys are walked in the order written
(upstream walks Go maps, in random order).
"""

from __future__ import annotations

import re
from typing import Optional

from platformd.cel import STATIC_ESTIMATED_CRD_COST_LIMIT, re2
from platformd.apiextensions.schema import causes, cost, objectmeta, rules, values
from platformd.goformat import goregexp
from platformd.apiextensions.schema.causes import forbidden, invalid, not_supported, required
from platformd.apiextensions.schema.node import Node
from platformd.apiextensions.schema.paths import child, index, key

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_META = ("metadata", "kind", "apiVersion")
_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
            "FieldValueRequired")
_FORBIDDEN_GENERICS = (("type", "must be empty to be structural"),
                       ("default", "must be undefined to be structural"),
                       ("title", "must be empty to be structural"),
                       ("description", "must be empty to be structural"),
                       ("nullable", "must be false to be structural"),
                       ("externalDocs", "must be undefined to be structural"))
_FORBIDDEN_EXTENSIONS = (
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"))


def check(schema: dict, path: str, status_enabled: bool = False) -> list:
    out: list = []
    if status_enabled:
        out.extend(_status_root(schema, path))
    if schema.get("nullable"):
        out.append(forbidden(child(path, "nullable"), "nullable cannot be true at the root"))
    structural = _structural(schema, path)
    context: Optional[cost.Total] = None
    if structural:
        out.extend(structural)
    else:
        defaults = _defaults(Node(schema), path, root=True)
        if defaults:
            out.extend(defaults)
        else:
            context = cost.Total()
    shape: list = []
    cel: list = []
    _shape(schema, path, _Options(), True, shape, cel, context, 1)
    out.extend(shape)
    out.extend(cel)
    if context is not None and context.total > STATIC_ESTIMATED_CRD_COST_LIMIT:
        for where in context.most_expensive():
            out.append(forbidden(where, "contributed to estimated rule cost total exceeding "
                                 "cost limit for entire OpenAPIv3 schema"))
        out.append(forbidden(path, cost.message("x-kubernetes-validations estimated rule cost "
                                                "total for entire OpenAPIv3 schema",
                                                context.total,
                                                STATIC_ESTIMATED_CRD_COST_LIMIT)))
    return out


#: JSONSchemaProps' fields in Go's order, by JSON name, and those a root may have when
#: the status subresource is enabled (``allowedFieldsAtRootSchema``).
_GO_FIELDS = ("id", "$schema", "$ref", "description", "type", "format", "title", "default",
              "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
              "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf",
              "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf",
              "anyOf", "not", "properties", "additionalProperties", "patternProperties",
              "dependencies", "additionalItems", "definitions", "externalDocs", "example",
              "nullable", "x-kubernetes-preserve-unknown-fields",
              "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
              "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
              "x-kubernetes-validations")
_ROOT_ALLOWED = frozenset((
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs", "example",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"))
_ROOT_ALLOWED_GO = ("[Description Type Format Title Maximum ExclusiveMaximum Minimum "
                    "ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems "
                    "MultipleOf Required Items Properties ExternalDocs Example "
                    "XPreserveUnknownFields XValidations]")


def _status_root(schema: dict, path: str) -> list:
    """With the status subresource, the root holds only what survives extracting
    ``properties.status``.  The bad value upstream shows is the whole internal
    JSONSchemaProps (Go field names); here it is the schema as written."""
    for name in _GO_FIELDS:
        value = schema.get(name)
        if value in (None, False, "", [], {}) and not (name == "default" and name in schema):
            continue
        if name == "type":
            if value != "object":
                return [invalid(child(path, "type"), value, 'only "object" is allowed as the '
                                "type at the root of the schema if the status subresource is "
                                "enabled")]
            continue
        if name not in _ROOT_ALLOWED:
            return [invalid(path, schema, f"only {_ROOT_ALLOWED_GO} fields are allowed at the "
                            "root of the schema if the status subresource is enabled")]
    return []


# -- 2. structurality ------------------------------------------------------------------

_ROOT, _ITEM, _FIELD = "root", "item", "field"
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _structural(schema: dict, path: str) -> list:
    out: list = []
    _invariants(schema, _ROOT, path, out)
    _completeness(schema, schema, path, path, out)
    out.sort(key=causes.text)
    return out


def _invariants(s: Optional[dict], level: str, path: str, out: list) -> None:
    if s is None:
        return
    kind = s.get("type") or ""
    if kind == "array" and not isinstance(s.get("items"), dict):
        out.append(required(child(path, "items"), "must be specified"))
    if isinstance(s.get("items"), dict):
        _invariants(s["items"], _ITEM, child(path, "items"), out)
    for name, prop in (s.get("properties") or {}).items():
        _invariants(prop, _FIELD, key(child(path, "properties"), name), out)
    additional = s.get("additionalProperties")
    if additional is not None:
        if level == _ROOT:
            out.append(forbidden(child(path, "additionalProperties"), "must not be used at the "
                                 "root"))
        if isinstance(additional, dict):
            _invariants(additional, _FIELD, child(path, "additionalProperties"), out)
    int_or_string = bool(s.get("x-kubernetes-int-or-string"))
    preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    if int_or_string and preserve:
        out.append(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), True,
                           "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        out.append(invalid(child(path, "x-kubernetes-embedded-resource"), True,
                           "must be false if x-kubernetes-int-or-string is true"))
    skip_any_of = s.get("anyOf") == _INT_OR_STRING
    all_of = s.get("allOf") or []
    skip_first = bool(all_of) and isinstance(all_of[0], dict) and \
        all_of[0].get("anyOf") == _INT_OR_STRING
    _value_validation(s, skip_any_of, skip_first, level, path, out)
    check_metadata = level == _ROOT or embedded
    if embedded and kind != "object":
        if not kind:
            out.append(required(child(path, "type"), "must be object if "
                                "x-kubernetes-embedded-resource is true"))
        else:
            out.append(invalid(child(path, "type"), kind, "must be object if "
                               "x-kubernetes-embedded-resource is true"))
    elif not kind and not int_or_string and not preserve:
        where = {_ROOT: "at the root", _ITEM: "for specified array items",
                 _FIELD: "for specified object fields"}[level]
        out.append(required(child(path, "type"), f"must not be empty {where}"))
    if embedded and additional is not None:
        out.append(forbidden(child(path, "additionalProperties"), "must not be used if "
                             "x-kubernetes-embedded-resource is set"))
    if level == _ROOT and kind and kind != "object":
        out.append(invalid(child(path, "type"), kind, "must be object at the root"))
    props = s.get("properties") or {}
    for name in ("kind", "apiVersion"):
        if name in props and check_metadata and (props[name].get("type") or "") != "string":
            out.append(invalid(child(key(child(path, "properties"), name), "type"),
                               props[name].get("type") or "", "must be string"))
    if "metadata" in props:
        _metadata(props["metadata"], check_metadata, level,
                  key(child(path, "properties"), "metadata"), out)
    if embedded and not preserve and not props:
        out.append(required(child(path, "properties"), "must not be empty if "
                            "x-kubernetes-embedded-resource is true without "
                            "x-kubernetes-preserve-unknown-fields"))


def _metadata(s: dict, check_metadata: bool, level: str, path: str, out: list) -> None:
    if check_metadata and s.get("type") != "object":
        out.append(invalid(child(path, "type"), s.get("type") or "", "must be object"))
    if level == _ROOT:
        rest = {k: v for k, v in s.items() if k not in ("type", "default") and not _zero(v)}
        props = rest.get("properties") or {}
        names = set(props)
        if names and names <= {"name", "generateName"}:
            rest.pop("properties")
        elif "properties" in rest and not props:
            rest.pop("properties")
        if rest:
            out.append(forbidden(path, "must not specify anything other than name and "
                                 "generateName, but metadata is implicitly specified"))


def _zero(value) -> bool:
    """Whether ``value`` is its Go field's zero value (false, "", empty; not 0, which
    only a pointer field holds)."""
    return value is None or value is False or (isinstance(value, (str, list, dict)) and
                                                not value)


def _value_validation(s: dict, skip_any_of: bool, skip_first: bool, level: str, path: str,
                      out: list) -> None:
    if not skip_any_of:
        for i, sub in enumerate(s.get("anyOf") or ()):
            _nested(sub, False, level, index(child(path, "anyOf"), i), out)
    for i, sub in enumerate(s.get("allOf") or ()):
        _nested(sub, skip_first and i == 0, level, index(child(path, "allOf"), i), out)
    for i, sub in enumerate(s.get("oneOf") or ()):
        _nested(sub, False, level, index(child(path, "oneOf"), i), out)
    if isinstance(s.get("not"), dict):
        _nested(s["not"], False, level, child(path, "not"), out)
    pattern = s.get("pattern")
    if pattern:
        problem = _regexp_problem(pattern)
        if problem:
            out.append(invalid(child(path, "pattern"), pattern, "must be a valid regular "
                               f"expression, but isn't: {problem}"))


def _regexp_problem(pattern: str) -> Optional[str]:
    """Go's ``regexp.Compile`` error, None when it compiles: ``goformat.goregexp``'s
    words for what it knows, RE2's own refusals (its repetition limit) after them."""
    return goregexp.problem(pattern) or re2.refusal(pattern)


def _nested(v: dict, skip_any_of: bool, level: str, path: str, out: list) -> None:
    if not isinstance(v, dict):
        return
    _value_validation(v, skip_any_of, False, level, path, out)
    if isinstance(v.get("items"), dict):
        _nested(v["items"], False, level, child(path, "items"), out)
    for name, prop in (v.get("properties") or {}).items():
        _nested(prop, False, _FIELD, key(child(path, "properties"), name), out)
    for name, message in _FORBIDDEN_GENERICS:
        if v.get(name) not in (None, "", False) or (name == "default" and "default" in v
                                                       and v["default"] is not None):
            out.append(forbidden(child(path, name), message))
    if "additionalProperties" in v:
        out.append(forbidden(child(path, "additionalProperties"), "must be undefined to be "
                             "structural"))
    for name, message in _FORBIDDEN_EXTENSIONS:
        if v.get(name):
            out.append(forbidden(child(path, name), message))
    if "metadata" in (v.get("properties") or {}):
        out.append(forbidden(key(child(path, "properties"), "metadata"), "must not be "
                             "specified in a nested context"))


def _completeness(v: dict, s: Optional[dict], s_path: str, v_path: str, out: list) -> None:
    for name in ("not",):
        if isinstance(v.get(name), dict):
            _nested_complete(v[name], s, s_path, child(v_path, name), out)
    for junction in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(v.get(junction) or ()):
            _nested_complete(sub, s, s_path, index(child(v_path, junction), i), out)


def _nested_complete(v: dict, s: Optional[dict], s_path: str, v_path: str, out: list) -> None:
    if not isinstance(v, dict):
        return
    if s is None:
        out.append(required(s_path, f"because it is defined in {v_path}"))
        return
    _completeness(v, s, s_path, v_path, out)
    if isinstance(v.get("items"), dict):
        items = s.get("items") if isinstance(s.get("items"), dict) else None
        _nested_complete(v["items"], items, child(s_path, "items"), child(v_path, "items"), out)
    s_props = s.get("properties") or {}
    for name, prop in (v.get("properties") or {}).items():
        if name not in s_props:
            out.append(required(key(child(s_path, "properties"), name),
                                "because it is defined in "
                                f"{key(child(v_path, 'properties'), name)}"))
        else:
            _nested_complete(prop, s_props[name], key(child(s_path, "properties"), name),
                             key(child(v_path, "properties"), name), out)


# -- 3. defaults -----------------------------------------------------------------------


def _defaults(s: Node, path: str, root: bool = False, inside_meta: bool = False) -> list:
    from platformd.apiextensions.schema import pruning

    out: list = []
    embedded = s.embedded or root
    if embedded:
        inside_meta = False
    if s.has_default:
        where = child(path, "default")
        value = s.default
        if not inside_meta:
            import copy
            pruned = copy.deepcopy(value)
            pruning.prune(pruned, s, embedded)
            if pruned != value:
                out.append(invalid(where, value, "must not have unknown fields"))
        errs = objectmeta.validate_resource(where, value, s) if embedded and not inside_meta \
            else objectmeta.validate(where, value, s)
        if not errs:
            errs = values.validate_value(s.raw, value, where)
        if errs:
            out.extend(errs)
        elif s.rules:
            out.extend(rules.validate_default(s, value, where))
    if s.items is not None:
        out.extend(_defaults(s.items, child(path, "items"), inside_meta=inside_meta))
    for name, prop in s.properties.items():
        meta = inside_meta or (embedded and name in _META)
        out.extend(_defaults(prop, key(child(path, "properties"), name), inside_meta=meta))
    return out


# -- 4. shape --------------------------------------------------------------------------


class _Options:
    __slots__ = ("defaults_reason", "inside_meta", "uncorrelatable")

    def __init__(self, defaults_reason=None, inside_meta=False, uncorrelatable=None):
        self.defaults_reason: Optional[str] = defaults_reason
        self.inside_meta = inside_meta
        self.uncorrelatable: Optional[str] = uncorrelatable

    def but(self, **changes) -> "_Options":
        new = _Options(self.defaults_reason, self.inside_meta, self.uncorrelatable)
        for name, value in changes.items():
            if name == "uncorrelatable" and new.uncorrelatable is not None:
                continue
            setattr(new, name, value)
        return new


def _standard(s: dict, path: str, opts: _Options) -> list:
    out = []
    kind = s.get("type") or ""
    if kind and kind not in _TYPES:
        out.append(not_supported(child(path, "type"), kind, _TYPES))
    if "default" in s and opts.defaults_reason is not None:
        out.append(forbidden(child(path, "default"), "must not be set " + opts.defaults_reason))
    if s.get("id"):
        out.append(forbidden(child(path, "id"), "id is not supported"))
    if s.get("additionalItems") is not None:
        out.append(forbidden(child(path, "additionalItems"), "additionalItems is not supported"))
    if s.get("patternProperties"):
        out.append(forbidden(child(path, "patternProperties"), "patternProperties is not "
                             "supported"))
    if s.get("definitions"):
        out.append(forbidden(child(path, "definitions"), "definitions is not supported"))
    if s.get("dependencies") is not None:
        out.append(forbidden(child(path, "dependencies"), "dependencies is not supported"))
    if s.get("$ref") is not None:
        out.append(forbidden(child(path, "$ref"), "$ref is not supported"))
    if kind == "null":
        out.append(forbidden(child(path, "type"), "type cannot be set to null, use nullable as "
                             "an alternative"))
    if isinstance(s.get("items"), list) and s["items"]:
        out.append(forbidden(child(path, "items"), "items must be a schema object and not an "
                             "array"))
    if opts.inside_meta and s.get("x-kubernetes-embedded-resource"):
        out.append(forbidden(child(path, "x-kubernetes-embedded-resource"), "must not be used "
                             "inside of resource meta"))
    return out


def _shape(s: Optional[dict], path: str, opts: _Options, is_root: bool, schema_errs: list,
           cel_errs: list, total: Optional[cost.Total], cardinality: Optional[int]) -> None:
    if not isinstance(s, dict):
        return
    mine: list = []
    below: list = []
    mine.extend(_standard(s, path, opts))
    if s.get("uniqueItems"):
        mine.append(forbidden(child(path, "uniqueItems"), "uniqueItems cannot be set to true "
                              "since the runtime complexity becomes quadratic"))
    additional = s.get("additionalProperties")
    props = s.get("properties") or {}
    if additional is not None:
        if props and (additional is not True):
            mine.append(forbidden(child(path, "additionalProperties"), "additionalProperties and "
                                  "properties are mutual exclusive"))
        sub = opts
        if opts.inside_meta:
            sub = opts.but(defaults_reason="inside additionalProperties applying to object "
                           "metadata")
        if isinstance(additional, dict):
            _shape(additional, child(path, "additionalProperties"), sub, False, below, cel_errs,
                   total, cost.times(cardinality, s.get("maxProperties")))
    for name, prop in props.items():
        sub = opts
        if s.get("x-kubernetes-map-type") == "atomic":
            sub = sub.but(uncorrelatable=path)
        if (is_root or s.get("x-kubernetes-embedded-resource")) and name in _META:
            sub = sub.but(inside_meta=True)
            if is_root:
                sub = sub.but(defaults_reason=f"in top-level {name}")
        _shape(prop, key(child(path, "properties"), name), sub, False, below, cel_errs, total,
               cardinality)
    if isinstance(s.get("not"), dict):
        _shape(s["not"], child(path, "not"), opts, False, below, cel_errs, None, None)
    for junction in ("allOf", "oneOf", "anyOf"):
        for i, sub_schema in enumerate(s.get(junction) or ()):
            _shape(sub_schema, index(child(path, junction), i), opts, False, below, cel_errs,
                   None, None)
    items = s.get("items")
    if items is not None:
        sub = opts
        if s.get("x-kubernetes-list-type") != "map":
            sub = sub.but(uncorrelatable=path)
        if isinstance(items, dict):
            _shape(items, child(path, "items"), sub, False, below, cel_errs, total,
                   cost.times(cardinality, s.get("maxItems")))
        elif isinstance(items, list):
            for i, item in enumerate(items):
                _shape(item, index(child(path, "items"), i), sub, False, below, cel_errs, None,
                       None)
    after: list = []
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        after.append(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), False,
                             "must be true or undefined"))
    after.extend(_list_and_map_types(s, path))
    after.extend(_map_list_keys(s, path))
    after.extend(_rule_fields(s, path))
    # upstream's order: this node's first checks, its children's, then the rest
    schema_errs.extend(mine)
    schema_errs.extend(below)
    schema_errs.extend(after)
    if s.get("x-kubernetes-validations") and not mine and not below and not after and \
            total is not None:
        cel_errs.extend(rules.compile_causes(Node(s), path, is_root or bool(
            s.get("x-kubernetes-embedded-resource")), opts.uncorrelatable, total, cardinality))


def _list_and_map_types(s: dict, path: str) -> list:
    out = []
    kind = s.get("type") or ""
    map_type = s.get("x-kubernetes-map-type")
    list_type = s.get("x-kubernetes-list-type")
    keys = s.get("x-kubernetes-list-map-keys") or []
    items = s.get("items") if isinstance(s.get("items"), dict) else None
    if map_type is not None and kind != "object":
        if not kind:
            out.append(required(child(path, "type"), "must be object if x-kubernetes-map-type "
                                "is specified"))
        else:
            out.append(invalid(child(path, "type"), kind, "must be object if "
                               "x-kubernetes-map-type is specified"))
    if map_type is not None and map_type not in ("atomic", "granular"):
        out.append(not_supported(child(path, "x-kubernetes-map-type"), map_type,
                                 ["atomic", "granular"]))
    if list_type is not None and kind != "array":
        if not kind:
            out.append(required(child(path, "type"), "must be array if x-kubernetes-list-type "
                                "is specified"))
        else:
            out.append(invalid(child(path, "type"), kind, "must be array if "
                               "x-kubernetes-list-type is specified"))
    elif list_type == "set" and items is not None:
        if items.get("type") == "array" and items.get("x-kubernetes-list-type") not in (
                None, "atomic"):
            out.append(invalid(child(path, "items", "x-kubernetes-list-type"),
                               items.get("x-kubernetes-list-type"), "must be atomic as item of a "
                               "list with x-kubernetes-list-type=set"))
        elif items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            out.append(invalid(child(path, "items", "x-kubernetes-map-type"),
                               items.get("x-kubernetes-list-type"), "must be atomic as item of a "
                               "list with x-kubernetes-list-type=set"))
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        out.append(not_supported(child(path, "x-kubernetes-list-type"), list_type,
                                 ["atomic", "set", "map"]))
    if keys:
        if list_type is None:
            out.append(required(child(path, "x-kubernetes-list-type"), "must be map if "
                                "x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            out.append(invalid(child(path, "x-kubernetes-list-type"), list_type, "must be map if "
                               "x-kubernetes-list-map-keys is non-empty"))
    if list_type == "map":
        if not keys:
            out.append(required(child(path, "x-kubernetes-list-map-keys"), "must not be empty if "
                                "x-kubernetes-list-type is map"))
        if s.get("items") is None:
            out.append(required(child(path, "items"), "must have a schema if "
                                "x-kubernetes-list-type is map"))
        elif items is None:
            out.append(invalid(child(path, "items"), s.get("items"), "must only have a single "
                               "schema if x-kubernetes-list-type is map"))
        elif items.get("type") != "object":
            out.append(invalid(child(path, "items", "type"), items.get("type") or "",
                               "must be object if parent array's x-kubernetes-list-type is map"))
        else:
            seen = set()
            item_props = items.get("properties") or {}
            for k in keys:
                if k in item_props:
                    if item_props[k].get("type") in ("array", "object"):
                        out.append(invalid(child(key(child(path, "items", "properties"), k),
                                                 "type"), items.get("type"),
                                           "must be a scalar type if parent array's "
                                           "x-kubernetes-list-type is map"))
                else:
                    out.append(invalid(child(path, "x-kubernetes-list-map-keys"), keys,
                                       "entries must all be names of item properties"))
                if k in seen:
                    out.append(invalid(child(path, "x-kubernetes-list-map-keys"), keys,
                                       "must not contain duplicate entries"))
                seen.add(k)
    return out


def _map_list_keys(s: dict, path: str) -> list:
    items = s.get("items")
    list_type = s.get("x-kubernetes-list-type")
    if not isinstance(items, dict) or list_type not in ("set", "map"):
        return []
    out = []
    if items.get("nullable"):
        out.append(forbidden(child(path, "items", "nullable"), "cannot be nullable when "
                             f"x-kubernetes-list-type is {list_type}"))
    if list_type == "map":
        required_keys = set(items.get("required") or ())
        item_props = items.get("properties") or {}
        for k in s.get("x-kubernetes-list-map-keys") or ():
            prop = item_props.get(k)
            if prop is None:
                continue
            where = key(child(path, "items", "properties"), k)
            if k not in required_keys and "default" not in prop:
                out.append(required(child(where, "default"), "this property is in "
                                    "x-kubernetes-list-map-keys, so it must have a default or be "
                                    "a required property"))
            if prop.get("nullable"):
                out.append(forbidden(child(where, "nullable"), "this property is in "
                                     "x-kubernetes-list-map-keys, so it cannot be nullable"))
    return out


_NEWLINES = re.compile(r"[\n\r]+")


def _rule_fields(s: dict, path: str) -> list:
    out = []
    node: Optional[Node] = None
    for i, rule in enumerate(s.get("x-kubernetes-validations") or ()):
        where = index(child(path, "x-kubernetes-validations"), i)
        text = (rule.get("rule") or "").strip()
        message = rule.get("message") or ""
        trimmed = message.strip()
        if not text:
            out.append(required(child(where, "rule"), "rule is not specified"))
        elif message and not trimmed:
            out.append(invalid(child(where, "message"), message, "must be non-empty if "
                               "specified"))
        elif _NEWLINES.search(trimmed):
            out.append(invalid(child(where, "message"), message, "must not contain line breaks"))
        elif _NEWLINES.search(text) and not trimmed:
            out.append(required(child(where, "message"), "message must be specified if rule "
                                "contains line breaks"))
        expression = rule.get("messageExpression") or ""
        if expression and not expression.strip():
            out.append(required(child(where, "messageExpression"), "messageExpression must be "
                                "non-empty if specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in _REASONS:
            out.append(not_supported(child(where, "reason"), reason, _REASONS))
        field_path = rule.get("fieldPath") or ""
        if field_path and not field_path.strip():
            out.append(invalid(child(where, "fieldPath"), field_path, "must be non-empty if "
                               "specified"))
        if _NEWLINES.search(field_path):
            out.append(invalid(child(where, "fieldPath"), field_path, "must not contain line "
                               "breaks"))
        if field_path:
            node = node or Node(s)
            if rules.field_path(field_path, node) is None:
                out.append(invalid(child(where, "fieldPath"), field_path, "must be a valid path"))
    return out
