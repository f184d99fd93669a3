"""
Service-account tokens through the in-memory server: TokenRequest
(``serviceaccounts/<name>/token``) mints them, the ServiceAccountAuthenticator accepts
them as bearer tokens, bound objects and the clock end them, TokenReview reviews them and
the OpenID documents publish the keys; upstream's messages.
"""

from __future__ import annotations

import datetime
import os
import stat
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from joserfc import jwt
from joserfc.jwk import KeySet
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http_headers import Headers

from platformd.auth import serviceaccount as sa
from platformd.auth.authenticators import AuthenticatorChain
from platformd.compose import Authentication
from platformd.codecs.protobufcodec import KUBERNETES_PROTOBUF, PROTOBUF, ProtobufCodec
from tests.stub import HeaderAuthenticator, StubServer

ISSUER = "https://platform.default.svc"
NS = "/api/v1/namespaces/default"
TOKEN = f"{NS}/serviceaccounts/build/token"
REVIEWS = "/apis/authentication.platform.io/v1/tokenreviews"
SSR = "/apis/authentication.platform.io/v1/selfsubjectreviews"


def ec_key():
    return ec.generate_private_key(ec.SECP256R1())


class TokenTestCase(SynchronousTestCase):
    def setUp(self):
        self.key = sa.SigningKey(ec_key())
        self.chain = AuthenticatorChain([])
        self.stub = StubServer(authentication=self.authentication)
        self.addCleanup(self.stub.stop)
        self.use(self.authn)
        self.admin = self.stub.client()
        self.anonymous = self.stub.client(user=None)
        self.account = self.create(f"{NS}/serviceaccounts", {"metadata": {"name": "build"}})

    def authentication(self, internals) -> Authentication:
        """The server's tokens issued and read with ``self.key``."""
        self.informers, self.sync = internals.informers, internals.sync
        self.issuer = sa.TokenIssuer(self.informers, self.sync, ISSUER, self.key,
                                     internals.clock)
        self.authn = sa.ServiceAccountAuthenticator(self.informers, self.sync, ISSUER,
                                                    [self.key], internals.clock)
        return Authentication(self.chain, self.issuer)

    def use(self, *authenticators):
        """The server's chain: ``authenticators``, then the stub's header authenticator."""
        self.chain.authenticators = [*authenticators, HeaderAuthenticator()]

    def create(self, path, body):
        r = self.admin.post(path, body)
        self.assertEqual(r.code, 201, r.body)
        return r.json()

    def mint(self, spec=None, path=TOKEN, code=201, **body):
        r = self.admin.post(path, {"spec": spec or {}, **body})
        self.assertEqual(r.code, code, r.body)
        return r.json()

    def token(self, spec=None) -> str:
        return self.mint(spec)["status"]["token"]

    def as_token(self, token, path=f"{NS}/pods"):
        return self.anonymous.get(path, headers={b"authorization": f"Bearer {token}".encode()})

    def review(self, token, audiences=None):
        spec = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        r = self.admin.post(REVIEWS, {"spec": spec})
        self.assertEqual(r.code, 201, r.body)
        return r.json()["status"]


