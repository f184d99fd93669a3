"""
CustomResourceDefinitions with stock kubectl against a real daemon: ``apply -f`` a
definition, ``wait --for condition=established``, objects of the kind by its short name
and category, its printer columns, ``explain``, ``api-resources``, and ``delete crd``
(its objects go with it, the kind stops being served).
"""

import json

from twisted.internet.defer import inlineCallbacks

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


class CustomResourceKubectlTests(KubectlCase):

    @inlineCallbacks
    def succeeds(self, *args, stdin=None):
        r = yield self.run_kubectl(*args, stdin=stdin)
        self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

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
