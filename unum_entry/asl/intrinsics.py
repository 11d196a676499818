"""The 18 intrinsic functions of the States Language (JSONPath mode).

An intrinsic is a string such as `States.Format('Hello, {}', $.name)` in a `.$` field.
`parse` turns it into a tree once (arguments are string literals in single quotes with the
escapes `\\'`, `\\{`, `\\}`, `\\\\`; numbers; `true`/`false`/`null`; paths `$…`, `$$…`,
`$name…`; nested intrinsics, at most 10 deep); `evaluate` runs the tree with a path resolver
supplied by the caller. No library parses this grammar, so it is parsed here, by hand.

Run-time failures (wrong argument types, bad JSON, out-of-range values) raise
StatesRuntimeError("States.IntrinsicFailure", cause); a path that selects nothing raises
whatever the resolver raises (States.Runtime).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import random as _random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import StatesRuntimeError

INTRINSIC_FAILURE = "States.IntrinsicFailure"
MAX_NESTING = 10
MAX_RANGE_ITEMS = 1000
MAX_ENCODE_CHARS = 10_000
INT32 = (-(2**31), 2**31 - 1)

_HASHES: Mapping[str, str] = {
    "MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512",
}

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"States\.[A-Za-z0-9]+")


class IntrinsicSyntaxError(ValueError):
    """A string is not a well-formed intrinsic invocation; the message says why."""


# ---------------------------------------------------------------------------------------------
# The tree.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """A literal argument. For a string, `pieces` is the text split at its unescaped `{}`."""

    value: Any
    pieces: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PathArg:
    """A path argument (`$…`, `$$…`, `$name…`)."""

    text: str


@dataclass(frozen=True)
class Call:
    """An intrinsic invocation."""

    name: str
    args: tuple[Literal | PathArg | Call, ...]

    def depth(self) -> int:
        """How many invocations deep this call nests (1 for a call without nested calls)."""
        return 1 + max((arg.depth() for arg in self.args if isinstance(arg, Call)), default=0)


def looks_like_intrinsic(text: object) -> bool:
    """True if `text` is meant as an intrinsic invocation (starts with `States.`)."""
    return isinstance(text, str) and text.lstrip().startswith("States.")


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Call:
    """Parse an intrinsic invocation. Raises IntrinsicSyntaxError naming the problem."""
    parser = _Parser(text)
    call = parser.call()
    parser.skip_space()
    if parser.pos != len(text):
        raise parser.error("unexpected text after the closing ')'")
    if call.depth() > MAX_NESTING:
        raise IntrinsicSyntaxError(f"{text!r}: intrinsic functions nest at most {MAX_NESTING} deep")
    _check_call(call, text)
    return call


class _Parser:
    """Recursive-descent parser over one invocation string."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, problem: str) -> IntrinsicSyntaxError:
        return IntrinsicSyntaxError(f"{self.text!r}: {problem} at position {self.pos}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def call(self) -> Call:
        self.skip_space()
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise self.error("expected an intrinsic function name such as States.Format")
        name = match.group(0)
        self.pos = match.end()
        self.skip_space()
        if self.text[self.pos:self.pos + 1] != "(":
            raise self.error(f"expected '(' after {name}")
        self.pos += 1
        args: list[Literal | PathArg | Call] = []
        self.skip_space()
        if self.text[self.pos:self.pos + 1] == ")":
            self.pos += 1
            return Call(name, ())
        while True:
            args.append(self.argument())
            self.skip_space()
            char = self.text[self.pos:self.pos + 1]
            self.pos += 1
            if char == ")":
                return Call(name, tuple(args))
            if char != ",":
                self.pos -= 1
                raise self.error("expected ',' or ')'")

    def argument(self) -> Literal | PathArg | Call:
        self.skip_space()
        rest = self.text[self.pos:]
        if rest.startswith("'"):
            return self.string()
        if rest.startswith("$"):
            return self.path()
        if rest.startswith("States."):
            return self.call()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if rest.startswith(word) and not rest[len(word):len(word) + 1].isalnum():
                self.pos += len(word)
                return Literal(value)
        match = _NUMBER.match(self.text, self.pos)
        if match is not None:
            self.pos = match.end()
            number = json.loads(match.group(0))
            return Literal(number)
        raise self.error("expected a string in single quotes, a number, true, false, null, a path or an intrinsic")

    def string(self) -> Literal:
        self.pos += 1  # opening quote
        chars: list[str] = []
        pieces: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated string literal")
            char = self.text[self.pos]
            if char == "\\":
                escaped = self.text[self.pos + 1:self.pos + 2]
                if escaped not in ("'", "{", "}", "\\"):
                    raise self.error("open escape: a backslash must be followed by ', {, } or \\")
                chars.append(escaped)
                self.pos += 2
                continue
            if char == "'":
                self.pos += 1
                pieces.append("".join(chars))
                return Literal("{}".join(pieces), tuple(pieces))
            if char == "{" and self.text[self.pos + 1:self.pos + 2] == "}":
                pieces.append("".join(chars))
                chars = []
                self.pos += 2
                continue
            chars.append(char)
            self.pos += 1

    def path(self) -> PathArg:
        start, depth, quote = self.pos, 0, None
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if quote is not None:
                if char == "\\":
                    self.pos += 1
                elif char == quote:
                    quote = None
            elif char in "'\"" and depth > 0:
                quote = char
            elif char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            elif depth == 0 and (char in ",)" or char.isspace()):
                break
            self.pos += 1
        text = self.text[start:self.pos]
        from unum_entry.asl.paths import path_problem

        problem = path_problem(text)
        if problem is not None:
            raise self.error(problem)
        return PathArg(text)


def _check_call(call: Call, text: str) -> None:
    """Static checks: known name, argument count, literal argument types where knowable."""
    spec = _FUNCTIONS.get(call.name)
    if spec is None:
        known = ", ".join(sorted(_FUNCTIONS))
        raise IntrinsicSyntaxError(f"{text!r}: unknown intrinsic function {call.name} (known: {known})")
    low, high = spec.arity
    count = len(call.args)
    if count < low or (high is not None and count > high):
        wanted = f"{low}" if low == high else (f"at least {low}" if high is None else f"{low} to {high}")
        raise IntrinsicSyntaxError(f"{text!r}: {call.name} takes {wanted} argument(s), got {count}")
    if call.name == "States.Format" and isinstance(call.args[0], Literal):
        template = call.args[0]
        # A placeholder/argument count mismatch is left to run time (States.IntrinsicFailure):
        # AWS's own documented example has one placeholder more than arguments.
        if template.pieces is None:
            raise IntrinsicSyntaxError(f"{text!r}: the first argument of States.Format must be a string")
    for position, (arg, wanted) in enumerate(zip(call.args, _argument_kinds(spec, count))):
        found = _static_kind(arg)
        if wanted != ANY and found is not None and found != wanted:
            raise IntrinsicSyntaxError(f"{text!r}: the {_ORDINALS[min(position, 3)]} argument of {call.name} must be "
                                       f"{_KIND_NAMES[wanted]}, found {_describe(arg, found)}")
    if call.name == "States.JsonMerge" and isinstance(call.args[2], Literal) and call.args[2].value is not False:
        raise IntrinsicSyntaxError(f"{text!r}: States.JsonMerge supports only shallow merging: its third argument must be false")
    if call.name == "States.Hash" and isinstance(call.args[1], Literal) and call.args[1].value not in _HASHES:
        raise IntrinsicSyntaxError(f"{text!r}: States.Hash algorithm must be one of {', '.join(_HASHES)}")
    for arg in call.args:
        if isinstance(arg, Call):
            _check_call(arg, text)


# Static argument types: what each argument must be, and what each function returns, so literal
# arguments (and nested calls) of the wrong type are rejected at compile time, as AWS does.
ANY, STRING, NUMBER, BOOLEAN, ARRAY, OBJECT, NULL = "any", "string", "number", "boolean", "array", "object", "null"
_KIND_NAMES: Mapping[str, str] = {STRING: "a string", NUMBER: "a number", BOOLEAN: "a boolean",
                                  ARRAY: "an array", OBJECT: "an object", NULL: "null", ANY: "any value"}
_ORDINALS = ("first", "second", "third", "fourth")


def _argument_kinds(spec: _Spec, count: int) -> list[str]:
    """The kind wanted at each of `count` argument positions (the last kind repeats)."""
    kinds = list(spec.kinds) or [ANY]
    return [kinds[min(i, len(kinds) - 1)] for i in range(count)]


def _static_kind(arg: Literal | PathArg | Call) -> str | None:
    """The kind of a literal or of a nested call's result; None when only run time knows."""
    if isinstance(arg, PathArg):
        return None
    if isinstance(arg, Call):
        returns = _FUNCTIONS[arg.name].returns if arg.name in _FUNCTIONS else ANY
        return None if returns == ANY else returns
    value = arg.value
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, (int, float)):
        return NUMBER
    return STRING


