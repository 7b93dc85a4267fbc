"""The shared system's auxiliary service: the object store (started by the cluster launcher).

- No `s3.endpoint` configured: an embedded SeaweedFS (`weed mini`) is started under
  DIR/objstore with random credentials; its endpoint, pid and log go to cluster.json.
- `--config s3.endpoint=host:port` (MinIO, AWS, ...): that store is used; nothing is started.

Either way credentials go to DIR/run/s3.credentials (mode 0600) and brokers/controller get only
its path (`s3.credentials.file`), so no secret is on a command line, in cluster.json or in a log.
"""
from __future__ import annotations

import json
import os
import secrets

from systems.core.process import Proc
from systems.core.profile import ServiceContext, ServiceHandle
from systems.shared.objstore import ObjectStore
from systems.shared.seaweed import SeaweedServer
from systems.shared.settings import s3_config


def _write_credentials(path: str, ak: str, sk: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"access_key": ak, "secret_key": sk}, f)
    os.replace(path + ".tmp", path)


def _read_credentials(path: str) -> tuple[str, str] | None:
    try:
        with open(path) as f:
            d = json.load(f)
        return d["access_key"], d["secret_key"]
    except (OSError, ValueError, KeyError):
        return None


def start_object_store(ctx: ServiceContext) -> ServiceHandle:
    cfg = ctx.config
    path = os.path.join(ctx.dir, "run", "s3.credentials")
    info = dict(ctx.previous or {})
    if cfg.get("s3.endpoint") and not info.get("embedded"):
        out = {}
        ak, sk = cfg.pop("s3.access.key", None), cfg.pop("s3.secret.key", None)
        if ak and sk:
            _write_credentials(path, ak, sk)
            out["s3.credentials.file"] = path
        return ServiceHandle(None, {"embedded": False, "endpoint": cfg["s3.endpoint"],
                                    "bucket": cfg.get("s3.bucket", "reassign-bench")}, out)
    creds = _read_credentials(path) or ("ak" + secrets.token_hex(8), secrets.token_urlsafe(24))
    _write_credentials(path, *creds)
    srv = SeaweedServer(os.path.join(ctx.dir, "objstore"), host=ctx.host, s3_port=info.get("port"),
                        access_key=creds[0], secret_key=creds[1],
                        log_path=os.path.join(ctx.logs_dir, "objstore.log"))
    srv.start(timeout=min(ctx.timeout, 60))
    out = {"s3.endpoint": srv.endpoint, "s3.credentials.file": path}
    try:
        with ObjectStore(s3_config({**cfg, **out})) as st:
            st.ensure_bucket()
    except BaseException:
        srv.stop()
        raise
    proc = Proc(0, ctx.host, srv.s3_port, srv.pid, str(srv.log_path), [])
    return ServiceHandle(proc, {"embedded": True, "endpoint": srv.endpoint, "port": srv.s3_port, "pid": srv.pid,
                                "bucket": cfg.get("s3.bucket", "reassign-bench"),
                                "data_dir": str(srv.data_dir), "credentials_file": path},
                         out, stop=srv.stop)
