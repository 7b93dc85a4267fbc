"""The harness: cluster launcher, scenarios, runner, checkers, aggregation, report."""
