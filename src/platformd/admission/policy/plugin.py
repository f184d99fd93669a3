"""
``ValidatingAdmissionPolicy`` (upstream's ``policy/validating`` dispatcher): every policy
whose ``matchConstraints`` take the request is evaluated once per binding that takes
it and per parameter object, and each failed validation does what the binding's
``validationActions`` say:

- ``Deny``: the request is refused, with the first denial:
  ``<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding '<b>'
  denied request: <message>``, the validation's ``reason`` (default ``Invalid``) and its
  code (422; 403 Forbidden, 413 RequestEntityTooLarge, 401 Unauthorized);
- ``Warn``: a warning ``Validation failed for ValidatingAdmissionPolicy '<p>' with
  binding '<b>': <message>``;
- ``Audit``: the audit annotation
  ``validation.policy.admission.platform.io/validation_failure``.

A configuration error (a selector or parameter that cannot be used, a parameter kind not
served, an expression failing) denies under ``failurePolicy: Fail`` and is passed over
under ``Ignore``.  Audit annotations go to the request's as ``<policy>/<key>``.
Evaluation is synchronous CEL over the cached objects: nothing waits.
"""

from __future__ import annotations

import json
import uuid

from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import IValidatingPlugin
from platformd.admission.policy.matching import MatchError, exempt, matches
from platformd.admission.policy.params import ParamError, collect, param_lister
from platformd.admission.policy.validator import DENY, validate
from platformd.admission.webhooks.review import request_dict

VALIDATION_FAILURE = "validation.policy.admission.platform.io/validation_failure"
#: Upstream's ``maxAuditAnnotationValueLength``.
MAX_ANNOTATION_VALUE = 10 * 1024
_CODES = {"Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413,
          "Unauthorized": 401}


def _namespace_object(a, namespaces):
    """``namespaceObject``: the request's namespace, with upstream's subset of fields."""
    if not a.namespace or namespaces.holds(a):
        return None
    entry = namespaces.get(None, a.namespace)
    if entry is None:
        raise errors.not_found("namespaces", "", a.namespace)
    namespace = {k: v for k, v in entry.obj.items() if k in ("metadata", "spec", "status")}
    namespace["metadata"] = {k: v for k, v in (namespace.get("metadata") or {}).items()
                             if k not in ("managedFields", "ownerReferences")}
    return namespace


class _Denial:
    """The first denial of a request (upstream keeps them all and answers the first)."""

    def __init__(self):
        self.first = None

    def add(self, policy, binding, message: str, reason: str = "") -> None:
        if self.first is None:
            self.first = (policy.name, binding, message, reason)


@implementer(IValidatingPlugin)
class ValidatingAdmissionPolicy:
    name = "ValidatingAdmissionPolicy"

    def __init__(self, source, namespaces, informers):
        #: ``PolicySource``.
        self.source = source
        #: ``webhooks.matching.Namespaces``: the Namespace kind and its lister.
        self.namespaces = namespaces
        #: ``informing.IInformers`` (parameter objects, by their kind's lister).
        self.informers = informers

    def handles(self, operation: str) -> bool:
        return operation in ("CREATE", "UPDATE", "DELETE")

    def validate(self, a):
        if exempt(a):
            return None
        hooks = self.source.hooks()
        if not hooks:
            return None
        denial = _Denial()
        request = None
        for policy, bindings in hooks:
            if not self._policy_matches(policy, a, denial):
                continue
            if request is None:
                request = request_dict(a, str(uuid.uuid4()), self.namespaces)
                request.pop("object", None)
                request.pop("oldObject", None)
            annotations: dict = {}
            for binding in bindings:
                self._bind(policy, binding, a, request, denial, annotations)
            _publish(a, policy.name, annotations)
        if denial.first is not None:
            raise _denied(a, *denial.first)
        return None

    def _policy_matches(self, policy, a, denial) -> bool:
        try:
            if policy.match_constraints is None:
                raise MatchError("policy contained no match constraints, a required field")
            if not matches(policy.match_constraints, a, self.namespaces):
                return False
            if policy.param_kind is not None:
                param_lister(self.informers, policy.param_kind)
        except (MatchError, ParamError) as error:
            _config_error(policy, None, str(error), denial)
            return False
        return True

    def _bind(self, policy, binding, a, request, denial, annotations) -> None:
        spec = binding.get("spec") or {}
        name = binding["metadata"]["name"]
        try:
            if not matches(spec.get("matchResources"), a, self.namespaces):
                return
            found = collect(self.informers, policy.param_kind, spec.get("paramRef"),
                            a.namespace)
        except (MatchError, ParamError) as error:
            _config_error(policy, name, str(error), denial)
            return
        if not found:
            return
        namespace = _namespace_object(a, self.namespaces)
        actions = spec.get("validationActions") or ()
        for param in found:
            result = validate(policy, {"object": a.obj, "oldObject": a.old,
                                       "request": request, "params": param,
                                       "namespaceObject": namespace})
            for index, decision in enumerate(result.decisions):
                if decision.action != DENY:
                    continue
                for action in actions:
                    if action == "Deny":
                        denial.add(policy, name, decision.message, decision.reason)
                    elif action == "Warn":
                        _warn(a, f"Validation failed for ValidatingAdmissionPolicy "
                                 f"'{policy.name}' with binding '{name}': {decision.message}")
                    elif action == "Audit":
                        _audit_failure(a, policy.name, name, index, decision.message, actions)
            for annotation in result.annotations:
                if annotation.action == "publish":
                    values = annotations.setdefault(annotation.key, [])
                    value = annotation.value[:MAX_ANNOTATION_VALUE]
                    if value not in values:
                        values.append(value)
                elif annotation.action == "error":
                    denial.add(policy, name, annotation.error)


def _config_error(policy, binding, error: str, denial) -> None:
    """upstream's ``addConfigError``: denied under Fail, passed over under Ignore."""
    if policy.ignore_failures:
        return
    what = "policy" if binding is None else "binding"
    denial.add(policy, binding, f"failed to configure {what}: {error}")


def _denied(a, policy: str, binding, message: str, reason: str) -> errors.StatusError:
    if binding is not None:
        message = (f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied "
                   f"request: {message}")
    else:
        message = f"ValidatingAdmissionPolicy '{policy}' denied request: {message}"
    name = a.name or ((a.obj or {}).get("metadata") or {}).get("name") or (
        (a.obj or {}).get("metadata") or {}).get("generateName") or "Unknown"
    error = errors.forbidden(a.kind.plural, a.kind.group, name, message,
                             causes=(errors.Cause("", message, ""),))
    error.reason = reason or "Invalid"
    error.code = _CODES.get(error.reason, 422)
    return error


def _warn(a, text: str) -> None:
    warnings = getattr(a.context, "warnings", None)
    if warnings is not None:
        warnings.append(text)


def _annotate(a, key: str, value: str) -> None:
    annotations = getattr(a.context, "audit_annotations", None)
    if annotations is not None:
        annotations.setdefault(key, value)


def _audit_failure(a, policy: str, binding: str, index: int, message: str, actions) -> None:
    _annotate(a, VALIDATION_FAILURE, json.dumps([{
        "message": message, "policy": policy, "binding": binding, "expressionIndex": index,
        "validationActions": list(actions)}], separators=(",", ":")))


def _publish(a, policy: str, annotations: dict) -> None:
    for key, values in annotations.items():
        _annotate(a, f"{policy}/{key}", ", ".join(values))
