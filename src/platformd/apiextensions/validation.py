"""
A CustomResourceDefinition's validation, in upstream's order and words
(``apiextensions/validation/validation.go``: ``ValidateCustomResourceDefinition``,
``...Update``, ``...Status``).  Paths are upstream's internal ones: a schema, the
subresources or the printer columns every version shares are reported at
``spec.validation.openAPIV3Schema``, ``spec.subresources`` and
``spec.additionalPrinterColumns`` (upstream's v1 → internal conversion lifts what every
version has in common to the top), else per version.
"""

from __future__ import annotations

import re

from platformd.apiextensions import jsonpath, schemas
from platformd.apiextensions.names import (
    APPROVAL_ANNOTATION, ESTABLISHED, PROTECTED_SUFFIXES, condition_true,
)
from platformd.model import fielderrors as fe
from platformd.model.meta import dns_subdomain

DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_RE = re.compile(DNS1035_LABEL + r"\Z")
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
    "with an alphabetic character, and end with an alphanumeric character (e.g. "
    f"'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL}')")
PRINTER_TYPES = ("boolean", "date", "integer", "number", "string")
PRINTER_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64",
                   "password")
SCOPES = ("Cluster", "Namespaced")
STRATEGIES = ("None", "Webhook")
REVIEW_VERSIONS = ("v1", "v1beta1")


def dns1035(value: str) -> list:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1035_RE.match(value):
        problems.append(DNS1035_MESSAGE)
    return problems


def name_rule(crd: dict):
    """metadata.name: a DNS subdomain, and ``<plural>.<group>``."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    required = f"{names.get('plural') or ''}.{spec.get('group') or ''}"

    def problems(name: str) -> list:
        out = dns_subdomain(name)
        if name != required:
            out.append('must be spec.names.plural+"."+spec.group')
        return out
    return problems


def _enum(path: str, value, allowed) -> list:
    if not value:
        return [fe.required(path, "")]
    if value not in allowed:
        return [fe.not_supported(path, value, allowed)]
    return []


def _go_versions(versions: list) -> fe.GoValue:
    """``spec.Versions`` as field.Error shows the internal slice (Go field names)."""
    shown = []
    for v in versions:
        shown.append({
            "Name": v.get("name") or "", "Served": bool(v.get("served")),
            "Storage": bool(v.get("storage")), "Deprecated": bool(v.get("deprecated")),
            "DeprecationWarning": v.get("deprecationWarning"), "Schema": None,
            "Subresources": None, "AdditionalPrinterColumns": None,
            "SelectableFields": None})
    return fe.go_json(shown)


def _shared(versions: list, field: str):
    """``(True, value)`` when every version has the same ``field`` (lifted to the top)."""
    values = [v.get(field) for v in versions]
    if values and all(x == values[0] for x in values):
        return True, values[0]
    return False, None


def validate(crd: dict) -> list:
    """Every cause for ``crd`` as a new definition (after metadata, which the store checks
    with ``name_rule``)."""
    causes = validate_spec(crd.get("spec") or {})
    causes += validate_status(crd.get("status") or {})
    causes += validate_stored_versions(crd)
    causes += validate_approval(crd)
    return causes


def validate_update(new: dict, old: dict) -> list:
    """What an update may not change (``ValidateCustomResourceDefinitionSpecUpdate``)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes = []
    if condition_true(old, ESTABLISHED):
        if spec.get("scope") != old_spec.get("scope"):
            causes.append(_immutable("spec.scope", spec.get("scope")))
        if (spec.get("names") or {}).get("kind") != (old_spec.get("names") or {}).get("kind"):
            causes.append(_immutable("spec.names.kind", (spec.get("names") or {}).get("kind")))
    if spec.get("group") != old_spec.get("group"):
        causes.append(_immutable("spec.group", spec.get("group")))
    if (spec.get("names") or {}).get("plural") != (old_spec.get("names") or {}).get("plural"):
        causes.append(_immutable("spec.names.plural", (spec.get("names") or {}).get("plural")))
    return causes


def _immutable(path: str, value) -> object:
    return fe.invalid(path, value or "", "field is immutable")


