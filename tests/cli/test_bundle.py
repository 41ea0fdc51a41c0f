"""``sparktui bundle`` on the local cluster: a failed run of a recipe with secrets becomes one
archive the real ``tar`` lists, holding every part (logs cut to ``--max-log-mb`` and the cut said,
the stack dumps, the stall and canary events), with no secret value in any member in any form
the redactor knows; and a run whose nodes do not answer is bundled all the same, each node's file
saying why.

Runs real demo ranks on the local cluster (fixed ports: run it in a private network namespace).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path
from urllib.parse import quote

from sparktui.core.bundle import encodings
from tests.runner import local_env, secret_demo, sparktui_run

API_KEY = "sk-bundle-secret-9981"
HF_TOKEN = "hf_bündle/tok+5511"  # non-ASCII, '/' and '+': its JSON and URL forms differ from it
SECRETS = (API_KEY, HF_TOKEN)
PARTS = ("README.txt", "summary.txt", "plan.txt", "plan.json", "status.json", "events.jsonl",
         "history.jsonl", "nodes.json", "logs/r0.log", "logs/r1.log", "logs/r2.log",
         "logs/r3.log", "dumps/1/r2.txt", "nodes/local0.txt", "nodes/local3.txt")


def forms(value: str) -> list[bytes]:
    return [f.encode() for f in (value, *encodings(value))]


def members(archive: Path) -> dict[str, bytes]:
    """Each member's name (less the bundle's folder) and bytes, listed by the real tar first."""
    listed = subprocess.run(["tar", "tzf", str(archive)], capture_output=True, text=True,
                            check=True).stdout.split()
    with tarfile.open(archive) as tar:
        infos = tar.getmembers()
        assert [i.name for i in infos] == listed
        assert all(i.isfile() and i.mode == 0o600 and i.uid == 0 for i in infos)
        top = {i.name.split("/", 1)[0] for i in infos}
        assert len(top) == 1 and top.pop().startswith("sparktui-bundle-demo-secrets-")
        found = {}
        for info in infos:
            f = tar.extractfile(info)
            assert f is not None
            found[info.name.split("/", 1)[1]] = f.read()
    return found


def no_secret(found: dict[str, bytes]) -> None:
    for name, data in found.items():
        for value in SECRETS:
            for form in forms(value):
                assert form not in data, f"{form!r} in {name}"


def test_bundle_of_a_failed_run_holds_every_part_and_no_secret(tmp_path: Path) -> None:
    recipe = secret_demo(tmp_path / "recipes", api_key=API_KEY, hf_token=HF_TOKEN,
                         extra_env='SPARKTUI_DEMO_FAIL_RANK = "2"\n')
    env = local_env(tmp_path)
    cli = sparktui_run(env, timeout=120)
    up = cli("up", str(recipe), "--wait")
    assert up.returncode == 1, up.stdout + up.stderr
    (run,) = (tmp_path / "state" / "sparktui" / "runs").iterdir()
    assert API_KEY not in (run / "r0.log").read_text()  # masked as written; the bundle masks again
    # what the dump verb and the stall and canary watchers leave in the run (built elsewhere):
    # written here unmasked, as a writer that forgot would
    (run / "dumps" / "1").mkdir(parents=True)
    (run / "dumps" / "1" / "r2.txt").write_text(f"Thread 0x1 (active): main\n  key={API_KEY}\n")
    (run / "dumps" / "1" / "bad name").write_text("left out")
    os.symlink("/etc/passwd", run / "dumps" / "passwd")
    with open(run / "events.jsonl", "a") as f:
        f.write(json.dumps({"ts": "2026-01-01T00:00:00Z", "kind": "stall", "rank": 2,
                            "after": f"token {HF_TOKEN}"}) + "\n")
        f.write(json.dumps({"ts": "2026-01-01T00:00:01Z", "kind": "canary", "ok": False,
                            "url": f"http://x/?t={quote(HF_TOKEN, safe='')}",
                            "said": f"key {API_KEY}"}, ensure_ascii=False) + "\n")

    out = tmp_path / "out"
    out.mkdir()
    made = cli("bundle", str(recipe), "--output", str(out), "--max-log-mb", "0.002")
    assert made.returncode == 0, made.stdout + made.stderr
    (archive,) = out.iterdir()
    assert f"bundle: {archive} (" in made.stdout and "KiB" in made.stdout
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    found = members(archive)
    assert set(PARTS) <= set(found), sorted(found)
    assert list(found)[:2] == ["README.txt", "summary.txt"]
    readme = found["README.txt"].decode()
    assert "logs/r2.log: the last" in readme and "were cut (--max-log-mb)" in readme
    assert "'bad name' (no safe name)" in readme and "'passwd' (a link)" in readme
    assert all(len(found[f"logs/r{r}.log"]) <= 0.002 * 2**20 for r in range(4))
    assert b"key=********" in found["dumps/1/r2.txt"]
    history = [json.loads(line) for line in found["history.jsonl"].splitlines()]
    assert [h["kind"] for h in history] == ["stall", "canary"]
    assert "stall and canary history: 2 event(s)" in found["summary.txt"].decode()
    status = json.loads(found["status.json"])
    assert [r["state"] for r in status["ranks"]] == ["failed"] * 4
    assert any(c["state"] == "failed" for c in status["checks"])
    assert "first failure" not in status  # the verdicts are status's, not up's sentences
    assert b"## kernel\nLinux" in found["nodes/local0.txt"]
    assert b"## memory\nMemTotal:" in found["nodes/local0.txt"]
    assert b"--api-key ********" in found["plan.txt"]
    no_secret(found)

    cli("down", str(recipe))
    # the same run once its nodes do not answer: an SSH cluster whose nodes listen nowhere
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (tmp_path / "known_hosts").write_text("")
    nodes = "".join(f'[[nodes]]\nname = "gone{i}"\nhost = "127.0.0.1:1"\nfabric_ip = "127.0.0.1"\n'
                    for i in range(4))
    cluster = tmp_path / "gone.toml"
    cluster.write_text(f'name = "gone"\nkind = "ssh"\nhf_cache = "/tmp/hf"\n[ssh]\nuser = "x"\n'
                       f'identity = "{key}"\nknown_hosts = "{tmp_path / "known_hosts"}"\n'
                       f'[docker]\ngpus = "none"\n{nodes}')
    gone = cli("bundle", str(recipe), "--cluster", str(cluster), "--output",
               str(tmp_path / "gone.tar.gz"), "--run", run.name)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "node gone3: the node did not answer" in gone.stderr
    found = members(tmp_path / "gone.tar.gz")
    assert {f"nodes/gone{i}.txt" for i in range(4)} <= set(found)
    assert b"the node did not answer" in found["nodes/gone2.txt"]
    assert b"not attached: no node answered" in found["summary.txt"]
    status = json.loads(found["status.json"])
    assert status["ranks"] is None and any(c["state"] == "failed" for c in status["checks"])
    assert len(found["logs/r2.log"]) > 2048  # the default: whole
    no_secret(found)


def test_bundle_refuses_a_run_id_that_is_no_name(tmp_path: Path) -> None:
    recipe = secret_demo(tmp_path / "recipes", api_key=API_KEY, hf_token=HF_TOKEN)
    cli = sparktui_run(local_env(tmp_path))
    for bad in ("../../etc", "demo-secrets-x/../y"):
        res = cli("bundle", str(recipe), "--run", bad)
        assert res.returncode == 2 and "not a safe name" in res.stderr, res.stderr
    res = cli("bundle", str(recipe))
    assert res.returncode == 1 and "has no run to bundle yet" in res.stderr, res.stderr
