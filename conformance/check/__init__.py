"""Oracles: every step of a trace judged by the model. The invariant checker (`invariants`), step
validation against the Z3 transition relation (`validate`), replay of a trace through the implementation
(`replay`), what a run covered of the model's actions and state transitions (`coverage`, drawn by `svg`),
and the implementation's state tables read off its predicates, for the proofs that hold them to the
model's (`tables`)."""