def _describe(arg: Literal | PathArg | Call, kind: str) -> str:
    if not isinstance(arg, Literal):
        return f"{arg.name}(...), which returns {_KIND_NAMES[kind]}" if isinstance(arg, Call) else _KIND_NAMES[kind]
    return f"{_KIND_NAMES[kind]} ({json.dumps(arg.value) if not isinstance(arg.value, str) else repr(arg.value)})"


# ---------------------------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    """What an evaluation may draw on: a path resolver and the UUID / random sources."""

    resolve: Callable[[str], Any]  # path text -> value; raises StatesRuntimeError
    uuid: Callable[[], str]
    random: Callable[[], float]  # uniform in [0, 1)


def evaluate(call: Call, sources: Sources) -> Any:
    """The value of intrinsic `call`. Raises StatesRuntimeError."""
    spec = _FUNCTIONS[call.name]
    if call.name == "States.Format":
        return _format(call, sources)
    values = [_argument(arg, sources) for arg in call.args]
    return spec.run(call.name, values, sources)


def _argument(arg: Literal | PathArg | Call, sources: Sources) -> Any:
    if isinstance(arg, Literal):
        return arg.value
    if isinstance(arg, PathArg):
        return sources.resolve(arg.text)
    return evaluate(arg, sources)


def _fail(name: str, problem: str) -> StatesRuntimeError:
    return StatesRuntimeError(INTRINSIC_FAILURE, f"Invalid arguments in {name}: {problem}")


