"""The history's vocabulary: every event and counter name the harness writes and reads, in one
place. A row's ``event`` column holds one of the ``EVENT_*`` names; a ``counter`` event's
``detail.name`` one of the ``COUNTER_*`` names.
"""
from __future__ import annotations

# Run lifecycle (runner)
EVENT_RUN_START = "run_start"  # {run_id, scenario, system, started_at, git_commit, machine, params, matrix}
EVENT_RUN_END = "run_end"  # {finished_at, duration_s, completed, error}
EVENT_RUN_ERROR = "run_error"
EVENT_HARNESS_ERROR = "harness_error"  # a runner thread failed {thread, error}
EVENT_CLUSTER_STARTED = "cluster_started"
EVENT_TOPICS_CREATED = "topics_created"
EVENT_PREFILL = "prefill"  # per partition {topic, partition, bytes, messages, ...}
EVENT_LOAD_STARTED = "load_started"  # time zero of the action timeline
EVENT_LOAD_FINISHED = "load_finished"  # {locust: {...}, purged, skipped, workers, ...}
EVENT_LOAD_WORKERS = "load_workers"  # the load's Locust master and workers, all connected: {master, pids, names}
EVENT_LOAD_WORKER_LOST = "load_worker_lost"  # a worker missing its heartbeats: {worker, pending}
EVENT_VERIFY = "verify"  # per partition {high_watermark, read, complete, error}
# The workload's consumers (bench/run/consumers.py): every group joined and assigned, before the
# load starts {groups: {id: {set, mode, assignment, members, topics, start, backlog}}, seconds};
# their end {delivered, caught_up, behind, locust}
EVENT_CONSUMERS_READY = "consumers_ready"
EVENT_CONSUMERS_FINISHED = "consumers_finished"
EVENT_CPU_SAMPLE = "cpu_sample"  # {process: cpu %} once a second during the load
EVENT_RSS_SAMPLE = "rss_sample"  # {process: resident memory bytes} with every cpu_sample
EVENT_FD_SAMPLE = "fd_sample"  # {process: open file descriptors} with every cpu_sample
EVENT_OBJSTORE_CENSUS = "objstore_census"  # {key group: {objects, bytes}} every checks.objstore_census_s
# The whole host with every cpu_sample (same ts), every process on the machine, the harness's or
# not (bench/run/observe.py host_busy): {busy_pct (share of all cores not idle and not waiting
# for I/O, psutil.cpu_percent's definition; 100 = every core busy), user_pct (user + nice),
# system_pct (system + irq + softirq), iowait_pct, steal_pct (taken by the hypervisor), over the
# interval_s seconds up to ts; cpus; load_1m; cpu_pressure_pct: the share of the interval some
# runnable task waited for a CPU, the kernel's PSI, null without it}. What bench/check/host.py
# judges saturation on (busy_pct).
# (cpu_sample's "_machine" key is busy_pct again; histories from before host_sample have only it.)
EVENT_HOST_SAMPLE = "host_sample"
# Emulated links, once a second during the load: {node: {tx_bytes_per_s, rx_bytes_per_s, rate_bits}}
# (tx = what the node sent, rx = what it received, over the last interval; node "client" is the
# root namespace's link, which the load and the verifying consumer use)
EVENT_LINK_SAMPLE = "link_sample"
EVENT_JOURNAL_TRANSLATED = "journal_translated"
EVENT_JOURNAL_MALFORMED = "journal_malformed"

# Timeline actions (moves and faults)
EVENT_ACTION_START = "action_start"  # {action_id, action, at_s, ...}
EVENT_ACTION_END = "action_end"  # {action_id, action, ok, ...}
EVENT_BROKER_STARTING = "broker_starting"  # add_broker_and_rebalance: the new broker's start
EVENT_BROKER_STARTED = "broker_started"
EVENT_REASSIGN_REQUESTED = "reassign_requested"  # the AlterPartitionReassignments answer
EVENT_MOVE_OBSERVED = "move_observed"  # a client sees the target replicas with a leader in them
# A later action asked for another target of a partition still moving (KIP-455 replaces the
# ongoing reassignment): {action_id, topic, partition, by (the later action)}
EVENT_MOVE_SUPERSEDED = "move_superseded"
# What the move was estimated to take before its request (bench/run/move_estimate.py, the code path
# of `bench reassign --estimate`): {action_id, partitions [{topic, partition, seconds, seconds_low,
# seconds_high, bytes, feasible, ...}], total_seconds, model} or {action_id, error}
EVENT_MOVE_ESTIMATE = "move_estimate"

