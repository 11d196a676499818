"""Amazon States Language support that runs inside every function image.

The expression layer (`paths`, `templates`, `intrinsics`, `jsonata_mode`, `dataflow`) is pure: it
evaluates a state's data-flow fields (InputPath, Parameters, ResultSelector, ResultPath,
OutputPath, Arguments, Output, Assign, Choice rules) against JSON values and raises
`unum_entry.errors.StatesRuntimeError` with Step Functions' error names. `dataflow` is the
interface the compiler and the in-function state runner use.
"""
