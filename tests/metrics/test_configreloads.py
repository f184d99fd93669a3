"""
metrics.configreloads: upstream's reload metrics of a configuration file, as its
authenticationconfig/metrics tests expect them (names, help, stability, labels, hashes).
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.metrics.configreloads import ConfigReloads, config_hash
from platformd.metrics.core import Registry

#: upstream's metrics_test.go: getHash("testAPIServerID").
TEST_ID_HASH = "sha256:14f9d63e669337ac6bfda2e2162915ee6a6067743eddd4e5c374b572f951ff37"


def lines(registry: Registry, family: str) -> list:
    return [line for line in registry.render().decode().splitlines() if family in line]


class ConfigReloadsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1689101941)
        self.registry = Registry(process=False)
        self.reloads = ConfigReloads(self.registry, "testAPIServerID", self.clock,
                                     "authentication")

    def test_failure(self):
        """A failure counts under status="failure" and stamps the time."""
        self.reloads.failure()
        prefix = "apiserver_authentication_config_controller_automatic_reload"
        self.assertEqual(lines(self.registry, prefix + "s_total"), [
            f"# HELP {prefix}s_total [BETA] Total number of automatic reloads of "
            "authentication configuration split by status and apiserver identity.",
            f"# TYPE {prefix}s_total counter",
            f'{prefix}s_total{{apiserver_id_hash="{TEST_ID_HASH}",status="failure"}} 1'])
        self.assertEqual(lines(self.registry, prefix + "_last_timestamp_seconds")[2:], [
            f'{prefix}_last_timestamp_seconds{{apiserver_id_hash="{TEST_ID_HASH}",'
            'status="failure"} 1.689101941e+09'])

    def test_success_and_config_info(self):
        """A success counts and names the configuration now in use, replacing the last."""
        self.reloads.applied(b"first")
        self.reloads.success(b"second")
        info = "apiserver_authentication_config_controller_last_config_info"
        self.assertEqual(lines(self.registry, info), [
            f"# HELP {info} [ALPHA] Information about the last applied authentication "
            "configuration with hash as label, split by apiserver identity.",
            f"# TYPE {info} gauge",
            f'{info}{{apiserver_id_hash="{TEST_ID_HASH}",hash="{config_hash(b"second")}"}} 1'])
        self.assertEqual(config_hash(b"second"),
                         "sha256:16367aacb67a4a017c8da8ab95682ccb390863780f7114dda0a0e0c55644c7c4")
        self.assertEqual(config_hash(b""), "")
