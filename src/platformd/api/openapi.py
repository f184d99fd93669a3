"""
The OpenAPI documents: Swagger 2.0 at ``/openapi/v2`` and OpenAPI 3.0 per group-version
under ``/openapi/v3``.

Both are generated from the same schemas the server decodes with (``registry.schema``),
so a field is described once and the documents cannot drift from what the server
accepts.  Clients depend on details of upstream's documents, which are reproduced here:

* ``kubectl explain`` (OpenAPI v3 by default since 1.27) maps the resource to a
  group-version-kind through discovery, fetches that group-version's v3 document through
  the ``/openapi/v3`` index, and picks the schema whose ``x-kubernetes-group-version-kind``
  names the kind; fields and their descriptions come from ``properties``.
* kubectl decides whether to send ``fieldValidation`` (server-side field validation) by
  looking, in the v3 document of the kind's group-version (the v2 document as fallback),
  for a PATCH operation whose ``x-kubernetes-group-version-kind`` is the kind and whose
  own ``parameters`` include the ``fieldValidation`` query parameter (``QueryParamVerifier``
  / ``queryParamVerifierV3``).  Every PATCH operation of a kind, status included, carries it.
* The list extensions (``x-kubernetes-list-type``, ``-list-map-keys``, ``-patch-strategy``,
  ``-patch-merge-key``) drive client-side strategic merge and apply.

Operation ids, tags, actions, parameters and media types follow the apiserver's
conventions (``readRbacAuthorizationV1NamespacedRoleBinding``, ``rbacAuthorization_v1``),
with ``.platform.io`` playing the part of ``.k8s.io``.  Parameters shared by every
operation of a path are declared once on the path, as upstream's builder does.

Functions return plain dicts; the server encodes each document once and serves those
bytes.  The v3 index advertises the hash of each document's bytes (``openapi_hash``,
also its ETag), so it is built with the same encoder (``encode_document`` unless the
server passes its own).
"""

from __future__ import annotations

import hashlib
import json
from typing import Optional

import attrs

from platformd.model.meta import DELETE_OPTIONS, LIST_META
from platformd.model.schema import (
    INT32, MICRO_TIME, STRING, TIME, ListOf, MapOf, Prop, Scalar, Struct, Untyped, structs,
)

META = "io.platform.apimachinery.pkg.apis.meta.v1"
GROUP_SUFFIX = ".platform.io"
PROTOBUF = "application/vnd.platform.protobuf"
#: What every resource operation can answer in.
MEDIA_TYPES = ("application/json", "application/yaml", PROTOBUF)
#: What list operations can also answer in (with ``watch=true``, a stream of events).
STREAM_TYPES = ("application/json;stream=watch", f"{PROTOBUF};stream=watch")
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)

# The API-machinery types the operations refer to (request bodies, responses).

TIME_NAME = f"{META}.Time"
TIME_DOC = "A timestamp, RFC 3339 in UTC, to the second."
MICRO_TIME_NAME = f"{META}.MicroTime"
MICRO_TIME_DOC = "MicroTime is version of Time with microsecond level precision."

STATUS_CAUSE = Struct(f"{META}.StatusCause", {
    "reason": Prop(STRING, "A machine-readable description of the cause."),
    "message": Prop(STRING, "A human-readable description of the cause."),
    "field": Prop(STRING, "The field of the resource that caused this error, e.g. "
                          "'spec.containers[0].name'."),
}, doc="More information about one cause of a failure.")

STATUS_DETAILS = Struct(f"{META}.StatusDetails", {
    "name": Prop(STRING, "The name attribute of the resource the status is about."),
    "group": Prop(STRING, "The group attribute of the resource the status is about."),
    "kind": Prop(STRING, "The kind attribute of the resource the status is about."),
    "uid": Prop(STRING, "The UID of the resource the status is about."),
    "causes": Prop(ListOf(STATUS_CAUSE), "The causes of the failure, when there are several."),
    "retryAfterSeconds": Prop(INT32, "Seconds a client should wait before retrying."),
}, doc="Extra data a Status may carry about the failure.")