# Cluster state, as clients see it (poller) or as the cluster's journals say (journal.py)
EVENT_LEADER_CHANGE = "leader_change"
# A broker's count, per client id over its last 0.25 s (systems/core/broker.py), kept as the journal
# has it: {client_id, metadata (requests), produce_errors: {"topic-p": {error name: answers}}}
EVENT_CLIENT_REQUESTS = "client_requests"
PRODUCER_CLIENT_PREFIX = "locust-"  # the load's producers' client.id: this, then the producer's name
EVENT_MOVE_COMPLETE = "move_complete"
EVENT_MOVE_PHASE = "move_phase"  # {phase, seconds, bytes, action_id}
EVENT_COUNTER = "counter"  # {name, value (an increment), broker[, action_id]}
# A leader tells a new replica where its copy starts, when that is not the log's start (tiered
# storage: after the last tiered offset, or at the leader's local log start): a journal record
# with a `bytes_to_copy` field {replica, offset, bytes_to_copy (the leader's local bytes from
# there to its log end at that moment), ...its other fields}
EVENT_COPY_START = "copy_start"
# The old owner starts refusing a partition's writes before its leader changes (a handover's
# close): the journal record's own fields
EVENT_WRITES_REFUSED = "writes_refused"
FIELD_BYTES_TO_COPY = "bytes_to_copy"
# The protocol observer (bench/run/observe.py: poll_protocol), on any cluster
EVENT_REASSIGNMENT_LISTED = "reassignment_listed"  # ListPartitionReassignments shows it {replicas, adding, removing}
EVENT_REASSIGNMENT_CLEARED = "reassignment_cleared"  # no longer listed {replicas, listed_seconds}
# {target, adding, removing, copies, phase, to_move_bytes, done_bytes, remaining_bytes, rate_bytes_per_s, eta_s}
EVENT_MOVE_PROGRESS = "move_progress"
EVENT_LOG_DIRS = "log_dirs"  # DescribeLogDirs {sizes: {"topic-p": {broker: bytes}}, lags: {...}}
# A tiered-storage leader's untiered tail, what a new replica starting after the last tiered offset
# (KIP-1023) would copy (ListOffsets LATEST_TIERED / EARLIEST_LOCAL / LATEST and the leader's log-dir
# size): {segment_bytes, upload_interval_s, partitions: {"topic-p": {leader, end, local_start,
# last_tiered, local_bytes, untiered_bytes}}}
EVENT_UNTIERED = "untiered_sample"
EVENT_EXTERNAL_CLUSTER = "external_cluster"  # a cluster the harness did not start: what it found and set
# A journal record about a cluster's internal topic (Kafka's `__consumer_offsets`, the group
# coordinator's log): kept, but out of the checkers' sight, which measure the scenario's topics
EVENT_INTERNAL_TOPIC = "internal_topic"
INTERNAL_TOPIC_PREFIX = "__"

# Counter names
COUNTER_INTER_BROKER = "bytes_moved_inter_broker"  # bytes copied broker -> broker for a move (receiver)
COUNTER_SENT_INTER_BROKER = "bytes_sent_inter_broker"  # the same bytes seen by the sender
COUNTER_OBJSTORE = "bytes_moved_objstore"  # bytes uploaded to / read from object storage for a move
# A move's object-store requests of one kind (systems.shared.objstore.REQUEST_KINDS): the counter
# objstore_put_requests etc., from the `objstore_requests` field of a move's close or open record
COUNTER_OBJSTORE_REQUESTS = "objstore_{kind}_requests"
OBJSTORE_REQUEST_KINDS = ("put", "get", "list", "head", "delete")  # = systems.shared.objstore.REQUEST_KINDS (tested)

# How often the harness looks (bench/run/observe.py): the time resolution of what the history says
# about moves, which summaries and the report state.
POLL_INTERVAL_S = 0.1  # the client-side metadata poller (leader_change events)
# The protocol observer: ListPartitionReassignments every tick, DescribeLogDirs every other one.
PROTOCOL_POLL_S = 0.25
LOG_DIRS_EVERY = 2

# `source` of a leader_change: the harness's metadata poller (what a client sees); journal rows
# carry the emitting process instead ("controller" or a broker id).
SOURCE_CLIENT = "client"

# Node names: a cluster's processes and, with emulated links, their links (the keys of a
# link_sample's detail, of cpu_sample's and of cluster.json's network nodes).
NODE_CONTROLLER = "controller"
NODE_OBJSTORE = "objstore"
NODE_CLIENT = "client"  # the root namespace's link: load, verifying consumer, admin clients
# The delaying proxy in front of the object store (network.object_store_latency): a process of
# the cluster in the object store's namespace, with no link of its own (a cpu_sample key).
NODE_OBJSTORE_PROXY = "objstore-proxy"
BROKER_NODE_PREFIX = "broker-"


def broker_node(broker: int) -> str:
    return f"{BROKER_NODE_PREFIX}{broker}"
