"""The model, the lowest layer of kcm and the reference for every oracle: the shared vocabulary (design
knobs, invariants, actions, state variables; `vocabulary`), the trace format every engine speaks (`trace/`),
the TLA+ specification (the `*.tla` and `*.cfg` files beside this module) and TLC to run it (`tlc/`), the
designs kcm reviews on those models (`designs`), and the Z3 encoding (`z3/`). It imports nothing from the
layers above (kcm.tools.layers)."""
