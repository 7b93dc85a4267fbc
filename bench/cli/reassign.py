"""`python -m bench reassign`: kafka-reassign-partitions' verbs and plan format.

  --estimate [--throttle B/S | --link RATE] [--concurrency N] [--client-ack-ms MS] [--producers N] [--json]
                                                      before executing: each move's time with
                                                      its error band, bytes, and whether it can
                                                      finish under the ingest measured now
                                                      (bench/analysis/estimate.py)
  --execute [--throttle BYTES_PER_S] [--additional]   start the moves in a plan
  --verify [--watch]                                  per-partition status, and for each
                                                      move still going: target replicas,
                                                      bytes to move and done, rate, ETA
                                                      (bench/run/move_progress.py); --watch
                                                      refreshes until done; clears throttles
                                                      once all are done
  --cancel                                            cancel the plan's moves
  --list                                              ongoing reassignments, with progress
  --generate --topics-to-move-json-file F --broker-list 1,2
                                                      propose a plan

Plans are Kafka's JSON: {"version":1,"partitions":[{"topic","partition","replicas"}]}.
Throttles follow the Kafka tool: the rate goes on every broker involved
(leader.replication.throttled.rate and follower.replication.throttled.rate), the
existing replicas are listed as leader-throttled and the new ones as
follower-throttled, so only the move's traffic is capped.
"""
from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import kafka.errors as Errors
from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.protocol.admin import AlterPartitionReassignmentsRequest

from bench.run import move_progress as mp
from bench.run.clients import BootstrapError, reach
from bench.units import rate_bits

# An unreachable or silent bootstrap is reported within 5 s of the command's start: a TCP connect to
# every address first (a refused port or an unknown name is said at once), then the first Kafka
# answer (ApiVersions, Metadata). 2 s is kafka-python's own wait for ApiVersions; the rest of the
# 5 s is the interpreter's start, which took 2.7 s on a loaded 2-core CI machine (2.5 s here failed
# the bound there).
CONNECT_TIMEOUT_S = 1.5
BOOTSTRAP_TIMEOUT_S = 2.0

REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


class PlanError(Exception):
    """The plan file is unreadable or invalid; the message says where."""


def load_plan(path: str) -> list[dict]:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise PlanError(f"cannot read {path}: {e.strerror}") from None
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"{path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("partitions"), list):
        raise PlanError(f'{path}: expected {{"version":1,"partitions":[...]}}')
    if plan.get("version", 1) != 1:
        raise PlanError(f"{path}: unsupported plan version {plan.get('version')!r} (only 1)")
    out, seen = [], set()
    for i, p in enumerate(plan["partitions"]):
        where = f"{path}: partitions[{i}]"
        if not isinstance(p, dict):
            raise PlanError(f"{where}: expected an object")
        topic, part, reps = p.get("topic"), p.get("partition"), p.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise PlanError(f"{where}: 'topic' must be a non-empty string")
        if not isinstance(part, int) or isinstance(part, bool) or part < 0:
            raise PlanError(f"{where}: 'partition' must be a non-negative integer")
        if reps is not None and (not isinstance(reps, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in reps)):
            raise PlanError(f"{where}: 'replicas' must be a list of broker ids")
        if (topic, part) in seen:
            raise PlanError(f"{where}: partition {topic}-{part} appears twice")
        seen.add((topic, part))
        out.append({"topic": topic, "partition": part, "replicas": reps})
    return out


def _admin(bootstrap: str) -> KafkaAdminClient:
    """BootstrapError naming the address and what was tried when the cluster cannot be reached."""
    reach(bootstrap, CONNECT_TIMEOUT_S)
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000, client_id="bench-reassign",
                                bootstrap_timeout_ms=int(BOOTSTRAP_TIMEOUT_S * 1000))
    except KafkaTimeoutError:
        raise BootstrapError(f"no Kafka answer from {bootstrap}: a TCP connection opened, but no broker answered "
                             f"ApiVersions and Metadata within {BOOTSTRAP_TIMEOUT_S:g} s") from None


