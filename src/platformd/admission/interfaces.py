"""
The admission seam: what a plugin is asked (``AdmissionAttributes``) and answers.

Admission sits below the registry and the request context, which hand it a write's kind
and context: ``IKind`` and ``IAdmissionContext`` say what it reads of them (the
``ResourceType`` and the ``RequestContext`` declare them).
"""

from __future__ import annotations

from typing import Any, Optional

import attrs
from zope.interface import Attribute, Interface

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"


@attrs.define(eq=False)
class AdmissionAttributes:
    """
    One write as admission sees it (upstream's ``admission.Attributes``).  ``obj`` is
    the object to be stored (a mutating plugin may change it in place); ``old`` the
    stored one (updates, deletes); ``context`` the ``RequestContext``, whose
    ``dry_run`` a plugin with side effects must honour and whose ``user`` says who
    writes.
    """

    operation: str
    #: The kind's ``ResourceType`` (``IKind``).
    kind: Any
    namespace: str
    name: str
    subresource: str
    obj: Optional[dict]
    old: Optional[dict]
    #: The request's ``RequestContext`` (``IAdmissionContext``), or None.
    context: Any
    #: The request's options (``DeleteOptions`` for deletes), as given.
    options: Optional[dict] = None
    #: The object's kind (``IKind``) when it is not ``kind``'s: a subresource's object
    #: (``pods/eviction`` takes an ``Eviction``), as upstream's attributes name the
    #: object's kind and the resource apart.  None: ``kind``.
    object_kind: Any = None

    @property
    def kind_of_object(self):
        """The object's kind: ``object_kind``, else ``kind``."""
        return self.kind if self.object_kind is None else self.object_kind

    @property
    def dry_run(self) -> bool:
        return bool(self.context is not None and self.context.dry_run)


class IKind(Interface):
    """What admission reads of a write's kind (``registry.resource.ResourceType``)."""

    group = Attribute("The API group (\"\" for the core group).")
    version = Attribute("The version it is served at.")
    kind = Attribute("The kind's name, ``ConfigMap``.")
    plural = Attribute("The resource, ``configmaps``.")
    namespaced = Attribute("Whether its objects live in a namespace.")
    gvr = Attribute("``(group, version, plural)``: what a kind is known by; kinds are "
                    "compared by it, never by name.")


class IAdmissionContext(Interface):
    """What admission reads of a write's request (``context.RequestContext``)."""

    user = Attribute("Who writes (``auth.interfaces.UserInfo``), or None.")
    dry_run = Attribute("Whether the write is a dry run (a plugin skips side effects).")
    span = Attribute("The request's trace span (``tracing.spans``), or None.")
    warnings = Attribute("A list of ``Warning`` header texts for the answer.")
    audit_annotations = Attribute("A dict of the audit event's annotations.")


class IAdmissionPlugin(Interface):
    name = Attribute("The plugin's name, as ``--enable-admission-plugins`` spells it.")

    def handles(operation):
        """Whether the plugin wants to see ``operation`` (CREATE, UPDATE, DELETE)."""


class IMutatingPlugin(IAdmissionPlugin):
    def admit(attributes):
        """
        Change ``attributes.obj`` in place, or refuse by raising a ``StatusError``.
        Returns None, or a Deferred (a webhook answers later).
        """


class IValidatingPlugin(IAdmissionPlugin):
    def validate(attributes):
        """Refuse by raising a ``StatusError``; None, or a Deferred."""
