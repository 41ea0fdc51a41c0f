"""The Docker log pump's parts, alone: lines cut at the local shim's cap whatever the chunks or
frames the stream arrives in, and a hand-off that makes the reading thread wait, never the loop."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections.abc import Callable

from sparktui.agents.local_shim import CONTINUED, LineCutter
from sparktui.backend.logpump import FrameLines, Handoff

CAP = 8
# short lines, an empty one, CRLF, lines of exactly the cap and one over it, a long one, two- to
# four-byte characters around the cuts, an invalid byte, and a last line without its newline
STREAM = ("ab\n\ncr\r\n12345678\n123456789\n" + "x" * 30 + "\n" + "aé€𝄞" * 4 + "\n"
          ).encode() + b"\xff" * 3 + "é€𝄞é€𝄞tail".encode()


def lines_of(stream: bytes) -> list[str]:
    """The lines of ``stream`` (a CR before a newline dropped), as the shim writes them."""
    return [line.removesuffix(b"\r").decode(errors="replace") for line in stream.split(b"\n")]


def joined(out: list[str]) -> list[str]:
    """Pieces back into lines: a piece marked ``CONTINUED`` carries on the line before it."""
    lines: list[str] = []
    for text in out:
        if text.startswith(CONTINUED) and lines:
            lines[-1] += text[len(CONTINUED):]
        else:
            lines.append(text)
    return lines


def cut_at(positions: tuple[int, ...], data: bytes) -> list[bytes]:
    edges = [0, *positions, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def test_lines_are_the_same_whatever_the_chunks() -> None:
    whole = LineCutter(CAP)
    expected = whole.feed(STREAM) + whole.close()
    assert joined(expected) == lines_of(STREAM)  # every character, none cut in two
    for text in expected:
        body = text.removeprefix(CONTINUED)
        assert len(body.encode()) - 2 * body.count("\ufffd") <= CAP, text  # one byte each
    for i in range(len(STREAM) + 1):
        for j in range(i, len(STREAM) + 1):
            cutter = LineCutter(CAP)
            out = [line for chunk in cut_at((i, j), STREAM) for line in cutter.feed(chunk)]
            assert out + cutter.close() == expected, (i, j)


class OneAtATime(LineCutter):
    """The cutter without its quick way for a read of short lines (``_short_lines``)."""

    def _short_lines(self, out: list[str], data: bytes, start: int) -> int:
        return start


def test_short_lines_split_at_once_are_cut_as_one_at_a_time() -> None:
    rnd = random.Random(23)
    words = [b"\n", b"\r\n", b"\r", b"ab", b"x" * 7, b"y" * 9, "\u00e9\u20ac\U0001d11e".encode(),
             b"\xff", b"\xe2\x82", b"sk-1234"]
    for _ in range(2000):
        data = b"".join(rnd.choice(words) for _ in range(rnd.randint(0, 30)))
        positions = tuple(sorted(rnd.sample(range(len(data) + 1), min(3, len(data) + 1))))
        quick, slow = LineCutter(CAP, whole=[b"sk-1234"]), OneAtATime(CAP, whole=[b"sk-1234"])
        got = [t for chunk in cut_at(positions, data) for t in quick.feed(chunk)] + quick.close()
        want = [t for chunk in cut_at(positions, data) for t in slow.feed(chunk)] + slow.close()
        assert got == want, (data, positions)


def test_a_cutter_holds_a_piece_back_at_most() -> None:
    cutter = LineCutter(1024)
    pieces = 0
    for _ in range(1000):
        pieces += len(cutter.feed(b"a" * 5000))  # one line of 5 MB without a newline
        assert len(cutter.pending) <= 1024
    last = cutter.close()
    assert pieces + len(last) == -(-5_000_000 // 1024) and all(t.startswith(CONTINUED) for t in last)


def test_frames_lose_their_timestamps_and_keep_the_first() -> None:
    """Docker cuts a line into 16 KiB messages sharing its timestamp, one frame each; a whole
    line in one frame takes the quick way, and gives what the cutter gives."""
    line = b"0123456789abcdefghij\n"
    expected = ["01234567", CONTINUED + "89abcdef", CONTINUED + "ghij", "next"]
    assert FrameLines(CAP).feed(b"2026-01-01T00:00:01Z crlf\r\n") == [
        ("2026-01-01T00:00:01.000000000Z", "crlf")]
    for i in range(len(line) + 1):
        for j in range(i, len(line) + 1):
            frames = FrameLines(CAP)
            out = []
            parts = [part for part in cut_at((i, j), line) if part]  # docker sends none empty
            for n, part in enumerate(parts):
                out += frames.feed(f"2026-01-01T00:00:0{n}.5Z ".encode() + part)
            out += frames.feed(b"2026-01-01T00:00:09Z next\n")
            out += frames.close()
            assert out == [("2026-01-01T00:00:00.500000000Z", t) for t in expected[:3]] + [
                ("2026-01-01T00:00:09.000000000Z", "next")], (i, j)  # docker trims zeros


async def until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll the reader thread's progress from the loop (a slow box starts threads late)."""
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, "the reader thread made no progress"
        await asyncio.sleep(0.01)