class TokenRequestTests(TokenTestCase):
    def test_minted_with_defaults(self):
        answer = self.mint()
        self.assertEqual(list(answer), ["kind", "apiVersion", "metadata", "spec", "status"])
        self.assertEqual((answer["kind"], answer["apiVersion"]),
                         ("TokenRequest", "authentication.platform.io/v1"))
        meta = answer["metadata"]
        self.assertEqual((meta["name"], meta["namespace"], meta["uid"]),
                         ("build", "default", self.account["metadata"]["uid"]))
        self.assertEqual(answer["spec"], {"audiences": [ISSUER], "expirationSeconds": 3600})
        self.assertEqual(answer["status"]["expirationTimestamp"], "1970-01-01T01:00:00Z")
        claims = jwt.decode(answer["status"]["token"], self.key.jose).claims
        self.assertEqual(claims["sub"], "system:serviceaccount:default:build")
        self.assertEqual((claims["iss"], claims["aud"], claims["exp"], claims["iat"],
                          claims["nbf"]), (ISSUER, [ISSUER], 3600, 0, 0))
        self.assertEqual(claims["platform.io"], {
            "namespace": "default",
            "serviceaccount": {"name": "build", "uid": self.account["metadata"]["uid"]}})
        # Nothing stored: the service account is unchanged, no object appeared.
        self.assertEqual(self.admin.get(f"{NS}/serviceaccounts/build").json()["metadata"]
                         ["resourceVersion"], self.account["metadata"]["resourceVersion"])

    def test_asked_audiences_and_expiry(self):
        self.stub.advance(100)
        answer = self.mint({"audiences": ["vault"], "expirationSeconds": 600})
        self.assertEqual(answer["spec"]["audiences"], ["vault"])
        self.assertEqual(answer["status"]["expirationTimestamp"], "1970-01-01T00:11:40Z")

    def test_validation_messages(self):
        body = self.mint({"expirationSeconds": 599}, code=422)
        self.assertEqual(body["message"],
                         'TokenRequest.authentication.platform.io "" is invalid: '
                         "spec.expirationSeconds: Invalid value: 599: may not specify a "
                         "duration less than 10 minutes")
        body = self.mint({"expirationSeconds": 2 ** 32 + 1}, code=422)
        self.assertEqual(body["message"],
                         'TokenRequest.authentication.platform.io "" is invalid: '
                         "spec.expirationSeconds: Invalid value: 4294967297: may not specify "
                         "a duration larger than 2^32 seconds")
        body = self.mint(metadata={"name": "other"}, code=422)
        self.assertEqual(body["message"],
                         'TokenRequest.authentication.platform.io "build" is invalid: '
                         'metadata.name: Invalid value: "other": must match the service '
                         "account name if specified")
        body = self.mint(metadata={"namespace": "kube"}, code=422)
        self.assertEqual(body["message"],
                         'TokenRequest.authentication.platform.io "build" is invalid: '
                         'metadata.namespace: Invalid value: "kube": must match the service '
                         "account namespace if specified")

    def test_upstream_group_version(self):
        """
        A body naming upstream's ``authentication.k8s.io/v1`` (kubectl create token's, in
        upstream's Protobuf media type) is taken, and the answer names it back; any other
        version is refused naming the platform's.
        """
        codec = ProtobufCodec()
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600}}
        self.assertEqual(self.mint(**body)["apiVersion"], "authentication.k8s.io/v1")
        r = self.admin.post(TOKEN, codec.encode(body), content_type=KUBERNETES_PROTOBUF,
                            headers={"Accept": KUBERNETES_PROTOBUF})
        self.assertEqual((r.code, r.header("Content-Type")), (201, KUBERNETES_PROTOBUF))
        answer = codec.decode(r.body)
        self.assertEqual((answer["apiVersion"], answer["kind"]),
                         ("authentication.k8s.io/v1", "TokenRequest"))
        self.assertTrue(answer["status"]["token"])
        r = self.mint(code=400, **dict(body, apiVersion="authentication.example.io/v1"))
        self.assertEqual(r["message"], "the API version in the data "
                         "(authentication.example.io/v1) does not match the expected API "
                         "version (authentication.platform.io/v1)")

    def test_missing_service_account(self):
        body = self.mint(path=f"{NS}/serviceaccounts/nope/token", code=404)
        self.assertEqual(body["message"], 'serviceaccounts "nope" not found')

    def test_bound_object_errors(self):
        body = self.mint({"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1",
                                             "name": "x"}}, code=400)
        self.assertEqual(body["message"], "cannot bind token to object of type /v1, Kind=ConfigMap")
        body = self.mint({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                             "name": "gone"}}, code=404)
        self.assertEqual(body["message"], 'pods "gone" not found')
        self.create(f"{NS}/pods", {"metadata": {"name": "other"},
                                   "spec": {"containers": [{"name": "c", "image": "i"}]}})
        body = self.mint({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                             "name": "other"}}, code=400)
        self.assertEqual(body["message"], 'cannot bind token for serviceaccount "build" to pod '
                                          "running with different serviceaccount name.")
        self.create(f"{NS}/secrets", {"metadata": {"name": "s"}})
        body = self.mint({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s",
                                             "uid": "stale"}}, code=409)
        self.assertEqual(body["message"],
                         'Operation cannot be fulfilled on Secret "s": the UID in the bound '
                         "object reference (stale) does not match the UID in record. The object "
                         "might have been deleted and then recreated")

    def test_routes(self):
        r = self.admin.get(TOKEN)
        self.assertEqual(r.code, 405, r.body)
        r = self.admin.post(f"{NS}/serviceaccounts/build/nothing", {})
        self.assertEqual(r.code, 404, r.body)

    def test_not_configured(self):
        self.stub.api.token_issuer = None
        self.mint(code=404)

    def test_protobuf_answer(self):
        r = self.admin.post(TOKEN, {"spec": {}}, headers={b"accept": PROTOBUF.encode()})
        self.assertEqual(r.code, 201, r.body)
        answer = ProtobufCodec().decode(r.body)
        self.assertEqual(answer["kind"], "TokenRequest")
        self.assertTrue(answer["status"]["token"])

    def test_discovery(self):
        resources = self.admin.get("/api/v1").json()["resources"]
        entry = [r for r in resources if r["name"] == "serviceaccounts/token"]
        self.assertEqual(entry, [{"name": "serviceaccounts/token", "singularName": "",
                                  "namespaced": True, "group": "authentication.platform.io",
                                  "version": "v1", "kind": "TokenRequest",
                                  "verbs": ["create"]}])


