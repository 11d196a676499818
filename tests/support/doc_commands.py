"""The shell commands of a Markdown page's plain (or `sh`) code blocks, for the tests that run them as
written: a line ending in `\\` continues on the next; a trailing `  # comment` is cut off and kept
apart. A comment starting `cloud only:` followed by the reason marks a command that needs a real
cloud account (docs/aws.md, docs/gcp.md): the doc tests check that every other command is run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLOUD_ONLY = re.compile(r"^cloud only: \S")


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One command of a page: `text` as written (continuations joined by one space, comment cut),
    `comment` its trailing comment without the `#`, `doc` the page it is on."""
    doc: str
    text: str
    comment: str

    @property
    def cloud_only(self) -> bool:
        return bool(CLOUD_ONLY.match(self.comment))

    @property
    def required(self) -> str:
        """The command with its `[optional parts]` left out."""
        return re.sub(r"\s*\[[^\]]*\]", "", self.text)


def doc_commands(page: str) -> list[DocCommand]:
    """Every command of `page` (a path relative to the repository, e.g. "docs/aws.md") in order."""
    text = (REPO / page).read_text()
    found: list[DocCommand] = []
    for language, block in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if language not in ("", "sh", "bash"):
            continue
        pending = ""
        for raw in block.splitlines():
            line = pending + raw.strip() if pending else raw.rstrip()
            if line.endswith("\\"):
                pending = line[:-1].rstrip() + " "
                continue
            pending = ""
            if line.lstrip().startswith("#"):  # a comment line of its own
                continue
            command, comment = _cut_comment(line)
            if command:
                found.append(DocCommand(page, command, comment))
    return found


def _cut_comment(line: str) -> tuple[str, str]:
    match = re.match(r"^(.*?)(?:\s+#\s+(.*))?$", line.strip())
    assert match is not None  # the pattern matches any line
    return match.group(1), (match.group(2) or "").strip()


def doc_command(page: str, starting: str) -> DocCommand:
    """The one command of `page` that starts with `starting` (an error when none or several do)."""
    [found] = [command for command in doc_commands(page) if command.text.startswith(starting)]
    return found