def validate_approval(crd: dict) -> list:
    group = (crd.get("spec") or {}).get("group") or ""
    if not any(group == s or group.endswith("." + s) for s in PROTECTED_SUFFIXES):
        return []
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    if APPROVAL_ANNOTATION in annotations:
        return []
    return [fe.invalid(f"metadata.annotations[{APPROVAL_ANNOTATION}]", "",
                       f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}"')]


def validate_spec(spec: dict) -> list:
    causes = []
    group = spec.get("group") or ""
    if not group:
        causes.append(fe.required("spec.group", ""))
    elif dns_subdomain(group):
        causes.append(fe.invalid("spec.group", group, ",".join(dns_subdomain(group))))
    elif len(group.split(".")) < 2:
        causes.append(fe.invalid("spec.group", group, "should be a domain with at least one dot"))
    causes += _enum("spec.scope", spec.get("scope"), SCOPES)
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict)]
    schema_shared, _ = _shared(versions, "schema")
    sub_shared, _ = _shared(versions, "subresources")
    cols_shared, _ = _shared(versions, "additionalPrinterColumns")
    storage = 0
    seen: set = set()
    unique = True
    for i, version in enumerate(versions):
        name = version.get("name") or ""
        if version.get("storage"):
            storage += 1
        if name in seen:
            unique = False
        seen.add(name)
        problems = dns1035(name)
        if problems:
            causes.append(fe.invalid(f"spec.versions[{i}].name", name, ",".join(problems)))
    if not unique:
        causes.append(fe.invalid("spec.versions", _go_versions(versions),
                                 "must contain unique version names"))
    if storage != 1:
        causes.append(fe.invalid("spec.versions", _go_versions(versions),
                                 "must have exactly one version marked as storage version"))
    names = spec.get("names") or {}
    for field in ("plural", "singular", "kind", "listKind"):
        if not names.get(field):
            causes.append(fe.required(f"spec.names.{field}", ""))
    causes += validate_names(names, "spec.names")
    causes += _validate_conversion(spec.get("conversion"))
    if spec.get("preserveUnknownFields"):
        causes.append(fe.invalid(
            "spec.preserveUnknownFields", True, "cannot set to true, set "
            "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
    # Per version: subresources, columns, schema (each at the top when shared).
    for i, version in enumerate(versions):
        at = f"spec.versions[{i}]"
        if not (sub_shared and i > 0):
            causes += validate_subresources(
                version.get("subresources"),
                "spec.subresources" if sub_shared else f"{at}.subresources")
        if not (cols_shared and i > 0):
            base = "spec.additionalPrinterColumns" if cols_shared \
                else f"{at}.additionalPrinterColumns"
            for j, column in enumerate(version.get("additionalPrinterColumns") or ()):
                causes += validate_column(column or {}, f"{base}[{j}]")
    for i, version in enumerate(versions):
        if schema_shared and i > 0:
            break
        at = "spec.validation.openAPIV3Schema" if schema_shared \
            else f"spec.versions[{i}].schema.openAPIV3Schema"
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        if openapi is None:
            causes.append(fe.required(at, "schemas are required"))
            continue
        causes += schemas.checked(openapi, at,
                                  "status" in (version.get("subresources") or {}))
    return causes


def _validate_conversion(conversion) -> list:
    if conversion is None:
        return []
    causes = _enum("spec.conversion.strategy", conversion.get("strategy"), STRATEGIES)
    webhook = conversion.get("webhook") or {}
    client = webhook.get("clientConfig")
    review = webhook.get("conversionReviewVersions") or []
    if conversion.get("strategy") == "Webhook":
        if client is None:
            causes.append(fe.required("spec.conversion.webhookClientConfig",
                                      "required when strategy is set to Webhook"))
        else:
            causes += _validate_client(client, "spec.conversion.webhookClientConfig")
        if not review:
            causes.append(fe.required("spec.conversion.conversionReviewVersions",
                                      "must include at least one of v1, v1beta1"))
        elif not any(v in REVIEW_VERSIONS for v in review):
            causes.append(fe.invalid("spec.conversion.conversionReviewVersions",
                                     fe.GoValue("[" + " ".join(review) + "]"),
                                     "must include at least one of v1, v1beta1"))
    else:
        if client is not None:
            causes.append(fe.forbidden("spec.conversion.webhookClientConfig",
                                       "should not be set when strategy is not set to Webhook"))
        if review:
            causes.append(fe.forbidden("spec.conversion.conversionReviewVersions",
                                       "should not be set when strategy is not set to Webhook"))
    return causes


def _validate_client(client: dict, path: str) -> list:
    url, service = client.get("url"), client.get("service")
    if url is None and service is None:
        return [fe.required(path, "exactly one of url or service is required")]
    if url is not None and service is not None:
        return [fe.required(path, "exactly one of url or service is required")]
    if url is not None and not url.startswith("https://"):
        return [fe.invalid(f"{path}.url", url, "'https' is the only allowed URL scheme")]
    return []


def validate_names(names: dict, path: str) -> list:
    """``ValidateCustomResourceDefinitionNames`` (spec.names, status.acceptedNames)."""
    causes = []
    for field in ("plural", "singular"):
        value = names.get(field) or ""
        if value and dns1035(value):
            causes.append(fe.invalid(f"{path}.{field}", value, ",".join(dns1035(value))))
    for field in ("kind", "listKind"):
        value = names.get(field) or ""
        if value and dns1035(value.lower()):
            causes.append(fe.invalid(
                f"{path}.{field}", value, "may have mixed case, but should otherwise match: "
                + ",".join(dns1035(value.lower()))))
    for i, short in enumerate(names.get("shortNames") or ()):
        if dns1035(short):
            causes.append(fe.invalid(f"{path}.shortNames[{i}]", short, ",".join(dns1035(short))))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(fe.invalid(f"{path}.listKind", names["listKind"],
                                 "kind and listKind may not be the same"))
    for i, category in enumerate(names.get("categories") or ()):
        if dns1035(category):
            causes.append(fe.invalid(f"{path}.categories[{i}]", category,
                                     ",".join(dns1035(category))))
    return causes


def validate_status(status: dict) -> list:
    return validate_names(status.get("acceptedNames") or {}, "status.acceptedNames")


def validate_stored_versions(crd: dict) -> list:
    stored = list((crd.get("status") or {}).get("storedVersions") or ())
    versions = (crd.get("spec") or {}).get("versions") or ()
    path = "status.storedVersions"
    if not stored:
        return [fe.invalid(path, fe.GoValue("[]"), "must have at least one stored version")]
    causes = []
    remaining = {v: i for i, v in enumerate(stored)}
    for version in versions:
        name = version.get("name")
        if version.get("storage") and name not in remaining:
            causes.append(fe.invalid(path, fe.GoValue(_go_versions([version]).text[1:-1]),
                                     "must have the storage version " + str(name)))
        remaining.pop(name, None)
    for name, i in sorted(remaining.items(), key=lambda item: item[1]):
        causes.append(fe.invalid(f"{path}[{i}]", name, "must appear in spec.versions"))
    return causes


def validate_subresources(subresources, path: str) -> list:
    if not subresources:
        return []
    scale = subresources.get("scale")
    if scale is None:
        return []
    causes = []
    for field, under, words in (("specReplicasPath", (".spec.",), "under .spec"),
                                ("statusReplicasPath", (".status.",), "under .status")):
        value = scale.get(field) or ""
        at = f"{path}.scale.{field}"
        if not value:
            causes.append(fe.required(at, ""))
            continue
        problem = _simple_path(value, at)
        if problem:
            causes.append(problem)
        elif not value.startswith(under):
            causes.append(fe.invalid(at, value, f"should be a json path {words}"))
    selector = scale.get("labelSelectorPath") or ""
    if selector:
        at = f"{path}.scale.labelSelectorPath"
        problem = _simple_path(selector, at)
        if problem:
            causes.append(problem)
        elif not selector.startswith((".spec.", ".status.")):
            causes.append(fe.invalid(at, selector,
                                     "should be a json path under either .spec or .status"))
    return causes


def _simple_path(value: str, at: str):
    if not value.startswith("."):
        return fe.invalid(at, value, "must be a simple json path starting with .")
    try:
        jsonpath.parse(value)
    except jsonpath.PathError as e:
        return fe.invalid(at, value, f"is an invalid JSONPath: {e}")
    return None


def validate_column(column: dict, path: str) -> list:
    causes = []
    if not column.get("name"):
        causes.append(fe.required(f"{path}.name", ""))
    kind = column.get("type") or ""
    if not kind:
        causes.append(fe.required(f"{path}.type", "must be one of " + ",".join(PRINTER_TYPES)))
    elif kind not in PRINTER_TYPES:
        causes.append(fe.invalid(f"{path}.type", kind, "must be one of " + ",".join(PRINTER_TYPES)))
    form = column.get("format") or ""
    if form and form not in PRINTER_FORMATS:
        causes.append(fe.invalid(f"{path}.format", form,
                                 "must be one of " + ",".join(PRINTER_FORMATS)))
    value = column.get("jsonPath") or ""
    if not value:
        causes.append(fe.required(f"{path}.JSONPath", ""))
    else:
        problem = _simple_path(value, f"{path}.JSONPath")
        if problem:
            causes.append(problem)
    return causes
