"""
CustomResourceDefinition (``apiextensions.platform.io/v1``, cluster-scoped, with a
``status`` subresource): a kind served at run time.  Its shape, defaults (upstream's
``SetDefaults_CustomResourceDefinition``), strategy (``PrepareForCreate``/``Update``:
status the controllers', generation moves with the spec, the storage version recorded in
``status.storedVersions``) and delete (upstream's CRD REST ``Delete``: the cleanup
finalizer and the ``Terminating`` condition, then the controller deletes the objects);
the rules are ``apiextensions/validation.py``, a version's ``openAPIV3Schema`` is
``jsonschemaprops.py``.  Its fields are upstream's Go types' (``types.go``): ``omitempty``
zero values are not kept.
"""

from __future__ import annotations

from platformd.apiextensions import names as crdnames
from platformd.apiextensions import validation
from platformd.model.schema import (
    BOOLEAN, BYTES, INT32, STRING, TIME, ListOf, Prop, Struct,
)
from platformd.registry import deletion
from platformd.registry.kinds import presence
from platformd.registry.kinds import jsonschemaprops
from platformd.registry.kinds.jsonschemaprops import JSON_SCHEMA_PROPS
from platformd.registry.outcomes import Keep, Write
from platformd.registry.resource import ResourceType

PREFIX = jsonschemaprops.PREFIX
PROTO = "platform.apiextensions_apiserver.pkg.apis.apiextensions.v1."


def struct(name, props, doc, **kw) -> Struct:
    return Struct(f"{PREFIX}.{name}", props, doc=doc, **kw)


NAMES = struct("CustomResourceDefinitionNames", {
    "plural": Prop(STRING, "plural is the plural name of the resource to serve.", True),
    "singular": Prop(STRING, "singular is the singular name of the resource.",
                     omit_empty=True),
    "shortNames": Prop(ListOf(STRING), "shortNames are short names for the resource, "
                       "exposed in API discovery documents.", omit_empty=True),
    "kind": Prop(STRING, "kind is the serialized kind of the resource.", True),
    "listKind": Prop(STRING, "listKind is the serialized kind of the list for this resource.",
                     omit_empty=True),
    "categories": Prop(ListOf(STRING), "categories is a list of grouped resources this "
                       "custom resource belongs to (e.g. 'all').", omit_empty=True),
}, "CustomResourceDefinitionNames indicates the names to serve this "
   "CustomResourceDefinition")

SERVICE_REFERENCE = struct("ServiceReference", {
    "namespace": Prop(STRING, "namespace is the namespace of the service.", True),
    "name": Prop(STRING, "name is the name of the service.", True),
    "path": Prop(STRING, "path is an optional URL path at which the webhook will be contacted."),
    "port": Prop(INT32, "port is an optional service port at which the webhook will be "
                 "contacted. Defaults to 443."),
}, "ServiceReference holds a reference to Service.legacy.k8s.io")

WEBHOOK_CLIENT_CONFIG = struct("WebhookClientConfig", {
    "url": Prop(STRING, "url gives the location of the webhook, in standard URL form."),
    "service": Prop(SERVICE_REFERENCE, "service is a reference to the service for this webhook."),
    "caBundle": Prop(BYTES, "caBundle is a PEM encoded CA bundle which will be used to "
                     "validate the webhook's server certificate.", omit_empty=True),
}, "WebhookClientConfig contains the information to make a TLS connection with the webhook.")

CONVERSION = struct("CustomResourceConversion", {
    "strategy": Prop(STRING, "strategy specifies how custom resources are converted between "
                     "versions. Allowed values are: - `\"None\"` ... - `\"Webhook\"` ...", True),
    "webhook": Prop(struct("WebhookConversion", {
        "clientConfig": Prop(WEBHOOK_CLIENT_CONFIG, "clientConfig is the instructions for how "
                             "to call the webhook if strategy is `Webhook`."),
        "conversionReviewVersions": Prop(ListOf(STRING), "conversionReviewVersions is an "
                                         "ordered list of preferred `ConversionReview` versions "
                                         "the Webhook expects.", True),
    }, "WebhookConversion describes how to call a conversion webhook"),
        "webhook describes how to call the conversion webhook."),
}, "CustomResourceConversion describes how to convert different versions of a CR.")