def alter_reassignments(admin: KafkaAdminClient, reassignments: dict) -> dict[TopicPartition, tuple[type, str] | None]:
    """AlterPartitionReassignments: {partition: None (accepted) or (error class, the controller's
    message)}. kafka-python's alter_partition_reassignments keeps only the error code; the message
    is what names the broker or partition at fault."""
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=admin.config["request_timeout_ms"],
        topics=admin._process_alter_partition_reassignments_input(reassignments))
    response = admin._manager.run(admin._send_request_to_controller, request,
                                  lambda r: [Errors.for_code(r.error_code)])
    out = {}
    for topic in response.responses:
        for part in topic.partitions:
            err = Errors.for_code(part.error_code)
            out[TopicPartition(topic.name, part.partition_index)] = (
                None if err is Errors.NoError else (err, part.error_message or err.description))
    return out


def _why(tp: TopicPartition, err: tuple[type, str]) -> str:
    return f"{tp.topic}-{tp.partition}: {err[0].__name__}: {err[1]}"


def current_assignment(admin: KafkaAdminClient, topics) -> dict[tuple[str, int], list[int]]:
    out = {}
    for t in admin.describe_topics(sorted(set(topics))):
        if t["error_code"]:
            continue
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
    return out


def _plan_json(assign: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                    for (t, p), r in sorted(assign.items())]})


def _alter_configs(admin: KafkaAdminClient, resources: list[ConfigResource]) -> None:
    if resources:
        admin.alter_configs(resources, raise_on_unknown=False, incremental=True)


def execute(bootstrap: str, plan: list[dict], throttle: int | None, additional: bool, out=sys.stdout,
            record: Path | None = None) -> int:
    admin = _admin(bootstrap)
    try:
        current = current_assignment(admin, [p["topic"] for p in plan])
        missing = [_missing(p["topic"], p["partition"], current) for p in plan
                   if (p["topic"], p["partition"]) not in current]
        if missing:
            print(f"error: unknown topic or partition: {'; '.join(missing)}", file=out)
            return 1
        # As Kafka's tool (verifyBrokerIds): every broker of the plan must exist.
        brokers = {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
        unknown = [f"Unknown broker id {b} (in the replicas {p['replicas']} of {p['topic']}-{p['partition']})"
                   for p in plan for b in p["replicas"] if b not in brokers]
        if unknown:
            print(f"error: {'; '.join(unknown)}; the cluster's brokers are {', '.join(map(str, sorted(brokers)))}",
                  file=out)
            return 1
        ongoing = admin.list_partition_reassignments()
        if ongoing and not additional:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in ongoing)
            print(f"error: cannot execute because there is an existing partition reassignment ({names}). "
                  "Use --additional to add to it.", file=out)
            return 1
        print("Current partition replica assignment\n", file=out)
        print(_plan_json({(p["topic"], p["partition"]): current[(p["topic"], p["partition"])] for p in plan}),
              file=out)
        print("\nSave this to use as the --reassignment-json-file option during rollback", file=out)
        if throttle is not None:
            set_throttles(admin, plan, current, throttle)
            print("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                  "the throttle is removed.", file=out)
            print(f"The inter-broker throttle limit was set to {throttle} B/s", file=out)
        _stamp_execute(record, plan)
        results = alter_reassignments(admin, {TopicPartition(p["topic"], p["partition"]): p["replicas"] for p in plan})
        failed = {tp: err for tp, err in results.items() if err is not None}
        ok = [tp for tp in results if tp not in failed]
        if ok:
            print("Successfully started partition reassignment" + ("s" if len(ok) > 1 else "") + " for "
                  + ",".join(f"{tp.topic}-{tp.partition}" for tp in ok), file=out)
        if failed:
            print("Error reassigning partition(s):", file=out)
        for tp, err in sorted(failed.items()):
            print(_why(tp, err), file=out)
        return 1 if failed else 0
    finally:
        admin.close()


def estimate_record(plan_file: str) -> Path:
    """Where --estimate keeps its last estimate of a plan (beside the plan file), for --execute to
    stamp with its start and --verify to show beside the live ETA."""
    p = Path(plan_file)
    return p.with_name(p.name + ".estimate.json")


def _read_record(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _stamp_execute(path: Path | None, plan: list[dict]) -> None:
    """--execute: the time the moves started, on the plan's estimate (if one was made of this plan)."""
    rec = _read_record(path)
    if rec is None:
        return
    planned = {(p["topic"], p["partition"]): p["replicas"] for p in plan}
    if {(r["topic"], r["partition"]): r["to"] for r in rec.get("partitions", [])} != planned:
        return  # an estimate of another plan under this name: not this execution's
    rec["executed_at"] = time.time()
    path.write_text(json.dumps(rec, default=float))


def estimate_line(rec: dict[str, Any] | None, key: tuple[str, int], now: float) -> str | None:
    """--verify's line beside a move's progress: what --estimate said before --execute, and how long
    the move has run since."""
    if rec is None or "executed_at" not in rec:
        return None
    row = next((r for r in rec.get("partitions", []) if (r["topic"], r["partition"]) == key), None)
    if row is None:
        return None
    ran = f"running {mp.fmt_eta(now - rec['executed_at'])} since --execute"
    if row.get("seconds") is None:
        return f"estimate before --execute: never finishes (not gaining); {ran}"
    return (f"estimate before --execute: {row['seconds']:,.1f} s ({row['seconds_low']:,.1f}-"
            f"{row['seconds_high']:,.1f}); {ran}")


def _missing(topic: str, partition: int, current: dict[tuple[str, int], list[int]]) -> str:
    parts = sorted(i for t, i in current if t == topic)
    if not parts:
        return f"{topic}-{partition} (Unable to find a topic named {topic}.)"
    return f"{topic}-{partition} (Unable to find partition {topic}:{partition}; topic {topic} has partitions " \
           f"{parts[0]}..{parts[-1]})"


def set_throttles(admin, plan, current, rate: int) -> None:
    brokers = set()
    leader_list, follower_list = defaultdict(list), defaultdict(list)
    for p in plan:
        cur = current[(p["topic"], p["partition"])]
        target = p["replicas"] or []
        brokers |= set(cur) | set(target)
        leader_list[p["topic"]] += [f"{p['partition']}:{b}" for b in cur]
        follower_list[p["topic"]] += [f"{p['partition']}:{b}" for b in target if b not in cur]
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b), configs={k: (AlterConfigOp.SET, str(rate))
                                                                           for k in mp.THROTTLE_KEYS})
                 for b in sorted(brokers)]
    for topic in sorted(set(leader_list) | set(follower_list)):
        resources.append(ConfigResource(ConfigResourceType.TOPIC, topic, configs={
            REPLICA_KEYS[0]: (AlterConfigOp.SET, ",".join(leader_list[topic])),
            REPLICA_KEYS[1]: (AlterConfigOp.SET, ",".join(follower_list[topic]))}))
    _alter_configs(admin, resources)


