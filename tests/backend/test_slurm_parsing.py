"""What the Slurm runtime reads back from the login node, checked on text Slurm and the step
supervisor write: ``squeue`` lines, the survey of a run's folder, a rank's log bytes (cut and
resumed at the cursors it hands out). The runtime itself is tested on the test cluster's real
Slurm (tests/realparts/test_slurm_runtime.py)."""

from __future__ import annotations

from sparktui.agents.local_shim import CONTINUED, MAX_LINE_BYTES
from sparktui.backend.runtimes.slurm import _Lines, parse_jobs, parse_state, parse_survey, state_of

TS = "2026-12-01T21:54:17.000000001Z"


def test_squeue_lines_and_the_comment_sparktui_wrote() -> None:
    text = ("12|RUNNING|None|node[0-3]|1:59:10|root|2026-12-01T21:54:10|"
            "sparktui:owner=root@vm,plan=abc123,dir=/shared/r-1\n"
            "13|PENDING|Resources||2:00:00|bob|2026-12-01T21:55:00|a comment | with bars\n"
            "not a job line\n")
    mine, theirs = parse_jobs(text)
    assert (mine.id, mine.running, mine.owner, mine.plan, mine.folder, mine.submitted) == (
        "12", True, "root@vm", "abc123", "/shared/r-1", "2026-12-01T21:54:10Z")
    assert (theirs.state, theirs.reason, theirs.owner, theirs.folder) == ("PENDING", "Resources", "", "")


def test_a_folder_survey_keeps_each_ranks_attempts() -> None:
    text = ("@dir /shared/r-1\n"
            '@rank rank0-1\n{"sparktui.rank": "0"}\n{"exit_code": 4, "finished_at": "x"}\nabc\n'
            '@rank rank0-2\n{"sparktui.rank": "0"}\n\ndef\n'
            "@rank rank1-1\nnot json\n\n\n")
    folder = parse_survey(text)["/shared/r-1"]
    attempt, files = folder.latest(0) or (0, None)
    assert attempt == 2 and files is not None and files.cid == "def" and files.exit_text == ""
    assert folder.ranks[0][1].exit_text.startswith('{"exit_code": 4')
    assert folder.latest(1) is None  # labels that are not JSON: no attempt
    assert parse_state('{"exit_code": 0}\n\nlast line\n') == ('{"exit_code": 0}', "")


def test_a_rank_whose_job_ended_without_an_exit_record_is_lost_with_slurms_words() -> None:
    from sparktui.backend.runtimes.slurm import Job

    job = Job("9", "NODE_FAIL", "NodeDown", "node[0-3]", "", "root", "root@vm", "p", "/s")
    st = state_of("slurm-9-r2-1", "n", "", "cid", job, {}, "down*|slurmd stopped", f"{TS} tick 4")
    assert st.status == "dead" and st.finished_at == TS
    assert st.lost == "Slurm job 9 ended NODE_FAIL (NodeDown); its node is down* (slurmd stopped)"
    running = state_of("slurm-9-r2-1", "n", "", "cid", Job("9", "RUNNING", "None", "", "", "", "", "",
                                                          "/s"), {})
    assert running.running and running.lost is None


def test_a_rank_that_exited_as_slurm_ended_its_job_says_how_the_job_ended() -> None:
    from sparktui.backend.runtimes.slurm import Job

    exit_text = '{"exit_code": 0, "finished_at": "2026-12-04T19:00:13Z"}'
    ending = Job("9", "COMPLETING", "NodeDown", "node[0-3]", "", "root", "root@vm", "p", "/s")
    st = state_of("slurm-9-r1-1", "n", exit_text, "cid", ending, {}, "down|sparktui: node down")
    assert st.status == "exited" and st.exit_code == 0
    assert st.lost == "Slurm job 9 is completing (NodeDown); its node is down (sparktui: node down)"
    running = Job("9", "RUNNING", "None", "node[0-3]", "", "root", "root@vm", "p", "/s")
    assert state_of("slurm-9-r1-1", "n", exit_text, "cid", running, {}, "idle|none").lost is None


def test_a_rank_whose_container_never_started_could_not_start() -> None:
    from sparktui.backend.runtimes.slurm import Job

    running = Job("9", "RUNNING", "None", "node[0-3]", "", "root", "root@vm", "p", "/s")
    never = '{"exit_code": null, "finished_at": "2026-12-04T19:54:47Z", "container_id": null, "error": "not started"}'
    st = state_of("slurm-9-r1-3", "n", never, "", running, {})
    assert st.status == "exited" and st.exit_code is None and st.unstarted
    assert not state_of("slurm-9-r1-3", "n", '{"exit_code": 0}', "cid", running, {}).unstarted


def test_log_bytes_become_lines_and_a_long_one_pieces_resumable_inside_it() -> None:
    secret = "hf_" + "s" * 40
    long = ("x" * (MAX_LINE_BYTES - 10) + secret + "y" * 50_000).encode()
    data = f"{TS} first\n".encode() + TS.encode() + b" " + long + b"\n" + f"{TS} last\n".encode()
    reader = _Lines(None, [secret])
    chunks = [c for i in range(0, len(data), 7000) if (c := reader.feed(data[i:i + 7000]))]
    lines = [line for c in chunks for line in c.lines]
    assert lines[0] == (TS, "first") and lines[-1] == (TS, "last")
    pieces = [text for _, text in lines[1:-1]]
    assert len(pieces) >= 3 and all(len(p.encode()) <= MAX_LINE_BYTES + len(CONTINUED.encode()) for p in pieces)
    assert all(p.startswith(CONTINUED) for p in pieces[1:]) and not pieces[0].startswith(CONTINUED)
    assert any(secret in p for p in pieces)  # never cut inside it
    assert "".join(p.removeprefix(CONTINUED) for p in pieces) == long.decode()
    assert all(ts == TS for ts, _ in lines)
    # a resume from any cursor inside the long line goes on with its pieces, no byte twice
    inside = next(c.cursor for c in chunks if "+" in c.cursor)
    offset = int(inside.split("+")[0])
    again = _Lines(inside, [secret])
    rest = [line for c in [again.feed(data[offset:])] if c for line in c.lines]
    before = [line for c in chunks if int(c.cursor.split("+")[0]) <= offset for line in c.lines]
    assert rest[0][1].startswith(CONTINUED) and rest[0][0] == TS
    joined = "".join(t.removeprefix(CONTINUED) for _, t in before[1:] + rest[:-1])
    assert joined == long.decode() and rest[-1] == (TS, "last")
