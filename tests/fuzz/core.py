"""A fuzz case, and running one: in this process (fast) or as a subprocess (what a user sees).

A case lays out its files in a fresh folder, runs one CLI command there, and passes when the command:
exits 2; prints exactly one line on stderr, naming the file or flag (`needle`); shows no traceback;
finishes within the time limit; leaves every file of the folder as it was (no file changed, created or
removed); and never creates MARKER, the file hostile inputs try to create by running code.
Controls (expect_exit 0) check the harness itself: a valid input must pass through it.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "MARKER"
#: special entries a case may ask for instead of file content
FIFO, LOOP, FOLDER = object(), object(), object()


@dataclass
class Case:
    id: str  # unique and stable for a seed: "<class>/<what>"
    argv: list[str]  # program name first; "{d}" stands for the case folder
    #: name -> str | bytes | FIFO | LOOP | FOLDER | ("sparse", size) | a function returning str or bytes
    files: dict = field(default_factory=dict)
    needle: str = ""  # what the error line must name ("{d}" expanded); default: the last file argument
    expect_exit: int = 2

    def expand(self, folder: Path) -> tuple[list[str], str]:
        argv = [a.replace("{d}", str(folder)) for a in self.argv]
        return argv, self.needle.replace("{d}", str(folder))


@dataclass
class Result:
    case: Case
    code: int | None
    stderr: str
    seconds: float
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def lay_out(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        path = folder / name
        if callable(content):  # built when the case runs: a pool of hundreds of profiles stays cheap
            content = content()
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:
            os.mkfifo(path)
        elif content is LOOP:
            path.symlink_to(path.name)
        elif content is FOLDER:
            path.mkdir()
        elif isinstance(content, tuple) and content[0] == "sparse":
            with open(path, "wb") as handle:
                handle.truncate(content[1])
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def snapshot(folder: Path) -> dict[str, str]:
    """Name -> sha256 of every regular file below folder (kind of entry for the others); never opens a FIFO."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root) / name
            info = os.lstat(path)
            rel = str(path.relative_to(folder))
            if os.path.islink(path):
                out[rel] = "link"
            elif os.path.isdir(path):
                out[rel] = "dir"
            elif path.is_fifo():
                out[rel] = "fifo"
            elif info.st_size > (64 << 20):
                out[rel] = f"size {info.st_size} mtime {info.st_mtime_ns}"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def judge(case: Case, folder: Path, needle: str, code, stderr: str, before: dict, seconds: float,
          crashed: str = "", timed_out: bool = False) -> Result:
    problems = []
    lines = [line for line in stderr.splitlines() if line.strip()]
    if timed_out:
        problems.append(f"hang: still running after {seconds:.0f} s")
    if crashed:
        problems.append(f"traceback: {crashed}")
    if "Traceback" in stderr:
        problems.append("traceback on stderr")
    if code != case.expect_exit and not timed_out:
        problems.append(f"exit {code}, expected {case.expect_exit}")
    if case.expect_exit == 2 and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, expected 1")
    if case.expect_exit == 2 and needle and lines and not any(needle in line for line in lines):
        problems.append(f"error does not name {needle!r}")
    if (folder / MARKER).exists():
        problems.append("code from a data file ran (MARKER created)")
    after = snapshot(folder)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problems.append(f"files changed: {', '.join(changed[:4])}")
    return Result(case, code, stderr, seconds, problems)


class _Timeout(BaseException):
    """Raised by the alarm in the case's own frame; a BaseException so no `except Exception` swallows it."""


def _alarm(signum, frame):
    raise _Timeout()


def run_in_process(case: Case, folder: Path, limit_s: float) -> Result:
    """The CLI's main() called in this process with the case folder as working directory."""
    from bench.__main__ import main as bench_main
    from paraoracle.cli import profiler_main
    from predictor.cli import main as predictor_main

    lay_out(case, folder)
    argv, needle = case.expand(folder)
    before = snapshot(folder)
    main = {"profiler": profiler_main, "predictor": predictor_main, "bench": bench_main}[argv[0]]
    out, err = io.StringIO(), io.StringIO()
    cwd, code, crashed, timed_out = os.getcwd(), None, "", False
    previous = signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = lambda m, c, f, n, line=None: sys.stderr.write(warnings.formatwarning(m, c, f, n, line))
            signal.setitimer(signal.ITIMER_REAL, limit_s)
            try:
                code = main(argv[1:])
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 2
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        timed_out = True
    except BaseException as exc:  # noqa: BLE001 - anything escaping main() is a failure of the case
        crashed = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    finally:
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)
    return judge(case, folder, needle, code, err.getvalue(), before, time.perf_counter() - start, crashed, timed_out)


def run_subprocess(case: Case, folder: Path, limit_s: float) -> Result:
    """The CLI as a user starts it: `python -m paraoracle.cli|predictor ...` (the `profiler` and `predictor`
    console scripts), killed at the time limit."""
    lay_out(case, folder)
    argv, needle = case.expand(folder)
    before = snapshot(folder)
    start = time.perf_counter()
    try:
        module = {"profiler": "paraoracle.cli"}.get(argv[0], argv[0])
        proc = subprocess.run([sys.executable, "-m", module, *argv[1:]], cwd=folder, capture_output=True, text=True,
                              timeout=limit_s, stdin=subprocess.DEVNULL)
        code, stderr, timed_out = proc.returncode, proc.stderr, False
    except subprocess.TimeoutExpired as exc:
        code, timed_out = None, True
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    return judge(case, folder, needle, code, stderr, before, time.perf_counter() - start, timed_out=timed_out)