class AuthenticatorTests(TokenTestCase):
    def test_bearer_token_is_the_service_account(self):
        token = self.token()
        self.assertEqual(self.as_token(token).code, 200)
        r = self.anonymous.post(SSR, {}, headers={b"authorization": f"Bearer {token}".encode()})
        info = r.json()["status"]["userInfo"]
        jti = jwt.decode(token, self.key.jose).claims["jti"]
        self.assertEqual(info, {
            "username": "system:serviceaccount:default:build",
            "uid": self.account["metadata"]["uid"],
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default",
                       "system:authenticated"],
            "extra": {"authentication.platform.io/credential-id": [f"JTI={jti}"]}})

    def test_pod_bound(self):
        pod = self.create(f"{NS}/pods", {
            "metadata": {"name": "web"},
            "spec": {"serviceAccountName": "build", "containers": [{"name": "c", "image": "i"}]}})
        token = self.token({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web",
                                               "uid": pod["metadata"]["uid"]}})
        claims = jwt.decode(token, self.key.jose).claims
        self.assertEqual(claims["platform.io"]["pod"],
                         {"name": "web", "uid": pod["metadata"]["uid"]})
        status = self.review(token)
        self.assertEqual(status["user"]["extra"]["authentication.platform.io/pod-name"], ["web"])
        self.assertEqual(status["user"]["extra"]["authentication.platform.io/pod-uid"],
                         [pod["metadata"]["uid"]])
        self.assertEqual(self.as_token(token).code, 200)
        r = self.admin.delete(f"{NS}/pods/web", {"gracePeriodSeconds": 0})
        self.assertIn(r.code, (200, 202), r.body)
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token), {
            "user": {}, "error": "service account token has been invalidated"})

    def test_secret_recreated(self):
        secret = self.create(f"{NS}/secrets", {"metadata": {"name": "s"}})
        token = self.token({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                               "name": "s"}})
        self.assertEqual(self.as_token(token).code, 200)
        self.admin.delete(f"{NS}/secrets/s")
        again = self.create(f"{NS}/secrets", {"metadata": {"name": "s"}})
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token)["error"],
                         f"secret UID ({again['metadata']['uid']}) does not match service "
                         f"account secret ref claim ({secret['metadata']['uid']})")

    def test_service_account_recreated_or_gone(self):
        token = self.token()
        self.admin.delete(f"{NS}/serviceaccounts/build")
        self.assertEqual(self.review(token)["error"], 'serviceaccounts "build" not found')
        again = self.create(f"{NS}/serviceaccounts", {"metadata": {"name": "build"}})
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token)["error"],
                         f"service account UID ({again['metadata']['uid']}) does not match "
                         f"claim ({self.account['metadata']['uid']})")

    def test_expiry_on_the_clock(self):
        token = self.token({"expirationSeconds": 600})
        self.stub.advance(600 + 60)  # go-jose's leeway: still good
        self.assertEqual(self.as_token(token).code, 200)
        self.stub.advance(1)
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token)["error"], "service account token has expired")

    def test_other_issuer_is_not_ours(self):
        token = self.token()
        other = sa.ServiceAccountAuthenticator(self.informers, self.sync, "https://elsewhere",
                                               [self.key], self.stub.clock)
        self.assertIsNone(other.authenticate(_Request(token)))
        self.use(other)
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token), {"user": {}})

    def test_not_a_jwt_is_not_ours(self):
        self.assertIsNone(self.authn.authenticate(_Request("plain-token")))
        self.assertIsNone(self.authn.authenticate(_Request(None)))

    def test_wrong_key(self):
        stranger = sa.TokenIssuer(self.informers, self.sync, ISSUER, sa.SigningKey(ec_key()),
                                  self.stub.clock)
        token = stranger.generate(self.account, 3600, [ISSUER])
        self.assertEqual(self.as_token(token).code, 401)
        self.assertEqual(self.review(token)["error"],
                         "go-jose/go-jose: error in cryptographic primitive")
        # Listed among the extra verification keys (--service-account-key-file): good.
        self.use(sa.ServiceAccountAuthenticator(self.informers, self.sync, ISSUER,
                                                [self.key, stranger.signing_key],
                                                self.stub.clock))
        self.assertEqual(self.as_token(token).code, 200)

    def test_audiences(self):
        token = self.token({"audiences": ["vault"]})
        self.assertEqual(self.as_token(token).code, 401)  # not meant for the API server
        self.assertEqual(self.review(token)["error"],
                         'token audiences ["vault"] is invalid for the target audiences '
                         '["https://platform.default.svc"]')
        status = self.review(token, ["vault", "other"])
        self.assertEqual((status["authenticated"], status["audiences"]), (True, ["vault"]))


