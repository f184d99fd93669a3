"""Which writes reach a webhook: rules, namespace and object selectors, match conditions."""

from __future__ import annotations

import attrs
from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.admission import webhooks
from platformd.admission.interfaces import AdmissionAttributes
from platformd.admission.webhooks.matching import Namespaces
from platformd.cache.informers import FakeLister
from platformd.cel.admission import compile_condition
from platformd.compose import admission_deps
from platformd.registry import core
from platformd.registry.kinds import webhookshapes
from tests.stub import StubServer
from tests.webhooks.helpers import WebhookCase


class RuleTests(WebhookCase):
    @defer.inlineCallbacks
    def calls(self, rules, **attributes) -> int:
        self.clear(self.validating_configs)
        self.configure("validating", self.hook(rules=rules))
        before = len(self.reviews())
        yield self.admit(self.attributes(**attributes))
        return len(self.reviews()) - before

    def rule(self, **fields):
        rule = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}
        rule.update(fields)
        return [rule]

    @defer.inlineCallbacks
    def test_operations_groups_versions(self):
        self.assertEqual((yield self.calls(self.rule(operations=["UPDATE"]))), 0)
        self.assertEqual((yield self.calls(self.rule(operations=["CREATE"]))), 1)
        self.assertEqual((yield self.calls(self.rule(apiGroups=["apps"]))), 0)
        self.assertEqual((yield self.calls(self.rule(apiVersions=["v2"]))), 0)
        self.assertEqual((yield self.calls(self.rule(resources=["pods"]))), 0)

    @defer.inlineCallbacks
    def test_subresources(self):
        status = {"kind": core.POD, "subresource": "status", "operation": "UPDATE",
                  "name": "p"}
        self.assertEqual((yield self.calls(self.rule(resources=["*"]), **status)), 0)
        self.assertEqual((yield self.calls(self.rule(resources=["pods"]), **status)), 0)
        self.assertEqual((yield self.calls(self.rule(resources=["pods/status"]), **status)), 1)
        self.assertEqual((yield self.calls(self.rule(resources=["pods/*"]), **status)), 1)
        self.assertEqual((yield self.calls(self.rule(resources=["*/status"]), **status)), 1)
        self.assertEqual((yield self.calls(self.rule(resources=["*/*"]), **status)), 1)
        self.assertEqual((yield self.calls(self.rule(resources=["*/*"]))), 1)

    @defer.inlineCallbacks
    def test_scope(self):
        namespace = {"kind": core.NAMESPACE, "namespace": "", "name": "new",
                     "obj": {"metadata": {"name": "new"}}}
        self.assertEqual((yield self.calls(self.rule(scope="Cluster"), **namespace)), 1)
        self.assertEqual((yield self.calls(self.rule(scope="Namespaced"), **namespace)), 0)
        self.assertEqual((yield self.calls(self.rule(scope="Namespaced"))), 1)
        self.assertEqual((yield self.calls(self.rule(scope="Cluster"))), 0)

    @defer.inlineCallbacks
    def test_configurations_are_never_sent(self):
        kind = webhookshapes.configuration_kind(False)
        self.assertEqual((yield self.calls(self.rule(), kind=kind, namespace="",
                                           name="x", obj={"metadata": {"name": "x"}})), 0)

    @defer.inlineCallbacks
    def test_delete_sends_old_object(self):
        old = {"metadata": {"name": "cm", "namespace": "default"}}
        self.assertEqual((yield self.calls(self.rule(), operation="DELETE", old=old)), 1)
        request = self.reviews()[-1]["request"]
        self.assertEqual((request["object"], request["oldObject"]), (None, old))
        self.assertEqual(request["options"]["kind"], "DeleteOptions")


