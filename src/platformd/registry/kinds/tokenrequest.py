"""
TokenRequest (``authentication.platform.io/v1``): a token for a service account, minted
by a POST to its ``serviceaccounts/<name>/token`` subresource and answered 201 with
``status.token`` and ``status.expirationTimestamp``; nothing is stored.  Upstream's
``pkg/registry/core/serviceaccount/storage/token.go``: body name and namespace must match
the URL, the service account must exist, ``spec.audiences`` default to the API server's,
``spec.expirationSeconds`` to 3600 (at least 600, at most 2^32), ``spec.boundObjectRef``
names a Pod (running as this account) or a Secret of the namespace, whose uid, when
given, must be the object's.

The kind is not served on its own (it is the ``token`` subresource of
``serviceaccounts``, ``serviceaccount.KIND.subresources``); the hook needs the server's
``TokenIssuer`` (``auth/serviceaccount.py``, ``APIServer.token_issuer``), through which
it reads the service account the URL names (by the URL's group, version and resource:
the kind this is a subresource of, which imports this module) and a bound Pod or Secret
(by their kinds' ``gvr``).
"""

from __future__ import annotations

from platformd import errors
from platformd.util.deferreds import then
from platformd.model import fielderrors as fe
from platformd.model.schema import INT64, STRING, TIME, ListOf, Prop, Struct
from platformd.model.times import rfc3339
from platformd.registry.kinds import pod as pod_kind, secret as secret_kind
from platformd.registry.kinds.selfsubjectreview import GROUP, PREFIX, PROTO
from platformd.registry.resource import ResourceType

DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 10 * 60
MAX_EXPIRATION_SECONDS = 1 << 32


BOUND_OBJECT_REFERENCE = Struct(f"{PREFIX}.BoundObjectReference", {
    "kind": Prop(STRING, "Kind of the referent. Valid kinds are 'Pod' and 'Secret'."),
    "apiVersion": Prop(STRING, "API version of the referent."),
    "name": Prop(STRING, "Name of the referent."),
    "uid": Prop(STRING, "UID of the referent."),
}, doc="BoundObjectReference is a reference to an object that a token is bound to.")

SPEC = Struct(f"{PREFIX}.TokenRequestSpec", {
    "audiences": Prop(ListOf(STRING), "Audiences are the intendend audiences of the token. A "
                                      "recipient of a token must identify themself with an "
                                      "identifier in the list of audiences of the token, and "
                                      "otherwise should reject the token. A token issued for "
                                      "multiple audiences may be used to authenticate "
                                      "against any of the audiences listed but implies a "
                                      "high degree of trust between the target audiences.",
                      required=True),
    "expirationSeconds": Prop(INT64, "ExpirationSeconds is the requested duration of "
                                     "validity of the request. The token issuer may return a "
                                     "token with a different validity duration so a client "
                                     "needs to check the 'expiration' field in a response."),
    "boundObjectRef": Prop(BOUND_OBJECT_REFERENCE, "BoundObjectRef is a reference to an "
                                                   "object that the token will be bound to. "
                                                   "The token will only be valid for as long "
                                                   "as the bound object exists."),
}, doc="TokenRequestSpec contains client provided parameters of a token request.")

STATUS = Struct(f"{PREFIX}.TokenRequestStatus", {
    "token": Prop(STRING, "Token is the opaque bearer token.", required=True),
    "expirationTimestamp": Prop(TIME, "ExpirationTimestamp is the time of expiration of the "
                                      "returned token.", required=True),
}, doc="TokenRequestStatus is the result of a token request.")


def _default(obj: dict) -> None:
    """``SetDefaults_TokenRequestSpec``: an hour."""
    spec = obj.setdefault("spec", {})
    if spec.get("expirationSeconds") is None:
        spec["expirationSeconds"] = DEFAULT_EXPIRATION_SECONDS


def _validate(obj: dict) -> list:
    """``ValidateTokenRequest``."""
    seconds = obj["spec"].get("expirationSeconds") or 0
    causes = []
    if seconds < MIN_EXPIRATION_SECONDS:
        causes.append(fe.invalid("spec.expirationSeconds", seconds,
                                 "may not specify a duration less than 10 minutes"))
    if seconds > MAX_EXPIRATION_SECONDS:
        causes.append(fe.invalid("spec.expirationSeconds", seconds,
                                 "may not specify a duration larger than 2^32 seconds"))
    return causes


def _invalid(name: str, causes) -> errors.StatusError:
    return errors.invalid("TokenRequest", GROUP, name, causes)


