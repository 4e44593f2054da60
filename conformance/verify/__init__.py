"""The stages of `kcm verify`: `stages` the contract between the run and each engine (its context, its rows,
their verdicts), one module per engine's stage (`simulation`, `z3`, `tlc`, `conformance`, `pipeline`,
`zookeeper`), and `engines` the run over them in order."""
