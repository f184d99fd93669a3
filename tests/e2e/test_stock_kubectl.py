"""
Stock kubectl's everyday commands, unchanged, against a real server on loopback.

Its typed commands (``create namespace|configmap|secret|serviceaccount|token``,
``describe``) send ``application/vnd.kubernetes.protobuf`` and ask for it first: upstream's
name of the Protobuf encoding, served as an alias (``negotiation.ALIASES``);
``create token`` posts a TokenRequest naming ``authentication.k8s.io/v1``, and its answer
names it back.  ``get`` asks for ``as=Table;g=meta.k8s.io``.  Elsewhere: ``get -w`` in
``test_watch_clients.KubectlWatchTests``, ``auth can-i|whoami`` in
``tests.reviews.test_kubectl``.

What does not work unchanged is recorded here as such (README, "What stock kubectl can
do"): the RBAC kinds' typed creates and ``auth reconcile`` (upstream's RBAC group names),
and ``describe configmap`` without ``--show-events=false`` (Events are not served).
``wait`` works with client-go's WatchList on (its default) because the initial-events-end
bookmark carries upstream's annotation beside the platform's.
"""

import base64
import json
import os

import yaml
from twisted.internet.defer import inlineCallbacks

from tests.e2e.test_clients import KubectlCase
from tests.e2e.test_watch_clients import wait_until

NS = ("-n", "team")
#: client-go's feature gate for informers' streamed initial list, off (on by default in
#: kubectl 1.37).
NO_WATCH_LIST = {"KUBE_FEATURE_WatchListClient": "false"}


