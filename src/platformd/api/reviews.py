"""
The create-only kinds that store nothing (upstream's access reviews and
SelfSubjectReview; ``ResourceType.review``): a POST to the collection is decoded,
validated and answered 201 with the object its kind's ``review`` hook fills; nothing is
written, so ``dryRun`` changes nothing either.

Admission, as upstream's create handler runs it for every create: the mutating plugins
once the body is decoded (and its namespace checked), the validating ones where the
kind's REST ``Create`` calls its ``createValidation``: a kind whose hook takes the
server is handed ``validate`` and calls it at that point (TokenReview once the token is
known to be there, TokenRequest after its static validation, Eviction and Binding after
their name checks); for the others it runs after the kind's validation, just before the
hook.  A subresource's attributes name the parent's resource and the subresource
(``pods``, ``eviction``) and the object's own kind (``Eviction``).

Routes as go-restful's for a resource with only a create route: any other path under it
(an object, a subresource, a namespaced kind without its namespace) is 404, any other
method on the collection 405, then the Accept header (406).

The aliases at upstream's group names (``catalog.builtin``: ``authorization.k8s.io``,
``authentication.k8s.io``, for unmodified ``kubectl auth``) are served by the same code:
``call.kind.api_version`` names the alias's group, so the answer does too.
"""

from __future__ import annotations

from platformd import errors
from platformd.admission.interfaces import CREATE, AdmissionAttributes
from platformd.api import responses, views, writeoptions
from platformd.api.body import decode_object
from platformd.util.deferreds import then
from platformd.registry.catalog import upstream_api_version


def serve(call, route_accepts, server):
    """
    Answer ``call`` (its ``kind`` a review); ``route_accepts(call)`` checks Accept;
    ``server`` (the ``APIServer``) goes to a kind whose ``review_takes_server``.
    """
    kind, info = call.kind, call.info
    if info.name or info.subresource or (kind.namespaced and not info.namespace):
        raise errors.not_found_path()
    if info.verb != "create":
        raise errors.method_not_allowed()
    route_accepts(call)
    call.pick(views.GET_VIEWS)
    return create(call, server)


def create(call, server):
    kind = call.kind
    options = writeoptions.parse(call)
    call.context.dry_run = options.dry_run
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version)
    obj["kind"], obj["apiVersion"] = kind.kind, kind.api_version
    meta = obj.setdefault("metadata", {})
    # rest.EnsureObjectNamespaceMatchesRequestNamespace, as upstream's create handler.
    if kind.namespaced:
        if meta.get("namespace") and meta["namespace"] != call.info.namespace:
            raise errors.bad_request("the namespace of the provided object does not match "
                                     "the namespace sent on the request")
        meta["namespace"] = call.info.namespace
    else:
        meta.pop("namespace", None)
    attributes = AdmissionAttributes(CREATE, kind, call.info.namespace or "", "", "", obj,
                                     None, call.context)
    return then(then(_admit(server, attributes), _validated, kind, obj),
                _run, kind, call, obj, server, attributes)


def _validated(_, kind, obj: dict) -> None:
    causes = kind.validate(obj)
    if causes:
        raise errors.invalid(kind.kind, kind.group, "", causes)


def serve_subresource(call, route_accepts, server, parent):
    """
    A POST to a create-only subresource (``ResourceType.subresources``:
    ``serviceaccounts/<name>/token``): ``call.kind`` is the subresource's kind; the body
    (which may name the kind's group by its upstream name, ``upstream_api_version``) is
    decoded as it, defaulted, and answered 201 with what its ``review`` hook makes
    (the hook checks the body's name and namespace against the URL, as upstream's
    ``TokenREST``).  Any other method is 405, then Accept (406).  ``parent``: the kind
    the subresource belongs to (admission names its resource).
    """
    kind = call.kind
    if call.info.verb != "create":
        raise errors.method_not_allowed()
    route_accepts(call)
    call.pick(views.GET_VIEWS)
    options = writeoptions.parse(call)
    call.context.dry_run = options.dry_run
    upstream = upstream_api_version(kind.api_version)
    obj = decode_object(call, options.field_validation, kind.schema, kind.kind, kind.api_version,
                        other_versions=(upstream,) + kind.accepts_versions)
    # The answer names the version the body named: a typed client (``kubectl create
    # token``) sends and decodes only upstream's, ``authentication.k8s.io/v1``.
    obj["kind"], obj["apiVersion"] = kind.kind, obj.get("apiVersion") or kind.api_version
    obj.setdefault("metadata", {})
    kind.default(obj)
    info = call.info
    attributes = AdmissionAttributes(CREATE, parent, info.namespace or "", info.name or "",
                                     info.subresource, obj, None, call.context,
                                     object_kind=kind)
    return then(_admit(server, attributes), _run, kind, call, obj, server, attributes)


def _admit(server, attributes):
    """The mutating admission plugins (None, or a Deferred)."""
    return None if server.admission is None else server.admission.admit(attributes)


def _run(_, kind, call, obj: dict, server, attributes):
    context = call.context
    admission = server.admission

    def validate():
        """The validating admission plugins (None, or a Deferred)."""
        return None if admission is None else admission.validate(attributes)
    if kind.review_takes_server:
        answer = kind.review(context, obj, server, validate)
    else:
        answer = then(validate(), lambda _: kind.review(context, obj))
    return then(answer, _answer, call)


def _answer(answer: dict, call):
    call.kind.schema.order(answer)
    return responses.write_value(call, 201, answer)
