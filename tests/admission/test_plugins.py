"""
The admission plugin registry (platformd/admission/plugins.py): upstream's order,
upstream's default-enabled set, --enable/--disable-admission-plugins with upstream's
words, and the chain compose builds from the names (the RBAC escalation check not in it).
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.admission.config import (
    AdmissionConfigError, AdmissionConfiguration, read_admission_configuration,
)
from platformd.admission.plugins import (
    ALL_ORDERED_PLUGINS, AdmissionFlagError, Plugins, builtin,
)
from platformd.registry import rbac as rbac_kinds
from platformd.registry.escalation import EscalationCheck

from tests.stub import StubServer


class Named:
    def __init__(self, name, config):
        self.name = name
        self.config = config


def registry(*names) -> Plugins:
    plugins = Plugins()
    for name in names:
        plugins.register(name, lambda deps, config, name=name: Named(name, config))
    return plugins


class FakeConfigs:
    def config_for(self, name):
        return name.encode() if name == "ServiceAccount" else None


class OrderTests(SynchronousTestCase):
    def test_builtin(self):
        """The plugins served, in upstream's AllOrderedPlugins order."""
        self.assertEqual(builtin().registered(), [
            "NamespaceLifecycle", "ServiceAccount", "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook"])
        self.assertEqual(builtin().default_enabled(), builtin().registered())

    def test_order_is_upstreams_not_registration(self):
        """Registered in any order, they run in AllOrderedPlugins' order: webhooks and
        policies last, mutating webhook before the validating policy and webhook."""
        plugins = registry("ValidatingAdmissionWebhook", "ValidatingAdmissionPolicy",
                           "MutatingAdmissionWebhook", "ServiceAccount", "NamespaceLifecycle")
        self.assertEqual(plugins.registered(), [
            "NamespaceLifecycle", "ServiceAccount", "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook"])
        built = plugins.build(["ValidatingAdmissionWebhook", "NamespaceLifecycle"], None)
        self.assertEqual([p.name for p in built],
                         ["NamespaceLifecycle", "ValidatingAdmissionWebhook"])

    def test_upstream_order_constant(self):
        """AllOrderedPlugins as upstream: the deny plugin last, quota before it."""
        self.assertEqual(ALL_ORDERED_PLUGINS[-2:], ("ResourceQuota", "AlwaysDeny"))
        self.assertLess(ALL_ORDERED_PLUGINS.index("NamespaceLifecycle"),
                        ALL_ORDERED_PLUGINS.index("ServiceAccount"))

    def test_unknown_registration_refused(self):
        """Only a name upstream knows has a place in the order."""
        self.assertRaises(ValueError, Plugins().register, "Bogus", lambda d, c: None)

    def test_configuration_handed_to_factory(self):
        """Each factory is given its own configuration (None when there is none)."""
        built = registry("NamespaceLifecycle", "ServiceAccount").build(
            ["NamespaceLifecycle", "ServiceAccount"], None, FakeConfigs())
        self.assertEqual([p.config for p in built], [None, b"ServiceAccount"])


class ConfigurationTests(SynchronousTestCase):
    """--admission-control-config-file's entries reach only the plugins built."""

    def configuration(self, text: str) -> AdmissionConfiguration:
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        path = os.path.join(directory, "admission.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: apiserver.config.platform.io/v1\n"
                    "kind: AdmissionConfiguration\nplugins:\n" + text)
        return read_admission_configuration(path)

    def test_unknown_and_disabled_names_unused(self):
        """Upstream's NewFromPlugins asks its config provider about the enabled plugins
        only: an entry for a plugin that does not exist (NotARealPlugin) or is not
        enabled is never read, even with a path that is missing."""
        configs = self.configuration(
            "- name: NotARealPlugin\n  path: missing.yaml\n"
            "- name: ValidatingAdmissionWebhook\n  path: missing.yaml\n"
            "- name: ServiceAccount\n  configuration: {a: 1}\n")
        built = registry("ServiceAccount", "ValidatingAdmissionWebhook").build(
            ["ServiceAccount"], None, configs)
        self.assertEqual([(p.name, p.config) for p in built],
                         [("ServiceAccount", b'{"a": 1}')])

    def test_refused_configuration(self):
        """A factory refusing its configuration fails the build in InitPlugin's words."""
        def refuse(deps, config):
            raise AdmissionConfigError("bad")
        plugins = Plugins()
        plugins.register("ServiceAccount", refuse)
        e = self.assertRaises(AdmissionConfigError, plugins.build, ["ServiceAccount"], None)
        self.assertEqual(str(e), 'couldn\'t init admission plugin "ServiceAccount": bad')

    def test_webhook_configuration_refused(self):
        """The webhook plugins read theirs (tests/webhooks/test_credentials.py has each
        message): the first refused, in running order, fails the build."""
        configs = self.configuration(
            "- name: ValidatingAdmissionWebhook\n  configuration:\n"
            "    apiVersion: apiserver.config.platform.io/v1\n"
            "    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: relative.kubeconfig\n"
            "- name: MutatingAdmissionWebhook\n  configuration:\n"
            "    apiVersion: apiserver.config.platform.io/v1\n"
            "    kind: WebhookAdmission\n")
        e = self.assertRaises(AdmissionConfigError, StubServer,
                              admission_names=["MutatingAdmissionWebhook",
                                               "ValidatingAdmissionWebhook"],
                              admission_configs=configs)
        self.assertEqual(str(e), 'couldn\'t init admission plugin "MutatingAdmissionWebhook": '
                                 'no kind "WebhookAdmission" is registered for version '
                                 '"apiserver.config.platform.io/v1" in scheme')


