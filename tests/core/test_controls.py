"""Control characters made visible: one rule for text and for the bytes ``sparktui logs`` writes
without decoding them (``visible_bytes`` tells clean bytes by two C scans, then uses the regex)."""

from __future__ import annotations

import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparktui.core.controls import visible, visible_bytes

TEXT = st.text(st.sampled_from(["a", " ", "\t", "\n", "\x1b", "\x00", "\x7f", "\x85", "\x9b", "°",
                                "é", "\u2028", "[", "€", "\u202e", "\u2066", "\u200b", "\ufeff",
                                "\u061c", "\xad", "…", "█", "\U000e0041", "\U0001f600", "\u2029",
                                "\ufffd"]), max_size=40)
FORMAT = ("Cf", "Zl", "Zp")


@settings(deadline=None)  # a 2-core CI box shared with other work: no per-example budget
@given(TEXT)
@example("plain ascii, tab\tand newline\n")
@example("° ± µ: Latin-1 after \\xc2, no control")
@example("\x1b]0;title\x07 and CSI \x9b31m")
@example("report.\u202etxt.exe \u2066isolated\u2069 zero\u200bwidth \ufeffBOM tag\U000e0041")
@example("progress ███▌ 61% … done — ok")
def test_bytes_are_made_visible_as_the_text_is(text: str) -> None:
    assert visible_bytes(text.encode()) == visible(text).encode()


def test_clean_bytes_come_back_as_the_same_object() -> None:
    data = "Decode batch. #running-req: 61, 2.3 °C\t\n".encode() * 1000
    assert visible_bytes(data) is data


def test_invalid_utf8_passes_as_it_is() -> None:
    assert visible_bytes(b"\xff\xfe ok \xc2") == b"\xff\xfe ok \xc2"
    assert visible_bytes(b"\xff\x1b") == b"\xff\\x1b"


def test_bidi_and_format_characters_are_written_out() -> None:
    """A U+202E reverses what follows it on screen (``txt.exe`` shows as ``exe.txt``); zero-width
    and tag characters hide text in plain sight."""
    assert visible("invoice\u202egpj.exe") == "invoice\\u202egpj.exe"
    assert visible("a\u2066b\u2069c\u200bd\u200fe\u061cf\ufeffg\u2028h\u2029i") == \
        "a\\u2066b\\u2069c\\u200bd\\u200fe\\u061cf\\ufeffg\\u2028h\\u2029i"
    assert visible("tag\U000e0041") == "tag\\U000e0041"
    assert visible("tab\tand\nnewline, é € … █ \U0001f600") == "tab\tand\nnewline, é € … █ \U0001f600"


def test_every_format_character_this_python_knows_is_written_out() -> None:
    """The table is written out (deriving it at import would cost 0.2 s); it must hold every
    Cf, Zl and Zp of this Python's Unicode, and nothing but controls of some Unicode."""
    for cp in range(0x110000):
        char = chr(cp)
        category = unicodedata.category(char)
        if category in FORMAT or (category == "Cc" and char not in "\t\n"):
            assert visible(char) != char, hex(cp)
            assert visible_bytes(char.encode()) == visible(char).encode(), hex(cp)
        elif category not in ("Cn", "Cs"):  # unassigned here may be Cf in a later Unicode
            assert visible(char) == char, hex(cp)


def test_text_with_common_non_ascii_comes_back_as_the_same_object() -> None:
    """Progress bars' blocks and box drawing start with \\xe2, as the bidi controls do: only
    \\xe2\\x80 and \\xe2\\x81 send a chunk to the regex."""
    data = "Loading safetensors ███████▌ 75% │ 3/4 ✓\n".encode() * 1000
    assert visible_bytes(data) is data