def clear_throttles(admin, brokers: list[int], topics: list[str], out) -> None:
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b), configs={k: (AlterConfigOp.DELETE, None)
                                                                           for k in mp.THROTTLE_KEYS})
                 for b in brokers]
    resources += [ConfigResource(ConfigResourceType.TOPIC, t, configs={k: (AlterConfigOp.DELETE, None)
                                                                      for k in REPLICA_KEYS})
                  for t in topics]
    _alter_configs(admin, resources)
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}", file=out)
    for t in topics:
        print(f"Clearing topic-level throttles on topic {t}", file=out)


def _progress(admin, topics: set[str] | None, window_s: float) -> dict[tuple[str, int], mp.PartitionProgress]:
    """Progress of the ongoing moves (of `topics`, or all): two observations `window_s` apart, so
    the rate and ETA are over that window; one when nothing is moving."""
    tracker = mp.Tracker(copies=mp.moves_copy_data(admin), window_s=window_s)
    rows = tracker.update(mp.observe(admin, topics))
    if rows and window_s > 0:
        time.sleep(window_s)
        rows = tracker.update(mp.observe(admin, topics))
    return {(r.topic, r.partition): r for r in rows}


def watch(admin, topics: set[str], interval_s: float, window_s: float, out=sys.stdout) -> None:
    """Refresh the progress of the plan's moves every `interval_s` until none is ongoing: progress
    bars on a terminal, a line per partition and refresh otherwise (logs, pipes)."""
    tracker = mp.Tracker(copies=mp.moves_copy_data(admin), window_s=window_s)
    if getattr(out, "isatty", lambda: False)():
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        bars = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[line]}"),
                        console=Console(file=out), transient=False)
        tasks: dict[tuple[str, int], Any] = {}
        with bars:
            while True:
                rows = tracker.update(mp.observe(admin, topics))
                for r in rows:
                    key = (r.topic, r.partition)
                    if key not in tasks:
                        tasks[key] = bars.add_task(r.name, total=None, line="")
                    bars.update(tasks[key], total=r.to_move_bytes or None, completed=r.done_bytes or 0,
                                line=mp.describe(r).split(": ", 1)[1])
                for key, task in tasks.items():
                    if key not in {(r.topic, r.partition) for r in rows}:
                        bars.update(task, completed=bars.tasks[task].total or 1, total=bars.tasks[task].total or 1,
                                    line="complete")
                if not rows:
                    return
                time.sleep(interval_s)
    while True:
        rows = tracker.update(mp.observe(admin, topics))
        if not rows:
            return
        stamp = time.strftime("%H:%M:%S")
        for r in rows:
            print(f"{stamp} {r.name}: {mp.describe(r)}", file=out, flush=True)
        time.sleep(interval_s)


