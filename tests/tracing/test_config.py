"""``--tracing-config-file``: decoding, defaults and upstream's validation messages."""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.tracing.config import (
    TracingConfigError, TracingConfiguration, load_tracing_config, parse_tracing_config,
)
from platformd.util.ids import apiserver_id
from platformd.tracing.provider import sampler_for

HEAD = "apiVersion: apiserver.config.platform.io/v1\nkind: TracingConfiguration\n"


class ConfigTests(SynchronousTestCase):
    def error(self, text: str) -> str:
        with self.assertRaises(TracingConfigError) as caught:
            parse_tracing_config(text.encode())
        return str(caught.exception)

    def test_defaults(self):
        config = parse_tracing_config(HEAD.encode())
        self.assertEqual(config, TracingConfiguration(None, None))
        self.assertEqual(config.collector, "localhost:4317")

    def test_both_versions(self):
        for version in ("apiserver.config.platform.io/v1", "apiserver.platform.io/v1beta1"):
            config = parse_tracing_config(
                f"apiVersion: {version}\nkind: TracingConfiguration\nendpoint: c:4317\n"
                "samplingRatePerMillion: 250\n".encode())
            self.assertEqual(config, TracingConfiguration("c:4317", 250))

    def test_endpoints_accepted(self):
        for endpoint in ("collector:4317", "dns:///collector:4317", "unix:///run/otel.sock",
                         "unix-abstract:otel"):
            self.assertEqual(parse_tracing_config(
                (HEAD + f"endpoint: {endpoint}\n").encode()).endpoint, endpoint)

    def test_validation_messages(self):
        self.assertEqual(
            self.error(HEAD + "samplingRatePerMillion: -1\n"),
            "failed to validate tracing configuration: samplingRatePerMillion: Invalid value: "
            "-1: sampling rate must be positive")
        self.assertEqual(
            self.error(HEAD + "samplingRatePerMillion: 1000001\n"
                              "endpoint: http://collector:4317\n"),
            "failed to validate tracing configuration: [samplingRatePerMillion: Invalid "
            "value: 1000001: sampling rate per million must be less than or equal to one "
            'million, endpoint: Invalid value: "http://collector:4317": unsupported scheme: '
            "http.  Options are none, dns, unix, or unix-abstract.  See "
            "https://github.com/grpc/grpc/blob/master/doc/naming.md]")

    def test_decoding_errors(self):
        self.assertEqual(
            self.error(HEAD + "samplingRatePerMillion: many\n"),
            "failed to read tracing config: unable to decode tracing configuration data: "
            "json: cannot unmarshal string into Go struct field "
            "TracingConfiguration.samplingRatePerMillion of type int32")
        self.assertEqual(
            self.error(HEAD + "endpoints: x\n"),
            "failed to read tracing config: unable to decode tracing configuration data: "
            'strict decoding error: unknown field "endpoints"')
        self.assertEqual(
            self.error("apiVersion: apiserver.config.platform.io/v1\nkind: Tracing\n"),
            "failed to read tracing config: unable to decode tracing configuration data: "
            'no kind "Tracing" is registered for version "apiserver.config.platform.io/v1" '
            "in scheme")

    def test_missing_file(self):
        path = os.path.join(self.mktemp(), "absent.yaml")
        with self.assertRaises(TracingConfigError) as caught:
            load_tracing_config(path)
        self.assertEqual(str(caught.exception),
                         f'failed to read tracing config: unable to read tracing configuration '
                         f'from "{path}": open {path}: no such file or directory')


class ProviderTests(SynchronousTestCase):
    def test_sampler(self):
        """Parent-based always; never for a new trace unless a positive rate is set."""
        self.assertIn("ParentBased{root:AlwaysOffSampler",
                      sampler_for(TracingConfiguration()).get_description())
        self.assertIn("ParentBased{root:AlwaysOffSampler",
                      sampler_for(TracingConfiguration(None, 0)).get_description())
        self.assertIn("TraceIdRatioBased{0.0005}",
                      sampler_for(TracingConfiguration(None, 500)).get_description())

    def test_apiserver_id(self):
        """Upstream's identity: apiserver- and the base32 of the host name's hash, the
        same on every start."""
        self.assertRegex(apiserver_id("node-1"), r"^apiserver-[a-z2-7]{26}$")
        self.assertEqual(apiserver_id("node-1"), apiserver_id("node-1"))
        self.assertNotEqual(apiserver_id("node-1"), apiserver_id("node-2"))