COLUMN = struct("CustomResourceColumnDefinition", {
    "name": Prop(STRING, "name is a human readable name for the column.", True),
    "type": Prop(STRING, "type is an OpenAPI type definition for this column.", True),
    "format": Prop(STRING, "format is an optional OpenAPI type definition for this column.",
                   omit_empty=True),
    "description": Prop(STRING, "description is a human readable description of this column.",
                        omit_empty=True),
    "priority": Prop(INT32, "priority is an integer defining the relative importance of this "
                     "column compared to others.", omit_empty=True),
    "jsonPath": Prop(STRING, "jsonPath is a simple JSON path (i.e. with array notation) which "
                     "is evaluated against each custom resource to produce the value for this "
                     "column.", True),
}, "CustomResourceColumnDefinition specifies a column for server side printing.")

SUBRESOURCES = struct("CustomResourceSubresources", {
    "status": Prop(struct("CustomResourceSubresourceStatus", {}, (
        "CustomResourceSubresourceStatus defines how to serve the status subresource for "
        "CustomResources."), preserve_unknown=True),
        "status indicates the custom resource should serve a `/status` subresource."),
    "scale": Prop(struct("CustomResourceSubresourceScale", {
        "specReplicasPath": Prop(STRING, "specReplicasPath defines the JSON path inside of a "
                                 "custom resource that corresponds to Scale `spec.replicas`.",
                                 True),
        "statusReplicasPath": Prop(STRING, "statusReplicasPath defines the JSON path inside of "
                                   "a custom resource that corresponds to Scale "
                                   "`status.replicas`.", True),
        "labelSelectorPath": Prop(STRING, "labelSelectorPath defines the JSON path inside of a "
                                  "custom resource that corresponds to Scale `status.selector`."),
    }, "CustomResourceSubresourceScale defines how to serve the scale subresource for "
       "CustomResources."), "scale indicates the custom resource should serve a `/scale` "
       "subresource that returns an `autoscaling/v1` Scale object."),
}, "CustomResourceSubresources defines the status and scale subresources for "
   "CustomResources.")

VERSION = struct("CustomResourceDefinitionVersion", {
    "name": Prop(STRING, "name is the version name, e.g. \u201cv1\u201d, \u201cv2beta1\u201d, "
                 "etc.", True),
    "served": Prop(BOOLEAN, "served is a flag enabling/disabling this version from being "
                   "served via REST APIs", True),
    "storage": Prop(BOOLEAN, "storage indicates this version should be used when persisting "
                    "custom resources to storage. There must be exactly one version with "
                    "storage=true.", True),
    "deprecated": Prop(BOOLEAN, "deprecated indicates this version of the custom resource API "
                       "is deprecated.", omit_empty=True),
    "deprecationWarning": Prop(STRING, "deprecationWarning overrides the default warning "
                               "returned to API clients."),
    "schema": Prop(struct("CustomResourceValidation", {
        "openAPIV3Schema": Prop(JSON_SCHEMA_PROPS, "openAPIV3Schema is the OpenAPI v3 schema "
                                "to use for validation and pruning."),
    }, "CustomResourceValidation is a list of validation methods for CustomResources."),
        "schema describes the schema used for validation, pruning, and defaulting of this "
        "version of the custom resource."),
    "subresources": Prop(SUBRESOURCES, "subresources specify what subresources this version "
                         "of the defined custom resource have."),
    "additionalPrinterColumns": Prop(ListOf(COLUMN), "additionalPrinterColumns specifies "
                                     "additional columns returned in Table output.",
                                     omit_empty=True),
    "selectableFields": Prop(ListOf(struct("SelectableField", {
        "jsonPath": Prop(STRING, "jsonPath is a simple JSON path which is evaluated against "
                         "each custom resource to produce a field selector value.", True),
    }, "SelectableField specifies the JSON path of a field that may be used with field "
       "selectors.")), "selectableFields specifies paths to fields that may be used as field "
        "selectors.", omit_empty=True),
}, "CustomResourceDefinitionVersion describes a version for CRD.")

