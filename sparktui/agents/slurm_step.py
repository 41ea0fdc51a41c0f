"""The supervisor of one rank's Slurm step: standard library only, run on the rank's compute
node by ``srun`` inside the run's job (``core/slurmjob.step_argv``).

Slurm does not see inside Docker, so this process is the step: it starts the rank's container
on the node's own Docker engine, copies the container's output with Docker's time stamps into
the rank's log file in the shared folder (sparktui follows that file through the login node,
by byte offset: a dropped connection resumes with no gap and no repeat), and writes the exit
code beside it when the container ends. A TERM (``scancel --signal=TERM`` of the step:
sparktui's restart and ``down``) stops the container before this process ends; a SIGKILL
(a bare ``scancel`` of a step) cannot be caught and leaves the container, which the job's
epilog removes by its ``sparktui.slurm.job`` label.

The spec is one JSON file (``argv``: what follows ``docker run -d``; ``env``: variables the
Docker client passes on by name, so a secret value is never on a command line; ``log``,
``exit``, ``cid``: the files it writes; ``docker``: the client; ``host``: the engine's socket
URL; ``stop_timeout``), written 0600 by sparktui and removed once read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

CHUNK = 1 << 16
EXIT_SETUP = 125  # as docker run: the container could not be started


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e9):09d}Z"


def _write_atomic(path: str, text: str) -> None:
    """A file sparktui polls for: complete under its name, or absent."""
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class Step:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.env = {**os.environ, **{str(k): str(v) for k, v in spec.get("env", {}).items()}}
        if spec.get("host"):
            self.env["DOCKER_HOST"] = str(spec["host"])
        self.docker = str(spec.get("docker") or "docker")
        self.log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                           0o600)
        self.cid: str | None = None
        self.waiter: subprocess.Popen[str] | None = None
        self.stopping = threading.Event()
        self.stop_sent = False

    def say(self, text: str) -> None:
        """A line of this supervisor's own, in the log's format (the engine's lines are
        Docker's, time-stamped by Docker)."""
        for line in text.splitlines() or [""]:
            os.write(self.log, f"{_now()} sparktui step: {line}\n".encode())

    def docker_cmd(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.docker, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def start(self) -> bool:
        done = self.docker_cmd("run", "-d", *self.spec["argv"])
        if done.returncode != 0:
            self.say(f"docker run failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            return False
        self.cid = done.stdout.strip().splitlines()[-1]
        # waiting from the start: the exit code is had even when the job's end (its epilog)
        # removes the container before this process reads it
        self.waiter = subprocess.Popen([self.docker, "wait", self.cid], env=self.env,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        _write_atomic(self.spec["cid"], self.cid + "\n")
        if self.stopping.is_set():  # a TERM came while it started
            self.stop()
        return True

    def stop(self) -> None:
        """TERM: the container first (its engine exits as ``docker stop`` has it), then us."""
        self.stopping.set()
        if self.cid is not None and not self.stop_sent:  # none yet: start() stops it once made
            self.stop_sent = True
            timeout = str(int(self.spec.get("stop_timeout", 10)))
            threading.Thread(target=self.docker_cmd, args=("stop", "-t", timeout, self.cid),
                             daemon=True).start()

    def copy_logs(self) -> None:
        """Docker's output of the container, both streams, time-stamped, into the log until
        the container ends (``docker logs -f`` returns then)."""
        assert self.cid is not None
        with subprocess.Popen([self.docker, "logs", "-f", "--timestamps", self.cid], env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as logs:
            assert logs.stdout is not None
            fd = logs.stdout.fileno()
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                os.write(self.log, chunk)

    def finish(self) -> int:
        assert self.cid is not None
        assert self.waiter is not None
        said = (self.waiter.communicate()[0] or "").strip()
        code = int(said) if said.lstrip("-").isdigit() else None
        finished = self.docker_cmd("inspect", "-f", "{{.State.FinishedAt}}", self.cid).stdout.strip()
        _write_atomic(self.spec["exit"], json.dumps({"exit_code": code, "finished_at": finished or _now(),
                                                     "container_id": self.cid}) + "\n")
        return code if code is not None else 1


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: slurm_step.py SPEC.json  (the supervisor of one rank's Slurm step; "
              "see its docstring)", file=sys.stderr if len(argv) != 2 else sys.stdout)
        return 2 if len(argv) != 2 else 0
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    os.unlink(argv[1])  # it may carry secrets: read once, then gone
    step = Step(spec)
    signal.signal(signal.SIGTERM, lambda *_: step.stop())
    signal.signal(signal.SIGINT, lambda *_: step.stop())
    if not step.start():
        _write_atomic(spec["exit"], json.dumps({"exit_code": None, "finished_at": _now(),
                                                "container_id": None, "error": "not started"}) + "\n")
        return EXIT_SETUP
    try:
        step.copy_logs()
    finally:
        code = step.finish()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