class TokenReviewTests(TokenTestCase):
    def test_authenticated(self):
        token = self.token()
        r = self.admin.post(REVIEWS, {"spec": {"token": token}})
        self.assertEqual(r.code, 201, r.body)
        body = r.json()
        self.assertEqual(list(body), ["kind", "apiVersion", "metadata", "spec", "status"])
        status = body["status"]
        self.assertEqual(list(status), ["authenticated", "user", "audiences"])
        self.assertEqual(status["audiences"], [ISSUER])
        self.assertEqual(status["user"]["username"], "system:serviceaccount:default:build")

    def test_authenticator_answering_later(self):
        """A chain member that answers with a Deferred (a JWKS fetch): user or error."""
        from twisted.internet.defer import fail, succeed
        from twisted.python.failure import Failure

        class Later:
            def __init__(self, inner):
                self.inner = inner

            def authenticate(self, request):
                try:
                    return succeed(self.inner.authenticate(request))
                except sa.AuthenticationError:
                    return fail(Failure())

        self.use(Later(self.authn))
        token = self.token()
        self.assertTrue(self.review(token)["authenticated"])
        self.stub.advance(3600 + 61)
        self.assertEqual(self.review(token),
                         {"user": {}, "error": "service account token has expired"})

    def test_token_required(self):
        r = self.admin.post(REVIEWS, {"spec": {}})
        self.assertEqual(r.code, 400, r.body)
        self.assertEqual(r.json()["message"], "token is required for TokenReview in authentication")

    def test_audience_agnostic_authenticator(self):
        """The stub's header authenticator ignores the token: the user it finds is answered
        with the API server's audiences asked for, and nobody for others."""
        status = self.review("anything")
        self.assertEqual(status, {"user": {}})

    def test_discovery_and_protobuf(self):
        resources = self.admin.get("/apis/authentication.platform.io/v1").json()["resources"]
        self.assertIn({"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False,
                       "kind": "TokenReview", "verbs": ["create"]}, resources)
        token = self.token()
        r = self.admin.post(REVIEWS, {"spec": {"token": token}},
                            headers={b"accept": PROTOBUF.encode()})
        self.assertEqual(r.code, 201, r.body)
        self.assertTrue(ProtobufCodec().decode(r.body)["status"]["authenticated"])