class StockKubectlTests(KubectlCase):

    @inlineCallbacks
    def succeeds(self, *args, stdin=None, env=None):
        """``kubectl args``, which must succeed: its standard output."""
        r = yield self.run_kubectl(*args, stdin=stdin, env=env)
        self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    @inlineCallbacks
    def refused(self, *args, stdin=None):
        """``kubectl args``, which must fail: its standard error."""
        r = yield self.run_kubectl(*args, stdin=stdin)
        self.assertNotEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stdout}")
        return r.stderr.strip()

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        yield self.succeeds("create", "namespace", "team")

    @inlineCallbacks
    def test_create_every_kind_and_get(self):
        """Every served kind's ``create`` subcommand, read back with -o json, yaml, wide."""
        pki = self.server.pki_dir
        for args, said in (
                (("configmap", "settings", "--from-literal=mode=fast"), "configmap/settings"),
                (("secret", "generic", "creds", "--from-literal=password=hunter2"),
                 "secret/creds"),
                (("secret", "tls", "web", "--cert", os.path.join(pki, "admin.crt"),
                  "--key", os.path.join(pki, "admin.key")), "secret/web"),
                (("secret", "docker-registry", "pull", "--docker-server=registry.example",
                  "--docker-username=u", "--docker-password=p"), "secret/pull"),
                (("serviceaccount", "robot"), "serviceaccount/robot")):
            out = yield self.succeeds(*NS, "create", *args)
            self.assertEqual(out, f"{said} created\n")
        out = yield self.succeeds(*NS, "get", "configmap,secret,serviceaccount", "-o", "json")
        items = {(i["kind"], i["metadata"]["name"]): i for i in json.loads(out)["items"]}
        self.assertEqual(items[("ConfigMap", "settings")]["data"], {"mode": "fast"})
        self.assertEqual({name: item["type"] for (kind, name), item in items.items()
                          if kind == "Secret"},
                         {"creds": "Opaque", "web": "kubernetes.io/tls",
                          "pull": "kubernetes.io/dockerconfigjson"})
        self.assertEqual(base64.b64decode(items[("Secret", "creds")]["data"]["password"]),
                         b"hunter2")
        self.assertIn(("ServiceAccount", "robot"), items)
        namespace = yaml.safe_load((yield self.succeeds("get", "namespace", "team",
                                                        "-o", "yaml")))
        self.assertEqual((namespace["apiVersion"], namespace["kind"],
                          namespace["status"]["phase"]), ("v1", "Namespace", "Active"))
        out = yield self.succeeds(*NS, "get", "secrets", "-o", "wide")
        rows = [line.split()[:3] for line in out.splitlines()]
        self.assertEqual(rows, [["NAME", "TYPE", "DATA"], ["creds", "Opaque", "1"],
                                ["pull", "kubernetes.io/dockerconfigjson", "1"],
                                ["web", "kubernetes.io/tls", "2"]])

    @inlineCallbacks
    def test_answers_in_the_media_type_asked_for(self):
        """A typed create is answered in upstream's Protobuf name, as kubectl asked."""
        r = yield self.run_kubectl("create", "namespace", "other", "-v=8")
        self.assertEqual(r.returncode, 0, r.stderr)
        response = r.stderr[r.stderr.index('status="201 Created"'):]
        self.assertIn("Content-Type: application/vnd.kubernetes.protobuf\n", response)
        error = yield self.refused("create", "namespace", "other")
        self.assertEqual(error, 'Error from server (AlreadyExists): namespaces "other" '
                                'already exists')

    @inlineCallbacks
    def test_create_token(self):
        """``create token`` prints a token for the account, of the duration asked for."""
        yield self.succeeds(*NS, "create", "serviceaccount", "robot")
        token = (yield self.succeeds(*NS, "create", "token", "robot", "--duration=10m")).strip()
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        self.assertEqual((claims["sub"], claims["exp"] - claims["iat"]),
                         ("system:serviceaccount:team:robot", 600))

    @inlineCallbacks
    def test_describe(self):
        """``describe`` of every served kind, with its Events section (events are served,
        issue 32)."""
        yield self.succeeds(*NS, "create", "configmap", "settings", "--from-literal=mode=fast")
        yield self.succeeds(*NS, "create", "secret", "generic", "creds", "--from-literal=a=b")
        yield self.succeeds(*NS, "create", "serviceaccount", "robot")
        out = yield self.succeeds("describe", "namespace", "team")
        self.assertIn("Status:       Active", out)
        out = yield self.succeeds(*NS, "describe", "secret", "creds")
        self.assertIn("a:  1 bytes", out)
        out = yield self.succeeds(*NS, "describe", "serviceaccount", "robot")
        self.assertIn("Name:                robot", out)
        out = yield self.succeeds(*NS, "describe", "configmap", "settings",
                                  "--show-events=false")
        self.assertIn("mode:\n----\nfast", out)
        out = yield self.succeeds(*NS, "describe", "configmap", "settings")
        self.assertIn("Events:  <none>", out)

    @inlineCallbacks
    def test_edit_label_annotate(self):
        """``edit`` through an EDITOR script, ``label`` and ``annotate``."""
        yield self.succeeds(*NS, "create", "configmap", "settings", "--from-literal=mode=fast")
        editor = os.path.join(self.home, "editor")
        with open(editor, "w") as f:
            f.write('#!/bin/sh\nsed -i "s/^  mode: fast$/  mode: slow/" "$1"\n')
        os.chmod(editor, 0o755)
        out = yield self.succeeds(*NS, "edit", "configmap", "settings", env={"EDITOR": editor})
        self.assertEqual(out, "configmap/settings edited\n")
        out = yield self.succeeds(*NS, "label", "configmap", "settings", "team=a")
        self.assertEqual(out, "configmap/settings labeled\n")
        out = yield self.succeeds(*NS, "annotate", "configmap", "settings", "note=x")
        self.assertEqual(out, "configmap/settings annotated\n")
        out = yield self.succeeds(*NS, "get", "configmap", "settings", "-o", "jsonpath={.data.mode}"
                                  "/{.metadata.labels.team}/{.metadata.annotations.note}")
        self.assertEqual(out, "slow/a/x")

    @inlineCallbacks
    def test_delete_and_wait_for_delete(self):
        """
        ``wait --for=delete`` sees the delete, with client-go's WatchList (kubectl's
        default: it waits for the bookmark annotated ``k8s.io/initial-events-end``) and
        without it (a LIST, then a watch).
        """
        streams = self.server.api.watcher.streams
        for name, env in (("one", None), ("two", NO_WATCH_LIST)):
            yield self.succeeds(*NS, "create", "configmap", name)
            waiting = self.run_kubectl(*NS, "wait", "--for=delete", f"configmap/{name}",
                                       "--timeout=20s", env=env)
            yield wait_until(lambda: streams, 10, "kubectl wait's watch")
            out = yield self.succeeds(*NS, "delete", "configmap", name)
            self.assertEqual(out, f'configmap "{name}" deleted from team namespace\n')
            r = yield waiting
            yield wait_until(lambda: not streams, 10, "kubectl wait's watch to end")
            self.assertEqual((r.returncode, r.stdout), (0, f"configmap/{name} condition met\n"),
                             r.stderr)

    @inlineCallbacks
    def test_rbac_typed_creates_out_of_scope(self):
        """
        The RBAC kinds' typed creates post to upstream's group (404 here) and ``auth
        reconcile`` decodes only upstream's; the README's YAML, applied, does the job.
        """
        not_found = "the server could not find the requested resource"
        for args, error in (
                (("role", "reader", "--verb=get", "--resource=configmaps"),
                 f"Error from server (NotFound): {not_found}"),
                (("rolebinding", "reads", "--role=reader", "--user=jane"),
                 f"error: failed to create rolebinding: {not_found}"),
                (("clusterrole", "reader", "--verb=get", "--resource=configmaps"),
                 f"Error from server (NotFound): {not_found}"),
                (("clusterrolebinding", "reads", "--clusterrole=view", "--user=jane"),
                 f"error: failed to create clusterrolebinding: {not_found}")):
            self.assertEqual((yield self.refused(*NS, "create", *args)), error)
        error = yield self.refused("auth", "reconcile", "-f", "-", stdin=ROLE_YAML)
        self.assertIn('no kind "Role" is registered for version '
                      '"rbac.authorization.platform.io/v1"', error)
        out = yield self.succeeds("apply", "-f", "-", stdin=ROLE_YAML)
        self.assertEqual(out, "role.rbac.authorization.platform.io/reader created\n")


ROLE_YAML = """\
apiVersion: rbac.authorization.platform.io/v1
kind: Role
metadata:
  name: reader
  namespace: team
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
"""