def _format(call: Call, sources: Sources) -> str:
    first = call.args[0]
    if isinstance(first, Literal) and first.pieces is not None:
        pieces: list[str] | tuple[str, ...] = first.pieces
    else:
        template = _argument(first, sources)
        if not isinstance(template, str):
            raise _fail(call.name, "the first argument must be a string")
        pieces = template.split("{}")
    values = [_argument(arg, sources) for arg in call.args[1:]]
    if len(pieces) - 1 != len(values):
        raise _fail(call.name, f"the template has {len(pieces) - 1} '{{}}' placeholder(s) but {len(values)} value(s) were given")
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:], strict=True):
        out.append(value if isinstance(value, str) else java_text(value))
        out.append(piece)
    return "".join(out)


def java_text(value: Any) -> str:
    """`value` as Step Functions renders a non-string States.Format argument: Java's
    `toString` of the parsed JSON (`{Arg1=1, Arg2=[]}`, `[a, b]`, `null`, `1.5`, `1.0E20`)."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}={java_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_text(item) for item in value) + "]"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return value
    return to_json(value)


def _java_double(value: float) -> str:
    """Java's `Double.toString`: plain decimals in [1e-3, 1e7), else `d.dddE±n`."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "e" not in text else format(value, "f")
    from decimal import Decimal

    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    power = len(digit_tuple) + int(exponent) - 1
    return f"{'-' if sign else ''}{digits[0]}.{digits[1:] or '0'}E{power}"


def to_json(value: Any) -> str:
    """Compact JSON text, as Step Functions prints values (no spaces, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _array(name: str, value: Any, position: str = "first") -> list[Any]:
    if not isinstance(value, list):
        raise _fail(name, f"the {position} argument must be an array")
    return value


def _string(name: str, value: Any, position: str = "first") -> str:
    if not isinstance(value, str):
        raise _fail(name, f"the {position} argument must be a string")
    return value


def _integer(name: str, value: Any, position: str) -> int:
    """An integer argument; non-integers round to the nearest integer (halves away from zero),
    as Step Functions documents."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(name, f"the {position} argument must be an integer")
    if isinstance(value, int):
        return value
    return int(math.floor(abs(value) + 0.5)) * (1 if value >= 0 else -1)