SPEC = struct("CustomResourceDefinitionSpec", {
    "group": Prop(STRING, "group is the API group of the defined custom resource.", True),
    "names": Prop(NAMES, "names specify the resource and kind names for the custom resource.",
                  True),
    "scope": Prop(STRING, "scope indicates whether the defined custom resource is cluster- or "
                  "namespace-scoped. Allowed values are `Cluster` and `Namespaced`.", True),
    "versions": Prop(ListOf(VERSION), "versions is the list of all API versions of the defined "
                     "custom resource.", True),
    "conversion": Prop(CONVERSION, "conversion defines conversion settings for the CRD."),
    "preserveUnknownFields": Prop(BOOLEAN, "preserveUnknownFields indicates that object fields "
                                  "which are not specified in the OpenAPI schema should be "
                                  "preserved when persisting to storage.", omit_empty=True),
}, "CustomResourceDefinitionSpec describes how a user wants their resource to appear")

CONDITION = struct("CustomResourceDefinitionCondition", {
    "type": Prop(STRING, "type is the type of the condition. Types include Established, "
                 "NamesAccepted and Terminating.", True),
    "status": Prop(STRING, "status is the status of the condition. Can be True, False, "
                   "Unknown.", True),
    "lastTransitionTime": Prop(TIME, "lastTransitionTime last time the condition transitioned "
                               "from one status to another."),
    "reason": Prop(STRING, "reason is a unique, one-word, CamelCase reason for the condition's "
                   "last transition.", omit_empty=True),
    "message": Prop(STRING, "message is a human-readable message indicating details about "
                    "last transition.", omit_empty=True),
}, "CustomResourceDefinitionCondition contains details for the current condition of this pod.")

STATUS = struct("CustomResourceDefinitionStatus", {
    "conditions": Prop(ListOf(CONDITION, "map", ("type",)), "conditions indicate state for "
                       "particular aspects of a CustomResourceDefinition"),
    "acceptedNames": Prop(NAMES, "acceptedNames are the names that are actually being used to "
                          "serve discovery."),
    "storedVersions": Prop(ListOf(STRING), "storedVersions lists all versions of "
                           "CustomResources that were ever persisted."),
}, "CustomResourceDefinitionStatus indicates the state of the CustomResourceDefinition")


