"""A cluster the harness does not start (a system whose profile has ``launched`` false): any
Kafka-compatible cluster reached at the scenario's ``system.bootstrap``, acted on through the
Kafka protocol only, and, for faults, through the shell commands the scenario names.

What the harness does there, and nothing else:

* reads the brokers (Metadata) and the cluster's ``default.replication.factor`` and
  ``min.insync.replicas`` (DescribeConfigs of a broker) once, at the start;
* creates the run's topics, all named with the scenario's topic prefix, after checking that none
  exists (``system.existing_topics: replace`` deletes and re-creates those that do), and deletes
  them at the end; it never lists, reads or deletes any other topic's data;
* sets the replication throttle (``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` on every broker, IncrementalAlterConfigs) when the
  scenario gives one, and puts back what each broker had at the end;
* runs ``system.commands.<action>`` with ``{broker}`` filled in for a fault action; a restart is
  done when clients see the broker in the metadata again.

It offers the launcher's interface (:class:`bench.run.cluster.Cluster`) where the runner uses it
(``bootstrap``, ``broker_ids``, ``processes``, ``network`` (None), ``start``, ``stop``,
``prepare_topics``) and the cluster-control interface the actions use
(``bench/scenario/actions/context.py``: ``launched`` False; the broker faults through the
scenario's commands, the rest refused, as the scenario validator refuses them).
"""
from __future__ import annotations

import logging
import shlex
import subprocess
import time
from typing import Any

from bench.run import clients
from bench.run import move_progress as mp
from bench.run.cluster import ClusterError

log = logging.getLogger("bench.run.external")

CONNECT_TIMEOUT_S = 5.0  # an unreachable bootstrap fails within this


