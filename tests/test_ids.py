"""Random identifiers are RFC 4122 version-4 UUIDs, as upstream's uuid.New()."""

import uuid

from twisted.trial.unittest import SynchronousTestCase

from platformd.util.ids import random_uuid


class RandomUUIDTests(SynchronousTestCase):
    def test_version_4_rfc_4122(self):
        seen = set()
        for _ in range(2000):
            text = random_uuid()
            parsed = uuid.UUID(text)
            self.assertEqual((parsed.version, parsed.variant, str(parsed)),
                             (4, uuid.RFC_4122, text))
            seen.add(text)
        self.assertEqual(len(seen), 2000)
