"""``result_accuracy=`` of the transcendental unary ops: ``{mode=highest}`` or
``{tolerance={atol=1e-07,rtol=0.5,ulps=2}}`` (XLA's ResultAccuracy proto).

Owns its reader with XLA's parser messages and its canonical text as XLA prints it: ``mode=default`` prints nothing,
modes in lower case, a tolerance as atol, rtol (``%g``) and ulps (an integer), always all
three. Imports only the shape layer's Scanner.
"""

from __future__ import annotations

import re

from xlapy.shape.text import Scanner

_MODES = ("default", "highest")
_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)[ \t\n\r]*=")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|inf|nan)")


def _name(sc: Scanner, what: str) -> str:
    m = sc.peek_re(_NAME)
    if not m:
        sc.error(f"expects attribute name ({what}) in result_accuracy, found {sc.describe_next()}")
    sc.pos = m.end()
    return m.group(1)


def _number(sc: Scanner, key: str) -> float:
    m = sc.peek_re(_NUMBER)
    if not m:
        sc.error(f"expects a number for result_accuracy tolerance {key}, "
                 f"found {sc.describe_next()}")
    sc.pos = m.end()
    return float(m.group(0))


def read_result_accuracy(sc: Scanner) -> str | None:
    """Read ``{mode=...}`` or ``{tolerance={...}}`` after ``result_accuracy=``; return the
    text XLA prints for it (None for mode=default, which XLA does not print)."""
    sc.expect("{", "to start result_accuracy")
    pos = sc.pos
    name = _name(sc, "mode= or tolerance=")
    if name == "mode":
        sc.skip()
        pos = sc.pos
        word = sc.read_ident()
        if word is None or word.lower() not in _MODES:
            found = repr(word) if word else sc.describe_next()
            sc.error(f"expects ResultAccuracy type but sees: {word or found}, error: Unknown "
                     f"accuracy mode (expected {' or '.join(_MODES)})", pos)
        text = None if word.lower() == "default" else f"{{mode={word.lower()}}}"
    elif name == "tolerance":
        sc.expect("{", "to start result accuracy list")
        values = {"atol": 0.0, "rtol": 0.0, "ulps": 0}
        if not sc.eat("}"):
            while True:
                key_pos = sc.pos
                key = _name(sc, "atol=, rtol= or ulps=")
                if key not in values:
                    sc.error(f"invalid attribute name: {key} (expected atol, rtol or ulps)",
                             key_pos)
                number = _number(sc, key)
                values[key] = int(number) if key == "ulps" else number
                if sc.eat("}"):
                    break
                sc.expect(",", "or '}' at the end of result precision")
        text = (f"{{tolerance={{atol={values['atol']:g},rtol={values['rtol']:g},"
                f"ulps={values['ulps']}}}}}")
    else:
        sc.error(f"invalid attribute name: {name} (expected mode or tolerance)", pos)
    sc.expect("}", "to end result_accuracy")
    return text


__all__ = ["read_result_accuracy"]
