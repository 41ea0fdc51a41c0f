"""The image every node holds: sparktui-demo:latest, built here as a `docker load` archive.

No registry, no Dockerfile: the rootfs is busybox-static plus the host's Debian CPython (its
shared libraries found with ldd) plus sparktui/demo, written as one reproducible layer (fixed
mtimes, owners and creation time). The image id is then a pure function of the inputs, the
same on every node, and the archive is cached under <state>/cache keyed by a hash of the
inputs (IMAGE_RECIPE_VERSION, the file list, and content or size/mtime/inode of each file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import platform
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .config import DEMO_SRC, IMAGE, IMAGE_CREATED, IMAGE_ENV, IMAGE_MTIME, IMAGE_RECIPE_VERSION
from .layout import Paths
from .runner import TestbedError, log, run


def debian_python() -> tuple[str, str]:
    """(interpreter path, stdlib dir) of the distribution's CPython."""
    for ver in ("3.11", "3.12", "3.13", "3.10"):
        exe = f"/usr/bin/python{ver}"
        if os.path.exists(exe) and os.path.isdir(f"/usr/lib/python{ver}"):
            return exe, f"/usr/lib/python{ver}"
    return "/usr/bin/python3.11", "/usr/lib/python3.11"


def busybox() -> str:
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if os.path.exists(p):
            return p
    raise TestbedError("image: busybox not found (apt-get install busybox-static)")


