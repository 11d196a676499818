"""Where `deploy` puts what it generates: the file `--out` names (with one line on stderr saying
what was written and what to do next), or stdout. Results go to stdout, messages to stderr."""

from __future__ import annotations

import sys
from pathlib import Path

from unum_entry.errors import BuildError


def emit(text: str, out: str | None, *, next_step: str, executable: bool = False) -> None:
    """Print `text`, or write it to `out` ("-": stdout) and say so on stderr: `wrote OUT: NEXT_STEP`
    (`{out}` in `next_step` is replaced by the path). A path that cannot be written (missing
    folder, no permission) is a BuildError naming it: the folder is not created."""
    if out in (None, "-"):
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    path = Path(out)
    try:
        path.write_text(text)
        if executable:
            path.chmod(0o755)
    except OSError as exc:
        raise BuildError(f"deploy --out {out}: cannot write: {exc.strerror or exc}") from exc
    print(f"wrote {out}: {next_step.replace('{out}', str(out))}", file=sys.stderr)
