"""The Z3 encoding of the protocol (docs/z3.md): state variables named as `VARIABLES`, one relation per
action of `ACTIONS`, the design knobs as parameters, the invariants under their shared names; and its four
uses: universal proofs (`proofs`), inductive invariants (`induction`), bounded model checking (`bmc`) and
step validation of traces (`validate`)."""
