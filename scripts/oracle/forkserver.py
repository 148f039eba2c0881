"""A fork server for the test suite's Python oracles (tests/it/support/forkserver.rs).

Starting the reference interpreter and importing numpy and python-blosc2 costs about 0.9
CPU-seconds; the integration tests run the oracles hundreds of times. This process imports
them once, then for every request forks a child that runs one oracle invocation as `python
ARGS...` would (its own process, `sys.argv`, `sys.path[0]`, working directory, stdin from
/dev/null, stdout and stderr to the files the request names) and reports its exit code.

Protocol, one JSON object per line on stdin: {"argv": [...], "cwd": DIR, "out": FILE, "err":
FILE}; the answer, one line on stdout: the exit code, or "spawn" when the arguments are not a
form it runs (the caller then starts a plain interpreter). It prints "ready" once warm and
exits at the end of its stdin (the test process gone).
"""

import json
import os
import sys

# Imported before any fork: what nearly every oracle imports. Nothing here starts a thread
# that a child would miss (C-Blosc2 and numexpr start their pools on first use).
for name in ("numpy", "blosc2", "blosc", "bcolz"):
    try:
        __import__(name)
    except Exception:  # noqa: BLE001 - a venv without it: its oracles import it themselves
        pass

import runpy  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402


def runnable(argv):
    """Whether `argv` is `-c CODE ARGS...` or `SCRIPT.py ARGS...`."""
    if not argv:
        return False
    if argv[0] == "-c":
        return len(argv) >= 2
    return not argv[0].startswith("-") and argv[0].endswith(".py")


def child(req):
    """Runs one request in the forked child; never returns (raises SystemExit)."""
    code = 1
    try:
        os.chdir(req["cwd"])
        fds = [
            os.open(os.devnull, os.O_RDONLY),
            os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
            os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
        ]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)
        argv = req["argv"]
        try:
            if argv[0] == "-c":
                sys.argv = ["-c"] + argv[2:]
                sys.path[0] = ""
                compiled = compile(argv[1], "<string>", "exec")
                main = types.ModuleType("__main__")
                main.__builtins__ = __builtins__
                sys.modules["__main__"] = main  # as `python -c`: pickle, `import __main__`
                exec(compiled, main.__dict__)
            else:
                sys.argv = list(argv)
                sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
                runpy.run_path(os.path.abspath(argv[0]), run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - reported as python would, exit status 1
            traceback.print_exc()
            code = 1
    except BaseException:  # noqa: BLE001 - set-up failed: say why on the request's stderr
        traceback.print_exc()
    # The child leaves as `python ARGS` does: out through main() and the interpreter's normal
    # exit (non-daemon threads joined, atexit handlers, buffers flushed, objects finalized).
    raise SystemExit(code)


def main():
    requests = sys.stdin
    answers = sys.stdout
    print("ready", file=answers, flush=True)
    for line in requests:
        req = json.loads(line)
        if not runnable(req["argv"]):
            print("spawn", file=answers, flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            child(req)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), file=answers, flush=True)


if __name__ == "__main__":
    main()
