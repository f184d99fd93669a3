"""
Issue 32 end to end on the in-memory server: Node, PodDisruptionBudget and its
controller, ``pods/eviction`` and ``pods/binding``, with upstream's words.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.authorizers import AuthorizerChain
from platformd.codecs.protobufcodec import MAGIC, ProtobufCodec
from platformd.compose import Authorization
from tests.stub import StubServer

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy.platform.io/v1/namespaces/default/poddisruptionbudgets"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.platform.io"}
READY = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _node(name="n1", **status):
    return {"metadata": {"name": name}, "status": {
        "conditions": [{"type": "Ready", "status": "True"}], **status}}


class Case(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()

    def settle(self):
        self.stub.flush()
        self.stub.advance(0.1)
        self.stub.flush()

    def ok(self, response, code=200):
        self.assertEqual(response.code, code, response.body)
        return response.json()

    def pod(self, name, labels=None, ready=True, owner=False, **spec):
        meta = {"name": name, "labels": labels if labels is not None else {"app": "web"}}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": "rs", "uid": "u-1", "controller": True}]
        self.ok(self.admin.post(PODS, {"metadata": meta, "spec": {
            "containers": [{"name": "c", "image": "i:1"}], **spec}}), 201)
        if ready:
            self.ok(self.admin.patch(f"{PODS}/{name}/status", READY))

    def budget(self, name="web", **spec):
        spec.setdefault("selector", {"matchLabels": {"app": "web"}})
        return self.ok(self.admin.post(PDBS, {"metadata": {"name": name}, "spec": spec}), 201)

    def status(self, name="web"):
        self.settle()
        return self.ok(self.admin.get(f"{PDBS}/{name}"))["status"]

    def evict(self, name, body=None, path_name=None, **kw):
        body = body if body is not None else {
            "apiVersion": "policy.platform.io/v1", "kind": "Eviction",
            "metadata": {"name": name}}
        return self.admin.post(f"{PODS}/{path_name or name}/eviction", body, **kw)

    def names(self):
        return [p["metadata"]["name"] for p in self.ok(self.admin.get(PODS))["items"]]


class NodeTests(Case):
    def test_create_keeps_status_and_zero_structs(self):
        node = self.ok(self.admin.post(NODES, _node()), 201)
        self.assertEqual(node["status"]["conditions"], [{"type": "Ready", "status": "True"}])
        self.assertEqual(node["status"]["daemonEndpoints"], {"kubeletEndpoint": {"Port": 0}})
        self.assertEqual(node["status"]["nodeInfo"]["kubeletVersion"], "")
        self.assertNotIn("namespace", node["metadata"])
        self.assertEqual(node["spec"], {})  # Go's JSON shows an empty struct

    def test_main_resource_ignores_status_and_status_ignores_spec(self):
        node = self.ok(self.admin.post(NODES, _node()), 201)
        node["status"]["conditions"][0]["status"] = "False"
        node["spec"] = {"unschedulable": True}
        updated = self.ok(self.admin.put(f"{NODES}/n1", node))
        self.assertEqual(updated["spec"], {"unschedulable": True})
        self.assertEqual(updated["status"]["conditions"][0]["status"], "True")
        updated["spec"] = {}
        updated["status"]["conditions"][0]["status"] = "False"
        written = self.ok(self.admin.put(f"{NODES}/n1/status", updated))
        self.assertEqual(written["spec"], {"unschedulable": True})
        self.assertEqual(written["status"]["conditions"][0]["status"], "False")

    def test_table(self):
        self.ok(self.admin.post(NODES, {
            "metadata": {"name": "n1", "labels": {"node-role.platform.io/control-plane": "",
                                                  "platform.io/role": "edge"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.36.0"}}}), 201)
        self.ok(self.admin.post(NODES, {"metadata": {"name": "n2"}}), 201)
        table = self.ok(self.admin.get(NODES, headers=TABLE))
        self.assertEqual([c["name"] for c in table["columnDefinitions"]],
                         ["Name", "Status", "Roles", "Age", "Version", "Internal-IP",
                          "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"])
        self.assertEqual([row["cells"] for row in table["rows"]], [
            ["n1", "NotReady,SchedulingDisabled", "control-plane,edge", "0s", "v1.36.0",
             "10.0.0.1", "<none>", "<unknown>", "<unknown>", "<unknown>"],
            ["n2", "Unknown", "<none>", "0s", "", "<none>", "<none>", "<unknown>",
             "<unknown>", "<unknown>"]])

    def test_field_selector_unschedulable(self):
        self.ok(self.admin.post(NODES, _node("n1")), 201)
        self.ok(self.admin.post(NODES, {**_node("n2"), "spec": {"unschedulable": True}}), 201)
        for value, names in (("true", ["n2"]), ("false", ["n1"])):
            items = self.ok(self.admin.get(
                f"{NODES}?fieldSelector=spec.unschedulable%3D{value}"))["items"]
            self.assertEqual([i["metadata"]["name"] for i in items], names)
        r = self.admin.get(f"{NODES}?fieldSelector=spec.nodeName%3Dx")
        self.assertEqual(r.code, 400)

    def test_validation(self):
        r = self.admin.post(NODES, {"metadata": {"name": "n1"}, "spec": {"taints": [
            {"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "Sometimes"}]}})
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.json()["message"], (
            'Node "n1" is invalid: [metadata.taints[1]: Duplicate value: '
            '{"Key":"a","Value":"","Effect":"NoSchedule","TimeAdded":null}: taints must be '
            'unique by key and effect pair, metadata.taints[2].effect: Unsupported value: '
            '"Sometimes": supported values: "NoSchedule", "PreferNoSchedule", '
            '"NoExecute"]'))
        self.ok(self.admin.post(NODES, {"metadata": {"name": "n1"}, "spec": {
            "providerID": "cloud://1", "podCIDRs": ["10.1.0.0/24"]}}), 201)
        node = self.ok(self.admin.get(f"{NODES}/n1"))
        node["spec"] = {"providerID": "cloud://2", "podCIDRs": ["10.2.0.0/24"]}
        r = self.admin.put(f"{NODES}/n1", node)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"], (
            'Node "n1" is invalid: [spec.podCIDRs[0]: Forbidden: node updates may not change '
            'podCIDR except from "" to valid, spec.providerID: Forbidden: node updates may '
            'not change providerID except from "" to valid]'))

    def test_patches_apply_and_watch(self):
        """Conditions merge by type; apply owns its fields; a watch filters on the field."""
        self.ok(self.admin.post(NODES, _node()), 201)
        watch = self.admin.watch(f"{NODES}?watch=1&fieldSelector=spec.unschedulable%3Dtrue")
        node = self.ok(self.admin.patch(f"{NODES}/n1/status", {"status": {"conditions": [
            {"type": "MemoryPressure", "status": "False"}]}},
            content_type="application/strategic-merge-patch+json"))
        # Upstream's mergeSortedSlice puts a patch's new element before the server's.
        self.assertEqual([c["type"] for c in node["status"]["conditions"]],
                         ["MemoryPressure", "Ready"])
        r = self.admin.patch(f"{NODES}/n1?fieldManager=cordoner", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "spec": {"unschedulable": True}}, content_type="application/apply-patch+yaml")
        managers = [m["manager"] for m in self.ok(r)["metadata"]["managedFields"]]
        self.assertIn("cordoner", managers)
        self.settle()
        self.assertEqual(watch.types(), ["ADDED"])  # it started to match
        watch.close()
        r = self.admin.delete(f"{NODES}/n1?dryRun=All")
        self.assertEqual(r.code, 200)
        self.assertEqual(self.ok(self.admin.get(f"{NODES}?limit=1"))["items"][0]["metadata"]
                         ["name"], "n1")

    def test_config_source_checked_on_update(self):
        self.ok(self.admin.post(NODES, {"metadata": {"name": "n1"}, "spec": {
            "configSource": {}}}), 201)  # upstream checks it on update only
        node = self.ok(self.admin.get(f"{NODES}/n1"))
        r = self.admin.put(f"{NODES}/n1", node)
        self.assertEqual(r.json()["message"], (
            'Node "n1" is invalid: spec.configSource: Invalid value: {"ConfigMap":null}: '
            'exactly one reference subfield must be non-nil'))
        node["spec"]["configSource"] = {"configMap": {"name": "c", "uid": "u"}}
        r = self.admin.put(f"{NODES}/n1", node)
        self.assertEqual(r.json()["message"], (
            'Node "n1" is invalid: [spec.configSource.configMap.uid: Forbidden: uid must not '
            'be set in spec, spec.configSource.configMap.namespace: Required value: namespace '
            'must be set, spec.configSource.configMap.kubeletConfigKey: Required value: '
            'kubeletConfigKey must be set]'))

    def test_protobuf_round_trip(self):
        self.ok(self.admin.post(NODES, _node(capacity={"cpu": "4", "memory": "8Gi"})), 201)
        r = self.admin.get(f"{NODES}/n1", headers={"Accept": "application/vnd.platform.protobuf"})
        self.assertEqual(r.code, 200)
        self.assertTrue(r.body.startswith(MAGIC))
        decoded = ProtobufCodec().decode(r.body)
        self.assertEqual(decoded["status"]["capacity"], {"cpu": "4", "memory": "8Gi"})
        self.assertEqual(decoded["status"]["conditions"], [{"type": "Ready", "status": "True"}])


class PodDisruptionBudgetTests(Case):
    def test_create_clears_status_and_starts_generation(self):
        r = self.admin.post(PDBS, {"metadata": {"name": "web"}, "spec": {"minAvailable": "50%"},
                                   "status": {"disruptionsAllowed": 5}})
        pdb = self.ok(r, 201)
        self.assertEqual(pdb["metadata"]["generation"], 1)
        self.assertEqual(pdb["status"], {"disruptionsAllowed": 0, "currentHealthy": 0,
                                         "desiredHealthy": 0, "expectedPods": 0})
        self.settle()
        pdb = self.ok(self.admin.get(f"{PDBS}/web"))
        pdb["spec"]["minAvailable"] = 2
        pdb["status"]["disruptionsAllowed"] = 7
        pdb = self.ok(self.admin.put(f"{PDBS}/web", pdb))
        self.assertEqual(pdb["metadata"]["generation"], 2)
        self.assertNotEqual(pdb["status"]["disruptionsAllowed"], 7)

    def test_validation(self):
        r = self.admin.post(PDBS, {"metadata": {"name": "web"}, "spec": {
            "minAvailable": "150%", "maxUnavailable": -1,
            "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "unhealthyPodEvictionPolicy": "Never"}})
        self.assertEqual(r.code, 422)
        self.assertEqual(r.json()["message"], (
            'PodDisruptionBudget.policy.platform.io "web" is invalid: [spec: Invalid value: '
            '{"MinAvailable":"150%","Selector":{"matchExpressions":[{"key":"a","operator":'
            '"In"}]},"MaxUnavailable":-1,"UnhealthyPodEvictionPolicy":"Never"}: minAvailable '
            'and maxUnavailable cannot be both set, spec.minAvailable: Invalid value: "150%": '
            'must not be greater than 100%, spec.maxUnavailable: Invalid value: -1: must be '
            'greater than or equal to 0, spec.selector.matchExpressions[0].values: Required '
            "value: must be specified when `operator` is 'In' or 'NotIn', "
            'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: '
            '"AlwaysAllow", "IfHealthyBudget"]'))
        r = self.admin.post(PDBS, {"metadata": {"name": "web"}, "spec": {"minAvailable": "x"}})
        self.assertIn('spec.minAvailable: Invalid value: "x": a valid percent string must be',
                      r.json()["message"])

    def test_table(self):
        self.budget(minAvailable=1)
        self.budget("other", maxUnavailable="25%")
        table = self.ok(self.admin.get(PDBS, headers=TABLE))
        self.assertEqual([row["cells"][:4] for row in table["rows"]],
                         [["other", "N/A", "25%", 0], ["web", "1", "N/A", 0]])

    def test_strategic_merge_replaces_the_selector(self):
        """``spec.selector`` is patchStrategy "replace" upstream."""
        self.budget(minAvailable=1, selector={"matchLabels": {"app": "web", "tier": "a"}})
        pdb = self.ok(self.admin.patch(f"{PDBS}/web", {"spec": {"selector": {
            "matchLabels": {"app": "db"}}}}, content_type="application/strategic-merge-patch+json"))
        self.assertEqual(pdb["spec"]["selector"], {"matchLabels": {"app": "db"}})
        self.assertEqual(pdb["metadata"]["generation"], 2)
        document = self.ok(self.admin.get("/openapi/v2"))
        spec = document["definitions"]["io.platform.api.policy.v1.PodDisruptionBudgetSpec"]
        self.assertEqual(spec["properties"]["selector"]["x-kubernetes-patch-strategy"],
                         "replace")

    def test_apply_watch_and_pages(self):
        apply = {"apiVersion": "policy.platform.io/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "web"}, "spec": {"maxUnavailable": 1}}
        watch = self.admin.watch(f"{PDBS}?watch=1")
        r = self.admin.patch(f"{PDBS}/web?fieldManager=me", apply,
                             content_type="application/apply-patch+yaml")
        self.assertEqual(self.ok(r, 201)["metadata"]["managedFields"][0]["manager"], "me")
        self.budget("two", minAvailable=1)
        self.settle()
        self.assertEqual(watch.types().count("ADDED"), 2)  # and the controller's MODIFIED
        watch.close()
        page = self.ok(self.admin.get(f"{PDBS}?limit=1"))
        self.assertEqual(len(page["items"]), 1)
        self.assertTrue(page["metadata"]["continue"])
        r = self.admin.put(f"{PDBS}/web?dryRun=All", {**apply, "spec": {"minAvailable": 3}})
        self.assertEqual(self.ok(r)["spec"], {"minAvailable": 3})
        self.assertEqual(self.ok(self.admin.get(f"{PDBS}/web"))["spec"], {"maxUnavailable": 1})

    def test_protobuf(self):
        self.budget(minAvailable="50%")
        r = self.admin.get(f"{PDBS}/web", headers={"Accept": "application/vnd.platform.protobuf"})
        decoded = ProtobufCodec().decode(r.body)
        self.assertEqual(decoded["spec"]["minAvailable"], "50%")
        self.assertEqual(decoded["status"]["expectedPods"], 0)
        body = ProtobufCodec().encode({**decoded, "metadata": {"name": "two"},
                                       "spec": {"minAvailable": 2}})
        r = self.admin.post(PDBS, body, content_type="application/vnd.platform.protobuf")
        self.assertEqual(self.ok(r, 201)["spec"]["minAvailable"], 2)


class DisruptionControllerTests(Case):
    def test_integer_min_available(self):
        self.budget(minAvailable=1)
        self.pod("a")
        self.pod("b")
        self.pod("c", ready=False)
        self.pod("other", labels={"app": "db"})
        status = self.status()
        self.assertEqual({k: status[k] for k in ("observedGeneration", "disruptionsAllowed",
                                                 "currentHealthy", "desiredHealthy",
                                                 "expectedPods")},
                         {"observedGeneration": 1, "disruptionsAllowed": 1,
                          "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 3})
        [condition] = status["conditions"]
        self.assertEqual((condition["type"], condition["status"], condition["reason"],
                          condition["message"], condition["observedGeneration"]),
                         ("DisruptionAllowed", "True", "SufficientPods", "", 1))
        self.ok(self.admin.delete(f"{PODS}/b"))
        status = self.status()
        self.assertEqual((status["disruptionsAllowed"], status["currentHealthy"]), (0, 1))
        self.assertEqual(status["conditions"][0]["reason"], "InsufficientPods")

    def test_pod_leaving_the_selector(self):
        """A pod relabelled out of the selector is counted out (its old labels matched)."""
        self.budget(minAvailable=1)
        self.pod("a")
        self.pod("b")
        self.assertEqual(self.status()["expectedPods"], 2)
        self.ok(self.admin.patch(f"{PODS}/b", {"metadata": {"labels": {"app": "db"}}}))
        status = self.status()
        self.assertEqual((status["expectedPods"], status["disruptionsAllowed"]), (1, 0))

    def test_status_written_once(self):
        """A budget whose status already says it all is not written again."""
        self.budget(minAvailable=1)
        self.pod("a")
        version = self.ok(self.admin.get(f"{PDBS}/web"))["metadata"]["resourceVersion"]
        self.stub.advance(60)
        self.settle()
        self.assertEqual(self.ok(self.admin.get(f"{PDBS}/web"))["metadata"]["resourceVersion"],
                         version)

    def test_percentages_count_only_managed_pods(self):
        """Unmanaged pods are left out of a percentage's count (upstream)."""
        self.budget(maxUnavailable="50%")
        self.pod("a")
        status = self.status()
        self.assertEqual((status["expectedPods"], status["desiredHealthy"],
                          status["disruptionsAllowed"]), (0, 0, 0))

    def test_controller_not_found_fails_safe(self):
        self.budget(minAvailable="50%")
        self.pod("a", owner=True)
        status = self.status()
        self.assertEqual(status["disruptionsAllowed"], 0)
        [condition] = status["conditions"]
        self.assertEqual((condition["status"], condition["reason"], condition["message"]),
                         ("False", "SyncFailed", 'found no controllers for pod "a"'))

    def test_null_selector_selects_nothing_empty_everything(self):
        self.pod("a")
        self.ok(self.admin.post(PDBS, {"metadata": {"name": "none"},
                                       "spec": {"minAvailable": 0}}), 201)
        self.budget("all", minAvailable=0, selector={})
        self.assertEqual(self.status("none")["expectedPods"], 0)
        self.assertEqual(self.status("all")["expectedPods"], 1)

    def test_disrupted_pods_expire(self):
        self.budget(minAvailable=0)
        self.pod("a")
        self.pod("b")
        self.ok(self.evict("a", body={"apiVersion": "policy.platform.io/v1",
                                      "kind": "Eviction", "metadata": {"name": "a"}}), 201)
        self.assertEqual(self.names(), ["b"])
        status = self.status()
        self.assertNotIn("disruptedPods", status)  # the pod is gone: dropped
        # A recorded pod that is never deleted is dropped after two minutes.
        pdb = self.ok(self.admin.get(f"{PDBS}/web"))
        pdb["status"]["disruptedPods"] = {"b": "1970-01-01T00:00:01Z"}
        self.ok(self.admin.put(f"{PDBS}/web/status", pdb))
        status = self.status()
        self.assertEqual(status["disruptedPods"], {"b": "1970-01-01T00:00:01Z"})
        self.assertEqual(status["currentHealthy"], 0)
        self.stub.advance(121)
        status = self.status()
        self.assertNotIn("disruptedPods", status)
        self.assertEqual(status["currentHealthy"], 1)


