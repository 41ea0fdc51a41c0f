from __future__ import annotations

import pytest

from sparktui.core.units import format_bytes, format_duration, parse_duration, parse_size


@pytest.mark.parametrize(("text", "expected"), [
    ("55G", 55 * 2**30), ("32gb", 32 * 2**30), ("32GiB", 32 * 2**30), ("1k", 1024),
    ("100", 100), (" 2 m ", 2 * 2**20), ("1.5g", int(1.5 * 2**30)), (0, 0), ("3T", 3 * 2**40),
])
def test_sizes(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["55Q", "", "G", "-1G", "1 0G", "12 parsecs"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="bad size"):
        parse_size(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("20m", 1200), ("90s", 90), ("1h30m", 5400), ("500ms", 0.5), (45, 45), ("2h", 7200),
])
def test_durations(text: str | int, expected: float) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["20", "m", "20 minutes", "", "0s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_formatting() -> None:
    assert format_bytes(55 * 2**30) == "55.0 GiB"
    assert format_bytes(512) == "512 B"
    assert format_duration(1200) == "20m"
    assert format_duration(5400) == "1h30m"