async def test_the_reader_waits_for_room_and_the_loop_never_waits() -> None:
    handoff = Handoff(asyncio.get_running_loop(), limit=100)
    put: list[int] = []

    def reader() -> None:
        for i in range(10):
            assert handoff.put([("ts", f"{i}" * 50)])
            put.append(i)
        handoff.finish()

    thread = threading.Thread(target=reader)
    started = time.monotonic()
    thread.start()
    await until(lambda: len(put) >= 2)
    await asyncio.sleep(0.3)  # time for a third put, were there room for it
    assert put == [0, 1]  # 100 characters held: the third put waits
    got: list[str] = []
    while (batch := await handoff.take()) is not None:
        got += [text for _, text in batch]
        await asyncio.sleep(0)
    thread.join(5)
    assert got == [f"{i}" * 50 for i in range(10)] and time.monotonic() - started < 5


async def test_a_waiting_reader_stops_when_the_consumer_leaves() -> None:
    handoff = Handoff(asyncio.get_running_loop(), limit=10)
    answers: list[bool] = []

    def reader() -> None:
        for _ in range(3):
            answers.append(handoff.put([("ts", "x" * 10)]))

    thread = threading.Thread(target=reader)
    thread.start()
    await until(lambda: answers == [True])
    await asyncio.sleep(0.2)  # the second put is waiting for room
    handoff.close()
    thread.join(5)
    assert answers == [True, False, False]


async def test_an_error_of_the_stream_is_raised_in_the_loop() -> None:
    handoff = Handoff(asyncio.get_running_loop())
    handoff.put([("ts", "last line")])
    handoff.finish(ConnectionResetError("gone"))
    assert await handoff.take() == [("ts", "last line")]
    try:
        await handoff.take()
    except ConnectionResetError as exc:
        assert str(exc) == "gone"
    else:
        raise AssertionError("no error")


def test_no_cut_splits_a_secret_whatever_the_chunks() -> None:
    """The follower masks a secret by searching each line for it: a 32 KiB cut through one
    would leave two halves that no search finds. The cutter moves such a cut before it."""
    secret = "sk-live-0123456789"
    line = ("y" * 13 + secret) * 5
    data = (line + "\n" + "z" * 3 + secret + "\n").encode()
    for positions in itertools.combinations(range(1, len(data)), 2):
        cutter = LineCutter(24, whole=[secret.encode()])
        out = [text for chunk in cut_at(positions, data) for text in cutter.feed(chunk)]
        out += cutter.close()
        assert joined(out) == [line, "zzz" + secret]
        pieces = [t.removeprefix(CONTINUED) for t in out]
        assert sum(p.count(secret) for p in pieces) == 6, (positions, out)
        assert all(len(p.encode()) <= 24 for p in pieces)
    frames = FrameLines(cap=24, whole=[secret])  # as the Docker pump gets it from the follower
    got = frames.feed(b"2026-12-01T12:00:00.000000001Z " + data[:40]) + frames.feed(
        b"2026-12-01T12:00:00.000000001Z " + data[40:len(line) + 1])
    assert sum(t.removeprefix(CONTINUED).count(secret) for _, t in got) == 5
