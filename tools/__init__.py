"""The kcm command line and its helpers."""