STATUS = Struct(f"{META}.Status", {
    "apiVersion": Prop(STRING, "The versioned schema of this representation."),
    "kind": Prop(STRING, "The REST resource this object represents."),
    "metadata": Prop(LIST_META, "Standard list metadata."),
    "status": Prop(STRING, 'Status of the operation: "Success" or "Failure".'),
    "message": Prop(STRING, "A human-readable description of the status."),
    "reason": Prop(STRING, "A machine-readable description of why the operation failed."),
    "details": Prop(STATUS_DETAILS, "Extended data about the reason."),
    "code": Prop(INT32, "The HTTP status code, 0 if not set."),
}, doc="A return value for calls that don't return other objects.")

PATCH = Struct(f"{META}.Patch", {}, preserve_unknown=True,
               doc="The body of a PATCH request, in the format its Content-Type names.")

RAW_EXTENSION = Struct("io.platform.apimachinery.pkg.runtime.RawExtension", {},
                       preserve_unknown=True, doc="An embedded object of any kind.")

WATCH_EVENT = Struct(f"{META}.WatchEvent", {
    "type": Prop(STRING, "ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.", required=True),
    "object": Prop(RAW_EXTENSION, "The new state for ADDED and MODIFIED, the last state for "
                                  "DELETED, a Status for ERROR.", required=True),
}, doc="One event of a watch stream.")

#: The meta types every document with resource paths defines: bodies and results of its
#: operations, and the frame of the watch stream a list with ``watch=true`` answers.
META_TYPES = (STATUS, DELETE_OPTIONS, PATCH, WATCH_EVENT)


# Schemas.

@attrs.frozen
class _Dialect:
    """Where definitions live, and whether a described ``$ref`` must be wrapped."""

    ref_prefix: str
    #: OpenAPI 3.0 ignores the siblings of ``$ref`` (upstream wraps it in ``allOf``);
    #: Swagger 2.0 as used by upstream keeps ``description`` next to ``$ref``.
    wrap_refs: bool

    def ref(self, name: str) -> dict:
        return {"$ref": self.ref_prefix + name}

    def described(self, schema: dict, doc: str) -> dict:
        if not doc:
            return schema
        if self.wrap_refs and "$ref" in schema:
            return {"allOf": [schema], "description": doc}
        return {**schema, "description": doc}


V2 = _Dialect("#/definitions/", wrap_refs=False)
V3 = _Dialect("#/components/schemas/", wrap_refs=True)


def _scalar(node: Scalar) -> dict:
    out: dict = {"type": node.type}
    if node.format:
        out["format"] = node.format
    if node.enum:
        out["enum"] = list(node.enum)
    return out


def _list_extensions(node: ListOf) -> dict:
    out: dict = {"x-kubernetes-list-type": node.list_type}
    if node.map_keys:
        out["x-kubernetes-list-map-keys"] = list(node.map_keys)
    if node.patch_strategy:
        out["x-kubernetes-patch-strategy"] = node.patch_strategy
    if node.merge_key:
        out["x-kubernetes-patch-merge-key"] = node.merge_key
    return out


def _schema(node, dialect: _Dialect) -> dict:
    """The schema of one node; Structs and timestamps become references, as upstream's."""
    if isinstance(node, Struct):
        return dialect.ref(node.name)
    if node == TIME:
        return dialect.ref(TIME_NAME)
    if node == MICRO_TIME:
        return dialect.ref(MICRO_TIME_NAME)
    if isinstance(node, Scalar):
        return _scalar(node)
    if isinstance(node, MapOf):
        out = {"type": "object", "additionalProperties": _schema(node.values, dialect)}
        if node.atomic:
            out["x-kubernetes-map-type"] = "atomic"
        return out
    if isinstance(node, ListOf):
        return {"type": "array", "items": _schema(node.items, dialect), **_list_extensions(node)}
    raise TypeError(f"no OpenAPI form for {node!r}")


def _property(prop: Prop, dialect: _Dialect) -> dict:
    schema = dialect.described(_schema(prop.node, dialect), prop.doc)
    if prop.patch_strategy:
        schema = {**schema, "x-kubernetes-patch-strategy": prop.patch_strategy}
    return schema


