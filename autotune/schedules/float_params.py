"""Float task parameters (eps, attention's scale, a pad value) as ints.

Task parameters are ints or tuples of ints, so workload keys stay exact and readable: a float is
(mantissa, exponent) meaning mantissa * 10**exponent, from Python's shortest round-trip digits,
e.g. 1e-5 is (1, -5), written `eps=1:-5` on the command line. Decoding is exact:
decode_float(encode_float(x)) == x for every finite float.
"""
from __future__ import annotations

import decimal
import math
from typing import Any


def encode_float(x: float) -> tuple[int, int]:
    """x as (mantissa, exponent), mantissa without trailing zeros (0.0 is (0, 0))."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"cannot encode the non-finite float {x} as a task parameter")
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    m = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    e = int(exp)
    if m == 0:
        return (0, 0)
    while m % 10 == 0:
        m, e = m // 10, e + 1
    return (m, e)


def decode_float(p: Any, op: str, name: str) -> float:
    """The float of a (mantissa, exponent) parameter, or of a plain int; errors name the op and
    the parameter."""
    if isinstance(p, int) and not isinstance(p, bool):
        return float(p)
    if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in p)):
        raise TypeError(f"{op}: parameter {name} must be (mantissa, exponent) ints meaning mantissa * 10**exponent "
                        f"(e.g. 1e-5 is (1, -5), on the command line {name}=1:-5), got {p!r}")
    return float(f"{p[0]}e{p[1]}")