def canonical(value: Any) -> Any:
    """A hashable key equal for equal JSON values (1 == 1.0; true is not 1; key order ignored)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if value is None:
        return ("z",)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(canonical(item) for item in value))
    if isinstance(value, Mapping):
        return ("o", tuple(sorted((key, canonical(item)) for key, item in value.items())))
    return ("?", repr(value))


def _array_fn(name: str, values: list[Any], sources: Sources) -> Any:
    return list(values)


def _array_partition(name: str, values: list[Any], sources: Sources) -> Any:
    array = _array(name, values[0])
    size = _integer(name, values[1], "second")
    if size <= 0:
        raise _fail(name, "the chunk size must be a positive integer")
    return [array[i:i + size] for i in range(0, len(array), size)]


def _array_contains(name: str, values: list[Any], sources: Sources) -> Any:
    array = _array(name, values[0])
    wanted = canonical(values[1])
    return any(canonical(item) == wanted for item in array)


def _array_range(name: str, values: list[Any], sources: Sources) -> Any:
    start = _integer(name, values[0], "first")
    end = _integer(name, values[1], "second")
    step = _integer(name, values[2], "third")
    if step == 0:
        raise _fail(name, "the step (third argument) must not be 0")
    count = max(0, (end - start) // step + 1)
    if count > MAX_RANGE_ITEMS:
        raise _fail(name, f"the range has {count} items; at most {MAX_RANGE_ITEMS} are allowed")
    return [start + i * step for i in range(count)]


def _array_get_item(name: str, values: list[Any], sources: Sources) -> Any:
    array = _array(name, values[0])
    index = _integer(name, values[1], "second")
    if not 0 <= index < len(array):
        raise _fail(name, f"index {index} is out of bounds for an array of {len(array)} item(s)")
    return array[index]


def _array_length(name: str, values: list[Any], sources: Sources) -> Any:
    return len(_array(name, values[0]))


def _array_unique(name: str, values: list[Any], sources: Sources) -> Any:
    seen: set[Any] = set()
    out = []
    for item in _array(name, values[0]):
        key = canonical(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _limited(name: str, value: Any) -> str:
    text = _string(name, value)
    if len(text) > MAX_ENCODE_CHARS:
        raise _fail(name, f"the input has {len(text)} characters; at most {MAX_ENCODE_CHARS} are allowed")
    return text


def _base64_encode(name: str, values: list[Any], sources: Sources) -> Any:
    return base64.b64encode(_limited(name, values[0]).encode("utf-8")).decode("ascii")


def _base64_decode(name: str, values: list[Any], sources: Sources) -> Any:
    text = _limited(name, values[0])
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as error:
        raise _fail(name, f"the input is not Base64 text of UTF-8 data ({error})") from None


def hash_text(name: str, data: Any, algorithm: Any) -> str:
    """Hex digest of `data` (a string as is, any other JSON value as compact JSON)."""
    if algorithm not in _HASHES:
        raise _fail(name, f"the algorithm must be one of {', '.join(_HASHES)}, got {algorithm!r}")
    if data is None:
        raise _fail(name, "the data to hash must not be null")
    text = data if isinstance(data, str) else to_json(data)
    if len(text) > MAX_ENCODE_CHARS:
        raise _fail(name, f"the input has {len(text)} characters; at most {MAX_ENCODE_CHARS} are allowed")
    return hashlib.new(_HASHES[algorithm], text.encode("utf-8")).hexdigest()


def _hash(name: str, values: list[Any], sources: Sources) -> Any:
    return hash_text(name, values[0], values[1])


def _json_merge(name: str, values: list[Any], sources: Sources) -> Any:
    left, right, deep = values
    if not isinstance(left, Mapping) or not isinstance(right, Mapping):
        raise _fail(name, "the first two arguments must be JSON objects")
    if deep is not False:
        raise _fail(name, "only shallow merging is supported: the third argument must be false")
    return {**left, **right}


def _string_to_json(name: str, values: list[Any], sources: Sources) -> Any:
    text = _string(name, values[0])
    if not text.strip():
        return None  # AWS: an empty or blank string is null
    try:
        return json.loads(text)
    except ValueError as error:
        raise _fail(name, f"the argument is not valid JSON text ({error})") from None


def _json_to_string(name: str, values: list[Any], sources: Sources) -> Any:
    return to_json(values[0])


def random_integer(name: str, start: int, end: int, seed: Any, source: Callable[[], float]) -> int:
    """A random integer in [start, end); seeded when `seed` is not None."""
    if start >= end:
        raise _fail(name, f"the start ({start}) must be less than the end ({end})")
    fraction = _random.Random(seed).random() if seed is not None else source()
    return start + min(int(fraction * (end - start)), end - start - 1)


def _math_random(name: str, values: list[Any], sources: Sources) -> Any:
    start = _integer(name, values[0], "first")
    end = _integer(name, values[1], "second")
    seed = _integer(name, values[2], "third") if len(values) > 2 else None
    return random_integer(name, start, end, seed, sources.random)


def _half_up(name: str, value: Any, position: str) -> int:
    """An integer argument of States.MathAdd: non-integers round half up, as Java's
    Math.round (what AWS does: -1.5 -> -1, -0.5 -> 0, 0.5 -> 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(name, f"the {position} argument must be an integer")
    return value if isinstance(value, int) else math.floor(value + 0.5)


def _math_add(name: str, values: list[Any], sources: Sources) -> Any:
    low, high = INT32
    numbers = [_half_up(name, values[0], "first"), _half_up(name, values[1], "second")]
    for number in numbers:
        if not low <= number <= high:
            raise _fail(name, f"{number} is outside the range {low}..{high}")
    return numbers[0] + numbers[1]


def _string_split(name: str, values: list[Any], sources: Sources) -> Any:
    text = _string(name, values[0])
    delimiters = _string(name, values[1], "second")
    if not delimiters:
        raise _fail(name, "the delimiter (second argument) must not be empty")
    # Every character of the second argument is a delimiter; empty pieces are dropped.
    pattern = "[" + "".join(re.escape(char) for char in delimiters) + "]"
    return [piece for piece in re.split(pattern, text) if piece]


def _uuid(name: str, values: list[Any], sources: Sources) -> Any:
    return sources.uuid()


@dataclass(frozen=True)
class _Spec:
    arity: tuple[int, int | None]
    run: Callable[[str, list[Any], Sources], Any]
    kinds: tuple[str, ...] = ()   # the kind of each argument (the last repeats); () = any
    returns: str = ANY


_FUNCTIONS: Mapping[str, _Spec] = {
    "States.Format": _Spec((1, None), _array_fn, (STRING, ANY), STRING),  # evaluated by _format
    "States.StringToJson": _Spec((1, 1), _string_to_json, (STRING,)),
    "States.JsonToString": _Spec((1, 1), _json_to_string, (), STRING),
    "States.Array": _Spec((0, None), _array_fn, (), ARRAY),
    "States.ArrayPartition": _Spec((2, 2), _array_partition, (ARRAY, NUMBER), ARRAY),
    "States.ArrayContains": _Spec((2, 2), _array_contains, (ARRAY, ANY), BOOLEAN),
    "States.ArrayRange": _Spec((3, 3), _array_range, (NUMBER,), ARRAY),
    "States.ArrayGetItem": _Spec((2, 2), _array_get_item, (ARRAY, NUMBER)),
    "States.ArrayLength": _Spec((1, 1), _array_length, (ARRAY,), NUMBER),
    "States.ArrayUnique": _Spec((1, 1), _array_unique, (ARRAY,), ARRAY),
    "States.Base64Encode": _Spec((1, 1), _base64_encode, (STRING,), STRING),
    "States.Base64Decode": _Spec((1, 1), _base64_decode, (STRING,), STRING),
    "States.Hash": _Spec((2, 2), _hash, (ANY, STRING), STRING),
    "States.JsonMerge": _Spec((3, 3), _json_merge, (OBJECT, OBJECT, BOOLEAN), OBJECT),
    "States.MathRandom": _Spec((2, 3), _math_random, (NUMBER,), NUMBER),
    "States.MathAdd": _Spec((2, 2), _math_add, (NUMBER,), NUMBER),
    "States.StringSplit": _Spec((2, 2), _string_split, (STRING,), ARRAY),
    "States.UUID": _Spec((0, 0), _uuid, (), STRING),
}

NAMES: tuple[str, ...] = tuple(_FUNCTIONS)


def paths_in(call: Call) -> list[str]:
    """Every path argument in `call`, nested calls included (for static variable checks)."""
    found: list[str] = []
    for arg in call.args:
        if isinstance(arg, PathArg):
            found.append(arg.text)
        elif isinstance(arg, Call):
            found.extend(paths_in(arg))
    return found