class ExternalCluster:
    launched = False  # no processes of its own to act on, no journals to collect
    network = None

    def __init__(self, system: Any, topic_prefix: str) -> None:
        self.system = system  # the scenario's system section
        self.bootstrap: str = system.bootstrap
        self.prefix = topic_prefix
        self.brokers: dict[int, str] = {}  # id -> host:port, as the cluster advertises them
        self.defaults: dict[str, int] = {}
        self.cluster_id: str | None = None
        self.behaves_as: str | None = None
        self.config: dict[str, Any] = {}  # what the harness set on the cluster for the run
        self._admin = None
        self._saved: dict[int, dict[str, str | None]] = {}  # broker -> throttle key -> its own value
        self._topics: list[str] = []  # created by this run: deleted at stop
        self._groups: list[str] = []  # the run's consumer groups: deleted at stop

    # -- connection ------------------------------------------------------------------------

    def admin(self):
        if self._admin is None:
            from kafka.errors import KafkaError, KafkaTimeoutError

            try:  # a refused port or an unknown name: said at once, naming each address
                clients.reach(self.bootstrap, min(2.0, CONNECT_TIMEOUT_S))
            except clients.BootstrapError as e:
                raise ClusterError(f"system.bootstrap: {e}") from None
            t0 = time.monotonic()
            try:
                self._admin = clients.admin(self.bootstrap, self.system.client, "bench-runner",
                                            request_timeout_ms=int(CONNECT_TIMEOUT_S * 1000),
                                            bootstrap_timeout_ms=int(CONNECT_TIMEOUT_S * 1000))
            except KafkaTimeoutError:
                raise ClusterError(f"no broker answered at {self.bootstrap} (tried every address of system.bootstrap "
                                   f"for {time.monotonic() - t0:.1f}s)") from None
            except (KafkaError, OSError, ValueError) as e:
                raise ClusterError(f"cannot connect to {self.bootstrap}: {type(e).__name__}: {e}") from None
        return self._admin

    def connect(self) -> dict[str, Any]:
        """Brokers and defaults of the cluster; ClusterError naming the address if it cannot be
        asked within :data:`CONNECT_TIMEOUT_S` seconds."""
        from kafka.admin import ConfigResource, ConfigResourceType

        admin = self.admin()
        try:
            md = admin.describe_cluster()
            self.brokers = {int(b["broker_id"]): f"{b['host']}:{b['port']}" for b in md["brokers"]}
            self.cluster_id = md.get("cluster_id")
            first = str(min(self.brokers))
            res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, first,
                                                         ["default.replication.factor", "min.insync.replicas"])],
                                         config_filter="all")
        except Exception as e:  # noqa: BLE001 - any failure here: the cluster cannot be measured
            raise ClusterError(f"cannot read the brokers and defaults of the cluster at {self.bootstrap}: "
                               f"{type(e).__name__}: {e}") from None
        # which system's profile its brokers' configs match: the move model an estimate or a
        # calibration of this cluster uses (bench/analysis/estimate.py)
        self.behaves_as = mp.system_of(mp.broker_configs(admin))
        entries = res.get("broker", {}).get(first, {})
        for key in ("default.replication.factor", "min.insync.replicas"):
            try:
                self.defaults[key] = int(entries[key]["value"])
            except (KeyError, TypeError, ValueError):
                raise ClusterError(f"the cluster at {self.bootstrap} did not report {key} for broker {first} "
                                   f"(DescribeConfigs)") from None
        return self.facts()

    def facts(self) -> dict[str, Any]:
        return {"bootstrap": self.bootstrap, "cluster_id": self.cluster_id, "behaves_as": self.behaves_as,
                "brokers": {str(b): a for b, a in sorted(self.brokers.items())}, "defaults": dict(self.defaults),
                "topic_prefix": self.prefix}

    # -- the launcher's interface ------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ExternalCluster:
        if not self.brokers:
            self.connect()
        rate = self.system.replication_throttle_bytes_per_s
        if rate:
            self._set_throttle(int(rate))
        return self

    def stop(self) -> None:
        """Delete the run's consumer groups and topics, put the throttles back; safe to repeat."""
        try:
            if self._groups:
                self._delete_groups(self._groups)
                self._groups = []
            if self._topics:
                self._delete(self._topics)
                self._topics = []
        finally:
            try:
                if self._saved:
                    self._restore_throttle()
            finally:
                if self._admin is not None:
                    self._admin.close()
                    self._admin = None

    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def processes(self) -> list[tuple[str, int]]:
        return []  # not ours: no CPU or memory samples

    def prepare_groups(self, ids: list[str]) -> None:
        """The run's consumer groups (ids with the run's prefix): deleted at stop."""
        self._groups = [g for g in ids if g.startswith(self.prefix)]

    def _delete_groups(self, ids: list[str]) -> None:
        # Their members have left (the consumer process ended first); a group still busy stays,
        # with a warning: the run never deletes what it cannot show is its own and idle.
        try:
            res = self.admin().delete_groups(ids)  # {group id: "OK" or the Kafka error's name}
        except Exception as exc:
            log.warning("could not delete the run's consumer groups %s: %s", ids, exc)
            return
        for gid, outcome in (res or {}).items():
            if outcome != "OK":
                log.warning("consumer group %s not deleted: %s", gid, outcome)

    def prepare_topics(self, names: list[str]) -> None:
        """Before the run creates ``names``: refuse (or, with existing_topics: replace, delete)
        those that exist; remember them for deletion at stop."""
        for n in names:
            if not n.startswith(self.prefix):  # for_cluster names every topic; never touch another
                raise ClusterError(f"topic {n!r} lacks the run's prefix {self.prefix!r}")
        try:
            existing = sorted(set(names) & set(self.admin().list_topics()))
        except Exception as e:  # noqa: BLE001
            raise ClusterError(f"cannot list the topics of the cluster at {self.bootstrap}: {e}") from None
        if existing and self.system.existing_topics != "replace":
            raise ClusterError(f"topic(s) {', '.join(existing)} already exist on the cluster at {self.bootstrap}; "
                               f"the harness refuses to write into them (set system.existing_topics: replace to "
                               f"delete and re-create them, or system.topic_prefix to use other names)")
        if existing:
            log.info("deleting existing topics %s (existing_topics: replace)", existing)
            self._delete(existing)
        self._topics = list(names)

    def _delete(self, names: list[str], timeout_s: float = 30.0) -> None:
        from kafka.errors import UnknownTopicOrPartitionError

        names = [n for n in names if n.startswith(self.prefix)]
        try:
            self.admin().delete_topics(names, timeout_ms=int(timeout_s * 1000), raise_errors=False)
        except UnknownTopicOrPartitionError:
            pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            left = set(names) & set(self.admin().list_topics())
            if not left:
                return
            time.sleep(0.2)
        raise ClusterError(f"topics {sorted(left)} still listed {timeout_s:.0f}s after DeleteTopics")

    # -- throttles -----------------------------------------------------------------------------

    def _broker_configs(self, broker: int) -> dict[str, Any]:
        from kafka.admin import ConfigResource, ConfigResourceType

        res = self.admin().describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker), list(mp.THROTTLE_KEYS))],
                                            config_filter="all")
        return res.get("broker", {}).get(str(broker), {})

    def _alter(self, broker: int, ops: dict[str, tuple[str, str | None]]) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        res = self.admin().alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker), ops)],
                                         raise_on_unknown=False, incremental=True)
        err = res.get("broker", {}).get(str(broker)) if isinstance(res, dict) else None
        if err is not None and getattr(err, "errno", 0):
            raise ClusterError(f"IncrementalAlterConfigs on broker {broker} failed: {err}")

    def _set_throttle(self, rate: int) -> None:
        for b in self.broker_ids():
            own = self._broker_configs(b)
            # Only a value set on this broker dynamically is the cluster's to get back; a default
            # or static value comes back by itself once the dynamic one is deleted.
            self._saved[b] = {k: (own[k]["value"] if k in own and own[k].get("config_source") in (2, "DYNAMIC_BROKER_CONFIG")
                                  else None) for k in mp.THROTTLE_KEYS}
            self._alter(b, {k: ("SET", str(rate)) for k in mp.THROTTLE_KEYS})
        self.config = {k: str(rate) for k in mp.THROTTLE_KEYS}

    def _restore_throttle(self) -> None:
        for b, saved in list(self._saved.items()):
            try:
                self._alter(b, {k: ("SET", v) if v is not None else ("DELETE", None) for k, v in saved.items()})
                del self._saved[b]
            except Exception as e:  # noqa: BLE001 - a dead broker: say so, go on with the others
                log.error("could not restore the throttle of broker %d (%s): %s", b, saved, e)

    # -- the cluster-control interface: fault actions through the scenario's commands ----------

    def _run_command(self, action: str, broker: int) -> None:
        template = getattr(self.system.commands, action, None) if self.system.commands else None
        if template is None:  # validation refuses such scenarios; a clear error all the same
            raise ClusterError(f"system.commands.{action} is not set")
        cmd = template.format(broker=broker)
        timeout = self.system.commands.timeout_s
        log.info("%s %d: %s", action, broker, cmd)
        try:
            res = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"system.commands.{action} did not return within {timeout:.0f}s: {cmd}") from None
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
            raise ClusterError(f"system.commands.{action} exited {res.returncode}: {shlex.quote(cmd)}: "
                               f"{' | '.join(tail)}")

    def signal_broker(self, kind: str, broker: int, sig: int) -> None:
        """No PID here: the scenario's shell command for the action (system.commands.<kind>)."""
        self._run_command(kind, broker)

    def restart_broker(self, broker: int, timeout: float = 60.0) -> None:
        self._run_command("restart_broker", broker)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                md = self.admin().describe_cluster()
                if any(int(b["broker_id"]) == broker for b in md["brokers"]):
                    return
            except Exception as e:  # noqa: BLE001 - the cluster is recovering
                log.debug("metadata while waiting for broker %d: %s", broker, e)
            time.sleep(0.2)
        raise ClusterError(f"broker {broker} not in the cluster's metadata {timeout:.0f}s after "
                           f"system.commands.restart_broker")

    # What only a cluster the harness starts can do (the scenario validator refuses these actions
    # on this one: their specs need a launched cluster).

    def _not_here(self, what: str) -> ClusterError:
        return ClusterError(f"{what}: not on a cluster the harness does not start (at {self.bootstrap})")

    def start_broker(self, bid: int, timeout: float = 60.0) -> None:
        raise self._not_here(f"start broker {bid}")

    def kill_controller(self) -> None:
        raise self._not_here("kill the controller")

    def restart_controller(self, timeout: float = 60.0) -> None:
        raise self._not_here("restart the controller")

    def stop_object_store(self) -> None:
        raise self._not_here("stop the object store")

    def start_object_store(self, timeout: float = 60.0) -> None:
        raise self._not_here("start the object store")

    def isolate_broker(self, bid: int) -> None:
        raise self._not_here(f"isolate broker {bid}")

    def heal_broker(self, bid: int) -> None:
        raise self._not_here(f"heal broker {bid}")

    def link_rate(self, node: str) -> str | None:
        return None  # its links are its own

    def set_link_rate(self, node: str, rate: str) -> None:
        raise self._not_here(f"set the rate of {node}'s link")
