"""Each engine trick against its plain alternative, on the workloads users run (issue 46).

    python bench/fastpaths.py machine DIR [--states 30]     # writes a Step Functions machine of N states
    python bench/fastpaths.py small [--workflows 200]       # a test suite's many small workflows, in-process
    python bench/fastpaths.py patch VARIANT WORKTREE        # switches one trick off in a scratch worktree

The tricks, and what `patch` puts in their place (in a scratch worktree made with
`git worktree add --detach /tmp/wt-VARIANT HEAD`, never in the working checkout):

- `interpreter`: `unum_entry.plan.Program` plans every transition through the IR interpreter
  (`plan.plan`): no chain-hop / fan-in shortcut, no remembered join-set name.
- `full-validation`: `Envelope.from_wire` always validates field by field (no `_plain_from_wire`;
  removed since commit caf823a: measure it on 14cb942).
- `frozen-dataclass`: what `@dataclass(frozen=True, slots=True)` costs instead of the value
  classes: every field store in a value class's `__init__` becomes `object.__setattr__` (what
  the generated frozen `__init__` does), and each value class also generates the dataclass
  methods for its fields when it is defined (the import cost).
- `slots-dataclass`: what `@dataclass(slots=True, unsafe_hash=True)` costs instead: the same
  plain stores, plus the code generation at definition.

Each workload is then timed as a whole process, the trick on (HEAD) and off (the worktree) in
alternating pairs, A B A B ..., with the ratio taken pair by pair, e.g. with public tools:

    for i in 1 2 3 4 5 6; do
      (cd /tmp/fpb && env PYTHONPATH=/tmp/wt-x /usr/bin/time -f %U+%S python -m builder run sfn30 ...)
      (cd /tmp/fpb && env PYTHONPATH=/tmp/wt-interpreter /usr/bin/time -f %U+%S python -m builder run sfn30 ...)
    done

bench/fastpaths-report.txt holds the figures, their spread and the exact commands. Not a test.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]


def machine(folder: Path, states: int) -> Path:
    """A Step Functions machine of `states` states: Lambda Tasks adding one, with a Pass every
    fifth state and a Choice every tenth, and the Lambda's code in `functions/Inc`."""
    body: dict[str, dict[str, object]] = {}
    for i in range(states):
        name, following = f"S{i}", f"S{i + 1}"
        last = i + 1 == states
        if i % 10 == 9 and not last:
            body[name] = {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericGreaterThanEquals": 0,
                                                         "Next": following}], "Default": following}
            continue
        if i % 5 == 4:
            state: dict[str, object] = {"Type": "Pass", "Parameters": {"n.$": "$.n", "at": name}}
        else:
            state = {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Inc"}
        state.update({"End": True} if last else {"Next": following})
        body[name] = state
    (folder / "functions" / "Inc").mkdir(parents=True, exist_ok=True)
    (folder / "functions" / "Inc" / "app.py").write_text(
        "def handler(event, context):\n    return {\"n\": event[\"n\"] + 1}\n")
    (folder / "statemachine.json").write_text(json.dumps({"StartAt": "S0", "States": body}, indent=1))
    return folder


def small(workflows: int) -> None:
    """`workflows` runs of a three-function chain, each on its own embedded engine over a
    fresh memory store (as a test suite's fixtures build them); prints the CPU per workflow."""
    if not os.environ.get("PYTHONPATH") and str(REPO) not in sys.path:  # PYTHONPATH: a worktree's code
        sys.path.insert(0, str(REPO))
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.stores.memory import MemoryStore
    from unum_entry.workflow import load_workflow

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(3):
            (folder / f"F{i}").mkdir()
            (folder / f"F{i}" / "app.py").write_text("def handler(event, context):\n    return event + 1\n")
            ins = [{"op": "invoke", "function": f"F{i + 1}"}] if i < 2 else []
            (folder / f"F{i}" / "unum-ir.json").write_text(json.dumps(
                {"unum_ir": 1, "function": f"F{i}", "handler": "app.handler", "instructions": ins}))
        (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "small", "entry": "F0"}))
        workflow = load_workflow(folder)
        cpu, wall = time.process_time(), time.perf_counter()
        for n in range(workflows):
            with LocalPlatform(workflow, MemoryStore(), workers=2) as platform:
                result = platform.run(n, timeout=60)
            if result.result != n + 3:
                _fail(f"small: workflow {n} answered {result.result!r}, expected {n + 3}")
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"small: {workflows} workflows in {wall:.2f} s; CPU {cpu / workflows * 1e3:.2f} ms/workflow; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB", flush=True)


# ---- the "off" side of each trick, written into a scratch worktree --------------------------------

def _fail(message: str) -> NoReturn:
    """One error line, exit status 2 (bad input)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        _fail(f"patch: {path}: the code to switch off is not there (was it changed since?)")
    path.write_text(text.replace(old, new, 1))


def _interpreter(tree: Path) -> None:
    plan = tree / "unum_entry" / "plan.py"
    _replace(plan, """        self._only = only if isinstance(only, (Invoke, FanIn)) and only.when is None else None
        # A chain hop's program (one unconditional invoke): `hop_call` is its whole plan.
        self.hop = self._only if isinstance(self._only, Invoke) else None
        # A fan-in branch's program (one unconditional fan_in): its join depends on the envelope alone.
        self.branch = self._only if isinstance(self._only, FanIn) else None""",
             """        fast = only if isinstance(only, (Invoke, FanIn)) and only.when is None else None
        self._only = None  # BENCH: the interpreter only
        self.hop = None
        self.branch = fast if isinstance(fast, FanIn) else None  # kept: the join-in-create path reads it""")
    _replace(plan, """        parts = (workflow, target, target_frames, size)
        known, name = self._set""", """        return naming.fan_in_set_key(workflow, target, target_frames, size)  # BENCH: not remembered
        parts = (workflow, target, target_frames, size)
        known, name = self._set""")


