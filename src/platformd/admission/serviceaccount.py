"""
``ServiceAccount`` (upstream's ``plugin/pkg/admission/serviceaccount``), mutating and
validating, for pod creates (no subresource):

- a pod without ``spec.serviceAccountName`` gets ``default`` (the deprecated
  ``spec.serviceAccount`` fills it first, as upstream's v1 conversion does);
- the service account must exist, else 403 ``pods "p" is forbidden: error looking up
  service account ns/sa: serviceaccount "sa" not found``.  Service accounts are read
  from their lister (the watch cache's), and one missing from it is looked up again
  once the cache is up to date (upstream's live lookup: another server over the same
  etcd may have just created it); for ``default``, which the service-account controller creates in every
  namespace, up to ten times, 0.1 s apart;
- a pod without ``imagePullSecrets`` gets its service account's;
- a service account annotated ``platform.io/enforce-mountable-secrets: "true"`` (upstream's
  ``kubernetes.io/...``) limits the pod to the secrets it references: of the secret
  references upstream checks, only ``imagePullSecrets`` exist in the Pod served here;
- a mirror pod (annotation ``platform.io/config.mirror``) is not changed and may
  reference neither a service account nor secrets.

Upstream also mounts a projected token volume into every container; the Pod served
here has no volumes, so there is nothing to mount.
"""

from __future__ import annotations

from twisted.internet.task import deferLater
from zope.interface import implementer

from platformd import errors
from platformd.admission.interfaces import CREATE, UPDATE, IMutatingPlugin, IValidatingPlugin
from platformd.admission.namespacelifecycle import _name
from platformd.util.deferreds import then

PLUGIN_NAME = "ServiceAccount"
DEFAULT_SERVICE_ACCOUNT = "default"
ENFORCE_MOUNTABLE_SECRETS_ANNOTATION = "platform.io/enforce-mountable-secrets"
MIRROR_POD_ANNOTATION = "platform.io/config.mirror"
#: Lookups of a missing ``default`` service account, and the wait between them.
DEFAULT_ATTEMPTS = 10
RETRY_INTERVAL = 0.1

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


@implementer(IMutatingPlugin, IValidatingPlugin)
class ServiceAccountPlugin:
    name = PLUGIN_NAME

    def __init__(self, service_accounts, pod_kind, clock, sync):
        #: The service accounts' ``ILister``.
        self.service_accounts = service_accounts
        self.pod_kind = pod_kind
        self.clock = clock
        #: ``WatchCache.sync``: the live lookup.
        self.sync = sync

    def handles(self, operation: str) -> bool:
        return operation in (CREATE, UPDATE)

    def _ignored(self, a) -> bool:
        return (a.kind is not self.pod_kind or a.subresource != "" or a.obj is None
                or a.operation != CREATE)

    def admit(self, a):
        if self._ignored(a):
            return None
        pod = a.obj
        spec = pod.setdefault("spec", {})
        if _is_mirror(pod):
            return self.validate(a)
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
        return then(self._lookup(a, spec["serviceAccountName"]), self._admit_with, a)

    def _admit_with(self, account: dict, a):
        spec = a.obj["spec"]
        if not spec.get("imagePullSecrets"):
            pulls = [{"name": ref.get("name", "")} for ref in account.get("imagePullSecrets") or ()]
            if pulls:
                spec["imagePullSecrets"] = pulls
        return self.validate(a)

    def validate(self, a):
        if self._ignored(a):
            return None
        pod = a.obj
        spec = pod.get("spec") or {}
        if _is_mirror(pod):
            if spec.get("serviceAccountName"):
                raise _forbidden(a, "a mirror pod may not reference service accounts")
            if spec.get("imagePullSecrets"):
                raise _forbidden(a, "a mirror pod may not reference secrets")
            return None
        if not spec.get("serviceAccountName"):
            name = (pod.get("metadata") or {}).get("name") or ""
            raise _forbidden(a, f"no service account specified for pod {a.namespace}/{name}")
        return then(self._lookup(a, spec["serviceAccountName"]), self._validate_with, a)

    def _validate_with(self, account: dict, a) -> None:
        if not _enforces_mountable_secrets(account):
            return None
        allowed = {ref.get("name") for ref in account.get("imagePullSecrets") or ()}
        for index, ref in enumerate(a.obj["spec"].get("imagePullSecrets") or ()):
            if ref.get("name") not in allowed:
                raise _forbidden(
                    a, f'imagePullSecrets[{index}].name="{ref.get("name", "")}" is not allowed '
                    f"because service account {account['metadata']['name']} does not "
                    "reference that imagePullSecret")
        return None

    def _lookup(self, a, name: str):
        """The service account (a dict, or a Deferred of one), or a 403."""
        attempts = DEFAULT_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT else 1
        return self._attempt(a, name, attempts)

    def _attempt(self, a, name: str, attempts: int):
        entry = self._cached(a, name)
        if entry is not None:
            return entry.obj
        return then(self.sync(), self._looked_up, a, name, attempts)

    def _cached(self, a, name: str):
        return self.service_accounts.get(a.namespace, name)

    def _looked_up(self, _, a, name: str, attempts: int):
        """After the live lookup (the cache up to date): the account, a retry, or 403."""
        entry = self._cached(a, name)
        if entry is not None:
            return entry.obj
        if attempts <= 1:
            raise _forbidden(a, f"error looking up service account {a.namespace}/{name}: "
                             f'serviceaccount "{name}" not found')
        return deferLater(self.clock, RETRY_INTERVAL, self._attempt, a, name, attempts - 1)


def _is_mirror(pod: dict) -> bool:
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _enforces_mountable_secrets(account: dict) -> bool:
    annotations = (account.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ENFORCE_MOUNTABLE_SECRETS_ANNOTATION) in _TRUE


def _forbidden(a, why: str) -> errors.StatusError:
    return errors.forbidden(a.kind.plural, a.kind.group, _name(a), why)