class OpenIDTests(TokenTestCase):
    def test_configuration(self):
        r = self.admin.get("/.well-known/openid-configuration")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.headers.getRawHeaders(b"content-type"), [b"application/json"])
        self.assertEqual(r.json(), {
            "issuer": ISSUER, "jwks_uri": f"{ISSUER}/openid/v1/jwks",
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"]})

    def test_jwks_verifies_tokens(self):
        token = self.token()
        keys = self.admin.get("/openid/v1/jwks").json()
        self.assertEqual([(k["use"], k["kty"], k["kid"], k["alg"], k["crv"])
                          for k in keys["keys"]],
                         [("sig", "EC", self.key.kid, "ES256", "P-256")])
        decoded = jwt.decode(token, KeySet.import_key_set(keys), algorithms=["ES256"])
        self.assertEqual(decoded.header["kid"], self.key.kid)


class _Request:
    def __init__(self, token):
        self.requestHeaders = Headers(
            {} if token is None else {b"authorization": [f"Bearer {token}".encode()]})


class KeyFileTests(SynchronousTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def test_ensure_signing_key(self):
        path = sa.ensure_signing_key(self.dir)
        self.assertEqual(path, os.path.join(self.dir, "pki", "service-account.key"))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path, "rb") as f:
            first = f.read()
        self.assertEqual(sa.ensure_signing_key(self.dir), path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), first)  # kept: tokens outlive a restart
        key = sa.load_signing_key(path)
        self.assertEqual(key.algorithm, "RS256")
        self.assertEqual([k.kid for k in sa.load_public_keys([path])], [key.kid])
        # The daemon's own key, loaded without OpenSSL's consistency check, is the same key.
        self.assertEqual(sa.load_signing_key(path, own=True).kid, key.kid)

    def test_public_key_files(self):
        private = ec_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
        now = datetime.datetime(2026, 1, 1)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(private.public_key()).serial_number(1).not_valid_before(now)
                .not_valid_after(now + datetime.timedelta(days=1)).sign(private, hashes.SHA256()))
        other = ec_key()
        path = os.path.join(self.dir, "keys.pem")
        with open(path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
            f.write(other.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        keys = sa.load_public_keys([path])
        self.assertEqual([k.kid for k in keys],
                         [sa.PublicKey(private).kid, sa.PublicKey(other).kid])

    def test_errors(self):
        path = os.path.join(self.dir, "empty.pem")
        with open(path, "w") as f:
            f.write("nothing here\n")
        with self.assertRaises(sa.SigningKeyError) as e:
            sa.load_public_keys([path])
        self.assertEqual(str(e.exception), f"{path}: data does not contain any valid RSA or "
                                           "ECDSA public keys")
        with self.assertRaises(sa.SigningKeyError) as e:
            sa.load_signing_key(os.path.join(self.dir, "missing"))
        self.assertIn("cannot read", str(e.exception))
        with self.assertRaises(sa.SigningKeyError):
            sa.load_signing_key(path)


class OpenAPITests(SynchronousTestCase):
    def test_token_subresource_and_review(self):
        from platformd.api import openapi
        from platformd.registry.catalog import builtin
        catalog = builtin()
        v2 = openapi.openapi_v2(catalog, "1.0")
        post = v2["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"]
        self.assertEqual((post["operationId"], post["description"],
                          post["x-kubernetes-group-version-kind"]),
                         ("createCoreV1NamespacedServiceAccountToken",
                          "create token of a ServiceAccount",
                          {"group": "authentication.platform.io", "kind": "TokenRequest",
                           "version": "v1"}))
        self.assertIn("io.platform.api.authentication.v1.TokenRequest", v2["definitions"])
        self.assertIn("/apis/authentication.platform.io/v1/tokenreviews", v2["paths"])
        v3 = openapi.openapi_v3_documents(catalog)
        self.assertIn("io.platform.api.authentication.v1.TokenRequest",
                      v3["api/v1"]["components"]["schemas"])


class BuildTests(SynchronousTestCase):
    def test_build_from_flags(self):
        """What the daemon builds: a key under the data dir, the issuer served, the
        authenticator first in the chain; TokenReview also at authentication.k8s.io."""
        def authentication(internals):
            issuer, authn = sa.build(internals.informers, internals.sync, internals.clock,
                                     tempfile.mkdtemp(),
                                     issuer="https://issuer.example", api_audiences=["api"])
            return Authentication(AuthenticatorChain([authn, HeaderAuthenticator()]), issuer)

        stub = StubServer(authentication=authentication)
        self.addCleanup(stub.stop)
        admin = stub.client()
        self.assertEqual(admin.post(f"{NS}/serviceaccounts", {"metadata": {"name": "build"}}).code,
                         201)
        r = admin.post(TOKEN, {"spec": {}})
        self.assertEqual(r.json()["spec"]["audiences"], ["api"])
        token = r.json()["status"]["token"]
        r = admin.post("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.json()["apiVersion"], "authentication.k8s.io/v1")
        self.assertEqual(r.json()["status"]["audiences"], ["api"])
        self.assertEqual(admin.get("/.well-known/openid-configuration").json()["issuer"],
                         "https://issuer.example")
