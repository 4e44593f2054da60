"""The TLC engine: finding Java and `tla2tools.jar` and reading TLC's output (`runner`), model checking a
`spec/MC*` instance with the knobs bound and its counterexample turned into a trace (`modelcheck`), and
TLC trace validation, a trace as a constrained behaviour of the specification (`validate`)."""
