"""The log view on its own: batches, capture order, the bounded window, wrap and the cursor."""

from __future__ import annotations

from textual.app import App, ComposeResult

from sparktui.core.linefilter import LineFilter
from sparktui.ui.logstore import NO, RANK, LogLine, line_of
from sparktui.ui.widgets.log_view import LogView


class ViewApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LogView(max_lines=100)


def lines(rank: int, start: int, count: int, second: int = 0, text: str = "line") -> list[LogLine]:
    return [line_of(rank, no, f"2026-01-01T00:{second + i // 60:02d}:{i % 60:02d}.{rank}Z", f"{text} {no}")
            for i, no in enumerate(range(start, start + count))]


def rows(view: LogView) -> list[str]:
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_content_region.height)]


async def test_batches_keep_capture_order_and_stay_bounded() -> None:
    app = ViewApp()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(LogView)
        view.append(lines(0, 1, 5))
        view.append(lines(1, 1, 5))  # captured alongside rank 0's: merged in, not appended
        assert [(ln[RANK], ln[NO]) for ln in view.lines[:4]] == [(0, 1), (1, 1), (0, 2), (1, 2)]
        view.append(lines(0, 6, 200, second=1))
        assert len(view.lines) <= 100 and view.lines[-1][NO] == 205
        await pilot.pause()
        assert rows(view)[-1].startswith("r0 line 205")  # following: the end is on screen


async def test_wrap_cursor_and_highlight() -> None:
    app = ViewApp()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LogView)
        view.set_lines([line_of(0, 1, "2026-01-01T00:00:00Z", "x" * 70), *lines(0, 2, 3, second=1)])
        assert view.virtual_size.height == 4
        view.set_options(wrap=True)
        await pilot.pause()
        assert view.virtual_size.height > 4  # the long line takes more than one row
        assert all(len(r) <= view.scrollable_content_region.width for r in rows(view))
        view.set_follow(False)
        assert view.step(True) and view.cursor == 0
        assert view.step(True) and view.cursor == 1
        assert view.step(False) and view.cursor == 0 and not view.step(False)
        view.set_filter(LineFilter.parse("line"))
        view.set_options(wrap=False, prefix=False, timestamps=True)
        await pilot.pause()
        assert "00:01:00" in rows(view)[1]


async def test_placeholder_when_empty() -> None:
    app = ViewApp()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(LogView)
        view.set_placeholder("Not running · press u")
        await pilot.pause()
        assert "Not running · press u" in rows(view)[1]


async def test_reading_back_pauses_and_the_end_resumes() -> None:
    app = ViewApp()
    async with app.run_test(size=(60, 8)) as pilot:
        view = app.query_one(LogView)
        view.focus()
        view.append(lines(0, 1, 50))
        await pilot.pause()
        await pilot.press("pageup")
        assert not view.follow
        top = view.scroll_y
        view.append(lines(0, 51, 10, second=1))
        await pilot.pause()
        assert view.scroll_y == top  # new lines do not pull the view away from what is read
        await pilot.press("end")
        await pilot.pause()
        assert view.follow and view.is_vertical_scroll_end


async def test_control_characters_from_a_container_show_as_pictures() -> None:
    """ESC, BEL, backspace and C1's CSI in a line: shown (one cell each), never sent raw."""
    app = ViewApp()
    async with app.run_test(size=(60, 6)) as pilot:
        view = app.query_one(LogView)
        view.set_lines([line_of(0, 1, "2026-01-01T00:00:00Z", "a\x1b[2Jb\x07c\x08d\x9b31me[/red]\tf")])
        await pilot.pause()
        shown = rows(view)[0]
        assert shown == "r0 a␛[2Jb␇c␈d�31me[/red]   f", shown
        assert not any(ch in shown for ch in "\x1b\x07\x08\x9b")



async def test_wrap_is_a_repaint_not_a_layout_and_the_scrollbars_catch_up_when_shown() -> None:
    app = ViewApp()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(LogView)
        view.set_lines([line_of(0, no, "2026-01-01T00:00:00Z", f"{no} " + "x" * 70) for no in range(1, 41)])
        await pilot.pause()
        region = view.scrollable_content_region
        assert view.show_horizontal_scrollbar and view.max_scroll_x > 0  # sideways, unwrapped
        layouts = view._layout_updates  # Textual's count of the layouts the view asked for
        view.set_options(wrap=True)
        await pilot.pause()
        assert view.show_horizontal_scrollbar and view.max_scroll_x == 0  # an empty track
        assert view.scrollable_content_region == region  # the lines' room did not change
        assert all(len(r) <= region.width for r in rows(view))
        view.set_options(wrap=False)
        await pilot.pause()
        assert view.max_scroll_x > 0 and view._layout_updates == layouts  # repaints, no layout

        # following, the scrollbars are hidden and left alone; reading back shows them as the
        # view is now
        view.append([line_of(0, no, "2026-01-01T00:00:01Z", f"{no} more") for no in range(41, 81)])
        await pilot.pause()
        bar = view.vertical_scrollbar
        assert bar.window_virtual_size != view.virtual_size.height  # not updated while hidden
        view.set_follow(False)
        await pilot.pause()
        assert bar.window_virtual_size == view.virtual_size.height
        assert bar.position == view.scroll_y == view.max_scroll_y
        assert view.horizontal_scrollbar.window_virtual_size == view.virtual_size.width
