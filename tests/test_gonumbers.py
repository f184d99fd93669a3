"""Numbers read as Go's strconv and encoding/json read them, at any length (gonumbers)."""

import time

from twisted.trial.unittest import SynchronousTestCase

from platformd.goformat.gonumbers import BigNumber, NumError, parse_int, parse_uint


class ParseTests(SynchronousTestCase):
    def fails(self, parse, text, message, *args):
        started = time.monotonic()
        with self.assertRaises(NumError) as e:
            parse(text, *args)
        self.assertEqual(str(e.exception), message)
        self.assertLess(time.monotonic() - started, 0.1)

    def test_parse_int(self):
        """strconv.ParseInt(s, 10, 64): a sign, ASCII digits, leading zeros, the bounds."""
        for text, value in (("0", 0), ("+5", 5), ("-5", -5), ("007", 7),
                            ("0" * 5000 + "12", 12), ("9223372036854775807", 2 ** 63 - 1),
                            ("-9223372036854775808", -2 ** 63)):
            self.assertEqual(parse_int(text), value, text)

    def test_parse_int_refused(self):
        """Go's NumError words: syntax for what is not a decimal integer, range for one
        past int64, of any length (the first overflow wins over a later bad byte)."""
        for text in ("", "-", "+-1", " 1", "1 ", "1_000", "0x10", "\u0663", "1.0", "1e3"):
            self.fails(parse_int, text, f'strconv.ParseInt: parsing "{text}": invalid syntax')
        for text in ("9223372036854775808", "-9223372036854775809", "1" * 5000,
                     "-" + "1" * 5000, "99999999999999999999x"):
            self.fails(parse_int, text, f'strconv.ParseInt: parsing "{text}": value out of range')
        self.fails(parse_int, "2147483648", 'strconv.ParseInt: parsing "2147483648": value '
                   "out of range", 32)

    def test_parse_uint(self):
        """strconv.ParseUint(s, 10, 64): no sign; up to 2**64 - 1."""
        self.assertEqual(parse_uint("18446744073709551615"), 2 ** 64 - 1)
        self.fails(parse_uint, "+1", 'strconv.ParseUint: parsing "+1": invalid syntax')
        self.fails(parse_uint, "18446744073709551616",
                   'strconv.ParseUint: parsing "18446744073709551616": value out of range')


class BigNumberTests(SynchronousTestCase):
    def test_as_float(self):
        """What Go's decoder puts in an interface{}: a float64, or nothing past its range."""
        self.assertEqual(BigNumber("1" * 30).as_float(), 1.1111111111111111e29)
        self.assertIsNone(BigNumber("1" * 5000).as_float())
        self.assertIsNone(BigNumber("-1e400").as_float())

    def test_a_value(self):
        """Written as it came, equal by text, hashable (a set-list's member, a map key)."""
        self.assertEqual(str(BigNumber("1e400")), "1e400")
        self.assertEqual({BigNumber("1e400"), BigNumber("1e400")}, {BigNumber("1e400")})
