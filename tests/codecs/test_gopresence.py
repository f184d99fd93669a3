"""
``gopresence.fields`` pinned for every message: the table as it stood before each kind's
messages moved to the kind's own module (``ResourceType.presence``), so moving entries
around changes no message's fields.
"""

from twisted.trial.unittest import SynchronousTestCase

from platformd.codecs import gopresence
from platformd.registry.catalog import Catalog, builtin
from platformd.registry.kinds import pod

#: ``gopresence.fields(name)`` of every message, frozen.
EXPECTED = {
    "platform.api.admissionregistration.v1.AuditAnnotation": [("key", False), ("valueExpression", False)],
    "platform.api.admissionregistration.v1.ExpressionWarning": [("fieldRef", False), ("warning", False)],
    "platform.api.admissionregistration.v1.MatchCondition": [("name", False), ("expression", False)],
    "platform.api.admissionregistration.v1.MatchResources": [],
    "platform.api.admissionregistration.v1.MutatingWebhook": [("name", False), ("clientConfig", False)],
    "platform.api.admissionregistration.v1.MutatingWebhookConfiguration": [("metadata", False)],
    "platform.api.admissionregistration.v1.MutatingWebhookConfigurationList": [("metadata", False)],
    "platform.api.admissionregistration.v1.NamedRuleWithOperations": [("ruleWithOperations", False)],
    "platform.api.admissionregistration.v1.ParamKind": [("apiVersion", True), ("kind", True)],
    "platform.api.admissionregistration.v1.ParamRef": [("name", True), ("namespace", True)],
    "platform.api.admissionregistration.v1.Rule": [],
    "platform.api.admissionregistration.v1.RuleWithOperations": [("rule", False)],
    "platform.api.admissionregistration.v1.ServiceReference": [("namespace", False), ("name", False)],
    "platform.api.admissionregistration.v1.TypeChecking": [],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicy": [("metadata", False), ("spec", False), ("status", False)],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding": [("metadata", False), ("spec", False)],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingList": [("metadata", False)],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": [("policyName", True)],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicyList": [("metadata", False)],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": [],
    "platform.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus": [("observedGeneration", True)],
    "platform.api.admissionregistration.v1.ValidatingWebhook": [("name", False), ("clientConfig", False)],
    "platform.api.admissionregistration.v1.ValidatingWebhookConfiguration": [("metadata", False)],
    "platform.api.admissionregistration.v1.ValidatingWebhookConfigurationList": [("metadata", False)],
    "platform.api.admissionregistration.v1.Validation": [("expression", False), ("message", True), ("messageExpression", True)],
    "platform.api.admissionregistration.v1.Variable": [("name", False), ("expression", False)],
    "platform.api.admissionregistration.v1.WebhookClientConfig": [],
    "platform.api.authentication.v1.BoundObjectReference": [("kind", True), ("apiVersion", True),
        ("name", True), ("uid", True)],
    "platform.api.authentication.v1.ExtraValue": [],
    "platform.api.authentication.v1.SelfSubjectReview": [("metadata", False), ("status", False)],
    "platform.api.authentication.v1.SelfSubjectReviewStatus": [("userInfo", False)],
    "platform.api.authentication.v1.TokenRequest": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authentication.v1.TokenRequestSpec": [],
    "platform.api.authentication.v1.TokenRequestStatus": [("token", False),
        ("expirationTimestamp", True)],
    "platform.api.authentication.v1.TokenReview": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authentication.v1.TokenReviewSpec": [("token", True)],
    "platform.api.authentication.v1.TokenReviewStatus": [("authenticated", True), ("user", False),
        ("error", True)],
    "platform.api.authentication.v1.UserInfo": [("username", True), ("uid", True)],
    "platform.api.authorization.v1.ExtraValue": [],
    "platform.api.authorization.v1.LocalSubjectAccessReview": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authorization.v1.NonResourceAttributes": [("path", True), ("verb", True)],
    "platform.api.authorization.v1.NonResourceRule": [],
    "platform.api.authorization.v1.ResourceAttributes": [("namespace", True), ("verb", True),
        ("group", True), ("version", True), ("resource", True), ("subresource", True),
        ("name", True)],
    "platform.api.authorization.v1.ResourceRule": [],
    "platform.api.authorization.v1.SelfSubjectAccessReview": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authorization.v1.SelfSubjectAccessReviewSpec": [],
    "platform.api.authorization.v1.SelfSubjectRulesReview": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authorization.v1.SelfSubjectRulesReviewSpec": [("namespace", True)],
    "platform.api.authorization.v1.SubjectAccessReview": [("metadata", False), ("spec", False),
        ("status", False)],
    "platform.api.authorization.v1.SubjectAccessReviewSpec": [("user", True), ("uid", True)],
    "platform.api.authorization.v1.SubjectAccessReviewStatus": [("allowed", False), ("denied", True),
        ("reason", True), ("evaluationError", True)],
    "platform.api.authorization.v1.SubjectRulesReviewStatus": [("incomplete", False),
        ("evaluationError", True)],
    "platform.api.core.v1.ConfigMap": [("metadata", False)],
    "platform.api.core.v1.ConfigMapList": [("metadata", False)],
    "platform.api.core.v1.Container": [("name", False), ("image", True), ("workingDir", True),
        ("resources", False), ("terminationMessagePath", True), ("imagePullPolicy", True),
        ("stdin", True), ("stdinOnce", True), ("tty", True),
        ("terminationMessagePolicy", True)],
    "platform.api.core.v1.ContainerPort": [("name", True), ("hostPort", True),
        ("containerPort", False), ("protocol", True), ("hostIP", True)],
    "platform.api.core.v1.ContainerState": [],
    "platform.api.core.v1.ContainerStateRunning": [("startedAt", True)],
    "platform.api.core.v1.ContainerStateTerminated": [("exitCode", False), ("signal", True),
        ("reason", True), ("message", True), ("startedAt", True), ("finishedAt", True),
        ("containerID", True)],
    "platform.api.core.v1.ContainerStateWaiting": [("reason", True), ("message", True)],
    "platform.api.core.v1.ContainerStatus": [("name", False), ("state", False),
        ("lastState", False), ("ready", False), ("restartCount", False), ("image", False),
        ("imageID", False), ("containerID", True)],
    "platform.api.core.v1.EnvVar": [("name", False), ("value", True)],
    "platform.api.core.v1.LocalObjectReference": [("name", True)],
    "platform.api.core.v1.Namespace": [("metadata", False), ("spec", False), ("status", False)],
    "platform.api.core.v1.NamespaceCondition": [("type", False), ("status", False),
        ("lastTransitionTime", True), ("reason", True), ("message", True)],
    "platform.api.core.v1.NamespaceList": [("metadata", False)],
    "platform.api.core.v1.NamespaceSpec": [],
    "platform.api.core.v1.NamespaceStatus": [("phase", True)],
    "platform.api.core.v1.ObjectReference": [("kind", True), ("namespace", True),
        ("name", True), ("uid", True), ("apiVersion", True), ("resourceVersion", True),
        ("fieldPath", True)],
    "platform.api.core.v1.Pod": [("metadata", False), ("spec", False), ("status", False)],
    "platform.api.core.v1.PodCondition": [("type", False), ("status", False),
        ("lastProbeTime", True), ("lastTransitionTime", True), ("reason", True),
        ("message", True), ("observedGeneration", True)],
    "platform.api.core.v1.PodIP": [("ip", False)],
    "platform.api.core.v1.PodList": [("metadata", False)],
    "platform.api.core.v1.PodSpec": [("restartPolicy", True), ("dnsPolicy", True),
        ("serviceAccountName", True), ("serviceAccount", True), ("nodeName", True),
        ("hostNetwork", True), ("hostPID", True), ("hostIPC", True), ("hostname", True),
        ("subdomain", True), ("schedulerName", True), ("priorityClassName", True)],
    "platform.api.core.v1.PodStatus": [("phase", True), ("message", True), ("reason", True),
        ("hostIP", True), ("podIP", True), ("qosClass", True), ("nominatedNodeName", True),
        ("resize", True), ("observedGeneration", True)],
    "platform.api.core.v1.ResourceRequirements": [],
    "platform.api.core.v1.Secret": [("metadata", False), ("type", True)],
    "platform.api.core.v1.SecretList": [("metadata", False)],
    "platform.api.core.v1.ServiceAccount": [("metadata", False)],
    "platform.api.core.v1.ServiceAccountList": [("metadata", False)],
    # Issue 32: Event (core and events/v1), Lease.
    "platform.api.core.v1.Event": [("metadata", False), ("involvedObject", False),
        ("reason", True), ("message", True), ("source", False), ("firstTimestamp", True),
        ("lastTimestamp", True), ("count", True), ("type", True), ("eventTime", True),
        ("action", True), ("reportingComponent", False), ("reportingInstance", False)],
    "platform.api.core.v1.EventList": [("metadata", False)],
    "platform.api.core.v1.EventSeries": [("count", True), ("lastObservedTime", True)],
    "platform.api.core.v1.EventSource": [("component", True), ("host", True)],
    "platform.api.events.v1.Event": [("metadata", False), ("eventTime", True),
        ("reportingController", True), ("reportingInstance", True), ("action", True),
        ("reason", True), ("regarding", False), ("note", True), ("type", True),
        ("deprecatedSource", False), ("deprecatedFirstTimestamp", True),
        ("deprecatedLastTimestamp", True), ("deprecatedCount", True)],
    "platform.api.events.v1.EventList": [("metadata", False)],
    "platform.api.events.v1.EventSeries": [("count", False), ("lastObservedTime", True)],
    "platform.api.coordination.v1.Lease": [("metadata", False), ("spec", False)],
    "platform.api.coordination.v1.LeaseList": [("metadata", False)],
    "platform.api.coordination.v1.LeaseSpec": [],
    "platform.api.rbac.v1.AggregationRule": [],
    "platform.api.rbac.v1.ClusterRole": [("metadata", False)],
    "platform.api.rbac.v1.ClusterRoleBinding": [("metadata", False), ("roleRef", False)],
    "platform.api.rbac.v1.ClusterRoleBindingList": [("metadata", False)],
    "platform.api.rbac.v1.ClusterRoleList": [("metadata", False)],
    "platform.api.rbac.v1.PolicyRule": [],
    "platform.api.rbac.v1.Role": [("metadata", False)],
    "platform.api.rbac.v1.RoleBinding": [("metadata", False), ("roleRef", False)],
    "platform.api.rbac.v1.RoleBindingList": [("metadata", False)],
    "platform.api.rbac.v1.RoleList": [("metadata", False)],
    "platform.api.rbac.v1.RoleRef": [("apiGroup", False), ("kind", False), ("name", False)],
    "platform.api.rbac.v1.Subject": [("kind", False), ("apiGroup", True), ("name", False),
        ("namespace", True)],
    "platform.apimachinery.pkg.api.resource.Quantity": [],
    "platform.apimachinery.pkg.apis.meta.v1.APIGroup": [("name", False),
        ("preferredVersion", False)],
    "platform.apimachinery.pkg.apis.meta.v1.APIGroupList": [],
    "platform.apimachinery.pkg.apis.meta.v1.APIResource": [("name", False),
        ("namespaced", False), ("kind", False), ("singularName", False), ("group", True),
        ("version", True), ("storageVersionHash", True)],
    "platform.apimachinery.pkg.apis.meta.v1.APIResourceList": [("groupVersion", False)],
    "platform.apimachinery.pkg.apis.meta.v1.APIVersions": [],
    "platform.apimachinery.pkg.apis.meta.v1.DeleteOptions": [],
    "platform.apimachinery.pkg.apis.meta.v1.FieldsV1": [],
    "platform.apimachinery.pkg.apis.meta.v1.GroupVersionForDiscovery": [("groupVersion", False),
        ("version", False)],
    "platform.apimachinery.pkg.apis.meta.v1.LabelSelector": [],
    "platform.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement": [("key", False),
        ("operator", False)],
    "platform.apimachinery.pkg.apis.meta.v1.ListMeta": [("selfLink", True),
        ("resourceVersion", True), ("continue", True)],
    "platform.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry": [("manager", True),
        ("operation", True), ("apiVersion", True), ("fieldsType", True), ("subresource", True)],
    "platform.apimachinery.pkg.apis.meta.v1.ObjectMeta": [("name", True),
        ("generateName", True), ("namespace", True), ("selfLink", True), ("uid", True),
        ("resourceVersion", True), ("generation", True), ("creationTimestamp", True)],
    "platform.apimachinery.pkg.apis.meta.v1.OwnerReference": [("apiVersion", False),
        ("kind", False), ("name", False), ("uid", False)],
    "platform.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata": [("metadata", False)],
    "platform.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList": [("metadata", False)],
    "platform.apimachinery.pkg.apis.meta.v1.Preconditions": [],
    "platform.apimachinery.pkg.apis.meta.v1.ServerAddressByClientCIDR": [("clientCIDR", False),
        ("serverAddress", False)],
    "platform.apimachinery.pkg.apis.meta.v1.ShardInfo": [("selector", False)],
    "platform.apimachinery.pkg.apis.meta.v1.Condition": [("type", False), ("status", False),
        ("observedGeneration", True), ("lastTransitionTime", True), ("reason", False),
        ("message", False)],
    "platform.apimachinery.pkg.apis.meta.v1.Status": [("metadata", False), ("status", True),
        ("message", True), ("reason", True), ("code", True)],
    "platform.apimachinery.pkg.apis.meta.v1.StatusCause": [("reason", True),
        ("message", True), ("field", True)],
    "platform.apimachinery.pkg.apis.meta.v1.StatusDetails": [("name", True), ("group", True),
        ("kind", True), ("uid", True), ("retryAfterSeconds", True)],
    "platform.apimachinery.pkg.apis.meta.v1.Time": [],
    "platform.apimachinery.pkg.apis.meta.v1.MicroTime": [],
    "platform.apimachinery.pkg.apis.meta.v1.Verbs": [],
    "platform.apimachinery.pkg.apis.meta.v1.WatchEvent": [("type", False), ("object", False)],
    "platform.apimachinery.pkg.runtime.RawExtension": [],
    "platform.apimachinery.pkg.runtime.TypeMeta": [("apiVersion", True), ("kind", True)],
    "platform.apimachinery.pkg.runtime.Unknown": [("typeMeta", False),
        ("contentEncoding", False), ("contentType", False)],
    # Service, Endpoints (core), EndpointSlice (discovery), IntOrString (issue 32).
    "platform.api.core.v1.ClientIPConfig": [],
    "platform.api.core.v1.EndpointAddress": [("ip", False), ("hostname", True)],
    "platform.api.core.v1.EndpointPort": [("name", True), ("port", False), ("protocol", True)],
    "platform.api.core.v1.EndpointSubset": [],
    "platform.api.core.v1.Endpoints": [("metadata", False)],
    "platform.api.core.v1.EndpointsList": [("metadata", False)],
    "platform.api.core.v1.LoadBalancerIngress": [("ip", True), ("hostname", True)],
    "platform.api.core.v1.LoadBalancerStatus": [],
    "platform.api.core.v1.PortStatus": [("port", False), ("protocol", False)],
    "platform.api.core.v1.Service": [("metadata", False), ("spec", False), ("status", False)],
    "platform.api.core.v1.ServiceList": [("metadata", False)],
    "platform.api.core.v1.ServicePort": [("name", True), ("protocol", True), ("port", False), ("targetPort", False), ("nodePort", True)],
    "platform.api.core.v1.ServiceSpec": [("clusterIP", True), ("type", True), ("sessionAffinity", True), ("loadBalancerIP", True), ("externalName", True), ("externalTrafficPolicy", True), ("healthCheckNodePort", True), ("publishNotReadyAddresses", True)],
    "platform.api.core.v1.ServiceStatus": [("loadBalancer", False)],
    "platform.api.core.v1.SessionAffinityConfig": [],
    "platform.api.discovery.v1.Endpoint": [("conditions", False)],
    "platform.api.discovery.v1.EndpointConditions": [],
    "platform.api.discovery.v1.EndpointHints": [],
    "platform.api.discovery.v1.EndpointPort": [],
    "platform.api.discovery.v1.EndpointSlice": [("metadata", False), ("addressType", False)],
    "platform.api.discovery.v1.EndpointSliceList": [("metadata", False)],
    "platform.api.discovery.v1.ForNode": [("name", False)],
    "platform.api.discovery.v1.ForZone": [("name", False)],
    "platform.apimachinery.pkg.util.intstr.IntOrString": [],
}


