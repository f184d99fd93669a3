"""
Eviction (``policy.platform.io/v1``): a pod deleted subject to its PodDisruptionBudget,
by a POST to ``/api/v1/namespaces/{ns}/pods/{name}/eviction``; nothing is stored.

Upstream's ``pkg/registry/core/pod/storage/eviction.go`` (v1.36), step by step:

* the body's name must be the URL's (400 ``name in URL does not match name in Eviction
  object``); its ``deleteOptions.dryRun`` and the query's ``dryRun`` must agree
  (``propagateDryRun``);
* a pod that is Pending, Succeeded, Failed or already terminating is deleted without
  looking at budgets (``canIgnorePDB``; a conflict is retried);
* otherwise the PodDisruptionBudgets of the namespace whose selector matches the pod
  are found: more than one is a ``Failure`` Status with code 500 (``This pod has more
  than one PodDisruptionBudget, which the eviction subresource does not support.``),
  written, as upstream's create handler writes any Status a create returns, with HTTP
  201 (client-go turns it into an error);
* with one: an unready pod goes without touching the budget when its policy is
  ``AlwaysAllow`` or the budget is met (``currentHealthy >= desiredHealthy > 0``), on
  the condition that the pod has not changed since (a 409 there is answered 429);
  otherwise ``checkAndDecrement``: a budget the controller has not yet seen at its
  generation is 429 (retry after 10 s, cause ``The disruption budget N is still being
  processed by the server.``), a negative allowance or more than 2000 ``disruptedPods``
  403, none left **429** ``Cannot evict pod as it would violate the pod's disruption
  budget.`` with the cause ``DisruptionBudget``: ``The disruption budget N needs D
  healthy pods and has C currently``; else ``disruptionsAllowed`` is decremented (the
  ``DisruptionAllowed`` condition follows when it reaches 0) and the pod is recorded in
  ``status.disruptedPods`` with the time, written to the budget's status on the
  condition that it has not changed (a conflict reads it again and decides again);
* the pod gets the ``DisruptionTarget`` condition (``EvictionByEvictionAPI``), then is
  deleted with the request's ``deleteOptions`` (preconditions, grace period and
  propagation as any delete); the answer is a ``Success`` Status, 201.

A dry run (query or ``deleteOptions``) decides everything and writes nothing.  The kind
is not served on its own: it is ``pods.subresources["eviction"]`` (``kinds/pod.py``);
bodies may name ``policy/v1``/``policy/v1beta1`` (upstream's groups, as unmodified
``kubectl drain`` sends them) as well as ``policy.platform.io/v1``/``v1beta1``.
Admission sees the ``Eviction`` as a create of ``pods/eviction`` (``api/reviews.py``):
the mutating plugins before any of this, the validating ones (``validate``) after the
name and dry-run checks, as upstream's ``createValidation``.
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks, returnValue

from platformd import errors
from platformd.context import internal
from platformd.model.meta import DELETE_OPTIONS, OBJECT_META
from platformd.model.schema import Prop
from platformd.registry.kinds import poddisruptionbudget as pdbs
from platformd.registry.resource import ResourceType

GROUP = pdbs.GROUP
PODS = ("", "v1", "pods")
#: Upstream's ``MaxDisruptedPodSize`` and ``EvictionsRetry.Steps``.
MAX_DISRUPTED_POD_SIZE = 2000
RETRIES = 20
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = ("This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.")
#: ``policyv1.DisruptionBudgetCause``.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


def success() -> dict:
    """The Status a create returns, its code filled as upstream's create handler does."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}


def _too_many(message: str, cause: str, retry_after: int) -> errors.StatusError:
    """``errors.NewTooManyRequests`` with one ``DisruptionBudget`` cause."""
    return errors.StatusError(429, "TooManyRequests", message,
                              causes=(errors.Cause(DISRUPTION_BUDGET_CAUSE, cause, ""),),
                              retry_after=retry_after or None, empty_details=True)


def _still_processing(name: str) -> errors.StatusError:
    return _too_many(TOO_MANY, f"The disruption budget {name} is still being processed by "
                               "the server.", 10)


def _forbidden(name: str, why: str) -> errors.StatusError:
    return errors.forbidden("poddisruptionbudget", GROUP, name, why)


def _go_list(values) -> str:
    return "[" + " ".join(values) + "]"