def verify(bootstrap: str, plan: list[dict], out=sys.stdout, window_s: float = 3.0, watch_s: float | None = None,
           record: Path | None = None) -> int:
    """0 when every move is complete, 1 if one is still in progress or differs. Each move still in
    progress gets a line of progress: bytes to move and done, rate over `window_s` and an ETA, and
    beside it what --estimate said before --execute (``record``, when one was made of this plan).
    `watch_s`: first refresh the progress every that many seconds until the moves are done."""
    admin = _admin(bootstrap)
    try:
        topics = {p["topic"] for p in plan}
        if watch_s is not None:
            watch(admin, topics, watch_s, max(window_s, watch_s), out)
        progress = _progress(admin, topics, window_s)
        estimated = _read_record(record)
        ongoing = admin.list_partition_reassignments()
        current = current_assignment(admin, [p["topic"] for p in plan])
        print("Status of partition reassignment:", file=out)
        done = True
        for p in plan:
            name = f"{p['topic']}-{p['partition']}"
            key = (p["topic"], p["partition"])
            if TopicPartition(*key) in ongoing:
                print(f"Reassignment of partition {name} is still in progress.", file=out)
                if key in progress:
                    print(f"  {mp.describe(progress[key])}", file=out)
                if (line := estimate_line(estimated, key, time.time())) is not None:
                    print(f"  {line}", file=out)
                done = False
            elif key not in current:
                print(f"Partition {name} does not exist.", file=out)
                done = False
            elif p["replicas"] is not None and current[key] != p["replicas"]:
                print(f"There is no active reassignment of partition {name}, but replica set is "
                      f"{current[key]} rather than {p['replicas']}.", file=out)
                done = False
            else:
                print(f"Reassignment of partition {name} is completed.", file=out)
        if done and not ongoing:
            brokers = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
            clear_throttles(admin, brokers, sorted({p["topic"] for p in plan}), out)
        return 0 if done else 1
    finally:
        admin.close()


