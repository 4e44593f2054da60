"""Conformance: the implementation judged by the model. `check/` holds the oracles (invariants, step
validation, replay, coverage), `explore/` the searches that feed them (state machines, campaigns, mutants,
the race of engines and `kcm hunt`'s route), `scenario/` the scenario language (file format, commands,
rendering), `pipeline/` the Spark pipeline over trace corpora; `review` fills the design-review matrices and
`verify/` holds `kcm verify`'s stages, both showing their progress to a `reporter`."""
