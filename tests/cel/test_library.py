"""
Kubernetes' CEL libraries in every ``platformd.cel.Environment``: the cases of upstream's
``library/*_test.go`` (``TestQuantity``, ``TestIP``, ``TestCIDR``) and the examples of the
libraries' documentation (lists, regex, urls, semver), with upstream's results and
error messages; an opaque result is compared in CEL (``cidr(...).ip() == ip(...)``).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd import cel


class Error(str):
    """An evaluation error's message."""

    def __repr__(self):
        return f"Error({str.__repr__(self)})"


class Refused(str):
    """A compile error containing this text."""

    def __repr__(self):
        return f"Refused({str.__repr__(self)})"


class _Cases:
    """Each case: (expression, its value), (expression, ``Error(message)``) for an
    evaluation error, or (expression, ``Refused(text)``) for a compile error containing
    the text."""

    cases: tuple = ()

    def test_cases(self):
        env = cel.Environment({})
        wrong = []
        for source, expected in self.cases:
            got: object
            try:
                got = env.compile(source).evaluate({})
            except cel.EvaluationError as error:
                got = Error(error)
            except cel.CompileError as error:
                got = Refused(error)
            if isinstance(expected, Refused):
                ok = isinstance(got, Refused) and expected in got
            else:
                ok = type(got) is type(expected) and got == expected
            if not ok:
                wrong.append(f"{source}: {got!r}, upstream {expected!r}")
        self.assertEqual(wrong, [])


class ListsTests(_Cases, SynchronousTestCase):
    cases = (
        ("[1, 2, 3].isSorted()", True),
        ("['a', 'b', 'b', 'c'].isSorted()", True),
        ("[2.0, 1.0].isSorted()", False),
        ("[1].isSorted()", True),
        ("[].isSorted()", True),
        ("[1, 3].sum()", 4),
        ("[1.0, 3.0].sum()", 4.0),
        ("[duration('1m'), duration('1s')].sum() == duration('1m1s')", True),
        ("[].sum()", 0),
        ("[1, 3].min()", 1),
        ("[1, 3].max()", 3),
        ("[].min()", Error("min called on empty list")),
        ("[].max()", Error("max called on empty list")),
        ("[1].min()", 1),
        ("([0] + []).min()", 0),
        ("[1, 2, 2, 3].indexOf(2)", 1),
        ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
        ("[1.0].indexOf(1.1)", -1),
        ("[].indexOf('string')", -1),
        ("[9223372036854775807, 1].sum()", Error("integer overflow")),
        ("[{'a': 1}].isSorted()", Refused("found no matching overload for 'isSorted'")),
        ("'abc'.indexOf('c')", 2),  # the strings extension's, beside the lists'
    )


