"""Oracles: every step of a trace judged by the model. The invariant checker (`invariants`), step
validation against the Z3 transition relation (`validate`), replay of a trace through the implementation
(`replay`), and what a run covered of the model's actions and state transitions (`coverage`, drawn by
`svg`)."""
