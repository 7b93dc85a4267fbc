"""The ``run``, ``analyze``, ``list``, ``suite`` and ``faults-doc`` subcommands of ``python -m bench``.

    python -m bench run SCENARIO [--set key.path=value ...] [--results DIR] [--no-progress]
    python -m bench analyze RUN_DIR [--write] [--json]
    python -m bench list [--results DIR]
    python -m bench suite default [--results DIR] [--systems NAME,...]
    python -m bench faults-doc [RESULTS ...] [--out docs/faults.md] [--stdout]

SCENARIO is a YAML file or a built-in name (``python -m bench list`` shows them). ``run`` exits 1
if any checker of any run *failed* (False); "unknown" verdicts are reported but do not fail the
command; 2 for an invalid scenario (nothing started). ``analyze`` re-checks a
stored history and prints the summary (``--write`` stores it as summary.json); it exits 1 if the
recomputed summary differs from the stored summary.json.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.scenario import ScenarioError, builtin_scenarios, expand, load_scenario, resolve_scenario
from systems.registry import LAUNCHED as SYSTEMS

DEFAULT_SUITE = "default"
SUITE_NAMES = ("default", "full", "open")  # bench/run/suite.py SUITES (not imported here: the CLI starts fast)


def run_estimates(results: str | Path):
    """What estimates each move of the runs a command starts, before its request: the models of the
    runs stored under ``results`` before them (its aggregate), else the bundled ones
    (bench/analysis/estimate.py)."""
    from bench.analysis.estimate import RunModels

    return RunModels((Path(results) / "aggregate" / "model.json",))


def sigterm_as_interrupt() -> None:
    """Ctrl-C, SIGTERM and SIGHUP stop a run (cleanup, summary; recorded as
    ``interrupted: SIGTERM``): bench.run.ending.stop_on_signals."""
    from bench.run.ending import stop_on_signals

    stop_on_signals()


def cmd_run(args) -> int:
    from bench.run import runner

    sc_path = resolve_scenario(args.scenario)
    sets = [*(args.set or []), *([f"load.workers={args.load_workers}"] if args.load_workers is not None else [])]
    sc = load_scenario(sc_path, sets)  # validated before anything starts
    if args.external:
        sc = external_scenario(sc, args)
    elif args.client or args.client_env or args.command or args.label:
        raise ScenarioError("--client, --client-env, --command and --label need --external BOOTSTRAP "
                            "(or put them in the scenario's system section)")
    from bench.run import clients

    try:
        clients.resolve(sc.system.client)  # an unset environment variable: said now, not mid-run
    except clients.ClientSettingError as e:
        raise ScenarioError(f"{sc_path.name}: {e}") from None
    if not sc.profile.launched:
        # Reach the cluster once before any run: a wrong address or credentials fail here, fast.
        from bench.run.external import ExternalCluster

        probe = ExternalCluster(sc.system, sc.topic_prefix)
        try:
            facts = probe.connect()
        finally:
            probe.stop()
        print(f"cluster at {sc.system.bootstrap}: brokers {sorted(int(b) for b in facts['brokers'])}, "
              f"default.replication.factor {facts['defaults']['default.replication.factor']}, "
              f"min.insync.replicas {facts['defaults']['min.insync.replicas']}", file=sys.stderr)
    sigterm_as_interrupt()
    results = runner.run_scenario(sc, results_root=args.results, progress=not args.no_progress,
                                  keep_data=args.keep_data, estimates=run_estimates(args.results))
    from bench.check.summary import print_comparison

    print_comparison([(str(d), s) for d, s in results], title=f"{sc.name}")
    crashed = [str(d) for d, s in results if s.get("error")]
    if crashed:
        print(f"{len(crashed)} of {len(results)} run(s) crashed (their summaries say why): {', '.join(crashed)}",
              file=sys.stderr)
    # exit 1 when a check failed or a run crashed; a stop signal exits 128 + its number (bench/cli/__init__.py)
    return 1 if crashed or any(s["checks"]["valid"] is False for _, s in results) else 0


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ScenarioError(f"{flag} {item}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def external_scenario(sc, args):
    """The scenario pointed at the cluster at ``--external`` (bench.scenario.to_external); prints
    what did not carry over."""
    from bench.scenario import to_external

    client: dict = _pairs(args.client, "--client")
    client.update({k: {"env": v} for k, v in _pairs(args.client_env, "--client-env").items()})
    ext, notes = to_external(sc, args.external, client=client, commands=_pairs(args.command, "--command"),
                             label=args.label)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    return ext


def cmd_crosscheck(args) -> int:
    from bench.run import crosscheck, runner

    names = tuple(n for n in args.scenarios.split(",") if n)
    if args.from_dir:
        result = crosscheck.recompare(Path(args.from_dir), names)
        crosscheck.print_result(result)
        print(f"{Path(args.from_dir) / 'crosscheck.json'}")
        return 0 if result["agrees"] else 1
    out = Path(args.out) if args.out else Path(args.results) / "crosscheck" / runner.timestamp()
    out.mkdir(parents=True, exist_ok=False)
    for n in names:
        load_scenario(resolve_scenario(n), args.set or [])  # every scenario valid before anything starts
    sigterm_as_interrupt()
    result = crosscheck.crosscheck(out, names, args.repetitions, tuple(args.set or ()),
                                   say=lambda m: print(m, file=sys.stderr))
    crosscheck.print_result(result)
    print(f"{out / 'crosscheck.json'}")
    return 0 if result["agrees"] else 1


def cmd_analyze(args) -> int:
    from bench.check.summary import build_summary, dumps, load_run, upgrade_summary
    from bench.check.view import HistoryView

    run_dir = Path(args.run_dir)
    table, sc = load_run(run_dir)
    summary = build_summary(table, sc)
    stored_path = run_dir / "summary.json"
    # A summary an older version wrote is compared in today's shape (its schema_version upgraded).
    stored = (upgrade_summary(json.loads(stored_path.read_text()), HistoryView(table, sc))
              if stored_path.is_file() else None)
    same = stored == json.loads(dumps(summary))
    if args.write:
        stored_path.write_text(dumps(summary))
    if args.json:
        sys.stdout.write(dumps(summary))
    else:
        c = summary["checks"]
        print(f"{run_dir}: checks valid={c['valid']} failed={c['failed']} unknown={c['unknown']}")
        for m in summary["moves"]:
            print(f"  move action {m['action_id']} {m['topic']}-{m['partition']} {m['from']} -> {m['to']}: "
                  f"move_seconds={m['move_seconds']} inter_broker={m['bytes_moved_inter_broker']} "
                  f"objstore={m['bytes_moved_objstore']} unavailable_seconds={m['unavailable_seconds']}")
        p = summary["producer"]
        print(f"  producer: sent={p['sent']} acked={p['acked']} failed={p['failed']} info={p['info']} "
              f"rate={p['rate_msgs_per_s']}")
        print(f"  host saturated: {host_text(summary, markup=False)} (bench/check/host.py)")
        if stored is None:
            print("  (no stored summary.json to compare with)")
        else:
            print("  matches stored summary.json" if same else "  DIFFERS from stored summary.json")
    return 0 if (stored is None or same or args.write) else 1


def cmd_list(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from bench.check.host import RULE as HOST_RULE
    from bench.check.outcome import run_verdict

    console = Console()
    t = Table(title="built-in scenarios (workloads/scenarios)")
    t.add_column("name")
    t.add_column("runs")
    t.add_column("description")
    for name, path in builtin_scenarios().items():
        try:
            sc = load_scenario(path)
            n = len(expand(sc))
            t.add_row(name, str(n), sc.description)
        except ScenarioError as exc:
            t.add_row(name, "-", f"[red]invalid: {exc}[/red]")
    console.print(t)
    root = Path(args.results)
    # A run directory is one with the run's scenario.yaml. How it ended comes from its summary or,
    # without one, from runner.json (bench.run.ending): interrupted (Ctrl-C, SIGTERM), crashed
    # (the exception's first line), killed (no summary and its process gone) or still running.
    run_dirs = sorted({p.parent for p in (*root.glob("*/*/scenario.yaml"), *root.glob("*/*/*/scenario.yaml"))},
                      key=str)
    t = Table(title=f"past runs ({root})")
    for col in ("run", "system", "started", "status", "checks", "host saturated", "moves", "path"):
        t.add_column(col, overflow="fold")
    for d in run_dirs:
        try:
            s = json.loads((d / "summary.json").read_text())
        except OSError:
            t.add_row(d.name, "?", "?", run_status(d, None), "-", "-", "-", str(d))
            continue
        except ValueError:
            t.add_row(d.name, "?", "?", "[red]unreadable summary.json[/red]", "-", "-", "-", str(d))
            continue
        moves = ", ".join((f"{m['move_seconds']:.2f}s" if isinstance(m.get("move_seconds"), (int, float)) else "?")
                          + ("*" if m.get("host_saturated") else "") for m in s.get("moves", [])) or "-"
        t.add_row(str(s.get("run_id")), str(s.get("system")), str(s.get("started_at")), run_status(d, s),
                  _marked(run_verdict(s)), host_text(s), moves, str(d))
    console.print(t if run_dirs else f"no runs under {root}")
    if run_dirs:
        console.print(f"host saturated: {HOST_RULE} (load window: yes/no/unknown, mean busy %); "
                      "* a move timed while the host was saturated; steal: the CPU the hypervisor gave other "
                      "guests of this machine. A summary from before host samples: "
                      "`python -m bench analyze RUN_DIR --write` fills it in from the history.", highlight=False)
    return 0


def host_text(s: dict, markup: bool = True) -> str:
    """``python -m bench list``'s host column: whether the run's load window saturated the host
    (bench/check/host.py), its mean busy share, and how many of its moves were saturated
    (``markup``: a saturated run in red, rich's markup), and the hypervisor's steal when it took
    a noticeable share."""
    from bench.check.host import STEAL_NOTICE_PCT

    h = s.get("host")
    if not isinstance(h, dict):
        return "? (older summary)"
    sat = h.get("saturated")
    word = ("[red]yes[/red]" if markup else "yes") if sat else "no" if sat is False else "unknown"
    mean = h.get("busy_mean_pct")
    moves = s.get("moves") or []
    n = sum(1 for m in moves if m.get("host_saturated"))
    steal = h.get("steal_mean_pct")
    return (word + (f" ({mean:.0f} %)" if isinstance(mean, (int, float)) else "")
            + (f", {n} of {len(moves)} moves" if moves else "")
            + (f", steal {steal:.0f} %" if isinstance(steal, (int, float)) and steal >= STEAL_NOTICE_PCT else ""))


def _marked(word: str) -> str:
    return f"[red]{word}[/red]" if word == "fail" else word


def run_status(run_dir: Path, summary: dict | None) -> str:
    """How the run ended, marked red unless it completed (or is still running)."""
    from rich.markup import escape

    from bench.run.ending import run_state

    words, bad = run_state(run_dir, summary)
    return f"[red]{escape(words)}[/red]" if bad else escape(words)


def cmd_suite(args) -> int:
    from bench.run.suite import run_suite

    sigterm_as_interrupt()
    return run_suite(args.name, results_root=args.results, systems=args.systems, progress=not args.no_progress,
                     estimates=run_estimates(args.results))


def cmd_faults_doc(args) -> int:
    from bench.report.faults_doc import cmd_faults_doc as regenerate

    return regenerate(args)


def add_parsers(sub, default_results: str = "results") -> None:
    r = sub.add_parser("run", help="run a scenario (a YAML file or a built-in name)")
    r.add_argument("scenario", help="a scenario YAML file, or the name of a built-in one (`python -m bench list` "
                                     "shows them, e.g. reassign-one, faults/kill-source)")
    r.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field (repeatable); pins a matrix axis")
    r.add_argument("--load-workers", type=int, metavar="N",
                   help="run the producers in N Locust worker processes under a master (load.workers)")
    r.add_argument("--results", default=default_results, help="results root (default: results)")
    r.add_argument("--no-progress", action="store_true", help="no live display")
    r.add_argument("--keep-data", action="store_true", help="keep the cluster's data files")
    ext = r.add_argument_group("a cluster the harness does not start (any Kafka-compatible cluster)")
    ext.add_argument("--external", metavar="HOST:PORT[,...]",
                     help="run the scenario's load, prefill, moves and checks against the cluster at this "
                          "bootstrap instead of starting one (its topics get the prefix bench.)")
    ext.add_argument("--client", action="append", metavar="KEY=VALUE",
                     help="a setting for every Kafka client of the run, librdkafka names "
                          "(security.protocol=SASL_SSL, client.id=..., linger.ms=...); repeatable")
    ext.add_argument("--client-env", action="append", metavar="KEY=ENV_VAR",
                     help="a client setting read from an environment variable (secrets: the value is never "
                          "written down); repeatable")
    ext.add_argument("--command", action="append", metavar="ACTION=SHELL",
                     help="how to act on a broker for a fault action, {broker} filled in: kill_broker=..., "
                          "restart_broker=..., pause_broker=..., resume_broker=...; repeatable")
    ext.add_argument("--label", help="what the report calls the cluster")
    r.set_defaults(func=cmd_run)

    x = sub.add_parser("crosscheck", help="built-in runs vs the same scenarios against `bench cluster start` "
                                          "clusters measured as external (protocol only)")
    x.add_argument("--scenarios", default="reassign-one,broker-loss", help="comma-separated scenarios")
    x.add_argument("--repetitions", type=int, default=3, help="runs per configuration and side (default: 3)")
    x.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", help="override a field of every scenario")
    x.add_argument("--results", default=default_results, help="results root (default: results)")
    x.add_argument("--out", help="output directory (default: RESULTS/crosscheck/<timestamp>)")
    x.add_argument("--from", dest="from_dir", metavar="DIR",
                   help="run nothing: compare the runs stored in DIR (an earlier --out) again")
    x.set_defaults(func=cmd_crosscheck)

    a = sub.add_parser("analyze", help="re-run the checkers on a stored run and rebuild its summary")
    a.add_argument("run_dir", help="a run directory (the one holding scenario.yaml and history.parquet)")
    a.add_argument("--write", action="store_true", help="store the result as summary.json")
    a.add_argument("--json", action="store_true", help="print the whole summary")
    a.set_defaults(func=cmd_analyze)

    ls = sub.add_parser("list", help="built-in scenarios and past runs")
    ls.add_argument("--results", default=default_results, help="results root searched for past runs (default: results)")
    ls.set_defaults(func=cmd_list)

    f = sub.add_parser("faults-doc", help="regenerate the fault suite section of docs/faults.md from stored runs "
                                          "of workloads/scenarios/faults/*.yaml")
    f.add_argument("results", nargs="*", default=[default_results],
                   help="result roots searched for runs (default: results)")
    f.add_argument("--out", default="docs/faults.md", help="the file whose fault suite section is replaced")
    f.add_argument("--stdout", action="store_true", help="print the section instead of writing it")
    f.set_defaults(func=cmd_faults_doc)

    s = sub.add_parser("suite", help="a suite of scenarios on every system the harness starts; prints the "
                                     "comparison table (default: make bench's, about 15 min: calibrate, tiered-tail, shared-tail, drain, consume-move; "
                                     "full: the run-level suite, about 55 min; open: the shared open cost to 100,000 "
                                     "objects, about 5 min)")
    s.add_argument("name", nargs="?", default=DEFAULT_SUITE, choices=sorted(SUITE_NAMES),
                   help="the suite to run (default: default)")
    s.add_argument("--results", default=default_results, help="results root (default: results)")
    s.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated systems to include")
    s.add_argument("--no-progress", action="store_true", help="no live display")
    s.set_defaults(func=cmd_suite)


def handle_errors(exc: BaseException) -> int | None:
    """Exit code for errors of these commands (None: not ours)."""
    from bench.run.runner import RunError

    if isinstance(exc, ScenarioError):
        print(f"invalid scenario:\n{exc}", file=sys.stderr)
        return 2
    if isinstance(exc, (RunError, FileNotFoundError)):
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return None

