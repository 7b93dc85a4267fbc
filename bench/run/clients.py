"""Every Kafka client the harness creates gets its settings here: the harness's own (what the
measurement needs) under the scenario's ``system.client`` settings, so a cluster that needs TLS,
SASL or a client id policy is reached by the load's producers, the prefill, the verifying
consumer, the metadata poller and the admin clients alike.

``system.client`` uses librdkafka's (and Java's) names. librdkafka clients get them unchanged;
kafka-python's admin client (the harness's reassignment and observer client) gets the ones it
has an equivalent for, translated (``security.protocol`` -> ``security_protocol``,
``sasl.username`` -> ``sasl_plain_username``, ``ssl.ca.location`` -> ``ssl_cafile``); a
producer's ``linger.ms`` means nothing to an admin client and is left out there.

A value ``{env: NAME}`` is read from the environment when the client is created, so secrets live
only in the environment: results keep the reference, never the value.
"""
from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

# librdkafka name -> kafka-python name where the two differ beyond "." -> "_".
_KAFKA_PYTHON_NAMES = {
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
}


class ClientSettingError(ValueError):
    """A client setting could not be resolved (the message names the setting)."""


def resolve(settings: Mapping[str, Any] | None) -> dict[str, str]:
    """The scenario's client settings with ``{env: NAME}`` values read from the environment.
    Accepts the scenario's models or their plain-dict form (a load spec)."""
    out: dict[str, str] = {}
    for key, value in (settings or {}).items():
        env = getattr(value, "env", None) or (value.get("env") if isinstance(value, Mapping) else None)
        if env is not None:
            if env not in os.environ:
                raise ClientSettingError(f"system.client.{key}: environment variable {env} is not set")
            out[key] = os.environ[env]
        else:
            out[key] = str(value)
    return out


def plain(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings as stored (env references kept as ``{"env": NAME}``): safe to write down."""
    out: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        env = getattr(value, "env", None)
        out[key] = {"env": env} if env is not None else value
    return out


def librdkafka(bootstrap: str, own: Mapping[str, Any], settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """A confluent-kafka client's config: the harness's ``own`` settings, then the scenario's."""
    return {"bootstrap.servers": bootstrap, **own, **resolve(settings)}


def kafka_python(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The scenario's settings that kafka-python's admin client has, under its names and types."""
    from kafka.admin import KafkaAdminClient

    known = KafkaAdminClient.DEFAULT_CONFIG
    out: dict[str, Any] = {}
    for key, value in resolve(settings).items():
        name = _KAFKA_PYTHON_NAMES.get(key, key.replace(".", "_"))
        if name not in known:
            continue
        default = known[name]
        if key == "ssl.endpoint.identification.algorithm":
            out[name] = value.lower() == "https"
        elif isinstance(default, bool):
            out[name] = value.lower() == "true"
        elif isinstance(default, int):
            try:
                out[name] = int(value)
            except ValueError:
                raise ClientSettingError(f"system.client.{key}: {value!r} is not an integer") from None
        else:
            out[name] = value
    return out


def admin(bootstrap: str, settings: Mapping[str, Any] | None, client_id: str, *,
          request_timeout_ms: int = 15000, bootstrap_timeout_ms: int = 5000):
    """kafka-python's admin client (reassignments, log dirs, configs); raises
    kafka.errors.KafkaTimeoutError when no bootstrap address answers within
    ``bootstrap_timeout_ms``."""
    from kafka.admin import KafkaAdminClient

    cfg = {"client_id": client_id, "request_timeout_ms": request_timeout_ms,
           "bootstrap_timeout_ms": bootstrap_timeout_ms, **kafka_python(settings)}
    return KafkaAdminClient(bootstrap_servers=bootstrap, **cfg)


def applied(settings: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Which client kinds got which of the scenario's settings (names only): recorded with the
    run, so a setting no admin client has is seen to have reached the librdkafka clients."""
    keys = sorted((settings or {}).keys())
    from kafka.admin import KafkaAdminClient

    known = KafkaAdminClient.DEFAULT_CONFIG
    return {"librdkafka (producers, prefill, verify, poller)": keys,
            "kafka-python admin (reassignments, observer)": [
                k for k in keys if _KAFKA_PYTHON_NAMES.get(k, k.replace(".", "_")) in known]}


# -- reaching a bootstrap ------------------------------------------------------------------------
# kafka-python waits its whole bootstrap timeout (30 s by default) before it says "Unable to
# bootstrap from X", whatever went wrong; these say at once what is wrong with which address.

_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")


class BootstrapError(ValueError):
    """A bootstrap list that is malformed, or none of whose addresses can be reached; the message
    names every address and what was tried (one line)."""


def bootstrap_addresses(bootstrap: str | None) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` -> [(host, port)]; BootstrapError naming the bad entry (a port
    is required: Kafka's clients refuse an address without one too)."""
    out = []
    for entry in (bootstrap or "").split(","):
        entry = entry.strip()
        m = _ADDRESS.match(entry)
        where = "" if entry == (bootstrap or "").strip() else f" (in {bootstrap!r})"
        if m is None:
            raise BootstrapError(f"{entry!r}{where} is not host:port (expected host:port[,host:port...], "
                                 f"e.g. 127.0.0.1:9092)")
        if not 0 < int(m.group(2)) < 65536:
            raise BootstrapError(f"{entry!r}{where}: port {int(m.group(2))} is not in 1..65535")
        out.append((m.group(1).strip("[]"), int(m.group(2))))
    return out


def _try_connect(host: str, port: int, timeout_s: float) -> str | None:
    """None if a TCP connection to host:port opens within timeout_s, else what went wrong."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"name not resolved ({e.strerror})"
    problems = []
    for family, kind, proto, _, sockaddr in infos:
        s = socket.socket(family, kind, proto)
        s.settimeout(timeout_s)
        try:
            s.connect(sockaddr)
            return None
        except socket.timeout:
            problems.append(f"TCP connect to {sockaddr[0]} timed out after {timeout_s:g} s")
        except OSError as e:
            problems.append(f"TCP connect to {sockaddr[0]}: {(e.strerror or str(e)).lower()}")
        finally:
            s.close()
    return "; ".join(problems) or "no address"


def reach(bootstrap: str, timeout_s: float = 2.0) -> str:
    """Open a TCP connection to every address of the bootstrap at once (each resolved and
    connected in its own thread, none waited for beyond ``timeout_s``); returns the first
    address that accepts one. BootstrapError naming each address and what happened otherwise."""
    addrs = bootstrap_addresses(bootstrap)
    results: dict[str, str | None] = {}
    done = threading.Condition()

    def attempt(host: str, port: int) -> None:
        outcome = _try_connect(host, port, timeout_s)
        with done:
            results[f"{host}:{port}"] = outcome
            done.notify_all()

    for host, port in addrs:
        threading.Thread(target=attempt, args=(host, port), daemon=True, name=f"reach {host}:{port}").start()
    deadline = time.monotonic() + timeout_s + 0.2
    with done:
        while True:
            ok = next((a for a, r in results.items() if r is None), None)
            left = deadline - time.monotonic()
            if ok is not None or len(results) == len(addrs) or left <= 0:
                break
            done.wait(left)
        tried = [f"{h}:{p} ({results.get(f'{h}:{p}', f'no answer within {timeout_s:g} s to name lookup or connect')})"
                 for h, p in addrs]
    if ok is None:
        raise BootstrapError(f"no broker reachable at {bootstrap}: tried {', '.join(tried)}")
    return ok
