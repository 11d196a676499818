"""The `python -m builder` sub-commands: one module per command (or family), each with
`register(subparsers)` wiring its arguments to a `cmd_*` function. Shared CLI helpers in `io.py`."""