def _definition(struct: Struct, dialect: _Dialect, gvks: Optional[list]) -> dict:
    if isinstance(struct, Untyped):
        return {"description": struct.doc}  # upstream names no type (OpenAPISchemaType nil)
    out: dict = {"type": "object"}
    if struct.doc:
        out["description"] = struct.doc
    if struct.props:
        out["properties"] = {name: _property(prop, dialect)
                             for name, prop in struct.props.items()}
    required = struct.required_names()
    if required:
        out["required"] = required
    if struct.preserve_unknown:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if gvks:
        out["x-kubernetes-group-version-kind"] = gvks
    return out


def _gvk(group: str, version: str, kind: str) -> dict:
    return {"group": group, "kind": kind, "version": version}


def _kind_name(struct: Struct) -> str:
    return struct.name.rsplit(".", 1)[1]


def _schema_gvks(catalog) -> dict:
    """
    ``x-kubernetes-group-version-kind`` of each definition that is a kind: the served
    kinds and their lists (a review has none), ``Status`` (core v1 only), and ``DeleteOptions`` and
    ``WatchEvent``, which upstream registers in every group-version.
    """
    gvks = {}
    for k in catalog.kinds:
        gvks[k.schema.name] = [_gvk(k.group, k.version, k.kind)]
        if k.stored:
            gvks[k.list_schema.name] = [_gvk(k.group, k.version, k.list_kind)]
        for sub in k.subresources.values():
            gvks[sub.schema.name] = [_gvk(sub.group, sub.version, sub.kind)]
    group_versions = [(g, v) for g, versions in sorted(catalog.group_versions().items())
                      for v in versions]
    for struct in (DELETE_OPTIONS, WATCH_EVENT):
        gvks[struct.name] = [_gvk(g, v, _kind_name(struct)) for g, v in group_versions]
    gvks[STATUS.name] = [_gvk("", "v1", _kind_name(STATUS))]
    return gvks


def _definitions(roots, gvks: dict, dialect: _Dialect) -> dict:
    """Every Struct reachable from ``roots``, plus ``Time``, keyed by definition name."""
    out = {TIME_NAME: {"description": TIME_DOC, **_scalar(TIME)},
           MICRO_TIME_NAME: {"description": MICRO_TIME_DOC, **_scalar(MICRO_TIME)}}
    for root in roots:
        for struct in structs(root):
            if struct.name not in out:
                out[struct.name] = _definition(struct, dialect, gvks.get(struct.name))
    return out


def _kind_roots(kinds) -> list:
    roots: list = []
    for k in kinds:
        roots.extend((k.schema, k.list_schema) if k.stored else (k.schema,))
        roots.extend(sub.schema for sub in k.subresources.values())
    return roots


# Operations, independent of the OpenAPI version they are written in.

_QUERY_PARAMETERS = {
    "allowWatchBookmarks": ("boolean", 'Requests watch events of type "BOOKMARK"; servers may '
                                       "send them at their discretion. Ignored unless watching."),
    "continue": ("string", "The continue token of a previous, limited list call with otherwise "
                           "identical parameters; fetches the next chunk. 410 when expired."),
    "dryRun": ("string", "When present, modifications are not persisted. The only valid value "
                         "is All: every dry-run stage is processed."),
    "fieldManager": ("string", "The name of the actor making the changes; at most 128 printable "
                               "characters. Required for apply patches "
                               "(application/apply-patch+yaml)."),
    "fieldSelector": ("string", "A selector restricting the returned objects by their fields. "
                                "Defaults to everything."),
    "fieldValidation": ("string", "How to treat unknown or duplicate fields in the request "
                                  "body: Ignore drops them silently; Warn (the default) drops "
                                  "them with a Warning header for each; Strict fails the "
                                  "request with 400 BadRequest naming all of them."),
    "force": ("boolean", "Forces an apply request: the manager takes over fields other "
                         "managers own instead of failing with a conflict. Must be unset for "
                         "other patch types."),
    "gracePeriodSeconds": ("integer", "Seconds before the object is deleted; zero deletes "
                                      "immediately. Defaults to the kind's own grace period."),
    "labelSelector": ("string", "A selector restricting the returned objects by their labels. "
                                "Defaults to everything."),
    "limit": ("integer", "The maximum number of objects to return; when more exist, the list's "
                         "metadata.continue holds the token for the next chunk."),
    "orphanDependents": ("boolean", "Deprecated: use propagationPolicy. Whether dependents "
                                    "are orphaned."),
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "propagationPolicy": ("string", "Whether and how garbage collection is performed: Orphan, "
                                    "Background or Foreground."),
    "resourceVersion": ("string", "Constrains which resource versions the request may be "
                                  "served from; for a watch, where it starts. Defaults to unset."),
    "resourceVersionMatch": ("string", "How resourceVersion applies to a list: Exact or "
                                       "NotOlderThan. Defaults to unset."),
    "sendInitialEvents": ("boolean", "With watch=true, starts the stream with synthetic ADDED "
                                     "events for the current state, closed by a BOOKMARK "
                                     "annotated k8s.io/initial-events-end. Requires "
                                     "resourceVersionMatch=NotOlderThan."),
    "timeoutSeconds": ("integer", "Timeout for the list/watch call, regardless of activity."),
    "watch": ("boolean", "Watch for changes to the described resources and return them as a "
                         "stream of add, update and remove notifications. Specify "
                         "resourceVersion."),
}

