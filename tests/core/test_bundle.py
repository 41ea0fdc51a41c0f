"""The pure half of ``sparktui bundle``: a log's end cut at a line's start, the forms of a secret
it masks, and the same members giving the same archive bytes (0600)."""

from __future__ import annotations

import stat
import tarfile
from pathlib import Path

from sparktui.core.bundle import Member, bundle_redactor, encodings, masked, tail, write_bundle


def test_tail_starts_at_a_line_and_says_what_it_cut(tmp_path: Path) -> None:
    log = tmp_path / "r0.log"
    log.write_bytes(b"aaaa\nbbbb\ncccc\n")
    assert tail(log, 100) == (b"aaaa\nbbbb\ncccc\n", 0)
    assert tail(log, 10) == (b"bbbb\ncccc\n", 5)  # the cut falls on a line's start: kept whole
    assert tail(log, 8) == (b"cccc\n", 10)  # inside a line: from the next one


def test_every_form_of_a_secret_is_masked() -> None:
    secret = "hf_bündle/tok+5511"
    assert {"hf_b\\u00fcndle/tok+5511", "hf_b%C3%BCndle%2Ftok%2B5511"} <= set(encodings(secret))
    redactor = bundle_redactor([secret])
    for form in (secret, *encodings(secret)):
        assert masked(f"x {form} y".encode(), redactor) == b"x ******** y"
    assert masked(b"\xff raw", redactor) == b"\xff raw"  # bytes that are no UTF-8 pass


def test_the_same_members_make_the_same_private_archive(tmp_path: Path) -> None:
    members = [Member("README.txt", b"hi\n", 1_700_000_000), Member("logs/r0.log", b"l\n", 1.5)]
    a, b = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    write_bundle(a, "sparktui-bundle-x", members)
    write_bundle(b, "sparktui-bundle-x", members)
    assert a.read_bytes() == b.read_bytes()
    assert stat.S_IMODE(a.stat().st_mode) == 0o600
    with tarfile.open(a) as tar:
        assert tar.getnames() == ["sparktui-bundle-x/README.txt", "sparktui-bundle-x/logs/r0.log"]
        assert tar.getmember("sparktui-bundle-x/README.txt").mtime == 1_700_000_000
    assert not list(tmp_path.glob(".*.tmp"))