class SelectorTests(WebhookCase):
    @defer.inlineCallbacks
    def calls(self, hook_fields, **attributes) -> int:
        self.clear(self.validating_configs)
        self.configure("validating", self.hook(**hook_fields))
        before = len(self.reviews())
        yield self.admit(self.attributes(**attributes))
        return len(self.reviews()) - before

    @defer.inlineCallbacks
    def test_namespace_selector(self):
        prod = {"namespaceSelector": {"matchLabels": {"env": "prod"}}}
        self.assertEqual((yield self.calls(prod)), 1)
        self.assertEqual((yield self.calls(prod, namespace="dev")), 0)
        not_dev = {"namespaceSelector": {"matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["dev"]}]}}
        self.assertEqual((yield self.calls(not_dev)), 1)
        self.assertEqual((yield self.calls(not_dev, namespace="dev")), 0)

    @defer.inlineCallbacks
    def test_namespace_selector_on_namespaces_and_cluster_objects(self):
        """A namespace is matched by its own (new) labels; other cluster-scoped objects
        always match."""
        prod = {"namespaceSelector": {"matchLabels": {"env": "prod"}},
                "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                           "resources": ["*"]}]}
        labelled = {"metadata": {"name": "new", "labels": {"env": "prod"}}}
        self.assertEqual((yield self.calls(prod, kind=core.NAMESPACE, namespace="",
                                           name="new", obj=labelled)), 1)
        self.assertEqual((yield self.calls(prod, kind=core.NAMESPACE, namespace="",
                                           name="new", obj={"metadata": {"name": "new"}})), 0)
        self.assertEqual((yield self.calls(prod, kind=core.NAMESPACE, namespace="",
                                           name="dev", operation="DELETE",
                                           old={"metadata": {"name": "dev"}})), 0)

    @defer.inlineCallbacks
    def test_object_selector_new_or_old(self):
        selector = {"objectSelector": {"matchLabels": {"watch": "me"}}}
        self.assertEqual((yield self.calls(selector)), 0)
        labelled = {"metadata": {"name": "cm", "namespace": "default",
                                 "labels": {"watch": "me"}}}
        self.assertEqual((yield self.calls(selector, obj=labelled)), 1)
        self.assertEqual((yield self.calls(selector, operation="UPDATE",
                                           old=labelled)), 1)
        exists = {"objectSelector": {"matchExpressions": [
            {"key": "watch", "operator": "DoesNotExist"}]}}
        self.assertEqual((yield self.calls(exists)), 1)


class ConditionTests(WebhookCase):
    @defer.inlineCallbacks
    def calls(self, conditions, policy="Fail", **attributes) -> int:
        self.clear(self.validating_configs)
        self.configure("validating", self.hook(matchConditions=conditions,
                                               failurePolicy=policy))
        before = len(self.reviews())
        yield self.admit(self.attributes(**attributes))
        return len(self.reviews()) - before

    @defer.inlineCallbacks
    def test_all_true_calls_any_false_skips(self):
        true = {"name": "named-cm", "expression": "object.metadata.name == 'cm'"}
        create = {"name": "create", "expression": "request.operation == 'CREATE'"}
        old = {"name": "no-old", "expression": "oldObject == null"}
        false = {"name": "other", "expression": "object.metadata.name == 'other'"}
        self.assertEqual((yield self.calls([true, create, old])), 1)
        self.assertEqual((yield self.calls([true, false])), 0)

    @defer.inlineCallbacks
    def test_false_wins_over_an_error(self):
        error = {"name": "err", "expression": "object.metadata.labels['x'] == 'y'"}
        false = {"name": "other", "expression": "object.metadata.name == 'other'"}
        self.assertEqual((yield self.calls([error, false])), 0)

    @defer.inlineCallbacks
    def test_error_follows_failure_policy(self):
        error = {"name": "err", "expression": "object.metadata.labels['x'] == 'y'"}
        self.assertEqual((yield self.calls([error], policy="Ignore")), 0)
        failure = yield self.assertFailure(self.calls([error]), errors.StatusError)
        self.assertEqual(failure.code, 500)
        self.assertIn('failed calling webhook "hook.example.com": cel evaluation error: '
                      "expression 'object.metadata.labels['x'] == 'y'' resulted in error",
                      failure.message)


class FactoryTests(SynchronousTestCase):
    def test_plugin_factory(self):
        stub = StubServer()
        self.addCleanup(stub.stop)
        c = stub.components
        deps = admission_deps(c.cache, c.informers, c.clock)
        mutating = webhooks.plugin_factory("MutatingAdmissionWebhook")(deps, None)
        validating = webhooks.plugin_factory("ValidatingAdmissionWebhook")(deps, None)
        self.assertEqual((mutating.name, validating.name),
                         ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"))
        # The kinds come from the deps, read through their informers by gvr.
        self.assertIs(mutating.namespaces.kind, core.NAMESPACE)
        self.assertIs(mutating.namespaces.lister,
                      c.informers.informer(core.NAMESPACE.gvr).lister)
        self.assertIs(validating.source.compile_condition, compile_condition)
        self.assertEqual(compile_condition("object.x == 1").source, "object.x == 1")
        with self.assertRaises(ValueError):
            compile_condition("object.x")


class NamespacesTests(SynchronousTestCase):
    """``Namespaces``: a write is of a namespace itself when its kind has the
    Namespace kind's gvr (upstream's ``namespaceResource``), whatever object holds it."""

    def attributes(self, kind):
        return AdmissionAttributes("CREATE", kind, "", "x", "", {}, None, None)

    def test_holds(self):
        namespaces = Namespaces(core.NAMESPACE, FakeLister({}))
        self.assertTrue(namespaces.holds(self.attributes(core.NAMESPACE)))
        self.assertTrue(namespaces.holds(self.attributes(attrs.evolve(core.NAMESPACE))))
        self.assertFalse(namespaces.holds(self.attributes(core.CONFIG_MAP)))
