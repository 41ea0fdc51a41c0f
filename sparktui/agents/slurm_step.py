"""The supervisor of one rank's Slurm step: standard library only, run on the rank's compute
node by ``srun`` inside the run's job (``core/slurmjob.step_argv``).

Slurm does not see inside Docker, so this process is the step: it runs the rank's container
on the node's own Docker engine (one attached ``docker run``), copies the container's output,
each line time-stamped as it arrives, into the rank's log file in the shared folder (sparktui
follows that file through the login node, by byte offset: a dropped connection resumes with no
gap and no repeat), and writes the exit code beside it when the container ends. A TERM
(``scancel --signal=TERM`` of the step: sparktui's restart and ``down``) stops the container
before this process ends; a SIGKILL
(a bare ``scancel`` of a step) cannot be caught and leaves the container, which the job's
epilog removes by its ``sparktui.slurm.job`` label.

The spec is one JSON file (``argv``: what follows ``docker run``; ``env``: variables the
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
from typing import IO, Any

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
        self.written = threading.Lock()  # whole lines, one writer at a time
        self.cid: str | None = None
        self.run: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.stop_sent = False

    def write(self, data: bytes) -> None:
        with self.written:
            os.write(self.log, data)

    def say(self, text: str) -> None:
        """A line of this supervisor's own, in the log's format."""
        self.write("".join(f"{_now()} sparktui step: {line}\n"
                           for line in text.splitlines() or [""]).encode())

    def start(self) -> bool:
        """One ``docker run``, attached: the container's output on its two pipes and its exit
        status as the command's own (one Docker client a rank: on a node of few cores each
        client's start is a good part of a launch). Its id comes from ``--cidfile``, written
        once the container is created."""
        cidfile = f"{self.spec['cid']}.new{os.getpid()}"
        self.run = subprocess.Popen(
            [self.docker, "run", f"--cidfile={cidfile}", "--sig-proxy=false", *self.spec["argv"]],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while True:
            try:
                with open(cidfile, encoding="ascii") as f:
                    cid = f.read().strip()
            except FileNotFoundError:
                cid = ""
            if cid:
                break
            if self.run.poll() is not None:
                assert self.run.stderr is not None
                said = self.run.stderr.read().decode("utf-8", "replace").strip()
                self.say(f"docker run failed (exit {self.run.returncode}): {said[-2000:]}")
                return False
            time.sleep(0.01)
        os.unlink(cidfile)
        self.cid = cid
        _write_atomic(self.spec["cid"], cid + "\n")
        if self.stopping.is_set():  # a TERM came while it started
            self.stop()
        return True

    def stop(self) -> None:
        """TERM: the container first (its engine exits as ``docker stop`` has it), then us."""
        self.stopping.set()
        if self.cid is not None and not self.stop_sent:  # none yet: start() stops it once made
            self.stop_sent = True
            timeout = str(int(self.spec.get("stop_timeout", 10)))
            threading.Thread(target=subprocess.run, args=([self.docker, "stop", "-t", timeout,
                                                           self.cid],),
                             kwargs={"env": self.env, "capture_output": True, "check": False},
                             daemon=True).start()

    def copy(self, pipe: IO[bytes]) -> None:
        """One of the container's streams into the log, each whole line stamped as it arrives
        (a line longer than ``CHUNK`` * 16 goes as pieces of that size: memory stays bounded)."""
        fd = pipe.fileno()
        held = b""
        while chunk := os.read(fd, CHUNK):
            *lines, held = (held + chunk).split(b"\n")
            while len(held) > CHUNK * 16:
                lines.append(held[:CHUNK * 16])
                held = held[CHUNK * 16:]
            if lines:
                stamp = _now().encode()
                self.write(b"".join(stamp + b" " + line + b"\n" for line in lines))
        if held:
            self.write(_now().encode() + b" " + held + b"\n")

    def finish(self) -> int:
        """Both streams copied to their end, then the exit record: the container's status."""
        assert self.run is not None and self.run.stdout is not None and self.run.stderr is not None
        copiers = [threading.Thread(target=self.copy, args=(pipe,), daemon=True)
                   for pipe in (self.run.stdout, self.run.stderr)]
        for thread in copiers:
            thread.start()
        code = self.run.wait()
        for thread in copiers:
            thread.join()
        _write_atomic(self.spec["exit"], json.dumps({"exit_code": code, "finished_at": _now(),
                                                     "container_id": self.cid}) + "\n")
        return code


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
    return step.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
