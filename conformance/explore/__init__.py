"""Search: hypothesis state machines that drive the implementation towards the states the known bugs
start from (`stateful` runs them: `machine`, `cluster_machine` and `replication_machine` hold the rules,
`harness` checks every step, `finding` reports a shrunk failure, `config` the run's settings, `known_bugs`
what search must find, steered by `danger`), seeded simulation campaigns (`campaign`), the race of engines
for a counterexample (`hunt`) and `kcm hunt`'s route through it (`route`), and the mutation score of the
conformance suite over a catalogue of implementation mutants (`mutants`)."""
