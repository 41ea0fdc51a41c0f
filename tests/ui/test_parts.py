"""The console's parts that need no screen: the log window, themes, settings, formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len

from sparktui.core.blockgrep import BlockSearch
from sparktui.core.linefilter import LineFilter
from sparktui.core.rungrep import RunScan
from sparktui.core.runstore import RunStore
from sparktui.ui.formatting import bar, checks_text, eta, uptime
from sparktui.ui.logstore import NO, TEXT, TS, LogStore, line_of, read_tail
from sparktui.ui.screens.add_check_screen import parse_ranks
from sparktui.ui.settings import load_settings, load_state, save_state
from sparktui.ui.themes import ThemeFileError, load_themes, rank_colors, theme_from_data
from sparktui.ui.widgets.one_line import middle_cut
from tests.conftest import ROOT


def test_log_window_is_bounded_deduplicated_and_merged() -> None:
    store = LogStore(2, window=3)
    assert store.add(0, [(1, "2026-01-01T00:00:01Z", "a"), (2, "2026-01-01T00:00:03Z", "b")])
    assert store.add(0, [(2, "2026-01-01T00:00:03Z", "b")]) == []  # already there
    store.add(1, [(1, "2026-01-01T00:00:02Z", "c")])
    assert [ln[TEXT] for ln in store.view([0, 1])] == ["a", "c", "b"]
    assert store.complete(0)
    store.add(0, [(3, "2026-01-01T00:00:04Z", "d"), (4, "2026-01-01T00:00:05Z", "e")])
    assert [ln[NO] for ln in store.lines(0)] == [2, 3, 4] and not store.complete(0)
    assert store.find(0, 3) == line_of(0, 3, "2026-01-01T00:00:04Z", "d") and store.find(0, 1) is None
    assert store.find(0, 3)[TS] == "2026-01-01T00:00:04.000000000Z"  # type: ignore[index]


def test_scan_and_tail_read_every_captured_line(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create("demo")
    run.log(0).append([(f"2026-01-01T00:00:{i:02d}Z", f"line {i}") for i in range(50)])
    run.log(1).append([(f"2026-01-01T00:00:{i:02d}.5Z", f"other {i}") for i in range(50)])
    assert [ln[NO] for ln in read_tail(run, 0, 5)] == [46, 47, 48, 49, 50]
    paths = {rank: run.log(rank).path for rank in (0, 1)}
    result = RunScan(paths, BlockSearch.of(LineFilter.parse(r"(line|other) 4\d")), cap=15).run()
    assert result.total == 20 and len(result.lines) == 15
    assert [ln[TEXT] for ln in result.lines[-2:]] == ["line 49", "other 49"]
    assert result.scanned == {0: 50, 1: 50}


def test_themes_from_files(tmp_path: Path) -> None:
    shipped = load_themes([ROOT / "themes"])
    assert not shipped.problems
    names = {t.name for t in shipped.themes}
    assert {"sparktui-dark", "sparktui-light", "sparktui-contrast"} <= names
    for theme in shipped.themes:
        assert len(rank_colors(theme.variables)) >= 4
    (tmp_path / "bad.toml").write_text('primary = "#zzz"\n')
    (tmp_path / "typo.toml").write_text('primary = "#112233"\nbackgrund = "#000000"\n')
    (tmp_path / "ok.toml").write_text('primary = "#112233"\ndark = false\n')
    loaded = load_themes([tmp_path])
    assert [t.name for t in loaded.themes] == ["ok"]
    assert len(loaded.problems) == 2 and any("backgrund" in p for p in loaded.problems)
    with pytest.raises(ThemeFileError, match="rank_colors"):
        theme_from_data({"primary": "#123456", "rank_colors": "red"}, "x")


def test_settings_and_state(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('theme = "sparktui-light"\n[keys]\nrestart = "R"\n'
                                          '[logs]\nwindow = 500\n')
    settings = load_settings(tmp_path)
    assert settings.theme == "sparktui-light" and settings.keys == {"restart": "R"}
    assert settings.window == 500 and not settings.problems
    save_state({"theme": "a"}, tmp_path)
    save_state({"recipe": "b"}, tmp_path)
    assert load_state(tmp_path) == {"theme": "a", "recipe": "b"}


def test_small_formats() -> None:
    assert uptime(None) == "-" and uptime(59) == "59s" and uptime(61) == "1m01s" and uptime(7260) == "2h01m"
    assert eta(75) == "1:15" and eta(None) == "--:--"
    assert bar(0.0) == "░░░░░░" and bar(1.0) == "██████" and len(bar(0.37)) == 6
    assert checks_text({"passed": 3, "failed": 0, "pending": 0}) == ("3/3 ✓", "ready")
    assert checks_text({"passed": 1, "failed": 1, "pending": 1})[0] == "1/3 ✗1"
    assert checks_text({}) == ("-", "pending")


def test_added_check_ranks() -> None:
    assert parse_ranks("", 4) == "any" and parse_ranks("ALL", 4) == "all"
    assert parse_ranks("2, 0", 4) == [0, 2]
    with pytest.raises(ValueError, match="does not exist"):
        parse_ranks("4", 4)
    with pytest.raises(ValueError, match="rank numbers"):
        parse_ranks("first", 4)


def test_timestamps_sort_as_text_whatever_their_fraction() -> None:
    from sparktui.ui.logstore import norm_ts

    docker_trimmed = ["2026-01-01T12:00:05Z", "2026-01-01T12:00:05.1Z", "2026-01-01T12:00:05.100000001Z"]
    assert [norm_ts(ts) for ts in docker_trimmed] == ["2026-01-01T12:00:05.000000000Z",
                                                      "2026-01-01T12:00:05.100000000Z",
                                                      "2026-01-01T12:00:05.100000001Z"]
    local = "2026-01-01T12:00:05.123456000Z"
    assert norm_ts(local) is local  # already nine digits: the same string, no copy per line
    assert norm_ts("2026-01-01T12:00:05.123456Z") == local


def test_the_console_settles_the_garbage_collector_in_its_own_process() -> None:
    """In a child process: freezing here would keep every later test's app alive for good."""
    import subprocess
    import sys

    code = ("import gc; from sparktui.ui.gcpolicy import settle, YOUNG_THRESHOLD; before = gc.get_threshold(); "
            "settle(); after = gc.get_threshold(); "
            "assert after == (YOUNG_THRESHOLD, before[1], before[2]), after; "
            "assert gc.get_freeze_count() > 1000, gc.get_freeze_count(); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("width", [0, 1, 2, 5, 17, 40, 80])
def test_a_cut_line_keeps_both_ends_in_its_width(width: int) -> None:
    sentence = "checkpoint folder /srv/hf/hub/models--x--y/snapshots/0123456789abcdef does not exist"
    cut = middle_cut(sentence, width)
    assert len(cut) == min(width, len(sentence))
    if 5 <= width < len(sentence):
        assert cut.startswith(sentence[:2]) and cut.endswith(sentence[-2:]) and "…" in cut
    assert middle_cut(sentence, len(sentence)) == sentence


@pytest.mark.parametrize("width", [2, 5, 6, 17, 40])
def test_a_cut_line_counts_wide_characters_as_two_cells(width: int) -> None:
    sentence = "チェックポイント /srv/hf/日本語モデル/snapshots/0123 does not exist ✅"
    cut = middle_cut(sentence, width)
    assert width - 1 <= cell_len(cut) <= width  # one short where a wide character would straddle
    assert "…" in cut
    if width >= 5:  # both ends kept, each a wide character
        assert cut.startswith("チ") and cut.endswith("✅")
    assert middle_cut(sentence, cell_len(sentence)) == sentence

