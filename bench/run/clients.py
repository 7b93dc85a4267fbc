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
