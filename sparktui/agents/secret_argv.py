"""Starts a local rank's Python program with its secret flag values from the environment.

Run as ``python [options] secret_argv.py (-m MODULE | -c CODE | SCRIPT) ARGS...`` by the local
shim, where ARGS hold ``********`` at each secret's place and ``SPARKTUI_SECRET_ARGS`` holds
``{"index": "token"}`` (indexes into the words after this file's name). The command line every
user can read (``ps``, ``/proc/<pid>/cmdline``) shows the mask; the values are put back into
``sys.argv`` here, taken out of the environment the program's own children inherit, and the
program runs as ``python -m``/``-c``/a script would run it. Standard library only.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

ENV = "SPARKTUI_SECRET_ARGS"
USAGE = "usage: python [options] secret_argv.py (-m MODULE | -c CODE | SCRIPT) [ARGS...]\n"


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return
    for index, token in json.loads(os.environ.pop(ENV, "{}")).items():
        args[int(index)] = token
    head = args[0] if args else ""
    if head.startswith(("-m", "-c")):
        value, rest = (head[2:], args[1:]) if head[2:] else (args[1], args[2:])
        sys.path[0] = os.getcwd()  # as ``python -m`` and ``-c`` have it (not this file's folder)
        if head.startswith("-m"):
            sys.argv = [head, *rest]  # run_module puts the module's file in argv[0]
            runpy.run_module(value, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *rest]
            exec(compile(value, "<string>", "exec"), {"__name__": "__main__"})
        return
    sys.argv = args
    sys.path[0] = os.path.dirname(os.path.abspath(head))
    runpy.run_path(head, run_name="__main__")


if __name__ == "__main__":
    main()
