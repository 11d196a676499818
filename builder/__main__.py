"""`python -m builder <command>`: the developer-facing tool. Wiring only; see builder/cli.py."""

from __future__ import annotations

import sys

from builder.cli import main

if __name__ == "__main__":
    sys.exit(main())
