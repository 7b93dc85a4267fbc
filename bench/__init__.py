"""The harness, one subpackage per step of the data flow: scenario -> run (timeline of actions,
cluster, load) -> history -> check (checkers, summary) -> analysis (aggregation, models, report);
`cli` is the command line over all of them."""