def estimate(bootstrap: str, plan: list[dict], *, throttle: int | None, link: str | None, concurrency: int | None,
             model: str | None, system: str | None, sample_s: float, as_json: bool, out=sys.stdout,
             record: Path | None = None, client_ack_s: float | None = None, producers: int | None = None) -> int:
    """--estimate: what the plan will take, printed before anything runs: the cluster's logs sampled
    twice ``sample_s`` apart (bench/run/move_estimate.py), then the estimate
    (bench/analysis/estimate.py): the code path a run's estimates take. Imported here: the models'
    numpy is not every command's start-up."""
    from bench.analysis import estimate as est
    from bench.run import move_estimate as me

    admin = _admin(bootstrap)
    try:
        topics = {p["topic"] for p in plan}
        current = current_assignment(admin, topics)
        missing = [_missing(p["topic"], p["partition"], current) for p in plan
                   if (p["topic"], p["partition"]) not in current]
        if missing:
            raise PlanError("the plan names partitions the cluster does not have: " + "; ".join(missing))
        first = me.sample_logs(admin, topics, profile_tails=True)
        time.sleep(max(sample_s, 0.0))
        second = me.sample_logs(admin, topics)
        e = est.cluster_estimate(admin, plan, first, second, throttle=throttle,
                                link_bytes_per_s=rate_bits(link) / 8 if link else None,
                                concurrency=concurrency, model=model, system=system, client_ack_s=client_ack_s,
                                producers=producers)
    except est.EstimateError as exc:
        print(f"error: --estimate: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()
    print(json.dumps(e, default=float) if as_json else est.render(e), file=out, end="\n" if as_json else "")
    if record is not None:
        try:
            record.write_text(json.dumps({**e, "estimated_at": time.time()}, default=float))
        except OSError as exc:  # a read-only plan directory: the estimate stands, --verify lacks it
            print(f"note: could not keep the estimate in {record} for --verify: {exc}", file=sys.stderr)
    return 0


def cancel(bootstrap: str, plan: list[dict], out=sys.stdout) -> int:
    admin = _admin(bootstrap)
    try:
        results = alter_reassignments(admin, {TopicPartition(p["topic"], p["partition"]): None for p in plan})
        rc = 0
        for tp, err in sorted(results.items()):
            if err is None:
                print(f"Successfully cancelled partition reassignment for {tp.topic}-{tp.partition}", file=out)
            else:
                print(f"Error cancelling {_why(tp, err)}", file=out)
                rc = 1
        return rc
    finally:
        admin.close()


def list_ongoing(bootstrap: str, out=sys.stdout, window_s: float = 3.0) -> int:
    admin = _admin(bootstrap)
    try:
        progress = _progress(admin, None, window_s)
        ongoing = admin.list_partition_reassignments()
        if not ongoing:
            print("No partition reassignments found.", file=out)
        for tp, st in sorted(ongoing.items()):
            print(f"{tp.topic}-{tp.partition}: replicas: {st['replicas']}, adding: {st['adding_replicas']}, "
                  f"removing: {st['removing_replicas']}", file=out)
            if (tp.topic, tp.partition) in progress:
                print(f"  {mp.describe(progress[(tp.topic, tp.partition)])}", file=out)
        return 0
    finally:
        admin.close()


def generate(bootstrap: str, topics_file: str, broker_list: str, out=sys.stdout) -> int:
    try:
        with open(topics_file) as f:
            spec = json.load(f)
        topics = [t["topic"] for t in spec["topics"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PlanError(f'{topics_file}: expected {{"topics":[{{"topic":"name"}}],"version":1}} ({e})') from None
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        raise PlanError(f"--broker-list must be comma-separated broker ids, got {broker_list!r}") from None
    if not brokers:
        raise PlanError("--broker-list is empty")
    admin = _admin(bootstrap)
    try:
        current = current_assignment(admin, topics)
    finally:
        admin.close()
    proposed = {}
    for i, (key, reps) in enumerate(sorted(current.items())):
        rf = min(len(reps), len(brokers))
        proposed[key] = [brokers[(i + j) % len(brokers)] for j in range(rf)]
    print("Current partition replica assignment", file=out)
    print(_plan_json(current), file=out)
    print("Proposed partition reassignment configuration", file=out)
    print(_plan_json(proposed), file=out)
    return 0


def run(args) -> int:
    verbs = [v for v in VERBS if getattr(args, v)]
    if len(verbs) != 1:
        raise PlanError("give exactly one of " + ", ".join(f"--{v}" for v in VERBS))
    verb = verbs[0]
    try:
        if verb == "list":
            return list_ongoing(args.bootstrap_server, window_s=args.window)
        if verb == "generate":
            if not args.topics_to_move_json_file or not args.broker_list:
                raise PlanError("--generate needs --topics-to-move-json-file and --broker-list")
            return generate(args.bootstrap_server, args.topics_to_move_json_file, args.broker_list)
        if not args.reassignment_json_file:
            raise PlanError(f"--{verb} needs --reassignment-json-file")
        plan = load_plan(args.reassignment_json_file)
        if verb == "execute":
            for p in plan:
                if p["replicas"] is None or not p["replicas"]:
                    raise PlanError(f"{p['topic']}-{p['partition']}: the replica list must not be empty")
                if len(set(p["replicas"])) != len(p["replicas"]):
                    raise PlanError(f"{p['topic']}-{p['partition']}: duplicate replicas in {p['replicas']}")
            if args.throttle is not None and args.throttle <= 0:
                raise PlanError("--throttle must be a positive number of bytes per second")
            return execute(args.bootstrap_server, plan, args.throttle, args.additional,
                           record=estimate_record(args.reassignment_json_file))
        if verb == "estimate":
            for p in plan:
                if not p["replicas"]:
                    raise PlanError(f"{p['topic']}-{p['partition']}: the replica list must not be empty")
            if args.throttle is not None and args.throttle <= 0:
                raise PlanError("--throttle must be a positive number of bytes per second")
            if args.concurrency is not None and args.concurrency < 1:
                raise PlanError("--concurrency must be at least 1 (moves per broker at once)")
            if args.link:
                try:
                    rate_bits(args.link)
                except ValueError as e:
                    raise PlanError(f"--link: {e}") from None
            if args.producers is not None and args.producers < 1:
                raise PlanError("--producers must be at least 1 (the producer clients writing to each partition)")
            if args.client_ack_ms is not None and not 0 < args.client_ack_ms < 600_000:
                raise PlanError("--client-ack-ms must be a positive number of milliseconds (the producers' "
                                "median ack latency now)")
            return estimate(args.bootstrap_server, plan, throttle=args.throttle, link=args.link,
                            concurrency=args.concurrency, model=args.model, system=args.system,
                            sample_s=args.window, as_json=args.json,
                            client_ack_s=args.client_ack_ms / 1000 if args.client_ack_ms is not None else None,
                            producers=args.producers,
                            record=estimate_record(args.reassignment_json_file))
        if verb == "verify":
            return verify(args.bootstrap_server, plan, window_s=args.window,
                          watch_s=args.interval if args.watch else None,
                          record=estimate_record(args.reassignment_json_file))
        return cancel(args.bootstrap_server, plan)
    except BootstrapError as e:
        print(f"error: --bootstrap-server: {e}", file=sys.stderr)
        return 1
    except KafkaError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


VERBS = {
    "estimate": "before --execute: the plan's time per partition and in total with its error band, the bytes "
                "it moves and whether each move can finish under the ingest measured now (nothing is changed)",
    "execute": "start the moves in the plan",
    "verify": "per-partition status of the plan's moves, with bytes to move and done, rate and ETA of each "
              "move still going; clears the throttles once all are done",
    "cancel": "cancel the plan's moves",
    "list": "the reassignments in progress, with their progress",
    "generate": "propose a plan that spreads --topics-to-move-json-file over --broker-list",
}


def add_parser(sub) -> None:
    p = sub.add_parser("reassign", help="partition reassignment, kafka-reassign-partitions style",
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                   help="the cluster to talk to; an address that cannot be reached is reported within 5 s")
    p.add_argument("--reassignment-json-file", metavar="PLAN.json",
                   help='the plan (Kafka\'s format: {"version":1,"partitions":[{"topic","partition","replicas"}]}); '
                        "needed by --execute, --verify and --cancel")
    for verb, what in VERBS.items():
        p.add_argument(f"--{verb}", action="store_true", help=what)
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                   help="with --execute: cap the move's traffic; with --estimate: the cap to estimate with "
                        "(default: the brokers' leader.replication.throttled.rate, where set)")
    p.add_argument("--link", metavar="RATE", help="with --estimate: the brokers' link rate (tc syntax: 1gbit, "
                                                  "10gbit), the cap of a move without a throttle")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="with --estimate: at most N moves per broker at once, as Cruise Control's executor "
                        "(default: all at once, as --execute submits them)")
    p.add_argument("--client-ack-ms", type=float, metavar="MS",
                   help="with --estimate: the producers' median ack latency now (their request latency); a "
                        "shared-storage handover ends one such ack after the clients find the new owner "
                        "(default: the model's runs' own)")
    p.add_argument("--producers", type=int, metavar="N",
                   help="with --estimate: the producer clients writing to each partition; each finds a moved "
                        "partition's new owner on its own retry schedule, so more find it sooner (default: 1, "
                        "the latest)")
    p.add_argument("--model", metavar="model.json",
                   help="with --estimate: the move-time model (default: results/aggregate/model.json, else the "
                        "repository's bundled one)")
    from systems.registry import LAUNCHED

    p.add_argument("--system", choices=LAUNCHED,
                   help="with --estimate: the system's move family (default: from the brokers' configs)")
    p.add_argument("--json", action="store_true", help="with --estimate: one JSON object instead of the table")
    p.add_argument("--additional", action="store_true", help="with --execute: add to ongoing reassignments")
    p.add_argument("--watch", action="store_true",
                   help="with --verify: refresh the moves' progress until they are done, then verify")
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help="with --watch: seconds between refreshes")
    p.add_argument("--window", type=float, default=3.0, metavar="S",
                   help="with --verify/--list: seconds over which the rate and ETA are measured (two samples "
                        "this far apart; 0: one sample, no rate); with --estimate: over which the ingest is")
    p.add_argument("--topics-to-move-json-file", metavar="TOPICS.json",
                   help='with --generate: the topics to move, {"topics":[{"topic":"name"}],"version":1}')
    p.add_argument("--broker-list", metavar="1,2,3", help="with --generate: the brokers to spread them over")
    p.set_defaults(func=run)
