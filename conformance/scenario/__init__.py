"""The scenario language: files of commands, each followed by the output it must produce, run against a
simulated cluster. `language` is the file format (parse, run, rewrite, write), `environment` the commands,
`rendering` how their events and the cluster's state print. The test suite runs the files of
tests/scenarios/ through it, `kcm conform` writes the failures it finds in it, `kcm mutate` scores with it."""
