"""
bench/ab.py's argument handling and baseline materialisation (no server, no timing).
Skipped when the bench/ directory or git history is not at hand (an installed wheel).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from twisted.trial import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")


def _load():
    if not os.path.exists(os.path.join(BENCH, "ab.py")):
        raise unittest.SkipTest("bench/ not at hand")
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    import ab
    return ab


class Arguments(unittest.TestCase):
    def setUp(self):
        self.ab = _load()

    def test_defaults(self):
        opts = self.ab.parse(["--baseline", "abc"])
        self.assertEqual((opts.baseline, opts.runs), ("abc", 3))
        self.assertEqual(opts.bench.suite, "bench_api")
        self.assertEqual(opts.bench.names, ["creates", "gets", "events"])  # every one
        self.assertEqual(opts.bench.seconds, 5)

    def test_benchmark_arguments_after_separator(self):
        opts = self.ab.parse(["--baseline", "abc", "--runs", "4", "--",
                              "--seconds", "3", "gets"])
        self.assertEqual(opts.runs, 4)
        self.assertEqual((opts.bench.seconds, opts.bench.names), (3, ["gets"]))
        opts = self.ab.parse(["--baseline", "abc", "--", "bench_api", "creates"])
        self.assertEqual(opts.bench.names, ["creates"])

    def test_over_etcd(self):
        opts = self.ab.parse(["--baseline", "abc", "--etcd", "--pin", "--", "creates"])
        self.assertEqual((opts.etcd, opts.tls, opts.pin), (True, False, True))
        self.assertFalse(self.ab.parse(["--baseline", "abc"]).etcd)

    def test_refused(self):
        self.patch(sys, "stderr", open(os.devnull, "w"))
        for argv in ([], ["--baseline", "abc", "--runs", "0"],
                     ["--baseline", "abc", "--", "nosuch"],
                     ["--baseline", "abc", "--tls"], ["--baseline", "abc", "--pin"]):
            self.assertRaises(SystemExit, self.ab.parse, argv)


class Materialise(unittest.TestCase):
    def setUp(self):
        self.ab = _load()
        if shutil.which("git") is None or subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode:
            raise unittest.SkipTest("no git checkout")

    def test_head_src_layout(self):
        tree = self.ab.materialise("HEAD", ROOT)
        self.addCleanup(shutil.rmtree, tree, True)
        self.assertFalse(tree.startswith(ROOT + os.sep))
        self.assertEqual(self.ab.package_root(tree), os.path.join(tree, "src"))
        self.assertTrue(os.path.exists(
            os.path.join(tree, "src", "twisted", "plugins", "platformd_plugin.py")))

    def test_root_layout(self):
        tree = self.mktemp()
        os.makedirs(os.path.join(tree, "platformd"))
        self.assertEqual(self.ab.package_root(tree), tree)

    def test_unknown_commit(self):
        self.assertRaises(subprocess.CalledProcessError, self.ab.materialise,
                          "no-such-commit-xyz", ROOT)