_LIST = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
         "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds",
         "watch")
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_PATCH = _WRITE + ("force",)
_DELETE = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_DELETE_COLLECTION = _DELETE + tuple(p for p in _LIST
                                     if p not in ("allowWatchBookmarks", "watch"))

_OK = (("200", "OK"),)
_CREATED = _OK + (("201", "Created"),)
_ACCEPTED = _CREATED + (("202", "Accepted"),)
_DELETED = _OK + (("202", "Accepted"),)

_NAMESPACE_DOC = "object name and auth scope, such as for teams and projects"


@attrs.frozen
class _Op:
    """One operation of a path, in terms both OpenAPI versions can be written from."""

    method: str
    operation_id: str
    description: str
    tag: str
    responses: tuple = _OK
    #: Definition name of the 2xx response body, if any.
    result: Optional[str] = None
    query: tuple = ()
    #: Definition name of the request body, if any.
    body: Optional[str] = None
    body_required: bool = False
    patch: bool = False
    streams: bool = False
    action: Optional[str] = None
    gvk: Optional[dict] = None


@attrs.frozen
class _Path:
    path: str
    #: ``((name, description), ...)`` of the ``{name}``/``{namespace}`` segments.
    segments: tuple
    ops: tuple


def _identifier(text: str, capitalize: bool) -> str:
    """Upstream's operation-id word: letters kept, other characters start a new word."""
    out, upper = [], capitalize
    for i, ch in enumerate(text):
        if ch.isalpha() or ch == "_" or (i and ch.isdigit()):
            out.append(ch.upper() if upper else ch)
            upper = False
        else:
            upper = True
    return "".join(out)


def _group_word(group: str) -> str:
    return group[:-len(GROUP_SUFFIX)] if group.endswith(GROUP_SUFFIX) else group or "core"


def _gv_words(group: str, version: str) -> tuple:
    """``("RbacAuthorizationV1", "rbacAuthorization_v1")``: operation-id infix and tag."""
    word = _group_word(group)
    return (_identifier(word, True) + _identifier(version, True),
            f"{_identifier(word, False)}_{_identifier(version, False)}")