def _request(context, obj: dict, server, validate):
    """Upstream's ``TokenREST.Create`` (see module docstring): a Deferred of the answer;
    ``validate``: the validating admission, run after the static validation."""
    issuer = getattr(server, "token_issuer", None)
    if issuer is None:
        raise errors.not_found_path()
    info = context.info
    namespace, name = info.namespace, info.name
    meta = obj.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != name:
        raise _invalid(name, [fe.invalid("metadata.name", meta["name"],
                                         "must match the service account name if specified")])
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise _invalid(name, [fe.invalid("metadata.namespace", meta["namespace"],
                                         "must match the service account namespace if "
                                         "specified")])
    # Upstream reads the service account (and the bound object) through the registry,
    # from etcd: over etcd another server may have just created them.
    accounts = (info.group, info.version, info.resource)  # the kind of the parent
    return then(issuer.sync(), lambda _: _mint(obj, issuer, accounts, namespace, name,
                                               validate))


def _mint(obj: dict, issuer, accounts: tuple, namespace: str, name: str, validate):
    """The rest of ``TokenREST.Create``, on a cache holding every earlier write;
    ``accounts``: the service accounts' gvr."""
    meta = obj["metadata"]
    account = issuer.get(accounts, namespace, name)
    if account is None:
        raise errors.not_found("serviceaccounts", "", name)
    account_meta = account["metadata"]
    if meta.get("uid") and meta["uid"] != account_meta.get("uid"):
        raise errors.conflict("TokenRequest", GROUP, name,
                              f"the UID in the token request ({meta['uid']}) does not match "
                              f"the UID of the service account ({account_meta.get('uid', '')})")
    spec = obj.setdefault("spec", {})
    if not spec.get("audiences"):
        spec["audiences"] = list(issuer.api_audiences)
    meta["name"], meta["namespace"] = account_meta["name"], account_meta["namespace"]
    meta.setdefault("uid", account_meta.get("uid", ""))
    now = issuer.clock.seconds()
    meta["creationTimestamp"] = rfc3339(now)
    obj.pop("status", None)
    causes = _validate(obj)
    if causes:
        raise _invalid("", causes)
    return then(validate(), lambda _: _bound(obj, issuer, account, namespace, name, now))


def _bound(obj: dict, issuer, account: dict, namespace: str, name: str, now) -> dict:
    """The token, bound to the object the request names (if any)."""
    spec = obj["spec"]
    pod = secret = None
    ref = spec.get("boundObjectRef")
    if ref is not None:
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        ref_name = ref.get("name", "")
        if group == "" and kind == "Pod":
            pod = issuer.get(pod_kind.KIND.gvr, namespace, ref_name)
            if pod is None:
                raise errors.not_found("pods", "", ref_name)
            if (pod.get("spec") or {}).get("serviceAccountName", "") != name:
                raise errors.bad_request(
                    f'cannot bind token for serviceaccount "{name}" to pod running with '
                    "different serviceaccount name.")
            uid = pod["metadata"].get("uid", "")
        elif group == "" and kind == "Secret":
            secret = issuer.get(secret_kind.KIND.gvr, namespace, ref_name)
            if secret is None:
                raise errors.not_found("secrets", "", ref_name)
            uid = secret["metadata"].get("uid", "")
        else:
            raise errors.bad_request(
                f"cannot bind token to object of type {_gvk(api_version, kind)}")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict(kind, group, ref_name,
                                  f"the UID in the bound object reference ({ref['uid']}) does "
                                  "not match the UID in record. The object might have been "
                                  "deleted and then recreated")
    seconds = spec["expirationSeconds"]
    token = issuer.generate(account, seconds, spec["audiences"], pod=pod, secret=secret,
                            now=now)
    obj["status"] = {"token": token, "expirationTimestamp": rfc3339(int(now) + seconds)}
    return obj


def _gvk(api_version: str, kind: str) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``group/version, Kind=kind``."""
    group, _, version = api_version.rpartition("/") if "/" in api_version else ("", "", api_version)
    return f"{group}/{version}, Kind={kind}"


#: The Protobuf presence of TokenRequest's messages (the catalog registers a kind's
#: subresources' with the kind's).
PRESENCE = {
    PROTO + "TokenRequest": "metadata spec status",
    PROTO + "TokenRequestSpec": "",
    PROTO + "BoundObjectReference": "kind? apiVersion? name? uid?",
    PROTO + "TokenRequestStatus": "token expirationTimestamp?"}

#: Not ``KIND``: the kind is served only as ``serviceaccounts/<name>/token``.
SUBRESOURCE = ResourceType(
    group=GROUP, version="v1", kind="TokenRequest", plural="token", singular="",
    namespaced=True, fields={
        "spec": Prop(SPEC, "Spec holds information about the request being evaluated",
                     required=True),
        "status": Prop(STATUS, "Status is filled in by the server and indicates whether the "
                               "token can be authenticated."),
    }, doc="TokenRequest requests a token for a given service account.",
    definition_prefix=PREFIX, review=_request, review_takes_server=True, default=_default,
    presence=PRESENCE)