class RegexTests(_Cases, SynchronousTestCase):
    cases = (
        ("'abc 123'.find('[0-9]+')", "123"),
        ("'abc'.find('[0-9]+')", ""),
        ("'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
        ("'123 abc 456'.findAll('[0-9]+', 1)", ["123"]),
        ("'123 abc 456'.findAll('[0-9]+', 0)", []),
        ("'abc'.findAll('[0-9]+')", []),
        ("'baaa'.findAll('a*')", ["", "aaa"]),  # Go leaves out an empty match after one
        ("'x'.find('(')", Error("Illegal regex: error parsing regexp: missing closing ): `(`")),
        ("'x'.find('(?=x)')", Error("Illegal regex: error parsing regexp: invalid or "
                                    "unsupported Perl syntax: `(?=`")),
    )


class QuantityTests(_Cases, SynchronousTestCase):
    """upstream's ``TestQuantity``."""

    cases = (
        ("quantity('12Mi') == quantity('12582912')", True),
        ("quantity('10Mo')", Error("quantities must match the regular expression "
                                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")),
        ("quantity('10Mm')", Error("unable to parse quantity's suffix")),
        ("isQuantity('20')", True),
        ("isQuantity('20M')", True),
        ("isQuantity('20Mi')", True),
        ("isQuantity('20Mo')", False),
        ("isQuantity('10Mm')", False),
        ("isQuantity([1, 2, 3])", Refused("found no matching overload for 'isQuantity' "
                                          "applied to")),
        ("quantity('200M') == quantity('200M')", True),
        ("quantity('200M') == quantity('0.2G') && quantity('0.2G') == quantity('200M')", True),
        ("quantity('2M') == quantity('0.002G') && quantity('2000k') == quantity('2M') && "
         "quantity('0.002G') == quantity('2000k')", True),
        ("quantity('200M') == quantity('0.3G')", False),
        ("quantity('50M').isLessThan(quantity('50Mi'))", True),
        ("quantity('50M').isLessThan(quantity('100M'))", True),
        ("quantity('100M').isLessThan(quantity('50M'))", False),
        ("quantity('50Mi').isGreaterThan(quantity('50M'))", True),
        ("quantity('150Mi').isGreaterThan(quantity('100Mi'))", True),
        ("quantity('50M').isGreaterThan(quantity('100M'))", False),
        ("quantity('200M').compareTo(quantity('0.2G'))", 0),
        ("quantity('50M').compareTo(quantity('50Mi'))", -1),
        ("quantity('50Mi').compareTo(quantity('50M'))", 1),
        ("quantity('50k').add(quantity('20')) == quantity('50.02k')", True),
        ("quantity('50k').add(20).isLessThan(quantity('50020'))", False),
        ("quantity('50k').sub(quantity('20')) == quantity('49.98k')", True),
        ("quantity('50k').sub(20) == quantity('49980')", True),
        ("quantity('50k').add(20).sub(quantity('100k')).asInteger()", -49980),
        ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger()", 20),
        ("quantity('50k').asInteger()", 50000),
        ("quantity('9999999999999999999999999999999999999G').asInteger()",
         Error("cannot convert value to integer")),
        ("quantity('9999999999999999999999999999999999999G').isInteger()", False),
        ("quantity('50').isInteger()", True),
        ("quantity('50.703k').asApproximateFloat()", 50703.0),
        ("sign(quantity('-1m'))", -1),
        ("sign(quantity('0'))", 0),
        ("type(quantity('1')) == kubernetes.Quantity", True),
        ("quantity('1n') == quantity('0.000000001')", True),
        ("quantity('0.0000000001') == quantity('1n')", True),  # rounded up to a nano-unit
    )


class URLTests(_Cases, SynchronousTestCase):
    """The examples of ``library/urls.go``."""

    cases = (
        ("url('https://user:pass@example.com:80/path?query=val#fragment').getScheme()",
         "https"),
        ("url('https://example.com:80/').getHost()", "example.com:80"),
        ("url('https://[::1]:80/').getHost()", "[::1]:80"),
        ("url('https://example.com:80/').getHostname()", "example.com"),
        ("url('https://[::1]:80/').getHostname()", "::1"),
        ("url('https://example.com:80/').getPort()", "80"),
        ("url('https://example.com/').getPort()", ""),
        ("url('https://example.com/path with spaces/').getEscapedPath()",
         "/path%20with%20spaces/"),
        ("url('https://example.com/path').getEscapedPath()", "/path"),
        ("url('https://example.com').getEscapedPath()", ""),
        ("url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()",
         {"k1": ["a"], "k2": ["b", "c"]}),
        ("url('https://example.com/path?key=').getQuery()", {"key": [""]}),
        ("url('https://example.com/path?').getQuery()", {}),
        ("url('https://example.com/path').getQuery()", {}),
        ("isURL('https://user:pass@example.com:80/path?query=val#fragment')", True),
        ("isURL('/absolute-path')", True),
        ("isURL('https://a:b:c/')", False),
        ("isURL('../relative-path')", False),
        ("url('../relative-path')", Error(
            'URL parse error during conversion from string: parse "../relative-path": '
            'invalid URI for request')),
        ("url('https://a:b:c/')", Error(
            'URL parse error during conversion from string: parse "https://a:b:c/": '
            'invalid port ":c" after host')),
        ("type(url('/a')) == kubernetes.URL", True),
    )


class IPTests(_Cases, SynchronousTestCase):
    """upstream's ``TestIP``."""

    cases = (
        ("ip('192.168.0.1') == ip('192.168.0.1')", True),
        ("ip('192.168.0.1.0')", Error(
            'IP Address "192.168.0.1.0" parse error during conversion from string: '
            'ParseAddr("192.168.0.1.0"): IPv4 address too long')),
        ("isIP('192.168.0.1')", True),
        ("isIP('192.168.0.1.0')", False),
        ("ip.isCanonical('127.0.0.1')", True),
        ("ip.isCanonical('127.0.0.1.0')", Error(
            'IP Address "127.0.0.1.0" parse error during conversion from string: '
            'ParseAddr("127.0.0.1.0"): IPv4 address too long')),
        ("ip('192.168.0.1').family()", 4),
        ("ip('0.0.0.0').isUnspecified()", True),
        ("ip('127.0.0.1').isUnspecified()", False),
        ("ip('127.0.0.1').isLoopback()", True),
        ("ip('1.2.3.4').isLoopback()", False),
        ("ip('224.0.0.1').isLinkLocalMulticast()", True),
        ("ip('224.0.1.1').isLinkLocalMulticast()", False),
        ("ip('169.254.169.254').isLinkLocalUnicast()", True),
        ("ip('192.168.0.1').isLinkLocalUnicast()", False),
        ("ip('192.168.0.1').isGlobalUnicast()", True),
        ("ip('255.255.255.255').isGlobalUnicast()", False),
        ("string(ip('2001:db8::68'))", "2001:db8::68"),
        ("ip('2001:db8:::68')", Error(
            'IP Address "2001:db8:::68" parse error during conversion from string: '
            'ParseAddr("2001:db8:::68"): each colon-separated field must have at least one '
            'digit (at ":68")')),
        ("isIP('2001:db8::68')", True),
        ("isIP('2001:db8:::68')", False),
        ("ip.isCanonical('2001:db8::68')", True),
        ("ip.isCanonical('2001:DB8::68')", False),
        ("ip('2001:db8::68').family()", 6),
        ("ip('::').isUnspecified()", True),
        ("ip('::1').isUnspecified()", False),
        ("ip('::1').isLoopback()", True),
        ("ip('2001:db8::abcd').isLoopback()", False),
        ("ip('ff02::1').isLinkLocalMulticast()", True),
        ("ip('fd00::1').isLinkLocalMulticast()", False),
        ("ip('fe80::1').isLinkLocalUnicast()", True),
        ("ip('fd80::1').isLinkLocalUnicast()", False),
        ("ip('2001:db8::abcd').isGlobalUnicast()", True),
        ("ip('ff00::1').isGlobalUnicast()", False),
        ("isIP(cidr('192.168.0.0/24'))", Refused(
            "found no matching overload for 'isIP' applied to '(net.CIDR)'")),
        ("string(ip('192.168.0.1'))", "192.168.0.1"),
        ("type(ip('192.168.0.1')) == net.IP", True),
        ("ip('fe80::1%eth0')", Error('IP address "fe80::1%eth0" with zone value is not '
                                     'allowed')),
        ("ip('::ffff:1.2.3.4')", Error('IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not '
                                       'allowed')),
        ("string(ip('2001:db8:0:0:1:0:0:1'))", "2001:db8::1:0:0:1"),
        ("string(ip('2001:db8:0:1:1:1:1:1'))", "2001:db8:0:1:1:1:1:1"),
    )


class CIDRTests(_Cases, SynchronousTestCase):
    """upstream's ``TestCIDR``."""

    cases = (
        ("cidr(192168)", Refused("found no matching overload for 'cidr' applied to '(int)'")),
        ("cidr(dyn('192.168.0.0/24')) == cidr('192.168.0.0/24')", True),
        ("cidr('192.168.0.0/')", Error(
            'network address parse error during conversion from string: network address '
            'parse error during conversion from string: netip.ParsePrefix("192.168.0.0/"): '
            'bad bits after slash: ""')),
        ("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
        ("cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))", False),
        ("cidr('192.168.0.0/24').containsIP('192.168.0.1')", True),
        ("cidr('192.168.0.0/24').containsIP('192.168.1.1')", False),
        ("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))", True),
        ("cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))", False),
        ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')", True),
        ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')", False),
        ("cidr('192.168.0.0/24').ip() == ip('192.168.0.0')", True),
        ("cidr('192.168.0.0/24').masked() == cidr('192.168.0.0/24')", True),
        ("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
        ("cidr('192.168.0.1/24') == cidr('192.168.0.0/24')", False),
        ("cidr('192.168.0.0/24').prefixLength()", 24),
        ("cidr('2001:db8::/32') == cidr('2001:db8::/32')", True),
        ("cidr('2001:db8::/')", Error(
            'network address parse error during conversion from string: network address '
            'parse error during conversion from string: netip.ParsePrefix("2001:db8::/"): '
            'bad bits after slash: ""')),
        ("cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))", True),
        ("cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))", False),
        ("cidr('2001:db8::/32').containsIP('2001:db8::1')", True),
        ("cidr('2001:db8::/32').containsIP('2001:dc8::1')", False),
        ("cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/33'))", True),
        ("cidr('2001:db8::/32').containsCIDR(cidr('2001:db8::/31'))", False),
        ("cidr('2001:db8::/32').containsCIDR('2001:db8::/33')", True),
        ("cidr('2001:db8::/32').containsCIDR('2001:db8::/31')", False),
        ("cidr('2001:db8::/32').ip() == ip('2001:db8::')", True),
        ("cidr('2001:db8::/32').masked() == cidr('2001:db8::/32')", True),
        ("cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')", True),
        ("cidr('2001:db8::/32').prefixLength()", 32),
        ("string(cidr('192.168.0.0/24'))", "192.168.0.0/24"),
        ("type(cidr('192.168.0.0/24')) == net.CIDR", True),
        ("cidr('1.2.3.4/33')", Error(
            'network address parse error during conversion from string: network address '
            'parse error during conversion from string: netip.ParsePrefix("1.2.3.4/33"): '
            'prefix length out of range')),
    )


class SemverTests(_Cases, SynchronousTestCase):
    """The examples of ``library/semverlib.go``."""

    cases = (
        ("semver('1.0.0') == semver('1.0.0')", True),
        ("semver('1.0.0+build') == semver('1.0.0+other')", True),
        ("semver('200K')", Error("No Major.Minor.Patch elements found")),
        ("semver('Three')", Error("No Major.Minor.Patch elements found")),
        ("semver('Mi')", Error("No Major.Minor.Patch elements found")),
        ("semver('v1.0.0')", Error('Invalid character(s) found in major number "v1"')),
        ("semver('1.01.0')", Error('Minor number must not contain leading zeroes "01"')),
        ("semver('1.0.0-01')", Error('Numeric PreRelease version must not contain leading '
                                     'zeroes "01"')),
        ("isSemver('1.0.0')", True),
        ("isSemver('1.0')", False),
        ("isSemver('v1.0')", False),
        ("isSemver('v1.0', true)", True),
        ("semver('1.0', true) == semver('1.0.0')", True),
        ("semver('01.01.01', true) == semver('1.1.1')", True),
        ("semver('1.0-a', true)", Error("short version cannot contain PreRelease/Build meta "
                                        "data")),
        ("semver('1.2.3').major()", 1),
        ("semver('1.2.3').minor()", 2),
        ("semver('1.2.3').patch()", 3),
        ("semver('1.2.3').compareTo(semver('1.2.3'))", 0),
        ("semver('1.2.3').compareTo(semver('2.0.0'))", -1),
        ("semver('1.2.3').compareTo(semver('0.1.2'))", 1),
        ("semver('1.2.3').isGreaterThan(semver('1.2.2'))", True),
        ("semver('1.2.3').isLessThan(semver('1.2.4'))", True),
        ("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))", True),
        ("semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", True),
        ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True),
        ("quantity('1').compareTo(semver('1.0.0'))", Refused("found no matching overload")),
    )


class ExtensionTests(_Cases, SynchronousTestCase):
    """cel-go's extensions as ``base.go`` enables them at 1.36, here cel-cpp's."""

    cases = (
        ("optional.of(1).hasValue()", True),
        ("optional.none().orValue(2)", 2),
        ("{'a': 1}[?'b'].orValue(3)", 3),
        ("{'a': {'b': 1}}.?a.?b.orValue(0)", 1),
        ("'Hello'.lowerAscii()", "hello"),
        ("'a,b'.split(',')", ["a", "b"]),
        ("['a', 'b'].join('-')", "a-b"),
        ("'%s=%d'.format(['x', 1])", "x=1"),
        ("strings.quote('a\"b')", '"a\\"b"'),
        ("'  x '.trim()", "x"),
        ("'abc'.reverse()", Refused("undeclared reference to 'reverse'")),  # version 3
        ("sets.contains([1, 2, 3], [1, 2])", True),
        ("sets.equivalent([1, 2], [2, 1, 1])", True),
        ("sets.intersects([1], [2])", False),
        ("[1, 2].all(i, v, v > i)", True),
        ("{'a': 1}.exists(k, v, k == 'a' && v == 1)", True),
        ("[1, 2, 2].existsOne(i, v, v == 1)", True),
        ("{'a': 1}.transformList(k, v, k)", ["a"]),
    )
