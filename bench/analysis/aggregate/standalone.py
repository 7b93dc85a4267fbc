"""A Spark standalone cluster on this machine (`python -m bench spark start|status|stop`): a master
and N workers, each a JVM started with the installed PySpark's own launcher (``bin/spark-class``
with ``org.apache.spark.deploy.master.Master`` / ``org.apache.spark.deploy.worker.Worker``), on
loopback ports chosen free and pinned, recorded in ``<dir>/spark.json`` and stopped by PID.
`bench aggregate --spark-master spark://127.0.0.1:PORT` then runs the aggregation on it; so does
any standalone, YARN or Kubernetes master Spark accepts (README.md).

Every process's command line holds the state directory (its properties file, a worker's work
directory), so a PID is signalled only while it still names it (systems/core/process.py).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from systems.core.process import alive, stop, tail

STATE_FILE = "spark.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STOP_GRACE_S = 10.0


class SparkClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why (a log's tail)."""


@dataclass
class SparkProcess:
    role: str  # "master" | "worker-<n>"
    pid: int
    port: int
    ui_port: int
    log: str


@dataclass
class SparkCluster:
    dir: str
    master_url: str
    ui_url: str
    cores_per_worker: int
    memory_per_worker: str
    processes: list[SparkProcess] = field(default_factory=list)

    @classmethod
    def load(cls, d: str | Path) -> SparkCluster:
        p = Path(d) / STATE_FILE
        if not p.is_file():
            raise SparkClusterError(f"no Spark cluster in {d} (no {STATE_FILE}): start one with "
                                    f"`python -m bench spark start --dir {d}`")
        raw = json.loads(p.read_text())
        return cls(**{**raw, "processes": [SparkProcess(**x) for x in raw["processes"]]})

    def save(self) -> None:
        (Path(self.dir) / STATE_FILE).write_text(json.dumps(asdict(self), indent=1))

    def running(self) -> dict[str, bool]:
        return {p.role: alive(p.pid, self.dir) for p in self.processes}

    def alive_workers(self) -> int | None:
        """Workers the master counts as alive (its JSON status page); None if it does not answer."""
        try:
            with urllib.request.urlopen(self.ui_url + "/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Workers first (the master would otherwise log them as lost), then the master."""
        for p in sorted(self.processes, key=lambda p: p.role == "master"):
            stop(p.pid, self.dir, STOP_GRACE_S)
        (Path(self.dir) / STATE_FILE).unlink(missing_ok=True)


def spark_home() -> Path:
    """The installed PySpark's distribution (bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(cls: str, args: list[str], log: Path, props: Path) -> int:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()),
               # executors run the driver's interpreter (its packages, its version)
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))
    cmd = [str(spark_home() / "bin" / "spark-class"), cls, "--host", "127.0.0.1", "--properties-file", str(props), *args]
    with open(log, "ab") as f:
        # spark-class execs the JVM: the PID is the JVM's
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    return proc.pid


def start(d: str | Path, workers: int = 2, cores: int = 1, memory: str = "2g", timeout: float = 90.0) -> SparkCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, up when the master
    counts every worker alive; on failure everything started is stopped."""
    if workers < 1:
        raise SparkClusterError(f"--workers must be at least 1, got {workers}")
    d = Path(d).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        old = SparkCluster.load(d)
        if any(old.running().values()):
            raise SparkClusterError(f"a Spark cluster already runs from {d} ({old.master_url}): "
                                    f"`python -m bench spark stop --dir {d}` first")
    props = d / "spark-defaults.conf"
    props.write_text("# written by `python -m bench spark start`\nspark.ui.showConsoleProgress false\n")
    port, ui = free_port(), free_port()
    c = SparkCluster(str(d), f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", cores, memory)
    log = d / "master.log"
    c.processes.append(SparkProcess("master", _launch(MASTER_CLASS, ["--port", str(port), "--webui-port", str(ui)],
                                                      log, props), port, ui, str(log)))
    c.save()
    try:
        for i in range(1, workers + 1):
            wport, wui = free_port(), free_port()
            wdir = d / f"worker-{i}"
            wdir.mkdir(exist_ok=True)
            wlog = d / f"worker-{i}.log"
            pid = _launch(WORKER_CLASS, ["--port", str(wport), "--webui-port", str(wui), "--cores", str(cores),
                                         "--memory", memory, "--work-dir", str(wdir), c.master_url], wlog, props)
            c.processes.append(SparkProcess(f"worker-{i}", pid, wport, wui, str(wlog)))
            c.save()
        _wait_up(c, workers, timeout)
    except BaseException:
        c.stop()
        raise
    return c


def _wait_up(c: SparkCluster, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [p for p in c.processes if not alive(p.pid, c.dir)]
        if dead:
            p = dead[0]
            raise SparkClusterError(f"Spark {p.role} exited during start-up; last lines of {p.log}:\n{tail(p.log)}")
        if (c.alive_workers() or 0) >= workers:
            return
        time.sleep(0.25)
    raise SparkClusterError(f"the Spark master did not count {workers} worker(s) alive within {timeout:.0f} s; "
                            f"last lines of {c.processes[0].log}:\n{tail(c.processes[0].log)}")


__all__ = ["SparkCluster", "SparkClusterError", "SparkProcess", "spark_home", "start"]