def _delete_options(obj: dict, context) -> dict:
    """``propagateDryRun``: the body's deleteOptions with the query's dryRun."""
    query = ["All"] if context.dry_run else []
    options = obj.get("deleteOptions")
    if options is None:
        return {"dryRun": query} if query else {}
    if not options.get("dryRun"):
        if query:
            options["dryRun"] = query
        return options
    if query and options["dryRun"] != query:
        raise errors.StatusError(500, "", "Non-matching dry-run options in request and "
                                          f"content: {_go_list(query)} and "
                                          f"{_go_list(options['dryRun'])}")
    return options


def _can_ignore_budgets(pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or \
        bool(pod["metadata"].get("deletionTimestamp"))


def _should_enforce_resource_version(pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not (phase in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"))


def _version_unset(options: dict) -> bool:
    return (options.get("preconditions") or {}).get("resourceVersion") is None


def _with_version(options: dict, version: str) -> dict:
    return {**options, "preconditions": {**(options.get("preconditions") or {}),
                                         "resourceVersion": version}}


def _conflict(e: Exception) -> bool:
    return isinstance(e, errors.StatusError) and e.code == 409


def check_names(meta: dict, context, kind: str) -> tuple:
    """
    A pod subresource's body against its URL: its namespace (upstream's
    ``EnsureObjectNamespaceMatchesRequestNamespace``, filled in when absent), then its
    name (``name in URL does not match name in <kind> object``); ``(namespace, name)``.
    """
    namespace, name = context.info.namespace, context.info.name
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
    meta["namespace"] = namespace
    if meta.get("name", "") != name:
        raise errors.bad_request(f"name in URL does not match name in {kind} object")
    return namespace, name


@inlineCallbacks
def _evict(context, obj: dict, server, validate):
    meta = obj["metadata"]
    namespace, name = check_names(meta, context, "Eviction")
    options = _delete_options(obj, context)
    context.dry_run = bool(options.get("dryRun"))
    yield validate()
    pod_store = server.stores[PODS]
    pdb_store = server.stores[pdbs.KIND.gvr]
    # Upstream reads the pod and the budgets through the registry, from etcd.
    yield pod_store.watch_cache.sync()
    retry_conflicts = _version_unset(options)
    pod: dict = {}
    for attempt in range(RETRIES):
        pod = pod_store.get(namespace, name).obj
        if not _can_ignore_budgets(pod):
            break
        delete = options
        if _should_enforce_resource_version(pod) and _version_unset(options):
            delete = _with_version(options, pod["metadata"]["resourceVersion"])
        try:
            yield _mark_and_delete(context, pod_store, namespace, name, delete)
        except errors.StatusError as e:
            if not (retry_conflicts and _conflict(e)) or attempt == RETRIES - 1:
                raise
            yield pod_store.watch_cache.sync()
            continue
        returnValue(success())
    matching = [entry for entry in pdb_store.list(namespace) if pdbs.selects(entry.obj, pod)]
    if len(matching) > 1:
        returnValue({"kind": "Status", "apiVersion": "v1", "metadata": {},
                     "status": "Failure", "message": MULTIPLE, "code": 500})
    pdb_name = ""
    unready_delete = False
    if matching:
        pdb = matching[0].mutable()
        pdb_name = pdb["metadata"]["name"]
        status = pdb.get("status") or {}
        if not pdbs.pod_ready(pod):
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            desired = status.get("desiredHealthy") or 0
            if policy == "AlwaysAllow" or (
                    (status.get("currentHealthy") or 0) >= desired and desired > 0):
                unready_delete = True
        if not unready_delete:
            yield _check_and_decrement(context, pdb_store, pod_store, pdb, name)
    delete = options
    if unready_delete:
        delete = _with_version(options, pod["metadata"]["resourceVersion"])
    try:
        yield _mark_and_delete(context, pod_store, namespace, name, delete)
    except errors.StatusError as e:
        if _conflict(e) and unready_delete and _version_unset(options):
            raise _still_processing(pdb_name) from None
        raise
    returnValue(success())


@inlineCallbacks
def _check_and_decrement(context, pdb_store, pod_store, pdb: dict, pod_name: str):
    """Upstream's ``checkAndDecrement``, retried on a conflict with the budget re-read."""
    name = pdb["metadata"]["name"]
    namespace = pdb["metadata"]["namespace"]
    for attempt in range(RETRIES):
        if attempt:
            yield pdb_store.watch_cache.sync()
            pdb = pdb_store.get(namespace, name).mutable()
        status = pdb.setdefault("status", {})
        if (status.get("observedGeneration") or 0) < (pdb["metadata"].get("generation") or 0):
            raise _still_processing(name)
        allowed = status.get("disruptionsAllowed") or 0
        if allowed < 0:
            raise _forbidden(name, "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
            raise _forbidden(name, "DisruptedPods map too big - too many evictions not "
                                   "confirmed by PDB controller")
        if allowed == 0:
            raise _too_many(TOO_MANY, f"The disruption budget {name} needs "
                                      f"{status.get('desiredHealthy') or 0} healthy pods and "
                                      f"has {status.get('currentHealthy') or 0} currently", 0)
        now = pod_store.now()
        status["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:
            pdbs.set_disruption_allowed_condition(status, now)
        if context.dry_run:
            return
        status.setdefault("disruptedPods", {})[pod_name] = now
        written = pdb
        try:
            # The eviction handler's own client writes the budget (upstream's loopback
            # PodDisruptionBudgets client), on the condition it is still the one read.
            yield pdb_store.update(internal(), namespace, name, lambda current: written,
                                   subresource="status")
        except errors.StatusError as e:
            if not _conflict(e):
                raise
            continue
        return
    raise errors.timeout(f'couldn\'t update PodDisruptionBudget "{name}" due to conflicts',
                         10)


@inlineCallbacks
def _mark_and_delete(context, pod_store, namespace: str, name: str, options: dict):
    """
    ``addConditionAndDeletePod``: the ``DisruptionTarget`` condition through the status
    (the delete options' preconditions checked against the latest pod, 409 ``Pod``),
    then the delete, conditioned on the version the condition made.
    """
    if not context.dry_run:
        preconditions = options.get("preconditions") or {}

        def condition(current: dict) -> dict:
            meta = current["metadata"]
            uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
            if uid and uid != meta.get("uid"):
                raise errors.conflict("Pod", "", name, (
                    f"the UID in the precondition ({uid}) does not match the UID in record "
                    f"({meta.get('uid', '')}). The object might have been deleted and then "
                    "recreated"))
            if version and version != meta.get("resourceVersion"):
                raise errors.conflict("Pod", "", name, (
                    f"the ResourceVersion in the precondition ({version}) does not match "
                    f"the ResourceVersion in record ({meta.get('resourceVersion', '')}). The "
                    "object might have been modified"))
            conditions = current.setdefault("status", {}).setdefault("conditions", [])
            _update_pod_condition(conditions, {
                "type": "DisruptionTarget", "status": "True",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"},
                pod_store.now())
            return current

        updated, _ = yield pod_store.update(context, namespace, name, condition,
                                            subresource="status")
        if not _version_unset(options):
            options = _with_version(options, updated["metadata"]["resourceVersion"])
    yield pod_store.delete(context, namespace, name, options)


def _update_pod_condition(conditions: list, new: dict, now: str) -> None:
    """``podutil.UpdatePodCondition``: the transition time kept when the status is."""
    for i, old in enumerate(conditions):
        if old.get("type") == new["type"]:
            stamp = old.get("lastTransitionTime") if old.get("status") == new["status"] else now
            conditions[i] = {**new, "lastTransitionTime": stamp or now,
                             **({"lastProbeTime": old["lastProbeTime"]}
                                if old.get("lastProbeTime") else {})}
            return
    conditions.append({**new, "lastTransitionTime": now})


#: The Protobuf presence of Eviction's message (registered with the pods' kind).
PRESENCE = {pdbs.PROTO + "Eviction": "metadata"}

#: Not ``KIND``: the kind is served only as ``pods/<name>/eviction``.
SUBRESOURCE = ResourceType(
    group=GROUP, version="v1", kind="Eviction", plural="eviction", singular="",
    namespaced=True, fields={
        "metadata": Prop(OBJECT_META, "ObjectMeta describes the pod that is being evicted."),
        "deleteOptions": Prop(DELETE_OPTIONS, "DeleteOptions may be provided"),
    }, doc="Eviction evicts a pod from its node subject to certain policies and safety "
           "constraints. This is a subresource of Pod.  A request to cause such an "
           "eviction is created by POSTing to .../pods/<pod name>/evictions.",
    definition_prefix=pdbs.PREFIX, review=_evict, review_takes_server=True,
    presence=PRESENCE,
    accepts_versions=("policy/v1", "policy/v1beta1", f"{GROUP}/v1beta1"))
