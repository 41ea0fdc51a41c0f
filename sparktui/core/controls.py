"""Control characters in outside text (a container's log, a recipe value) written out as
``\\x1b``: shown, not obeyed by the terminal. Tab and newline stay. One rule for text and for
the bytes ``sparktui logs`` writes without decoding them.

Controls are C0 (but tab and newline), DEL and C1, and every format character (Unicode ``Cf``:
bidi embeddings, overrides and isolates such as U+202E, zero-width spaces and joiners, the BOM,
the invisible tag characters) and the line and paragraph separators (``Zl``, ``Zp``): each can
make what the terminal shows differ from the text (a U+202E reverses what follows it, so
``txt.exe`` shows as ``exe.txt``), and none is needed to read a log. They are written as
Python writes them: ``\\x9b``, ``\\u202e``, ``\\U000e0041``."""

from __future__ import annotations

import re

# Unicode 15.1's Cf, Zl and Zp (Python 3.11 knows 14.0, whose set this holds too: tests check
# it against unicodedata). Written out so that importing this costs nothing: deriving it from
# unicodedata walks 1.1 M code points (about 0.2 s).
FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
CONTROL_RANGES: tuple[tuple[int, int], ...] = ((0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x9F),
                                               *FORMAT_RANGES)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + "".join(re.escape(chr(lo)) + (f"-{re.escape(chr(hi))}" if hi > lo else "")
                         for lo, hi in ranges) + "]"


_CONTROL = re.compile(_char_class(CONTROL_RANGES))
# Without the few controls past U+FFFF the class is a table lookup a character: 5 ms a MB
# instead of 22 (the ranges past U+FFFF are tried one by one).
_CONTROL_BMP = re.compile(_char_class(tuple(r for r in CONTROL_RANGES if r[1] < 0x10000)))
# Bytes that start a control in UTF-8: C0 and DEL themselves, and the lead bytes of the longer
# ones (C1 and U+00AD are \xc2 and one more). \xe2 starts common text too (U+2026 …, box
# drawing, progress bars' blocks): its controls are those of \xe2\x80 and \xe2\x81, looked for
# apart. Clean text has none of them.
_SUSPECT = bytes(sorted({chr(cp).encode()[0] for lo, hi in CONTROL_RANGES
                         for cp in range(lo, hi + 1)} - {0xE2}))
_ASTRAL_LEADS = (b"\xf0", b"\xf3")
_C0_DEL = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])


def written(char: str) -> str:
    """``\\x1b``, ``\\u202e``, ``\\U000e0041``: as Python writes the character."""
    cp = ord(char)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _sub(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda m: written(m.group()), text)


def visible(text: object) -> str:
    text = str(text)
    return text if text.isprintable() else _sub(_CONTROL, text)  # isprintable: a C scan


def visible_bytes(data: bytes) -> bytes:
    """``visible`` over UTF-8 bytes; invalid UTF-8 passes as it is (decoded with
    ``surrogateescape``, which no control matches, and encoded back). Clean text, nearly all of
    it, is told by C scans at memory speed (ASCII, and deleting C0 and DEL leaves its length; or
    deleting every byte that can start a control does, and no \\xe2\\x80 or \\xe2\\x81): the
    regex's scan is five to ten times slower (a 2-byte ``in`` costs as much as ``translate``,
    hence the one-byte test first)."""
    if data.isascii():  # 0.1 ms a MB; then only C0 and DEL can be there
        if len(data.translate(None, _C0_DEL)) == len(data):
            return data
    elif len(data.translate(None, _SUSPECT)) == len(data) and (
            b"\xe2" not in data or (b"\xe2\x80" not in data and b"\xe2\x81" not in data)):
        return data
    text = data.decode("utf-8", "surrogateescape")
    astral = any(lead in data for lead in _ASTRAL_LEADS)
    out = _sub(_CONTROL if astral else _CONTROL_BMP, text)
    return data if out == text else out.encode("utf-8", "surrogateescape")