class FieldsTests(SynchronousTestCase):
    def setUp(self):
        builtin()  # registers the built-in kinds' entries

    def test_every_message_unchanged(self):
        """Every message's always-written fields are as frozen, and no others exist."""
        self.assertEqual({name: gopresence.fields(name) for name in gopresence.ALWAYS},
                         EXPECTED)

    def test_kinds_own_their_messages(self):
        """The core and RBAC messages' entries are exactly the built-in kinds' presence."""
        owned = {}
        for kind in builtin().kinds:
            owned.update(kind.presence)
            for subresource in kind.subresources.values():  # serviceaccounts/token
                owned.update(subresource.presence)
        self.assertEqual(sorted(owned),
                         sorted(n for n in EXPECTED if n.startswith("platform.api.")))


class RegisterTests(SynchronousTestCase):
    def setUp(self):
        saved = dict(gopresence.ALWAYS)
        self.addCleanup(lambda: (gopresence.ALWAYS.clear(), gopresence.ALWAYS.update(saved)))

    def test_catalog_add_registers(self):
        """Adding a kind to a catalog registers its messages; adding it again is a no-op."""
        for name in pod.KIND.presence:
            gopresence.ALWAYS.pop(name)
        Catalog([pod.KIND])
        Catalog([pod.KIND])
        for name in pod.KIND.presence:
            self.assertEqual(gopresence.fields(name), EXPECTED[name])

    def test_conflict(self):
        """A different entry for a known message is refused, and nothing is registered."""
        with self.assertRaises(ValueError):
            gopresence.register({"platform.test.New": "a",
                                 "platform.api.core.v1.Pod": "metadata"})
        self.assertNotIn("platform.test.New", gopresence.ALWAYS)
        self.assertEqual(gopresence.fields("platform.api.core.v1.Pod"),
                         EXPECTED["platform.api.core.v1.Pod"])
