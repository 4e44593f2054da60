"""The TLC engine: finding Java and `tla2tools.jar` and reading TLC's output (`runner`), the configuration
TLC reads, a `.cfg` of spec/ with the knobs and era hooks bound (`config`), model checking a `spec/MC*`
instance and its counterexample turned into a trace (`modelcheck`), and TLC trace validation, a trace as
a constrained behaviour of the specification (`validate`)."""