def py_spy() -> str | None:
    """The py-spy binary beside this Python (a venv's bin), else on PATH; None: not installed."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


_STDLIB_SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "tkinter",
    "ensurepip",
    "turtledemo",
    "__pycache__",
    "site-packages",
    "dist-packages",
}
_DYNLOAD_SKIP = re.compile(r"^(_test|_xxtest|xxlimited|_ctypes_test|_xxsubinterpreters)")


@dataclasses.dataclass
class _Entry:
    kind: str  # "dir" | "file" | "symlink" | "data"
    mode: int = 0o755
    src: str = ""  # file: source path (symlinks resolved)
    target: str = ""  # symlink target
    data: bytes = b""
    hash_content: bool = False


def _ldd(paths: Sequence[str]) -> set[str]:
    libs: set[str] = set()
    for i in range(0, len(paths), 50):
        chunk = list(paths[i : i + 50])
        cp = run(["ldd", *chunk], what="image: ldd", check=False)
        for line in cp.stdout.decode(errors="replace").splitlines():
            line = line.strip()
            if "=>" in line:
                rhs = line.split("=>", 1)[1].strip()
                p = rhs.split(" (", 1)[0].strip()
                if p.startswith("/"):
                    libs.add(p)
            elif line.startswith("/") and " (" in line:
                libs.add(line.split(" (", 1)[0].strip())
    return libs


def _image_entries() -> dict[str, _Entry]:
    """Everything that goes into the image, arcname (no leading /) -> entry."""
    ents: dict[str, _Entry] = {}

    def add_file(arc: str, src: str, mode: int | None = None, content: bool = False) -> None:
        real = os.path.realpath(src)
        m = mode if mode is not None else (os.stat(real).st_mode & 0o7777)
        ents[arc.lstrip("/")] = _Entry("file", m, src=real, hash_content=content)

    for d, mode in [
        ("bin", 0o755),
        ("sbin", 0o755),
        ("usr/bin", 0o755),
        ("usr/sbin", 0o755),
        ("usr/lib", 0o755),
        ("usr/local/bin", 0o755),
        ("etc", 0o755),
        ("dev", 0o755),
        ("proc", 0o555),
        ("sys", 0o555),
        ("run", 0o755),
        ("tmp", 0o1777),
        ("var/tmp", 0o1777),
        ("root", 0o700),
        ("home", 0o755),
        ("opt", 0o755),
        ("lib", 0o755),
        ("lib64", 0o755),
    ]:
        ents[d] = _Entry("dir", mode)

    # busybox + applets
    add_file("bin/busybox", busybox(), 0o755)
    cp = run([busybox(), "--list-full"], what="image: busybox --list-full")
    for applet in cp.stdout.decode().split():
        applet = applet.strip().lstrip("/")
        if applet and applet != "bin/busybox":
            ents[applet] = _Entry("symlink", 0o777, target="/bin/busybox")

    # CPython
    py, stdlib = debian_python()
    pyname = os.path.basename(py)
    add_file(f"usr/bin/{pyname}", py, 0o755)
    ents["usr/bin/python3"] = _Entry("symlink", 0o777, target=pyname)
    ents["usr/bin/python"] = _Entry("symlink", 0o777, target=pyname)
    dynload: list[str] = []
    for dirpath, dirnames, filenames in os.walk(stdlib):
        rel = os.path.relpath(dirpath, stdlib)
        dirnames[:] = sorted(
            d for d in dirnames if d not in _STDLIB_SKIP_DIRS and not (rel == "." and d.startswith("config-"))
        )
        arcdir = os.path.normpath(os.path.join(stdlib.lstrip("/"), rel))
        ents[arcdir] = _Entry("dir", 0o755)
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            src = os.path.join(dirpath, fn)
            if rel == "lib-dynload" and _DYNLOAD_SKIP.match(fn):
                continue
            if not os.path.isfile(src):
                continue
            if rel == "lib-dynload":
                dynload.append(src)
            add_file(f"{arcdir}/{fn}", src)
    for lib in sorted(_ldd([py, *dynload])):
        add_file(lib, lib)
    for extra in ("libgcc_s.so.1",):  # dlopen()ed by glibc for thread cancellation
        if not any(a.endswith("/" + extra) for a in ents):
            for d in (os.path.dirname(p) for p in sorted(_ldd([py]))):
                if os.path.exists(os.path.join(d, extra)):
                    add_file(os.path.join(d, extra), os.path.join(d, extra))
                    break

    # py-spy (a static binary, from the Python running the testbed: the project's test extra),
    # so that `sparktui dump` reads the engines' stacks with it; without it the image still
    # builds and dumps take the demo engine's stack signal
    spy = py_spy()
    if spy is not None:
        add_file("usr/local/bin/py-spy", spy, 0o755)

    # minimal /etc
    ents["etc/passwd"] = _Entry(
        "data",
        0o644,
        data=(b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
    )
    ents["etc/group"] = _Entry("data", 0o644, data=b"root:x:0:\nnogroup:x:65534:\n")
    ents["etc/nsswitch.conf"] = _Entry("data", 0o644, data=b"passwd: files\ngroup: files\nhosts: files dns\n")

    # the demo engine, if it exists yet
    if DEMO_SRC.is_dir():
        ents["opt/sparktui"] = _Entry("dir", 0o755)
        ents["opt/sparktui/sparktui"] = _Entry("dir", 0o755)
        ents["opt/sparktui/sparktui/__init__.py"] = _Entry("data", 0o644, data=b"")
        for dirpath, dirnames, filenames in os.walk(DEMO_SRC):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, DEMO_SRC)
            arcdir = os.path.normpath(os.path.join("opt/sparktui/sparktui/demo", rel))
            ents[arcdir] = _Entry("dir", 0o755)
            for fn in sorted(filenames):
                src = os.path.join(dirpath, fn)
                if fn.endswith((".pyc", ".pyo")) or not os.path.isfile(src):
                    continue
                add_file(f"{arcdir}/{fn}", src, 0o644, content=True)

    # parents of everything
    for arc in list(ents):
        parent = os.path.dirname(arc)
        while parent and parent not in ents:
            ents[parent] = _Entry("dir", 0o755)
            parent = os.path.dirname(parent)
    return ents


def _inputs_hash(ents: dict[str, _Entry]) -> str:
    h = hashlib.sha256()
    h.update(f"recipe={IMAGE_RECIPE_VERSION};env={IMAGE_ENV};arch={_arch()}\n".encode())
    for arc in sorted(ents):
        e = ents[arc]
        h.update(f"{arc}\0{e.kind}\0{e.mode:o}\0{e.target}\0".encode())
        if e.kind == "data":
            h.update(hashlib.sha256(e.data).digest())
        elif e.kind == "file":
            if e.hash_content:
                h.update(hashlib.sha256(Path(e.src).read_bytes()).digest())
            else:
                st = os.stat(e.src)
                h.update(f"{e.src}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode())
        h.update(b"\n")
    return h.hexdigest()


def _arch() -> str:
    m = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(m, m)


def _write_layer(ents: dict[str, _Entry], f: io.BufferedWriter) -> None:
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arc in sorted(ents):
            e = ents[arc]
            ti = tarfile.TarInfo(arc)
            ti.mtime = IMAGE_MTIME
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.mode = e.mode
            if e.kind == "dir":
                ti.type = tarfile.DIRTYPE
                tar.addfile(ti)
            elif e.kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e.target
                tar.addfile(ti)
            elif e.kind == "data":
                ti.size = len(e.data)
                tar.addfile(ti, io.BytesIO(e.data))
            else:
                with open(e.src, "rb") as src:
                    ti.size = os.fstat(src.fileno()).st_size
                    tar.addfile(ti, src)


def _sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_image(paths: Paths) -> tuple[str, str, str]:
    """Build (or reuse from the cache) a `docker load` archive of sparktui-demo:latest.

    The archive is made here, not by `docker import`: its config has a fixed creation time,
    so the image id is a pure function of the inputs and identical on every engine.
    Returns (archive path, image id, inputs hash)."""
    ents = _image_entries()
    inputs = _inputs_hash(ents)
    paths.cache.mkdir(parents=True, exist_ok=True)
    archive = paths.cache / f"sparktui-demo-{inputs[:16]}.tar"
    meta = paths.cache / f"sparktui-demo-{inputs[:16]}.json"
    if archive.exists() and meta.exists():
        with contextlib.suppress(ValueError, OSError, KeyError):
            image_id = json.loads(meta.read_text())["image_id"]
            log(f"image: cached {archive.name} ({image_id[:19]})")
            return str(archive), image_id, inputs
    log(f"image: building {archive.name} ({len(ents)} entries)")
    with tempfile.TemporaryDirectory(dir=paths.cache) as tmp:
        layer = Path(tmp) / "layer.tar"
        with open(layer, "wb") as f:
            _write_layer(ents, f)
        diff_id = _sha256_file(layer)
        config = {
            "architecture": _arch(),
            "os": "linux",
            "created": IMAGE_CREATED,
            "config": {
                "Env": IMAGE_ENV,
                "Cmd": ["/bin/sh"],
                "WorkingDir": "/",
                "Labels": {"org.sparktui.testbed.inputs": inputs},
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [
                {
                    "created": IMAGE_CREATED,
                    # part of the config, hence of the image id: kept as first written
                    "created_by": "scripts/testbed.py: busybox-static + Debian CPython",
                }
            ],
        }
        config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        config_hex = hashlib.sha256(config_bytes).hexdigest()
        manifest = [{"Config": f"{config_hex}.json", "RepoTags": [IMAGE], "Layers": [f"{diff_id}/layer.tar"]}]
        repo, tag = IMAGE.rsplit(":", 1)
        tmp_archive = Path(tmp) / "image.tar"
        with tarfile.open(tmp_archive, "w", format=tarfile.PAX_FORMAT) as tar:

            def add_bytes(name: str, data: bytes) -> None:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime, ti.mode = len(data), IMAGE_MTIME, 0o644
                tar.addfile(ti, io.BytesIO(data))

            dti = tarfile.TarInfo(diff_id)
            dti.type, dti.mtime, dti.mode = tarfile.DIRTYPE, IMAGE_MTIME, 0o755
            tar.addfile(dti)
            add_bytes(f"{diff_id}/VERSION", b"1.0")
            lti = tar.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
            lti.mtime, lti.uid, lti.gid, lti.uname, lti.gname = IMAGE_MTIME, 0, 0, "", ""
            with open(layer, "rb") as lf:
                tar.addfile(lti, lf)
            add_bytes(f"{config_hex}.json", config_bytes)
            add_bytes("manifest.json", json.dumps(manifest).encode())
            add_bytes("repositories", json.dumps({repo: {tag: diff_id}}).encode())
        for old in paths.cache.glob("sparktui-demo-*"):
            with contextlib.suppress(OSError):
                old.unlink()
        os.replace(tmp_archive, archive)
    image_id = f"sha256:{config_hex}"
    meta.write_text(json.dumps({"image_id": image_id, "inputs": inputs, "entries": len(ents)}))
    log(f"image: built {archive.name} {archive.stat().st_size >> 20} MiB id {image_id[:19]}")
    return str(archive), image_id, inputs
