"""A follower killed at any moment loses no line and writes none twice (the local cluster).

``demo-tp4`` floods (400 lines a second per rank, plus its one-a-second ticks); ``sparktui logs
-f`` follows it and is SIGKILLed a few times, mostly between reading lines into the run's file
and saving its cursor (saved at most twice a second). The next follower cuts the file back to the
saved cursor and reads on. At the end rank 1's file must hold the flood and the ticks exactly
once each, in order.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparktui.demo.traffic import flood_lines
from tests.conftest import ROOT

FLOOD = re.compile(r"^(Decode batch\.|Prefill batch\.|Cache hit rate:|INFO:     10\.0\.0\.)")
TICK = re.compile(r"^demo tick (\d+)$")
PREFIX = re.compile(r"^\[[^\]]*\] ")  # "[2026-11-29 17:50:04 TP1] "


def test_a_follower_killed_mid_flood_leaves_no_gap_and_no_duplicate(tmp_path: Path) -> None:
    folder = tmp_path / "demo-flood"
    folder.mkdir()
    text = (ROOT / "recipes" / "demo-tp4" / "recipe.toml").read_text()
    assert text.count("\n[env]\n") == 1
    (folder / "recipe.toml").write_text(text.replace("\n[env]\n", '\n[env]\nSPARKTUI_DEMO_FLOOD = "400"\n'))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sparktui", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    rng = random.Random(5)
    try:
        up = cli("up", str(folder), "--wait")
        assert up.returncode == 0, up.stderr
        [run_dir] = (tmp_path / "state").glob("**/runs/demo-flood-*")

        def rewinds() -> int:
            events = (run_dir / "events.jsonl").read_text().splitlines()
            return sum(json.loads(e)["kind"] == "log-rewound" for e in events)

        kills = 0
        while kills < 3 or (rewinds() == 0 and kills < 10):
            log = run_dir / "r1.log"
            size = log.stat().st_size if log.exists() else 0
            follower = subprocess.Popen([sys.executable, "-m", "sparktui", "logs", str(folder), "-f",
                                         "--rank", "1"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
            # killed once it follows (the file grows), however long a loaded machine took to
            # start it, at a random moment of its writing
            end = time.monotonic() + 60
            while (log.stat().st_size if log.exists() else 0) <= size:
                assert time.monotonic() < end and follower.poll() is None, "the follower never wrote"
                time.sleep(0.02)
            time.sleep(0.5 + rng.random())
            follower.send_signal(signal.SIGKILL)
            _, stderr = follower.communicate(timeout=30)
            assert "Traceback" not in stderr, stderr
            kills += 1
        assert rewinds() > 0, f"no follower was killed ahead of its saved cursor in {kills} tries"
        time.sleep(1.0)
        last = cli("logs", str(folder), "--rank", "1")  # catches up, then prints the file
        assert last.returncode == 0, last.stderr
    finally:
        cli("down", str(folder))

    raw = [line.partition("\t")[2] for line in (run_dir / "r1.log").read_text().splitlines()]
    printed = last.stdout.splitlines()  # the file as it was then (down read on after)
    assert printed == [f"r1 {t}" for t in raw[:len(printed)]]
    texts = [PREFIX.sub("", t) for t in raw]
    first = texts.index(flood_lines(0, 1)[0])  # the flood starts once the rank is ready
    flood = [t for t in texts[first:] if FLOOD.match(t)]
    ticks = [int(m.group(1)) for t in texts if (m := TICK.match(t))]
    assert len(flood) > 2000, len(flood)
    assert flood == flood_lines(0, len(flood)), "a flood line is missing or written twice"
    assert ticks == list(range(1, len(ticks) + 1)), ticks
