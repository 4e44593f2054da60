"""`kcm report` and the `--html` option of every command: self-contained HTML reports."""