def _default(obj: dict) -> None:
    """``SetDefaults_CustomResourceDefinitionSpec`` and friends."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict):
        kind = names.get("kind") or ""
        if not names.get("singular") and kind:
            names["singular"] = kind.lower()
        if not names.get("listKind") and kind:
            names["listKind"] = kind + "List"
    if spec.get("conversion") is None:
        spec["conversion"] = {"strategy": "None"}
    service = (((spec.get("conversion") or {}).get("webhook") or {}).get("clientConfig")
               or {}).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443
    status = obj.get("status")
    if isinstance(status, dict):
        accepted = status.get("acceptedNames")
        if isinstance(accepted, dict) and accepted.get("kind") and not accepted.get("listKind"):
            accepted["listKind"] = accepted["kind"] + "List"


def _record_storage(obj: dict) -> None:
    """The storage version joins ``status.storedVersions`` (upstream's strategy)."""
    version = crdnames.storage_version(obj)
    if not version:
        return
    status = obj.setdefault("status", {})
    stored = status.setdefault("storedVersions", [])
    if version not in stored:
        stored.append(version)


def _prepare_for_create(obj: dict) -> None:
    obj["status"] = {}
    obj.setdefault("metadata", {})["generation"] = 1
    _default(obj)
    _record_storage(obj)


def _prepare_for_update(new: dict, old: dict) -> None:
    generation = (old.get("metadata") or {}).get("generation") or 1
    _default(new)
    if new.get("spec") != old.get("spec"):
        generation += 1
    new.setdefault("metadata", {})["generation"] = generation
    _record_storage(new)


TERMINATING_PENDING = {
    "type": crdnames.TERMINATING, "status": "True", "reason": "InstanceDeletionPending",
    "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will "
               "begin soon"}


def _decide_delete(kind, current, options: dict, now: str):
    """Upstream's CRD REST ``Delete``: a definition is first marked terminating, with the
    cleanup finalizer and the ``Terminating`` condition; the finalizer controller deletes
    its objects and then lets it go."""
    obj = current.obj
    deletion.check_preconditions(kind, obj, options.get("preconditions"))
    meta = obj["metadata"]
    if meta.get("deletionTimestamp"):
        return Keep(obj)
    new = current.mutable()
    new_meta = new["metadata"]
    new_meta["deletionTimestamp"] = now
    finalizers = list(new_meta.get("finalizers") or ())
    if crdnames.CLEANUP_FINALIZER not in finalizers:
        finalizers.append(crdnames.CLEANUP_FINALIZER)
    new_meta["finalizers"] = finalizers
    crdnames.set_condition(new, TERMINATING_PENDING, now)
    return Write(new)


KIND = ResourceType(
    group=crdnames.GROUP, version=crdnames.VERSION, kind="CustomResourceDefinition",
    plural="customresourcedefinitions", singular="customresourcedefinition",
    namespaced=False, fields={
        "spec": Prop(SPEC, "spec describes how the user wants the resources to appear", True),
        "status": Prop(STATUS, "status indicates the actual state of the "
                       "CustomResourceDefinition"),
    }, doc=("CustomResourceDefinition represents a resource that should be exposed on the API "
            "server.  Its name MUST be in the format <.spec.name>.<.spec.group>."),
    short_names=("crd", "crds"), categories=("api-extensions",), name_rule_for=validation.name_rule,
    has_status=True, default=_default, validate=validation.validate,
    validate_update=validation.validate_update,
    prepare_for_create=_prepare_for_create, prepare_for_update=_prepare_for_update,
    decide_delete=_decide_delete, definition_prefix=PREFIX,
    presence=presence(PROTO, "CustomResourceDefinition", {
        # Read off apiextensions/v1 types.go, types_jsonschema.go and generated.pb.go
        # (v0.36.3): non-pointer strings, ints and bools and non-pointer structs.
        "CustomResourceDefinition": "metadata spec status",
        "CustomResourceDefinitionSpec": "group names scope preserveUnknownFields?",
        "CustomResourceDefinitionNames": "plural singular? kind listKind?",
        "CustomResourceDefinitionVersion": "name served storage deprecated?",
        "CustomResourceValidation": "",
        "CustomResourceSubresources": "",
        "CustomResourceSubresourceStatus": "",
        "CustomResourceSubresourceScale": "specReplicasPath statusReplicasPath",
        "CustomResourceColumnDefinition": "name type format? description? priority? jsonPath",
        "SelectableField": "jsonPath",
        "CustomResourceConversion": "strategy",
        "WebhookConversion": "",
        "WebhookClientConfig": "",
        "ServiceReference": "namespace name",
        "CustomResourceDefinitionStatus": "acceptedNames observedGeneration?",
        "CustomResourceDefinitionCondition": "type status lastTransitionTime? reason? "
                                             "message? observedGeneration?",
        "JSONSchemaProps": "id? schema? description? type? format? title? "
                           "exclusiveMaximum? exclusiveMinimum? pattern? uniqueItems? "
                           "nullable? xKubernetesEmbeddedResource? xKubernetesIntOrString?",
        "ValidationRule": "rule message? messageExpression? fieldPath?",
        "ExternalDocumentation": "description? url?",
        # The JSON wrapper and the unions have their own JSON form (codecs/jsonforms.py).
        "JSON": "",
        "JSONSchemaPropsOrArray": "",
        "JSONSchemaPropsOrBool": "allows",
        "JSONSchemaPropsOrStringArray": "",
        # The conversion webhooks' messages.
        "ConversionReview": "",
        "ConversionRequest": "uid desiredAPIVersion",
        "ConversionResponse": "uid result",
    }))
