"""Control characters in outside text (a container's log, a recipe value) written out as
``\\x1b``: shown, not obeyed by the terminal. Tab and newline stay. One rule for text and for
the bytes ``sparktui logs`` writes without decoding them."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# the same in UTF-8: C0 and DEL are single bytes, C1 (U+0080-U+009F) is \xc2 and one more
_CONTROL_UTF8 = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
_C0_DEL = bytes([*range(0x09), *range(0x0b, 0x20), 0x7f])


def visible(text: object) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def visible_bytes(data: bytes) -> bytes:
    """``visible`` over UTF-8 bytes, without decoding them (invalid UTF-8 passes as it is).
    Clean text, nearly all of it, is told by two C scans at memory speed (deleting C0 and DEL
    leaves its length; no ``\\xc2`` lead byte of C1): the regex's scan is ten times slower."""
    if len(data.translate(None, _C0_DEL)) == len(data) and b"\xc2" not in data:
        return data
    return _CONTROL_UTF8.sub(lambda m: b"\\x%02x" % m.group()[-1], data)
