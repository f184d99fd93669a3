"""
The SubjectAccessReview an authorization webhook is sent, and the matchConditions
evaluated against it.

``spec_for(attributes)`` is the review's spec as upstream's webhook authorizer fills it
(``user``, ``groups``, ``uid``, ``extra``, and ``resourceAttributes``, with a list's
selectors, or ``nonResourceAttributes``), in its JSON form (empty fields left out, as Go's
``omitempty`` leaves them); ``review_body`` wraps it for ``authorization.platform.io/v1``
or ``v1beta1`` (whose spec calls the groups ``group``).

matchConditions are CEL over the variable ``request``: the v1 spec, typed as upstream
declares it (``platform.SubjectAccessReviewSpec``: ``resourceAttributes`` unset for
non-resource requests and ``nonResourceAttributes`` unset for resource requests; every
string field present, even empty; ``extra`` a map of string lists).  No cost is
estimated or limited: upstream's ``authorization/cel`` compiler estimates none and
``ValidateAuthorizationConfiguration`` checks none (see ``platformd.cel``).
"""

from __future__ import annotations

import json

from platformd import cel
from platformd.auth.interfaces import Attributes
from platformd.cel import matchconditions

GROUP = "authorization.platform.io"
RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
NON_RESOURCE_FIELDS = ("path", "verb")

_SPEC = "platform.SubjectAccessReviewSpec"
_MESSAGES = cel.proto_file("platform/authorization/sar.proto", "platform", {
    "ResourceAttributes": [(f, "string") for f in RESOURCE_FIELDS],
    "NonResourceAttributes": [(f, "string") for f in NON_RESOURCE_FIELDS],
    "SubjectAccessReviewSpec": [
        ("resourceAttributes", "ResourceAttributes"),
        ("nonResourceAttributes", "NonResourceAttributes"),
        ("user", "string"),
        ("groups", "repeated string"),
        ("extra", "map:google.protobuf.ListValue"),
        ("uid", "string"),
    ],
})

_environment: cel.Environment | None = None


def environment() -> cel.Environment:
    """The CEL environment of matchConditions (made once, on first use)."""
    global _environment
    if _environment is None:
        _environment = cel.Environment({"request": cel.message_type(_SPEC)}, _MESSAGES)
    return _environment


def compile_condition(expression: str) -> cel.Program:
    """A matchCondition's program; ``cel.CompileError`` unless it is a boolean expression."""
    return environment().compile(expression, cel.BOOL)


def _resource_values(attributes: Attributes):
    info = attributes.info
    if info.is_resource:
        return "resourceAttributes", RESOURCE_FIELDS, (
            info.namespace, info.verb, info.group, info.version, info.resource,
            info.subresource, info.name)
    return "nonResourceAttributes", NON_RESOURCE_FIELDS, (info.path, info.verb)


def spec_for(attributes: Attributes, selectors: dict | None = None) -> dict:
    """
    The v1 spec in its JSON form, Go's field order and ``omitempty``; ``selectors`` the
    ``fieldSelector``/``labelSelector`` of ``resourceAttributes``
    (``selectorattributes.resource_selectors``).
    """
    spec: dict = {}
    key, names, values = _resource_values(attributes)
    spec[key] = {name: value for name, value in zip(names, values) if value}
    if selectors:
        spec[key].update(selectors)
    user = attributes.user
    if user is not None:
        if user.name:
            spec["user"] = user.name
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in sorted(user.extra)}
        if user.uid:
            spec["uid"] = user.uid
    return spec


def cache_key(spec: dict) -> str:
    """Upstream keys its decision cache on the spec's JSON."""
    return json.dumps(spec, separators=(",", ":"), sort_keys=False)


def review_body(spec: dict, version: str) -> bytes:
    """The SubjectAccessReview to POST, as Go's JSON encoder writes it."""
    if version == "v1beta1" and "groups" in spec:
        spec = {("group" if k == "groups" else k): v for k, v in spec.items()}
    review = {
        "kind": "SubjectAccessReview",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": {"allowed": False},
    }
    return json.dumps(review, separators=(",", ":")).encode()


def request_value(attributes: Attributes):
    """The ``request`` variable of matchConditions for ``attributes``."""
    message = environment().message_class(_SPEC)()
    key, names, values = _resource_values(attributes)
    target = getattr(message, key)
    for name, value in zip(names, values):
        setattr(target, name, value)
    user = attributes.user
    message.user = user.name if user is not None else ""
    message.uid = user.uid if user is not None else ""
    if user is not None:
        message.groups.extend(user.groups)
        for extra_key, extra_values in user.extra:
            entry = message.extra[extra_key]
            for value in extra_values:
                entry.values.add().string_value = value
    return message


class Matcher:
    """
    A webhook's compiled matchConditions, evaluated as upstream's ``CELMatcher``: the
    first condition that is false skips the webhook; otherwise any error is the answer;
    otherwise (all true) the webhook is called.
    """

    def __init__(self, programs):
        self.programs = tuple(programs)

    def matches(self, attributes: Attributes) -> bool:
        """True or False; raises ``MatchError`` when a condition failed and none was false."""
        if not self.programs:
            return True
        try:
            return matchconditions.evaluate(self.programs,
                                            {"request": request_value(attributes)})
        except matchconditions.ConditionError as error:
            raise MatchError(str(error)) from None


class MatchError(Exception):
    """A matchCondition could not be evaluated (and none was false)."""
