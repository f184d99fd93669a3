"""Anonymous access from the file's block: conditions by path; wrong tokens stay 401."""

import os

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from platformd.auth.authenticators import ANONYMOUS_USER, AuthenticatorChain
from platformd.auth.fromflags import ANONYMOUS_BOTH, AuthFlagError, authenticators_from_flags
from platformd.auth.interfaces import AuthenticationError
from platformd.options import Options


def request(path: bytes, token: str = ""):
    r = DummyRequest([b""])
    r.path = path
    if token:
        r.requestHeaders.setRawHeaders(b"authorization", [f"Bearer {token}".encode()])
    return r


class AnonymousConditionsTests(SynchronousTestCase):
    def chain(self, *flags, anonymous_block=None):
        args = list(flags)
        if anonymous_block is not None:
            path = os.path.abspath(self.mktemp())
            with open(path, "w") as f:
                f.write("apiVersion: apiserver.config.platform.io/v1\n"
                        "kind: AuthenticationConfiguration\n" + anonymous_block)
            args += ["--authentication-config", path]
        options = Options()
        options.parseOptions(args)
        chain = AuthenticatorChain([])
        authenticators_from_flags(options, chain, [], [], None, None)
        return chain

    def test_conditions_by_path(self):
        chain = self.chain(anonymous_block="anonymous:\n  enabled: true\n"
                                           "  conditions:\n  - path: /livez\n"
                                           "  - path: /version\n")
        self.assertEqual(chain.authenticate(request(b"/version")), ANONYMOUS_USER)
        self.assertIsNone(chain.authenticate(request(b"/api")))
        with self.assertRaises(AuthenticationError):
            chain.authenticate(request(b"/version", token="bogus"))

    def test_disabled_in_file(self):
        chain = self.chain(anonymous_block="anonymous:\n  enabled: false\n")
        self.assertIsNone(chain.authenticate(request(b"/version")))

    def test_flag_and_file_exclusive(self):
        with self.assertRaises(AuthFlagError) as e:
            self.chain("--anonymous-auth", "true",
                       anonymous_block="anonymous:\n  enabled: true\n")
        self.assertEqual(str(e.exception), ANONYMOUS_BOTH)
