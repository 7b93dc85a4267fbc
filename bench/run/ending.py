"""How a run ended, in words, and where a run directory says so.

The runner writes ``RUN_DIR/runner.json`` when the run starts (its process id and that process's
start time) and again as soon as the run stops, whatever stopped it (before the teardown, so a
second Ctrl-C during the teardown cannot lose it), with ``ended``:

* ``completed``
* ``interrupted: SIGINT`` (Ctrl-C), ``interrupted: SIGTERM``, ``interrupted: SIGHUP``
* ``crashed: <exception type>: <first line of its message>``

The same words go into the ``run_end`` event and so into ``summary.json`` (``ended``). A run
directory with neither a summary nor an ``ended`` was killed (kill -9, a crash of the
interpreter, the machine going down) or is still running: :func:`run_state` tells the two apart
by whether the recorded process still exists.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

RUNNER_FILE = "runner.json"
COMPLETED = "completed"


# The stop signal this process received, if any (its name): see as_interrupt.
_received: str | None = None


def stop_on_signals(signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> None:
    """Ctrl-C, SIGTERM and SIGHUP (the terminal closed) stop a run: cleanup runs, the summary is
    written, and the run is recorded as ``interrupted: SIGTERM`` (or SIGINT, SIGHUP)."""
    def handler(signum, frame):
        global _received
        _received = signal.Signals(signum).name
        raise KeyboardInterrupt(_received)  # its argument: the signal's name

    for s in signals:
        signal.signal(s, handler)


def as_interrupt(exc: BaseException) -> BaseException:
    """The exception a run stopped with, as the stop signal it was once one arrived. A handler's
    KeyboardInterrupt raised inside a C extension's call can come out as that library's own error
    (confluent_kafka's produce() reported "expected header key to be unicode string" for a SIGTERM
    during a prefill): a run stopped by a signal is recorded and exits as that signal all the same."""
    if _received is None or isinstance(exc, KeyboardInterrupt):
        return exc
    interrupt = KeyboardInterrupt(_received)
    interrupt.__cause__ = exc
    return interrupt


def how_it_ended(exc: BaseException | None) -> str:
    if exc is None:
        return COMPLETED
    if isinstance(exc, KeyboardInterrupt):
        name = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
        if not name.startswith("SIG"):  # a bare KeyboardInterrupt is Python's answer to SIGINT
            name = "SIGINT"
        return f"interrupted: {name}"
    lines = str(exc).strip().splitlines()
    return f"crashed: {type(exc).__name__}" + (f": {lines[0]}" if lines else "")


def _create_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - gone, or not ours to see
        return None


def record_start(run_dir: Path) -> None:
    pid = os.getpid()
    _write(run_dir, {"pid": pid, "create_time": _create_time(pid), "ended": None})


def record_end(run_dir: Path, exc: BaseException | None) -> str:
    ended = how_it_ended(exc)
    try:
        data = read(run_dir) or {"pid": os.getpid()}
        data["ended"] = ended
        _write(run_dir, data)
    except OSError:
        pass  # the run directory is gone or full: the summary (if any) still says it
    return ended


def _write(run_dir: Path, data: dict[str, Any]) -> None:
    tmp = run_dir / (RUNNER_FILE + ".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, run_dir / RUNNER_FILE)


def read(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / RUNNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _running(info: dict[str, Any] | None) -> bool:
    if not info or not isinstance(info.get("pid"), int):
        return False
    now = _create_time(info["pid"])
    return now is not None and info.get("create_time") is not None and abs(now - info["create_time"]) < 1.0


def _old_signal_name(err: str) -> str:
    """Runs recorded before ``ended``: "KeyboardInterrupt: " (Ctrl-C) or "KeyboardInterrupt: signal 15"."""
    tail = err.partition(":")[2].strip()
    if tail.startswith("signal "):
        try:
            return signal.Signals(int(tail.split()[1])).name
        except ValueError:
            return tail
    return tail or "SIGINT"


def run_state(run_dir: Path, summary: dict[str, Any] | None) -> tuple[str, bool]:
    """(how the run ended, in words; True if it did not complete). From its summary, else from
    ``runner.json``; a summary from before ``ended`` was recorded is read from its
    ``completed`` and ``error``."""
    info = read(run_dir)
    if summary is not None:
        ended = summary.get("ended") or (info or {}).get("ended")
        if not ended:
            err = summary.get("error")
            if summary.get("completed") and not err:
                ended = COMPLETED
            elif err and err.startswith("KeyboardInterrupt"):
                ended = f"interrupted: {_old_signal_name(err)}"
            else:
                ended = f"crashed: {err}" if err else "incomplete"
        return ended, ended != COMPLETED
    if info and info.get("ended"):
        return f"{info['ended']} (no summary)", True
    if _running(info):
        return f"running (pid {info['pid']})", False
    return "killed (no summary)", True
