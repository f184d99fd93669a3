"""
delete and deletecollection (spec 3, 4.8.1).

Options come from the query and from an optional ``DeleteOptions`` body, as upstream
accepts both.  An object left with finalizers (and every namespace) is marked
terminating and returned: 200, or 202 when ``orphanDependents=false`` was given (upstream's
``handlers/delete.go`` rule).  An object without goes at once; the answer is a ``Status``
of success, or for pods and service accounts the object itself (``ReturnDeletedObject``).
deletecollection answers with the list of the objects it deleted, as upstream's
``DeleteCollection``.
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks, returnValue

from platformd import errors
from platformd.api import listoptions, responses, views, writeoptions
from platformd.api.reads import selected
from platformd.api.body import read_body
from platformd.codecs.interface import CodecError
from platformd.model import fielderrors as fe

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
UNSAFE = errors.UNSAFE_DELETE_OPTION


def delete_options(call) -> dict:
    """DeleteOptions from the body (if any) overlaid by query parameters; validated."""
    data = read_body(call)
    options = {}
    if data.strip():
        codec = call.negotiator.for_request(call.request.getHeader(b"content-type"))
        try:
            options = codec.decode(data)
        except CodecError as e:
            raise errors.bad_request(f"invalid DeleteOptions body: {e}") from None
        if not isinstance(options, dict):
            raise errors.bad_request("invalid DeleteOptions body: must be an object")
        call.context.audit_request(options, has_object_meta=False)
    if call.has_arg(UNSAFE):
        options[UNSAFE] = call.bool_arg(UNSAFE)
    grace = call.int_arg("gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    policy = call.arg("propagationPolicy")
    if policy is not None:
        options["propagationPolicy"] = policy
    if call.has_arg("orphanDependents"):
        options["orphanDependents"] = call.bool_arg("orphanDependents")
    dry_values = call.values("dryRun")
    if dry_values is not None:
        options["dryRun"] = ["All"]
        causes = writeoptions.dry_run_causes(dry_values)
        if causes:
            raise writeoptions.invalid(call.info.verb, causes)
    causes = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        causes.append(fe.invalid("propagationPolicy", policy,
                                 "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(fe.not_supported("propagationPolicy", policy,
                                       PROPAGATION_POLICIES + ("nil",)))
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        causes.append(fe.invalid("gracePeriodSeconds", grace, "must be an integer"))
    for value in options.get("dryRun") or ():
        if value != "All":
            causes.append(fe.not_supported("dryRun", value, ["All"]))
    preconditions = options.get("preconditions")
    if preconditions is not None and not isinstance(preconditions, dict):
        causes.append(fe.invalid("preconditions", preconditions, "must be an object"))
    causes += _unsafe_causes(call, options)
    if causes:
        raise errors.invalid("DeleteOptions", "meta.platform.io", "", causes)
    call.context.dry_run = bool(options.get("dryRun"))
    return options


def _unsafe_causes(call, options: dict) -> list:
    """The rules of spec 4.8.2 for the unsafe-delete option."""
    if not options.get(UNSAFE):
        return []
    if not call.gates["AllowUnsafeMalformedObjectDeletion"]:
        return [fe.forbidden(UNSAFE, "is forbidden unless the "
                             "AllowUnsafeMalformedObjectDeletion feature gate is enabled")]
    if call.info.verb != "delete":
        return [fe.forbidden(UNSAFE, "is not allowed for deletecollection")]
    return [fe.forbidden(field, f"may not be set together with {UNSAFE}")
            for field in ("dryRun", "gracePeriodSeconds", "orphanDependents", "preconditions",
                          "propagationPolicy") if options.get(field) is not None]


@inlineCallbacks
def delete(call, store):
    options = delete_options(call)
    unsafe = bool(options.get(UNSAFE))
    if unsafe:
        # Upstream asks for this extra permission before a cluster-breaking delete.
        yield call.authorize_as("unsafe-delete-ignore-read-errors")
    obj, removed = yield store.delete(call.context, call.info.namespace or None,
                                      call.info.name, options, unsafe)
    if removed:
        if not call.kind.returns_deleted_object:
            obj = responses.success_status(call.kind, call.info.name,
                                           obj["metadata"].get("uid", ""))
        returnValue(responses.write_value(call, 200, obj))
    code = 202 if options.get("orphanDependents") is False else 200
    returnValue(responses.write_value(call, code, obj))


@inlineCallbacks
def delete_collection(call, store, reader):
    """
    Delete every object the selectors choose, each as a delete of its own (finalizers
    and propagation honoured); the answer is the list of those objects as they were
    listed, at the list's resourceVersion, in the negotiated encoding and view.
    """
    options = delete_options(call)
    # Upstream lists what to delete as a LIST with the request's list options reads
    # (the resourceVersion's plan, selectors; a limit only pages, so everything
    # selected goes): without a resourceVersion, from a cache holding every write
    # committed before (``ConsistentListFromCache``).
    listed = yield listoptions.parse(call, reader.gates, watch=False)
    listing = yield reader.cache.list(call.kind, call.info.namespace, listed.list_plan(),
                                      listed.resource_version, listed.continue_token)
    entries = yield selected(listing, listed)
    for entry in entries:
        meta = entry.obj["metadata"]
        try:
            yield store.delete(call.context, meta.get("namespace"), meta["name"], options)
        except errors.StatusError as e:
            if e.code != 404:  # gone meanwhile: that is what we wanted
                raise
    result = reader.render(call, call.pick(views.LIST_VIEWS), call.kind,
                           {"resourceVersion": str(listing.revision), "continue": ""}, entries)
    if not isinstance(result, bytes):
        result = yield result
    returnValue(result)