def _base(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


class _KindOps:
    """Builds the operations of one kind at one path shape (namespaced or not)."""

    def __init__(self, kind, namespaced: bool):
        self.kind = kind
        self.infix, self.tag = _gv_words(kind.group, kind.version)
        self.scope = "Namespaced" if namespaced else ""
        self.gvk = _gvk(kind.group, kind.version, kind.kind)

    def op(self, method, verb, tail, description, query=(), **kw) -> _Op:
        """Every resource operation also takes ``pretty`` (the path declares it once)."""
        return _Op(method=method, operation_id=f"{verb}{self.infix}{tail}",
                   description=description, tag=self.tag, gvk=self.gvk,
                   query=("pretty",) + query, **kw)

    def list(self, tail: str) -> _Op:
        return self.op("get", "list", tail, f"list or watch objects of kind {self.kind.kind}",
                       result=self.kind.list_schema.name, query=_LIST, streams=True,
                       action="list")

    def create(self) -> _Op:
        k = self.kind
        return self.op("post", "create", self.scope + k.kind, f"create a {k.kind}",
                       responses=_ACCEPTED, result=k.schema.name, query=_WRITE,
                       body=k.schema.name, body_required=True, action="post")

    def create_subresource(self, name: str, sub) -> _Op:
        """POST to a create-only subresource (``serviceaccounts/{name}/token``)."""
        k = self.kind
        op = self.op("post", "create", self.scope + k.kind + _identifier(name, True),
                     f"create {name} of a {k.kind}", responses=_ACCEPTED,
                     result=sub.schema.name, query=_WRITE, body=sub.schema.name,
                     body_required=True, action="post")
        return attrs.evolve(op, gvk=_gvk(sub.group, sub.version, sub.kind))

    def collection(self) -> tuple:
        k, scoped = self.kind, self.scope + self.kind.kind
        return (
            self.list(scoped),
            self.create(),
            self.op("delete", "delete", "Collection" + scoped,
                    f"delete collection of {k.kind}", result=STATUS.name,
                    query=_DELETE_COLLECTION, body=DELETE_OPTIONS.name,
                    action="deletecollection"),
        )

    def item(self, sub: str = "") -> tuple:
        """The object's operations, or with ``sub="Status"`` its status subresource's."""
        k, tail = self.kind, self.scope + self.kind.kind + sub
        what = f"status of the specified {k.kind}" if sub else f"the specified {k.kind}"
        ops = (
            self.op("get", "read", tail, f"read {what}", result=k.schema.name, action="get"),
            self.op("put", "replace", tail, f"replace {what}", responses=_CREATED,
                    result=k.schema.name, query=_WRITE, body=k.schema.name,
                    body_required=True, action="put"),
            self.op("patch", "patch", tail, f"partially update {what}", responses=_CREATED,
                    result=k.schema.name, query=_PATCH, body=PATCH.name, body_required=True,
                    patch=True, action="patch"),
        )
        if sub:
            return ops
        return ops + (self.op("delete", "delete", tail, f"delete a {k.kind}",
                              responses=_DELETED, result=STATUS.name, query=_DELETE,
                              body=DELETE_OPTIONS.name, action="delete"),)


def _kind_paths(kind) -> list:
    """
    Every path of one kind: the collection and the object (per namespace for namespaced
    kinds, plus the list across all namespaces) and the status subresource.  Watching is
    a list with ``watch=true``; upstream's deprecated ``/watch/`` path forms (actions
    ``watch`` and ``watchlist``) are left out because this server does not route them.
    """
    base = _base(kind.group, kind.version)
    name = (("name", f"name of the {kind.kind}"),)
    ops = _KindOps(kind, kind.namespaced)
    segments: tuple[tuple[str, str], ...]
    if kind.namespaced:
        scope, segments = "/namespaces/{namespace}", (("namespace", _NAMESPACE_DOC),)
    else:
        scope, segments = "", ()
    collection = f"{scope}/{kind.plural}"
    if not kind.stored:
        # A review (upstream's access reviews): its collection path takes POST only.
        return [_Path(base + collection, segments, (ops.create(),))]
    paths = [
        _Path(base + collection, segments, ops.collection()),
        _Path(f"{base}{collection}/{{name}}", segments + name, ops.item()),
    ]
    if kind.has_status:
        paths.append(_Path(f"{base}{collection}/{{name}}/status", segments + name,
                           ops.item("Status")))
    for sub_name, sub in kind.subresources.items():
        paths.append(_Path(f"{base}{collection}/{{name}}/{sub_name}", segments + name,
                           (ops.create_subresource(sub_name, sub),)))
    if kind.namespaced:
        everywhere = _KindOps(kind, False)
        paths.append(_Path(f"{base}/{kind.plural}", (),
                           (everywhere.list(kind.kind + "ForAllNamespaces"),)))
    return paths


def _discovery_op(operation_id: str, description: str, tag: str) -> tuple:
    return (_Op("get", operation_id, description, tag),)


def _root_path(core: bool) -> _Path:
    """``/api/`` or ``/apis/``: the versions or groups served."""
    if core:
        return _Path("/api/", (), _discovery_op("getCoreAPIVersions",
                                                "get available API versions", "core"))
    return _Path("/apis/", (), _discovery_op("getAPIVersions", "get available API versions",
                                             "apis"))


def _group_path(group: str) -> _Path:
    word = _group_word(group)
    return _Path(f"/apis/{group}/", (), _discovery_op(
        f"get{_identifier(word, True)}APIGroup", "get information of a group",
        _identifier(word, False)))


def _resources_path(group: str, version: str) -> _Path:
    infix, tag = _gv_words(group, version)
    return _Path(_base(group, version) + "/", (), _discovery_op(
        f"get{infix}APIResources", "get available resources", tag))


def _group_version_paths(catalog, group: str, version: str) -> list:
    paths = [_resources_path(group, version)]
    for kind in catalog.kinds_in(group, version):
        paths.extend(_kind_paths(kind))
    return paths


def _all_paths(catalog) -> list:
    paths = [_root_path(core=True), _root_path(core=False)]
    for group, versions in catalog.group_versions().items():
        if group:
            paths.append(_group_path(group))
        for version in versions:
            paths.extend(_group_version_paths(catalog, group, version))
    return paths


def _split_parameters(path: _Path) -> tuple:
    """
    ``(path-level query names, [per-operation query names])``: parameters every operation
    of the path takes are hoisted to the path, as upstream's builder does.
    """
    shared = set.intersection(*(set(op.query) for op in path.ops))
    return sorted(shared), [sorted(set(op.query) - shared) for op in path.ops]


def _responses(op: _Op, content) -> dict:
    """``content(op)`` renders a 2xx body in the dialect at hand."""
    out = {}
    for code, description in op.responses:
        out[code] = {"description": description}
        if op.result:
            out[code].update(content(op))
    out["401"] = {"description": "Unauthorized"}
    return out


def _media_types(op: _Op) -> list:
    return list(MEDIA_TYPES + (STREAM_TYPES if op.streams else ()))


def _by_name(parameters: list) -> list:
    """Upstream lists a path's parameters, path segments and query alike, by name."""
    return sorted(parameters, key=lambda p: p["name"])


def _extensions(op: _Op) -> dict:
    out: dict = {}
    if op.action:
        out["x-kubernetes-action"] = op.action
    if op.gvk:
        out["x-kubernetes-group-version-kind"] = op.gvk
    return out


# Swagger 2.0.

def _v2_query(name: str) -> dict:
    type_, description = _QUERY_PARAMETERS[name]
    return {"uniqueItems": True, "type": type_, "description": description, "name": name,
            "in": "query"}


def _v2_segment(name: str, description: str) -> dict:
    return {"uniqueItems": True, "type": "string", "description": description, "name": name,
            "in": "path", "required": True}


def _v2_operation(op: _Op, query: list) -> dict:
    parameters = []
    if op.body:
        body: dict = {"name": "body", "in": "body", "schema": V2.ref(op.body)}
        if op.body_required:
            body["required"] = True
        parameters.append(body)
    parameters.extend(_v2_query(name) for name in query)
    out = {
        "description": op.description,
        "consumes": list(PATCH_TYPES if op.patch else ("*/*",)),
        "produces": _media_types(op),
        "schemes": ["https"],
        "tags": [op.tag],
        "operationId": op.operation_id,
        "responses": _responses(op, lambda o: {"schema": V2.ref(o.result)}),
        **_extensions(op),
    }
    if parameters:
        out["parameters"] = parameters
    return out


def _v2_path(path: _Path) -> dict:
    hoisted, per_op = _split_parameters(path)
    out: dict = {op.method: _v2_operation(op, query) for op, query in zip(path.ops, per_op)}
    parameters = ([_v2_segment(n, d) for n, d in path.segments]
                  + [_v2_query(name) for name in hoisted])
    if parameters:
        out["parameters"] = _by_name(parameters)
    return out


def openapi_v2(catalog, version: str) -> dict:
    """
    The Swagger 2.0 document for ``GET /openapi/v2``: every path and every definition.
    ``version`` is the server's version string, shown as ``info.version``.
    """
    gvks = _schema_gvks(catalog)
    roots = _kind_roots(catalog.kinds) + list(META_TYPES)
    return {
        "swagger": "2.0",
        "info": {"title": "Platform", "version": version},
        "paths": {p.path: _v2_path(p) for p in _all_paths(catalog)},
        "definitions": _definitions(roots, gvks, V2),
    }


# OpenAPI 3.0.

def _v3_parameter(name: str, location: str, type_: str, description: str) -> dict:
    out: dict = {"name": name, "in": location, "description": description,
           "schema": {"type": type_, "uniqueItems": True}}
    if location == "path":
        out["required"] = True
    return out


def _v3_query(name: str) -> dict:
    type_, description = _QUERY_PARAMETERS[name]
    return _v3_parameter(name, "query", type_, description)


def _v3_content(types, definition: str) -> dict:
    return {t: {"schema": V3.ref(definition)} for t in types}


def _v3_operation(op: _Op, query: list) -> dict:
    out = {
        "description": op.description,
        "operationId": op.operation_id,
        "tags": [op.tag],
        "responses": _responses(op, lambda o: {"content": _v3_content(_media_types(o),
                                                                       o.result)}),
        **_extensions(op),
    }
    if query:
        out["parameters"] = [_v3_query(name) for name in query]
    if op.body:
        body: dict = {"content": _v3_content(PATCH_TYPES if op.patch else ("*/*",), op.body)}
        if op.body_required:
            body["required"] = True
        out["requestBody"] = body
    return out


def _v3_path(path: _Path) -> dict:
    hoisted, per_op = _split_parameters(path)
    out: dict = {op.method: _v3_operation(op, query) for op, query in zip(path.ops, per_op)}
    parameters = ([_v3_parameter(n, "path", "string", d) for n, d in path.segments]
                  + [_v3_query(name) for name in hoisted])
    if parameters:
        out["parameters"] = _by_name(parameters)
    return out


def _v3_document(paths, schemas: Optional[dict]) -> dict:
    out = {
        "openapi": "3.0.0",
        "info": {"title": "Platform", "version": "unversioned"},
        "paths": {p.path: _v3_path(p) for p in paths},
    }
    if schemas:
        out["components"] = {"schemas": schemas}
    return out


def openapi_v3(catalog, group: str, version: str) -> Optional[dict]:
    """
    The OpenAPI 3.0 document of one group-version (group ``""`` for core ``v1``): its
    paths, and as ``components.schemas`` every definition they reach.  None when the
    group-version is not served.
    """
    kinds = catalog.kinds_in(group, version)
    if not kinds:
        return None
    roots = _kind_roots(kinds) + list(META_TYPES)
    return _v3_document(_group_version_paths(catalog, group, version),
                        _definitions(roots, _schema_gvks(catalog), V3))


def openapi_v3_documents(catalog) -> dict:
    """
    Every document the ``/openapi/v3`` index names, keyed by its index path: ``api``,
    ``api/v1``, ``apis``, ``apis/{group}`` and ``apis/{group}/{version}``.  The discovery
    documents (``api``, ``apis``, ``apis/{group}``) only list their one GET operation.
    """
    documents: dict = {
        "api": _v3_document([_root_path(core=True)], None),
        "apis": _v3_document([_root_path(core=False)], None),
    }
    for group, versions in catalog.group_versions().items():
        if group:
            documents[f"apis/{group}"] = _v3_document([_group_path(group)], None)
        for version in versions:
            documents[_base(group, version).lstrip("/")] = openapi_v3(catalog, group, version)
    return documents


def encode_document(document: dict) -> bytes:
    """The bytes to serve for a document; the hashes in the v3 index are of these."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def openapi_hash(document_bytes: bytes) -> str:
    """Upstream's document hash and ETag value: SHA-512, upper-case hex."""
    return hashlib.sha512(document_bytes).hexdigest().upper()


def openapi_v3_index(catalog, encode=encode_document) -> dict:
    """
    ``GET /openapi/v3``: each document's path with its ``serverRelativeURL``, whose
    ``hash`` lets clients cache the document for good (upstream redirects a request with
    a stale hash to the current one).  ``encode`` must be what the server encodes the
    documents with: the hash is of the bytes served, and also their ETag.
    """
    return openapi_v3_index_of({path: encode(document) for path, document
                                in openapi_v3_documents(catalog).items()})


def openapi_v3_index_of(encoded: dict) -> dict:
    """``openapi_v3_index`` of documents already encoded (index path -> bytes served)."""
    return {"paths": {
        path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={openapi_hash(body)}"}
        for path, body in encoded.items()
    }}
