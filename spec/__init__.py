"""The model side of kcm: the shared vocabulary (design knobs, invariant names) used unchanged by the
TLA+ specification, the Z3 encoding, the implementation, the CLI and the reports."""
