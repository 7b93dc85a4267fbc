"""Process management shared by the harness and the systems: start a node as an OS process,
check that a PID is still ours, stop it by PID.

A PID is only signalled while its command line still contains a *marker* (the cluster's
directory), so a recycled PID belonging to someone else is never touched.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ProcessError(RuntimeError):
    """A process could not be started; the message names it and quotes its log."""


@dataclass
class Proc:
    """One started process, as recorded in cluster.json."""

    id: int
    host: str
    port: int
    pid: int
    log: str
    cmd: list[str] = field(default_factory=list)


def tail(path: str, n: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


def alive(pid: int, marker: str) -> bool:
    """True if `pid` runs (not a zombie) and its command line contains `marker`."""
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and marker in " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def find(marker: str) -> list[int]:
    """PIDs of processes whose command line contains `marker` (a cluster's directory), this
    process and its ancestors excepted: what a harness killed mid-start may have launched
    without recording."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or ()):
                out.append(p.info["pid"])
        except psutil.Error:
            continue
    me = psutil.Process()
    mine = {me.pid, *(a.pid for a in me.parents())}  # e.g. `clean --dir DIR` and the shell that ran it
    return [pid for pid in out if pid not in mine]


def reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_gone(pid: int, marker: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(pid)
        if not alive(pid, marker):
            return True
        time.sleep(0.02)
    return False


def send_signal(pid: int, marker: str, sig: int) -> bool:
    """Signal `pid` if it is still ours; False if it was not running."""
    if not alive(pid, marker):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop(pid: int, marker: str, grace: float) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; only while the pid is still ours.
    A stopped (SIGSTOP) process is continued first, or it would never see the SIGTERM."""
    if not send_signal(pid, marker, signal.SIGCONT):
        return
    send_signal(pid, marker, signal.SIGTERM)
    if wait_gone(pid, marker, grace):
        return
    send_signal(pid, marker, signal.SIGKILL)
    wait_gone(pid, marker, 5.0)


def spawn_module(module_args: list[str], *, log_path: str, cwd: str, port_file: str, timeout: float,
                 name: str, prefix: list[str] | tuple[str, ...] = ()) -> tuple[int, int]:
    """Start `python -m <module_args>` in its own session, logging to `log_path`, and wait until
    it writes its listening port to `port_file`. -> (pid, port). `prefix` runs the command
    through a wrapper that execs it (`ip netns exec NS`), so the pid is still python's."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    if os.path.exists(port_file):
        os.unlink(port_file)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen([*prefix, sys.executable, "-m", *module_args], stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not os.path.exists(port_file):
        if proc.poll() is not None:
            raise ProcessError(f"{name} exited with code {proc.returncode} during start-up; "
                               f"last lines of {log_path}:\n{tail(log_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(5)
            raise ProcessError(f"{name} did not start listening within {timeout:.0f}s; "
                               f"last lines of {log_path}:\n{tail(log_path)}")
        time.sleep(0.05)
    with open(port_file) as f:
        return proc.pid, int(f.read())
