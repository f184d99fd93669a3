"""
The parameter objects a binding gives its policy (upstream's ``generic.CollectParams``),
read through the param kind's lister (its informer made when first asked for, per GVR):
none needed (no ``paramKind`` or no ``paramRef``: one
evaluation with ``params`` null), the object ``paramRef.name``, or every object
``paramRef.selector`` selects, in the request's namespace for a namespaced kind unless
``paramRef.namespace`` says otherwise.  None found is an error under
``parameterNotFoundAction: Deny`` and no evaluation under ``Allow``.
"""

from __future__ import annotations

from platformd.util.labelselectors import compile_selector, labels_of


class ParamError(Exception):
    """The binding cannot be evaluated (a configuration error; the policy decides)."""


def param_lister(informers, param_kind: tuple):
    """
    The served ``ResourceType`` of ``(apiVersion, kind)`` and its ``ILister`` (from
    ``informers``, ``informing.IInformers``), or ``ParamError``.
    """
    api_version, kind = param_kind
    group, _, version = api_version.rpartition("/")
    served = informers.served_kind(group, kind, version)
    if served is None:
        raise ParamError(f"failed to find resource referenced by paramKind: "
                         f"'{group}/{version}, Kind={kind}'")
    return served, informers.informer(served.gvr).lister


def collect(informers, param_kind, ref, namespace: str) -> list:
    """The parameter objects (``[None]``: evaluate once without)."""
    if param_kind is None or ref is None:
        return [None]
    kind, params = param_lister(informers, param_kind)
    ref_namespace = ref.get("namespace") or ""
    if kind.namespaced:
        ref_namespace = ref_namespace or namespace
        if not ref_namespace:
            raise ParamError("cannot use namespaced paramRef in policy binding that matches "
                             "cluster-scoped resources")
    elif ref_namespace:
        raise ParamError("paramRef.namespace must not be provided for a cluster-scoped "
                         "`paramKind`")
    name, selector = ref.get("name") or "", ref.get("selector")
    if name:
        if selector is not None:
            raise ParamError("paramRef.name and paramRef.selector are mutually exclusive")
        entry = params.get(ref_namespace or None, name)
        found = [entry.obj] if entry is not None else []
    elif selector is not None:
        try:
            chosen = compile_selector(selector)
        except ValueError as error:
            raise ParamError(str(error)) from None
        found = [entry.obj for entry in params.list(ref_namespace or None)
                 if chosen is None or chosen(labels_of(entry.obj))]
    else:
        raise ParamError("one of name or selector must be provided")
    if not found and ref.get("parameterNotFoundAction", "Deny") == "Deny":
        raise ParamError("no params found for policy binding with `Deny` "
                         "parameterNotFoundAction")
    return found
