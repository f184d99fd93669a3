"""
delete and deletecollection (spec 3, 4.8.1).

Options come from the query and from an optional ``DeleteOptions`` body, as upstream
accepts both.  An object with finalizers (and every namespace) is marked terminating and
returned; an object without goes at once and the answer is a ``Status`` of success.
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks, returnValue

from platformd import errors
from platformd.api import responses, writeoptions
from platformd.api.body import read_body
from platformd.api.selectors import from_call as selectors
from platformd.codecs.interface import CodecError
from platformd.registry import fielderrors as fe

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


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
    grace = call.int_arg("gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    policy = call.arg("propagationPolicy")
    if policy is not None:
        options["propagationPolicy"] = policy
    if b"dryRun" in call.request.args:
        options["dryRun"] = ["All"]
        causes = writeoptions.dry_run_causes(call.request.args[b"dryRun"])
        if causes:
            raise writeoptions.invalid(call.info.verb, causes)
    causes = []
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(fe.not_supported("propagationPolicy", policy, PROPAGATION_POLICIES))
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
        causes.append(fe.invalid("gracePeriodSeconds", grace, "must be an integer"))
    for value in options.get("dryRun") or ():
        if value != "All":
            causes.append(fe.not_supported("dryRun", value, ["All"]))
    preconditions = options.get("preconditions")
    if preconditions is not None and not isinstance(preconditions, dict):
        causes.append(fe.invalid("preconditions", preconditions, "must be an object"))
    if causes:
        raise errors.invalid("DeleteOptions", "meta.platform.io", "", causes)
    return options


@inlineCallbacks
def delete(call, store):
    options = delete_options(call)
    obj, removed = yield store.delete(call.info.namespace or None, call.info.name,
                                      options.get("preconditions"), bool(options.get("dryRun")))
    if removed:
        status = responses.success_status(call.kind, call.info.name,
                                          obj["metadata"].get("uid", ""))
        returnValue(responses.write_value(call, 200, status))
    returnValue(responses.write_value(call, 200, obj))


@inlineCallbacks
def delete_collection(call, store):
    options = delete_options(call)
    label_selector, field_selector = selectors(call)
    entries = store.list(call.info.namespace or None, label_selector, field_selector)
    for entry in entries:
        meta = entry.obj["metadata"]
        try:
            yield store.delete(meta.get("namespace"), meta["name"], None,
                               bool(options.get("dryRun")))
        except errors.StatusError as e:
            if e.code != 404:  # gone meanwhile: that is what we wanted
                raise
    returnValue(responses.write_value(call, 200, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
