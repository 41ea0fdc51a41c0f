"""Control characters made visible: one rule for text and for the bytes ``sparktui logs`` writes
without decoding them (``visible_bytes`` tells clean bytes by two C scans, then uses the regex)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from sparktui.core.controls import visible, visible_bytes

TEXT = st.text(st.sampled_from(["a", " ", "\t", "\n", "\x1b", "\x00", "\x7f", "\x85", "\x9b", "°",
                                "é", "\u2028", "[", "€"]), max_size=40)


@given(TEXT)
@example("plain ascii, tab\tand newline\n")
@example("° ± µ: Latin-1 after \\xc2, no control")
@example("\x1b]0;title\x07 and CSI \x9b31m")
def test_bytes_are_made_visible_as_the_text_is(text: str) -> None:
    assert visible_bytes(text.encode()) == visible(text).encode()


def test_clean_bytes_come_back_as_the_same_object() -> None:
    data = "Decode batch. #running-req: 61, 2.3 °C\t\n".encode() * 1000
    assert visible_bytes(data) is data


def test_invalid_utf8_passes_as_it_is() -> None:
    assert visible_bytes(b"\xff\xfe ok \xc2") == b"\xff\xfe ok \xc2"
    assert visible_bytes(b"\xff\x1b") == b"\xff\\x1b"