def _full_validation(tree: Path) -> None:
    _replace(tree / "unum_entry" / "envelope.py", """        plain = _plain_from_wire(wire)
        return plain if plain is not None else cls._checked_from_wire(wire)""",
             """        return cls._checked_from_wire(wire)  # BENCH: full validation only""")


def _codegen(tree: Path, options: str) -> None:
    """Each value class also generates `@dataclass(options)`'s methods for its fields when defined."""
    frozen = tree / "unum_entry" / "frozen.py"
    _replace(frozen, "class ReadOnly:", f'''def _codegen(name: str, fields: tuple[str, ...]) -> None:
    """BENCH: pay what @dataclass({options}) generates for these fields."""
    import dataclasses
    dataclasses.dataclass({options})(type(name, (), {{"__annotations__": {{f: "Any" for f in fields}}}}))


class ReadOnly:''')
    if "def frozen(cls: _C) -> _C:" in frozen.read_text():  # before commit bbbe727: the Frozen classes too
        _replace(frozen, '''    setattr(cls, _MARK, names)\n''', '''    setattr(cls, _MARK, names)\n    _codegen(cls.__name__, names)\n''')
    _replace(frozen, '''        cls._values = staticmethod(_tuple_getter(cls._compared))\n''',
             '''        cls._values = staticmethod(_tuple_getter(cls._compared))
        _codegen(cls.__name__, tuple(dict.fromkeys(n for k in reversed(cls.__mro__) for n in k.__dict__.get("__slots__", ()))))
''')


def _setattr_stores(tree: Path) -> int:
    """Every store in a value class's `__init__` through `object.__setattr__`; the stores rewritten."""
    files = [p for p in (tree / "unum_entry").rglob("*.py") if p.name != "frozen.py"]
    trees = {p: ast.parse(p.read_text()) for p in files}
    known, grew = {"Frozen", "ReadOnly"}, True
    while grew:  # the value classes: subclasses of Frozen / ReadOnly, by name, transitively
        grew = False
        for parsed in trees.values():
            for node in ast.walk(parsed):
                if (isinstance(node, ast.ClassDef) and node.name not in known
                        and any(isinstance(b, ast.Name) and b.id in known for b in node.bases)):
                    known.add(node.name)
                    grew = True
    total = 0
    for path, parsed in trees.items():
        source = path.read_text()
        edits: list[tuple[ast.stmt, str]] = []
        for cls in ast.walk(parsed):
            if not (isinstance(cls, ast.ClassDef) and cls.name in known):
                continue
            for init in (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"):
                for st in ast.walk(init):
                    if not isinstance(st, ast.stmt):
                        continue
                    target: ast.expr | None = None
                    value: ast.expr | None = None
                    if isinstance(st, ast.Assign) and len(st.targets) == 1:
                        target, value = st.targets[0], st.value
                    elif isinstance(st, ast.AnnAssign) and st.value is not None:
                        target, value = st.target, st.value
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self" and value is not None):
                        edits.append((st, f'object.__setattr__(self, "{target.attr}", '
                                          f'{ast.get_source_segment(source, value)})'))
                    elif (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                          and ast.unparse(st.value.func) == "self.__dict__.update"):
                        edits.append((st, "; ".join(f'object.__setattr__(self, "{k.arg}", '
                                                    f'{ast.get_source_segment(source, k.value)})'
                                                    for k in st.value.keywords)))
        starts = [0]
        for line in source.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        for st, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
            begin = starts[st.lineno - 1] + st.col_offset
            end = starts[(st.end_lineno or st.lineno) - 1] + (st.end_col_offset or 0)
            source = source[:begin] + new + source[end:]
        total += len(edits)
        path.write_text(source)
    return total


def patch(variant: str, tree: Path) -> None:
    """Switch one trick off in the scratch worktree `tree` (see the module docstring)."""
    if not (tree / "unum_entry" / "frozen.py").is_file() or tree.resolve() == REPO:
        _fail(f"patch: {tree} is not a scratch worktree of this repository")
    if variant == "interpreter":
        _interpreter(tree)
    elif variant == "full-validation":
        _full_validation(tree)
    elif variant == "frozen-dataclass":
        print(f"frozen-dataclass: {_setattr_stores(tree)} stores through object.__setattr__")
        _codegen(tree, "frozen=True, slots=True")
    elif variant == "slots-dataclass":
        _codegen(tree, "slots=True, unsafe_hash=True")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("machine")
    m.add_argument("folder", type=Path)
    m.add_argument("--states", type=int, default=30)
    s = sub.add_parser("small")
    s.add_argument("--workflows", type=int, default=200)
    p = sub.add_parser("patch")
    p.add_argument("variant", choices=("interpreter", "full-validation", "frozen-dataclass", "slots-dataclass"))
    p.add_argument("tree", type=Path)
    args = parser.parse_args()
    if args.command == "machine":
        print(machine(args.folder, args.states))
    elif args.command == "small":
        small(args.workflows)
    else:
        patch(args.variant, args.tree)


if __name__ == "__main__":
    main()
