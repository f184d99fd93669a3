"""The admission seam: what a plugin is asked (``AdmissionAttributes``) and answers."""

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
    #: The kind's ``ResourceType``.
    kind: Any
    namespace: str
    name: str
    subresource: str
    obj: Optional[dict]
    old: Optional[dict]
    context: Any
    #: The request's options (``DeleteOptions`` for deletes), as given.
    options: Optional[dict] = None

    @property
    def dry_run(self) -> bool:
        return bool(self.context is not None and self.context.dry_run)


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
