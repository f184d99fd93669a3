"""
CustomResourceDefinitions with stock kubectl against a real daemon: ``apply -f`` a
definition, ``wait --for condition=established``, objects of the kind by its short name
and category, its printer columns, ``explain``, ``api-resources``, ``edit``,
``get -w``, and ``delete crd`` (its objects go with it, the kind stops being served).
"""

import copy
import json
import os
import signal

import yaml
from twisted.internet.defer import inlineCallbacks

from tests.apiextensions.test_conversionwebhook import ConversionServer, https_webhook
from tests.e2e.streams import spawn
from tests.e2e.test_clients import KubectlCase

CRD_YAML = """\
apiVersion: apiextensions.platform.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [gadgets]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A widget of some size.
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""

WIDGET_YAML = """\
apiVersion: example.com/v1
kind: Widget
metadata:
  name: small
  namespace: team
spec:
  size: 3
"""


class SucceedingKubectl(KubectlCase):
    @inlineCallbacks
    def succeeds(self, *args, stdin=None, env=None):
        r = yield self.run_kubectl(*args, stdin=stdin, env=env)
        self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout


class CustomResourceKubectlTests(SucceedingKubectl):

    @inlineCallbacks
    def test_apply_get_explain_delete(self):
        yield self.succeeds("create", "namespace", "team")
        out = yield self.succeeds("apply", "-f", "-", stdin=CRD_YAML)
        self.assertEqual(out, "customresourcedefinition.apiextensions.platform.io/"
                              "widgets.example.com created\n")
        out = yield self.succeeds("wait", "--for", "condition=established", "--timeout=20s",
                                  "crd/widgets.example.com")
        self.assertIn("condition met", out)
        out = yield self.succeeds("apply", "-f", "-", stdin=WIDGET_YAML)
        self.assertEqual(out, "widget.example.com/small created\n")
        out = yield self.succeeds("-n", "team", "get", "wd")
        rows = [line.split() for line in out.splitlines()]
        self.assertEqual(rows[0], ["NAME", "SIZE", "AGE"])
        self.assertEqual(rows[1][:2], ["small", "3"])
        out = yield self.succeeds("-n", "team", "get", "gadgets", "-o", "name")
        self.assertEqual(out, "widget.example.com/small\n")
        out = yield self.succeeds("-n", "team", "get", "widget", "small", "-o", "json")
        self.assertEqual(json.loads(out)["spec"], {"size": 3})
        out = yield self.succeeds("api-resources", "--api-group=example.com")
        self.assertIn("widgets", out)
        self.assertIn("wd", out)
        out = yield self.succeeds("explain", "widgets")
        self.assertIn("KIND:       Widget", out)
        self.assertIn("A widget of some size.", out)
        out = yield self.succeeds("get", "crd")
        self.assertIn("widgets.example.com", out)
        out = yield self.succeeds("delete", "crd", "widgets.example.com")
        self.assertIn('"widgets.example.com" deleted', out)
        r = yield self.run_kubectl("-n", "team", "get", "widgets.example.com")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        out = yield self.succeeds("get", "crd", "-o", "name")
        self.assertEqual(out, "")


    @inlineCallbacks
    def test_edit_and_watch(self):
        """``kubectl edit`` changes a custom object through an EDITOR; ``kubectl get -w``
        prints its printer columns for the objects there and then for one created while
        it watches."""
        yield self.succeeds("create", "namespace", "team")
        yield self.succeeds("apply", "-f", "-", stdin=CRD_YAML)
        yield self.succeeds("wait", "--for", "condition=established", "--timeout=20s",
                            "crd/widgets.example.com")
        yield self.succeeds("apply", "-f", "-", stdin=WIDGET_YAML)
        editor = os.path.join(self.home, "editor")
        with open(editor, "w") as f:
            f.write('#!/bin/sh\nsed -i "s/^  size: 3$/  size: 5/" "$1"\n')
        os.chmod(editor, 0o755)
        out = yield self.succeeds("-n", "team", "edit", "widget", "small",
                                  env={"EDITOR": editor})
        self.assertEqual(out, "widget.example.com/small edited\n")
        out = yield self.succeeds("-n", "team", "get", "wd", "small",
                                  "-o", "jsonpath={.spec.size}/{.metadata.generation}")
        self.assertEqual(out, "5/2")

        argv, env = self.kubectl_command("-n", "team", "get", "widgets", "-w")
        process, output = spawn(self, argv, env)
        yield output.wait_for("small", 30)
        yield self.succeeds("apply", "-f", "-",
                            stdin=WIDGET_YAML.replace("small", "large").replace("3", "42"))
        yield output.wait_for("large", 30)
        process.signalProcess(signal.SIGTERM)
        yield output.ended
        rows = [line.split() for line in output.out.decode().splitlines()]
        self.assertEqual(rows[0], ["NAME", "SIZE", "AGE"])
        self.assertEqual([row[:2] for row in rows[1:]], [["small", "5"], ["large", "42"]])


class DefinitionApplyKubectlTests(SucceedingKubectl):
    """A definition's schema is upstream's typed JSONSchemaProps: stock kubectl applies it
    twice (its three-way strategic merge patch, made from the served OpenAPI), applies
    it server-side, and is refused a typo (kubectl's default ``--validate=strict``)."""

    def schema(self, out: str) -> dict:
        return json.loads(out)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    @inlineCallbacks
    def test_apply_twice_server_side_and_typo(self):
        yield self.succeeds("apply", "-f", "-", stdin=CRD_YAML)
        out = yield self.succeeds("apply", "-f", "-", stdin=CRD_YAML)
        self.assertEqual(out, "customresourcedefinition.apiextensions.platform.io/"
                              "widgets.example.com unchanged\n")
        # nullable: false is never stored: kubectl patches it in again each time, as it
        # does against upstream, and the write changes nothing.
        changed = CRD_YAML.replace("A widget of some size.", "A widget.").replace(
            "          spec:\n            type: object\n",
            "          spec:\n            type: object\n            nullable: false\n")
        out = yield self.succeeds("apply", "-f", "-", stdin=changed)
        self.assertEqual(out, "customresourcedefinition.apiextensions.platform.io/"
                              "widgets.example.com configured\n")
        out = yield self.succeeds("get", "crd", "widgets.example.com", "-o", "json")
        schema = self.schema(out)
        self.assertEqual(schema["description"], "A widget.")
        self.assertEqual(schema["properties"]["spec"],
                         {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
        generation = json.loads(out)["metadata"]["generation"]
        yield self.succeeds("apply", "-f", "-", stdin=changed)
        out = yield self.succeeds("get", "crd", "widgets.example.com", "-o", "json")
        self.assertEqual(json.loads(out)["metadata"]["generation"], generation)
        out = yield self.succeeds("apply", "--server-side", "--force-conflicts", "-f", "-",
                                  stdin=CRD_YAML)
        self.assertEqual(out, "customresourcedefinition.apiextensions.platform.io/"
                              "widgets.example.com serverside-applied\n")
        out = yield self.succeeds("get", "crd", "widgets.example.com", "-o", "json")
        self.assertEqual(self.schema(out)["description"], "A widget of some size.")
        typo = CRD_YAML.replace("description: A widget", "descripton: A widget")
        r = yield self.run_kubectl("apply", "-f", "-", stdin=typo)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        # An apply over a live object is a patch: upstream's patch handler words it.
        self.assertTrue(r.stderr.startswith("The request is invalid: patch: Invalid value: "),
                        r.stderr)
        self.assertTrue(r.stderr.endswith(
            'strict decoding error: unknown field '
            '"spec.versions[0].schema.openAPIV3Schema.descripton"\n'), r.stderr)


class ConversionWebhookKubectlTests(SucceedingKubectl):
    """A definition whose v2 a real HTTPS conversion webhook on loopback makes: stock
    kubectl applies a v1 object and reads it as v2."""

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        self.webhook = ConversionServer()
        self.ca_bundle, self.url = https_webhook(self, self.webhook)
        self.addCleanup(self.server.components.custom_resources.caller.close)

    @inlineCallbacks
    def test_apply_v1_get_v2(self):
        yield self.succeeds("create", "namespace", "team")
        crd = yaml.safe_load(CRD_YAML)
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2["name"], v2["storage"] = "v2", False
        crd["spec"]["versions"].append(v2)
        crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": self.url, "caBundle": self.ca_bundle},
            "conversionReviewVersions": ["v1"]}}
        yield self.succeeds("apply", "-f", "-", stdin=json.dumps(crd))
        yield self.succeeds("wait", "--for", "condition=established", "--timeout=20s",
                            "crd/widgets.example.com")
        yield self.succeeds("apply", "-f", "-", stdin=WIDGET_YAML.replace("size: 3",
                                                                          'size: "3"'))
        out = yield self.succeeds("-n", "team", "get", "widgets.v2.example.com", "small",
                                  "-o", "json")
        got = json.loads(out)
        self.assertEqual((got["apiVersion"], got["spec"]), ("example.com/v2", {"replicas": 3}))
        out = yield self.succeeds("-n", "team", "get", "widgets.v1.example.com", "small",
                                  "-o", "jsonpath={.spec.size}")
        self.assertEqual(out, "3")
