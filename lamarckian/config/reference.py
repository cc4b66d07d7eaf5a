"""The key reference of ``lamarckian.yml`` as a Markdown table (for docs/config.md).

    python -m lamarckian.config.reference              # print it
    python -m lamarckian.config.reference docs/config.md    # replace the table in docs/config.md
"""

from __future__ import annotations

import re
from pathlib import Path

from .loader import DEFAULTS

_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w]*):(?P<value>[^#]*?)\s*(?:#\s?(?P<comment>.*))?$")
_CONTINUATION = re.compile(r"^ +#\s?(?P<comment>.*)$")


def entries(path: Path = DEFAULTS) -> list[tuple[str, str, str]]:
    """(dotted key, default as written, comment) for every key, in file order; a comment continued on the
    following comment-only lines is joined."""
    rows: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    for line in path.read_text().splitlines():
        continuation = _CONTINUATION.match(line)
        if continuation and rows and not _LINE.match(line):
            rows[-1][2] = f"{rows[-1][2]} {continuation.group('comment').strip()}".strip()
            continue
        match = _LINE.match(line)
        if not match:
            continue
        indent = len(match.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([name for _, name in stack] + [match.group("key")])
        value = match.group("value").strip()
        if not value:
            stack.append((indent, match.group("key")))
        rows.append([key, value, (match.group("comment") or "").strip()])
    return [(key, value, comment) for key, value, comment in rows]


def markdown(path: Path = DEFAULTS) -> str:
    """The table: key, default, meaning (sections shown as bold rows)."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, value, comment in entries(path):
        shown = f"`{value}`" if value else ""
        name = f"`{key}`" if value else f"**`{key}`**"
        lines.append(f"| {name} | {shown.replace('|', '&#124;')} | {comment.replace('|', '&#124;')} |")
    return "\n".join(lines)


def update_table(path: Path) -> None:
    """Replace the key table (from its header row to the next blank line) in ``path``."""
    text = path.read_text()
    start = text.index("| key | default | meaning |")
    end = text.index("\n\n", start)
    path.write_text(text[:start] + markdown() + text[end:])


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:
        update_table(Path(sys.argv[1]))
    else:
        print(markdown())
