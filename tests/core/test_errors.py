"""``sentence``: an exception as one line for a notice or a detail column."""

from __future__ import annotations

from sparktui.core.errors import SparkError, sentence


def test_sentence_is_the_first_line_of_the_text() -> None:
    assert sentence(SparkError("ssh: connection refused")) == "ssh: connection refused"
    assert sentence(RuntimeError("  first line\nsecond line\n")) == "first line"


def test_sentence_of_an_exception_without_text_is_its_type_name() -> None:
    assert sentence(TimeoutError()) == "TimeoutError"
    assert sentence(ValueError("  \n ")) == "ValueError"
