"""Search: hypothesis state machines that drive the implementation towards the states the known bugs
start from (`stateful`, steered by `danger`), seeded simulation campaigns (`campaign`), and the mutation
score of the conformance suite over a catalogue of implementation mutants (`mutants`)."""
