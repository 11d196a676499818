"""`python -m builder compile`, and the compile options of `python -m builder run` (which loads a
state machine through builder.runs.folders.runnable_workflow)."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.compiler.substitute import parse_substitutions


def register(sub: argparse._SubParsersAction) -> None:
    """Add `compile`, and the compile options of `run` (run accepts a state machine directly)."""
    parser = sub.add_parser("compile", help="compile a Step Functions state machine (JSON/YAML) into a unum workflow folder")
    parser.add_argument("statemachine", help="state machine file (.json, .asl.json, .yaml) or a folder holding one")
    parser.add_argument("--out", default=None, help="output folder (default: <name>.unum next to the state machine)")
    _add_compile_options(parser)
    parser.set_defaults(func=cmd_compile)
    run = sub.choices.get("run")
    if run is not None:
        _add_compile_options(run)


def _add_compile_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--functions", default=None,
                        help="folder with one sub-folder of code per Lambda function name (default: ./functions next to the state machine, else its folder)")
    parser.add_argument("--handler", default=None,
                        help="handler of every function as MODULE.FUNCTION (default: detect app.handler or lambda_function.lambda_handler)")
    parser.add_argument("--substitution", action="append", default=None, metavar="KEY=VALUE",
                        help="replace ${KEY} (and CloudFormation Ref/Fn::GetAtt of KEY) in the definition, as SAM's "
                             "DefinitionSubstitutions; repeatable")


def cmd_compile(args: argparse.Namespace) -> int:
    from builder.compiler import compile_state_machine

    source = Path(args.statemachine)
    out = Path(args.out) if args.out else _default_out(source)
    substitutions = parse_substitutions(args.substitution)
    result = compile_state_machine(source, out, functions=args.functions, handler=args.handler, substitutions=substitutions)
    print(f"compiled {result.name}: {result.states} states -> {len(result.functions)} functions in {result.out} (entry {result.entry})")
    for name, info in sorted(result.functions.items()):
        what = f"Task {info['task']!r} -> {info['lambda']} ({info['handler']})" if info["task"] else info["kind"]
        print(f"  {name:<28} starts at {info['head']!r}; {what}")
    return 0


def _default_out(source: Path) -> Path:
    base = source if source.is_dir() else source.parent
    stem = source.name.split(".")[0] if source.is_file() else "statemachine"
    return base / f"{stem}.unum"
