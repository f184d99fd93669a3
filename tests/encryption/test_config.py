"""Loading and validating EncryptionConfiguration: upstream's messages and field paths."""

from __future__ import annotations

import json

from twisted.trial.unittest import TestCase

from platformd.storage.encryption.build import build
from platformd.storage.encryption.config import load, load_file
from platformd.storage.encryption.errors import EncryptionConfigError
from tests.encryption.helpers import IDENTITY, document, key, keys


def error(doc) -> str:
    try:
        build(load(json.dumps(doc).encode() if isinstance(doc, dict) else doc), [])
    except EncryptionConfigError as e:
        assert "\n" not in str(e)
        return str(e)
    raise AssertionError("no error")


class ValidationTests(TestCase):
    def test_yaml(self):
        config = load(b"""
apiVersion: apiserver.config.platform.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: %s
      - identity: {}
""" % key(32).encode())
        self.assertEqual([p.type for p in config.resources[0].providers],
                         ["aescbc", "identity"])

    def test_no_resources(self):
        self.assertEqual(error(document()),
                         "resources: Required value: at least one resources is required")

    def test_empty_lists(self):
        self.assertEqual(error(document(([], []))), (
            "[resources[0].resources: Required value: at least one resources[0].resources is "
            "required, resources[0].providers: Required value: at least one "
            "resources[0].providers is required]"))

    def test_key_lengths(self):
        self.assertEqual(error(document((["secrets"], [keys("aesgcm", ("k", key(8)))]))), (
            'resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: "REDACTED": '
            "secret is not of the expected length, got 8, expected one of [16 24 32]"))
        self.assertEqual(error(document((["secrets"], [keys("aescbc", ("k", key(16)))]))), (
            'resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": '
            "secret is not of the expected length, got 16, expected one of [32]"))
        self.assertEqual(error(document((["secrets"], [keys("secretbox", ("k", key(24)))]))), (
            'resources[0].providers[0].secretbox.keys[0].secret: Invalid value: "REDACTED": '
            "secret is not of the expected length, got 24, expected one of [32]"))

    def test_key_fields(self):
        self.assertEqual(error(document((["secrets"], [keys("aesgcm", ("", ""))]))), (
            "[resources[0].providers[0].aesgcm.keys[0].name: Required value: name is a "
            "mandatory field for a key, resources[0].providers[0].aesgcm.keys[0].secret: "
            "Required value: secret is a mandatory field for a key]"))
        self.assertEqual(error(document((["secrets"], [keys("aesgcm", ("k", "!!"))]))), (
            'resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: "REDACTED": '
            "secrets must be base64 encoded"))
        self.assertEqual(error(document((["secrets"], [{"aesgcm": {"keys": []}}]))), (
            "resources[0].providers[0].aesgcm.keys: Required value: at least one keys is "
            "required"))

    def test_provider_count(self):
        self.assertIn("provider does not contain any of the expected providers: KMS, AESGCM, "
                      "AESCBC, Secretbox, Identity", error(document((["secrets"], [{}]))))
        both = {**keys("aesgcm", ("k", key(16))), **IDENTITY}
        self.assertIn("more than one provider specified in a single element, should split "
                      "into different list elements", error(document((["secrets"], [both]))))

    def test_resource_names(self):
        for name, detail in [
            ("Secrets", "resource name should not contain capital letters"),
            ("*", "use '*.' to encrypt all the resources from core API group or *.* to "
                  "encrypt all resources"),
            ("serviceipallocations", "resources which do not have REST API/s cannot be "
                                     "encrypted"),
            ("deployments.extensions", "'extensions' group has been removed and cannot be "
                                       "used for encryption"),
            ("secrets.*", "encrypting the same resource across groups is not supported"),
        ]:
            self.assertEqual(error(document(([name], [IDENTITY]))),
                             f'resources[0].resources[0]: Invalid value: "{name}": {detail}')

    def test_overlap_and_duplicate(self):
        self.assertEqual(error(document((["secrets", "*."], [IDENTITY]))), (
            'resources[0].resources: Invalid value: []string{"secrets", "*."}: using '
            "overlapping resources such as 'secrets' and '*.' in the same resource list is "
            "not allowed as they will be masked"))
        self.assertEqual(error(document((["secrets", "secrets"], [IDENTITY]))), (
            'resources[0].resources: Invalid value: []string{"secrets", "secrets"}: the same '
            "resource cannot be specified multiple times"))

    def test_masked_by_earlier_rule(self):
        self.assertEqual(error(document((["*."], [IDENTITY]), (["secrets"], [IDENTITY]))),
                         'resource "secrets" is masked by earlier rule "*."')
        self.assertEqual(error(document((["*.*"], [IDENTITY]), (["*."], [IDENTITY]))),
                         'resource "*." is masked by earlier rule "*.*"')

    def test_kms(self):
        kms = {"kms": {"apiVersion": "v2", "name": "a:b", "endpoint": "tcp://x",
                       "cachesize": 10, "timeout": "0s"}}
        self.assertEqual(error(document((["secrets"], [kms]))), (
            '[resources[0].providers[0].kms.name: Invalid value: "a:b": invalid KMS provider '
            "name a:b, must not contain ':', resources[0].providers[0].kms.timeout: Invalid "
            "value: 0s: timeout should be a positive value, "
            'resources[0].providers[0].kms.endpoint: Invalid value: "tcp://x": unsupported '
            'scheme "tcp" for KMS provider, only unix is supported, '
            "resources[0].providers[0].kms.cachesize: Invalid value: 10: cachesize is not "
            "supported in v2]"))
        self.assertEqual(error(document((["secrets"], [{"kms": {
            "apiVersion": "v3", "name": "n", "endpoint": "unix:///s"}}]))), (
            'resources[0].providers[0].kms.apiVersion: Invalid value: "v3": unsupported '
            "apiVersion apiVersion for KMS provider, only v1 and v2 are supported"))
        two = {"kms": {"apiVersion": "v2", "name": "n", "endpoint": "unix:///s"}}
        self.assertEqual(error(document((["secrets"], [two, two]))), (
            'resources[0].providers[1].kms.name: Invalid value: "n": duplicate KMS provider '
            "name n, names must be unique"))

    def test_kms_v1_gated(self):
        """apiVersion defaults to v1, refused with upstream's text unless KMSv1=true."""
        v1 = {"kms": {"name": "old", "endpoint": "unix:///s"}}
        self.assertEqual(error(document((["secrets"], [v1]))), (
            "KMSv1 is deprecated and will only receive security updates going forward. "
            "Use KMSv2 instead.  Set --feature-gates=KMSv1=true to use the deprecated "
            "KMSv1 feature."))
        transformer, envelopes = build(load(json.dumps(document((["secrets"], [v1])))
                                            .encode()), [], kms_v1=True)
        self.addCleanup(envelopes[0].close)
        self.assertEqual(type(envelopes[0]).__name__, "KMSv1Envelope")
        self.assertEqual(envelopes[0]._cache.size, 1000)  # upstream's default cachesize

    def test_kind_and_version(self):
        doc = document((["secrets"], [IDENTITY]))
        doc["apiVersion"] = "apiserver.config.k8s.io/v1"
        self.assertIn('no kind "EncryptionConfiguration" is registered for version '
                      '"apiserver.config.k8s.io/v1"', error(doc))

    def test_files(self):
        missing = self.mktemp()
        e = self.assertRaises(EncryptionConfigError, load_file, missing)
        self.assertTrue(str(e).startswith("error while parsing file: error opening "
                                          "encryption provider configuration file"))
        empty = self.mktemp()
        open(empty, "w").close()
        e = self.assertRaises(EncryptionConfigError, load_file, empty)
        self.assertEqual(str(e), f'error while parsing file: encryption provider '
                                 f'configuration file "{empty}" is empty')
