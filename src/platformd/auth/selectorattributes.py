"""
A request's field and label selectors in a SubjectAccessReview's ``resourceAttributes``,
as upstream's webhook authorizer sends them (``resourceAttributesFrom``,
``fieldSelectorToAuthorizationAPI``, ``labelSelectorToAuthorizationAPI``) from what
its ``GetAuthorizerAttributes`` parses (``fields.ParseSelector``, ``labels.Parse``).

Only ``requirements`` are sent, never ``rawSelector``; a selector that does not parse
is left out (a selector only narrows what is asked, so asking about the unrestricted
action is safe).  Field terms are ``In`` or
``NotIn`` with their one value; label requirements are sorted by key (as ``labels.Parse``
sorts them), ``in``/``notin`` values sorted and unique, ``Exists`` and ``DoesNotExist``
without values.  Upstream's ``AuthorizeWithSelectors`` is GA and locked on since 1.34
(its gate removed in 1.37): there is no gate here.
"""

from __future__ import annotations

from platformd.util import slices
from platformd.auth.interfaces import Attributes
from platformd.errors import StatusError
from platformd.model.selectors import FieldSelectorError, field_requirements, \
    label_requirements

#: upstream's mapping from ``selection.Operator`` to the authorization API's operator
#: (``=`` stands for ``=`` and ``==``).
_FIELD_OPERATORS = {"=": "In", "!=": "NotIn"}
_LABEL_OPERATORS = {"=": "In", "in": "In", "!=": "NotIn", "notin": "NotIn",
                    "exists": "Exists", "!": "DoesNotExist"}


def resource_selectors(attributes: Attributes) -> slices.Work[dict]:
    """``{"fieldSelector": ..., "labelSelector": ...}``, each only when it has
    requirements (work for ``slices.run``: a selector may be a megabyte long)."""
    selectors: dict = {}
    if attributes.field_selector:
        try:
            terms = yield from field_requirements(attributes.field_selector)
        except FieldSelectorError:
            terms = []
        if terms:
            selectors["fieldSelector"] = {"requirements": [
                {"key": field, "operator": _FIELD_OPERATORS[op], "values": [value]}
                for field, op, value in terms]}
    if attributes.label_selector:
        try:
            requirements = yield from label_requirements(attributes.label_selector)
        except StatusError:
            requirements = []
        if requirements:
            selectors["labelSelector"] = {"requirements": [
                _label_requirement(key, op, values)
                for key, op, values in sorted(requirements, key=lambda r: r[0])]}
    return selectors


def _label_requirement(key: str, op: str, values) -> dict:
    requirement: dict = {"key": key, "operator": _LABEL_OPERATORS[op]}
    if values:
        requirement["values"] = sorted(set(values))
    return requirement
