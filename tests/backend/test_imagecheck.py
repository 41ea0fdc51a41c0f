"""The image check's verdict and sentence, from image ids as the engines report them (the sync
and the refusal of ``up`` run on the real test cluster: tests/realparts/test_image_sync.py)."""

from __future__ import annotations

from typing import Literal

from sparktui.backend.events import ImageSyncProgress
from sparktui.backend.imagesync import ImageCheck, ImageMismatch, default_source, progress_sentence

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64
ORDER = ["n0", "n1", "n2", "n3"]
Phase = Literal["skipped", "sending", "loading", "done", "failed"]


def check(ids: list[str | None]) -> ImageCheck:
    by_node = dict(zip(ORDER, ids, strict=True))
    return ImageCheck("img:1", by_node, default_source(ORDER, by_node))


def test_the_same_build_everywhere_is_ok() -> None:
    found = check([A, A, A, A])
    assert found.ok and found.reference == "n0"
    assert found.sentence() == "every node has img:1 aaaaaaaaaaaa"


def test_missing_and_other_builds_are_named_against_the_head() -> None:
    found = check([A, A, None, B])
    assert not found.ok
    assert found.missing == ["n2"] and found.different == ["n3"]
    assert found.sentence() == "image img:1 is not on n2; another build on n3 bbbbbbbbbbbb (n0 has aaaaaaaaaaaa)"
    assert str(ImageMismatch(found, "demo")).endswith("nothing was started. Copy it with: "
                                                     "sparktui image sync demo")


def test_without_it_on_the_head_the_first_node_that_has_it_is_the_reference() -> None:
    found = check([None, B, A, B])
    assert found.reference == "n1"
    assert found.missing == ["n0"] and found.different == ["n2"]


def test_nowhere_means_missing_everywhere() -> None:
    found = check([None, None, None, None])
    assert found.reference is None and found.missing == ORDER and found.different == []
    assert found.sentence() == "image img:1 is not on n0, n1, n2, n3"


def test_progress_sentences() -> None:
    def p(phase: Phase, done: int = 0, rate: float = 0.0, eta: float | None = None,
          image_id: str | None = None, error: str | None = None) -> str:
        return progress_sentence(ImageSyncProgress("n2", "img:1", "n0", phase, done, 2 << 30, rate,
                                                   eta, image_id, error))
    assert p("sending") == "n2: copying ~2.0 GiB from n0"
    assert p("sending", 1 << 30, rate=100 * 2**20, eta=10.24) == \
        "n2: sending 1.0 GiB of ~2.0 GiB from n0 at 100.0 MiB/s, 10s left"
    assert p("loading", 2 << 30) == "n2: 2.0 GiB sent; its engine is loading the layers"
    assert p("done", 2 << 30, image_id=A) == "n2: done, 2.0 GiB copied, now aaaaaaaaaaaa"
    assert p("failed", 5, error="docker load on n2: no space left") == \
        "n2: failed: docker load on n2: no space left"