class EvictionTests(Case):
    def setUp(self):
        super().setUp()
        self.budget(minAvailable=1)
        self.pod("a")
        self.pod("b")
        self.assertEqual(self.status()["disruptionsAllowed"], 1)

    def test_evicts_then_refuses(self):
        r = self.evict("a")
        self.assertEqual(r.code, 201)
        self.assertEqual(r.json(), {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "code": 201})
        self.assertEqual(self.names(), ["b"])
        r = self.evict("b", body={"apiVersion": "policy/v1beta1", "kind": "Eviction",
                                  "metadata": {"name": "b"}})
        self.assertEqual(r.code, 429)
        self.assertEqual(r.json(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "details": {"causes": [{
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 "
                           "currently"}]},
            "code": 429})
        self.assertIsNone(r.header("Retry-After"))
        self.assertEqual(self.names(), ["b"])

    def test_budget_decremented_and_pod_recorded(self):
        self.stub.advance(5)
        pdb_before = self.ok(self.admin.get(f"{PDBS}/web"))
        self.stub.components.disruption.stop()  # what the eviction wrote, unchanged
        self.ok(self.evict("a"), 201)
        status = self.ok(self.admin.get(f"{PDBS}/web"))["status"]
        self.assertEqual(status["disruptionsAllowed"], 0)
        self.assertEqual(list(status["disruptedPods"]), ["a"])
        self.assertEqual(status["conditions"][0]["reason"], "InsufficientPods")
        self.assertEqual(status["disruptedPods"]["a"], "1970-01-01T00:00:05Z")
        self.assertNotEqual(pdb_before["metadata"]["resourceVersion"],
                            self.ok(self.admin.get(f"{PDBS}/web"))["metadata"]["resourceVersion"])
        self.stub.components.disruption.start()  # the pod is gone: the record goes
        status = self.status()
        self.assertNotIn("disruptedPods", status)
        self.assertEqual((status["disruptionsAllowed"], status["currentHealthy"]), (0, 1))

    def test_dry_run_changes_nothing(self):
        for query, body in (("?dryRun=All", None),
                           ("", {"apiVersion": "policy/v1", "kind": "Eviction",
                                 "metadata": {"name": "a"}, "deleteOptions": {
                                     "dryRun": ["All"]}})):
            before = self.ok(self.admin.get(f"{PDBS}/web"))["metadata"]["resourceVersion"]
            body = body or {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": "a"}}
            r = self.admin.post(f"{PODS}/a/eviction{query}", body)
            self.assertEqual(r.code, 201, r.body)
            self.assertEqual(self.names(), ["a", "b"])
            after = self.ok(self.admin.get(f"{PDBS}/web"))["metadata"]["resourceVersion"]
            self.assertEqual(before, after)

    def test_preconditions_honoured(self):
        r = self.evict("a", body={"apiVersion": "policy/v1", "kind": "Eviction",
                                  "metadata": {"name": "a"},
                                  "deleteOptions": {"preconditions": {"uid": "nope"}}})
        self.assertEqual(r.code, 409, r.body)
        self.assertIn('Operation cannot be fulfilled on Pod "a": the UID in the precondition '
                      '(nope) does not match the UID in record', r.json()["message"])
        self.assertEqual(self.names(), ["a", "b"])

    def test_multiple_budgets(self):
        self.budget("second", maxUnavailable=1)
        self.settle()
        r = self.evict("a")
        self.assertEqual(r.code, 201)
        self.assertEqual(r.json(), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                       "subresource does not support.", "code": 500})
        self.assertEqual(self.names(), ["a", "b"])

    def test_generation_not_yet_observed(self):
        self.stub.components.disruption.stop()
        pdb = self.ok(self.admin.get(f"{PDBS}/web"))
        pdb["spec"]["minAvailable"] = 0
        self.ok(self.admin.put(f"{PDBS}/web", pdb))
        r = self.evict("a")  # before the controller has seen generation 2
        self.assertEqual(r.code, 429)
        self.assertEqual(r.header("Retry-After"), "10")
        self.assertEqual(r.json()["details"], {"causes": [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget web is still being processed by the server."}],
            "retryAfterSeconds": 10})

    def test_pending_and_unready_pods(self):
        self.pod("pending", ready=False)
        self.ok(self.evict("pending"), 201)
        self.pod("unready", ready=False)
        self.ok(self.admin.patch(f"{PODS}/unready/status", {"status": {"phase": "Running"}}))
        status = self.status()
        self.assertEqual(status["disruptionsAllowed"], 1)
        self.ok(self.evict("unready"), 201)  # the budget is met: it goes, nothing spent
        self.assertEqual(self.ok(self.admin.get(f"{PDBS}/web"))["status"]
                         ["disruptionsAllowed"], 1)

    def test_bad_requests(self):
        r = self.evict("a", path_name="b")
        self.assertEqual((r.code, r.json()["message"]),
                         (400, "name in URL does not match name in Eviction object"))
        r = self.evict("x")
        self.assertEqual((r.code, r.json()["message"]), (404, 'pods "x" not found'))
        r = self.admin.get(f"{PODS}/a/eviction")
        self.assertEqual(r.code, 405)

    def test_protobuf_body(self):
        body = ProtobufCodec().encode({"apiVersion": "policy/v1beta1", "kind": "Eviction",
                                       "metadata": {"name": "a", "namespace": "default"},
                                       "deleteOptions": {}})
        r = self.admin.post(f"{PODS}/a/eviction", body,
                            content_type="application/vnd.kubernetes.protobuf")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(self.names(), ["b"])

    def test_disruption_target_condition(self):
        """A pod that outlives its eviction (a finalizer) shows why it is going."""
        self.ok(self.admin.patch(f"{PODS}/a", {"metadata": {"finalizers": ["x/y"]}}))
        self.ok(self.evict("a"), 201)
        pod = self.ok(self.admin.get(f"{PODS}/a"))
        self.assertTrue(pod["metadata"]["deletionTimestamp"])
        target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        self.assertEqual([(c["status"], c["reason"], c["message"]) for c in target],
                         [("True", "EvictionByEvictionAPI", "Eviction API: evicting")])

class EvictionRBACTests(Case):
    def setUp(self):
        self.stub = StubServer(rbac_policy=True, authorization=lambda internals: Authorization(
            AuthorizerChain([internals.rbac])))
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()
        self.budget(minAvailable=0)
        self.pod("a")

    def test_edit_and_view(self):
        """``edit`` grants ``create`` on pods/eviction; ``view`` does not."""
        for role, user in (("view", "viewer"), ("edit", "editor")):
            self.ok(self.admin.post(
                "/apis/rbac.authorization.platform.io/v1/namespaces/default/rolebindings", {
                    "metadata": {"name": role},
                    "roleRef": {"apiGroup": "rbac.authorization.platform.io",
                                "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "User", "name": user}]}), 201)
        self.settle()
        viewer = self.stub.client("viewer", groups=())
        editor = self.stub.client("editor", groups=())
        self.assertEqual(self.ok(viewer.get(PDBS))["items"][0]["metadata"]["name"], "web")
        r = viewer.post(f"{PODS}/a/eviction", {"metadata": {"name": "a"}})
        self.assertEqual(r.code, 403)
        self.assertEqual(r.json()["message"], 'pods "a" is forbidden: User "viewer" cannot '
                                              'create resource "pods/eviction" in API group "" '
                                              'in the namespace "default"')
        self.assertEqual(editor.post(f"{PODS}/a/eviction", {"metadata": {"name": "a"}}).code,
                         201)


class BindingTests(Case):
    def bind(self, pod, node="n1", kind="Node", name=None, **meta):
        return self.admin.post(f"{PODS}/{pod}/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name or pod, **meta},
            "target": {"kind": kind, "name": node}})

    def test_bind_once(self):
        self.pod("a", ready=False)
        r = self.bind("a", annotations={"scheduler": "mine"})
        self.assertEqual((r.code, r.json()), (201, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}))
        pod = self.ok(self.admin.get(f"{PODS}/a"))
        self.assertEqual(pod["spec"]["nodeName"], "n1")
        self.assertEqual(pod["metadata"]["annotations"], {"scheduler": "mine"})
        self.assertEqual([(c["type"], c["status"]) for c in pod["status"]["conditions"]],
                         [("PodScheduled", "True")])
        r = self.bind("a", "n2")
        self.assertEqual(r.code, 409)
        self.assertEqual(r.json()["message"], 'Operation cannot be fulfilled on pods/binding '
                                              '"a": pod a is already assigned to node "n1"')
        self.assertEqual(r.json()["details"], {"name": "a", "kind": "pods/binding"})

    def test_refusals(self):
        self.pod("a", ready=False)
        r = self.bind("a", kind="Pod")
        self.assertEqual((r.code, r.json()["message"]), (500, 'target.kind: Unsupported value: '
                                                              '"Pod": supported values: "Node", '
                                                              '"<empty>"'))
        self.assertNotIn("reason", r.json())
        r = self.bind("a", name="b")
        self.assertEqual((r.code, r.json()["message"]),
                         (400, "name in URL does not match name in Binding object"))
        r = self.bind("x")
        self.assertEqual((r.code, r.json()["message"]), (404, 'pods "x" not found'))
        r = self.bind("a", uid="other")
        self.assertEqual(r.code, 409)
        self.assertIn("Precondition failed: UID in precondition: other", r.json()["message"])
        r = self.bind("a", kind="", node="n1")
        self.assertEqual(r.code, 201)
        r = self.admin.post(f"{PODS}/a/binding?dryRun=All", {
            "metadata": {"name": "a"}, "target": {"name": "n1"}})
        self.assertEqual(r.code, 409)

    def test_legacy_collection(self):
        """``POST .../bindings`` binds the pod the body names; it is create-only."""
        self.pod("a", ready=False)
        r = self.admin.post("/api/v1/namespaces/default/bindings", {
            "metadata": {"name": "a"}, "target": {"name": "n1"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(self.ok(self.admin.get(f"{PODS}/a"))["spec"]["nodeName"], "n1")
        r = self.admin.post("/api/v1/namespaces/default/bindings", {
            "metadata": {}, "target": {"name": "n1"}})
        self.assertEqual((r.code, r.json()["message"]), (400, "Name parameter required."))
        self.assertEqual(self.admin.get("/api/v1/namespaces/default/bindings").code, 405)
        resources = {r["name"]: r for r in self.ok(self.admin.get("/api/v1"))["resources"]}
        self.assertEqual(resources["bindings"], {
            "name": "bindings", "singularName": "binding", "namespaced": True,
            "kind": "Binding", "verbs": ["create"]})

    def test_dry_run(self):
        self.pod("a", ready=False)
        r = self.admin.post(f"{PODS}/a/binding?dryRun=All", {
            "metadata": {"name": "a"}, "target": {"name": "n1"}})
        self.assertEqual(r.code, 201)
        self.assertNotIn("nodeName", self.ok(self.admin.get(f"{PODS}/a"))["spec"])

    def test_discovery(self):
        resources = {r["name"]: r for r in self.ok(self.admin.get("/api/v1"))["resources"]}
        self.assertEqual(resources["pods/binding"], {
            "name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
            "verbs": ["create"]})
        self.assertEqual(resources["pods/eviction"], {
            "name": "pods/eviction", "singularName": "", "namespaced": True,
            "group": "policy.platform.io", "version": "v1", "kind": "Eviction",
            "verbs": ["create"]})
        self.assertEqual(resources["nodes/status"]["verbs"], ["get", "patch", "update"])
        policy = self.ok(self.admin.get("/apis/policy.platform.io/v1"))
        self.assertEqual([r["name"] for r in policy["resources"]],
                         ["poddisruptionbudgets", "poddisruptionbudgets/status"])
        self.assertEqual(policy["resources"][0]["shortNames"], ["pdb"])
        json.dumps(policy)
