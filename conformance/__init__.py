"""Conformance: the implementation judged by the model. `check/` holds the oracles (invariants, step
validation, replay, coverage), `explore/` the searches that feed them (state machines, campaigns, mutants),
`scenario/` the scenario language (file format, commands, rendering), `pipeline/` the Spark pipeline over
trace corpora."""