class FlagTests(SynchronousTestCase):
    def setUp(self):
        self.plugins = registry("NamespaceLifecycle", "ServiceAccount", "AlwaysDeny",
                                "ValidatingAdmissionWebhook")

    def test_defaults(self):
        """Upstream's default-on plugins; AlwaysDeny (default off) is not."""
        self.assertEqual(self.plugins.enabled(), [
            "NamespaceLifecycle", "ServiceAccount", "ValidatingAdmissionWebhook"])
        self.assertEqual(self.plugins.enabled(), self.plugins.default_enabled())

    def test_disable(self):
        self.assertEqual(self.plugins.enabled(disable=["ServiceAccount"]),
                         ["NamespaceLifecycle", "ValidatingAdmissionWebhook"])

    def test_enable_default_off(self):
        """Enabling one adds it at its place in the order, whatever the flag's order."""
        self.assertEqual(self.plugins.enabled(enable=["AlwaysDeny", "NamespaceLifecycle"]), [
            "NamespaceLifecycle", "ServiceAccount", "ValidatingAdmissionWebhook",
            "AlwaysDeny"])

    def test_unknown_enable(self):
        e = self.assertRaises(AdmissionFlagError, self.plugins.enabled, enable=["Bogus"])
        self.assertEqual(str(e), 'enable-admission-plugins plugin "Bogus" is unknown')

    def test_unknown_disable(self):
        e = self.assertRaises(AdmissionFlagError, self.plugins.enabled, disable=["Bogus"])
        self.assertEqual(str(e), 'disable-admission-plugins plugin "Bogus" is unknown')

    def test_known_upstream_but_not_served(self):
        """A plugin upstream has but this server does not serve is unknown here."""
        e = self.assertRaises(AdmissionFlagError, self.plugins.enabled, enable=["LimitRanger"])
        self.assertEqual(str(e), 'enable-admission-plugins plugin "LimitRanger" is unknown')

    def test_both_enabled_and_disabled(self):
        """Upstream refuses a plugin in both lists."""
        e = self.assertRaises(AdmissionFlagError, self.plugins.enabled,
                              enable=["ServiceAccount", "AlwaysDeny"],
                              disable=["AlwaysDeny", "ServiceAccount"])
        self.assertEqual(str(e), "[AlwaysDeny ServiceAccount] in enable-admission-plugins "
                                 "and disable-admission-plugins overlapped")

    def test_several_errors_aggregated(self):
        """Several errors are one line, as utilerrors.NewAggregate prints them."""
        e = self.assertRaises(AdmissionFlagError, self.plugins.enabled,
                              enable=["A"], disable=["B"])
        self.assertEqual(str(e), '[enable-admission-plugins plugin "A" is unknown, '
                                 'disable-admission-plugins plugin "B" is unknown]')


class ChainTests(SynchronousTestCase):
    def names(self, stub):
        return [p.name for p in stub.components.admission.plugins]

    def test_default_chain(self):
        """compose's default: the default plugins in order."""
        stub = StubServer()
        self.addCleanup(stub.stop)
        names = ["NamespaceLifecycle", "ServiceAccount", "MutatingAdmissionWebhook",
                 "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook"]
        self.assertEqual(self.names(stub), names)
        self.assertEqual(stub.components.admission_names, names)

    def test_webhooks_disabled(self):
        """--disable-admission-plugins takes the webhooks out like any other plugin."""
        names = builtin().enabled(disable=["MutatingAdmissionWebhook",
                                           "ValidatingAdmissionWebhook"])
        stub = StubServer(admission_names=names)
        self.addCleanup(stub.stop)
        self.assertEqual(self.names(stub), ["NamespaceLifecycle", "ServiceAccount",
                                            "ValidatingAdmissionPolicy"])

    def test_escalation_always_in(self):
        """The RBAC escalation check is no plugin: with every admission plugin disabled
        the chain is empty and the four RBAC kinds' stores still make it (no other
        store has a write check)."""
        stub = StubServer(admission_names=[])
        self.addCleanup(stub.stop)
        self.assertEqual(self.names(stub), [])
        rbac = {k.gvr for k in (rbac_kinds.ROLE, rbac_kinds.CLUSTER_ROLE,
                                rbac_kinds.ROLE_BINDING, rbac_kinds.CLUSTER_ROLE_BINDING)}
        for gvr, store in stub.components.stores.items():
            with self.subTest(gvr=gvr):
                if gvr in rbac:
                    self.assertIsInstance(store.write_check, EscalationCheck)
                    self.assertIs(store.write_check.index, stub.components.rbac_index)
                else:
                    self.assertIsNone(store.write_check)

    def test_configured_keeps_names(self):
        """With a configuration, the same plugins."""
        stub = StubServer(admission_names=["ServiceAccount"], admission_configs=FakeConfigs())
        self.addCleanup(stub.stop)
        self.assertEqual(self.names(stub), ["ServiceAccount"])
