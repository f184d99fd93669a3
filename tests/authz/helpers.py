"""Shared pieces of the authorization tests: configuration files and a kubeconfig."""

from __future__ import annotations

import os

import yaml

from platformd.auth.interfaces import Attributes, UserInfo
from platformd.files.pki import ensure_pki
from platformd.requestinfo import RequestInfo


def pki(testcase, server="https://127.0.0.1:1/authorize"):
    """A throwaway CA, serving certificate (127.0.0.1) and client kubeconfig."""
    return ensure_pki(testcase.mktemp(), [], [], server)


def kubeconfig_for(testcase, paths, server: str) -> str:
    """A copy of the PKI's kubeconfig pointing at ``server``; its absolute path."""
    with open(paths.admin_kubeconfig) as f:
        document = yaml.safe_load(f)
    document["clusters"][0]["cluster"]["server"] = server
    path = os.path.abspath(testcase.mktemp())
    with open(path, "w") as f:
        yaml.safe_dump(document, f)
    return path


def webhook_entry(name: str, config_file: str, **webhook) -> dict:
    hook = {
        "timeout": "3s",
        "subjectAccessReviewVersion": "v1",
        "matchConditionSubjectAccessReviewVersion": "v1",
        "failurePolicy": "Deny",
        "connectionInfo": {"type": "PlatformConfigFile", "platformConfigFile": config_file},
    }
    hook.update(webhook)
    return {"type": "Webhook", "name": name, "webhook": hook}


def document(*authorizers, api_version="apiserver.config.platform.io/v1") -> bytes:
    return yaml.safe_dump({"apiVersion": api_version, "kind": "AuthorizationConfiguration",
                           "authorizers": list(authorizers)}).encode()


def write(testcase, data: bytes) -> str:
    path = os.path.abspath(testcase.mktemp())
    with open(path, "wb") as f:
        f.write(data)
    return path


def pods(namespace="kube-system", verb="get", name="", user="alice", groups=("dev",),
         extra=(), uid="") -> Attributes:
    info = RequestInfo(True, f"/api/v1/namespaces/{namespace}/pods", verb, "api", "", "v1",
                       "pods", "", namespace, name)
    return Attributes(UserInfo(user, uid, tuple(groups), tuple(extra)), info)


def healthz(user="alice") -> Attributes:
    return Attributes(UserInfo(user, "", ("dev",)), RequestInfo(False, "/healthz", "get"))
