"""The README's code blocks, read the way a person reads them: by the section they sit in."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(after: str, lang: str, text: str | None = None) -> list[str]:
    """The ```lang blocks from the line that starts with `after` (a heading such as `## Run it by
    hand`, or a bold run-in one such as `**BI queries**`) to the next heading of its kind."""
    lines = (README.read_text() if text is None else text).splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    level = len(after) - len(after.lstrip("#"))
    found: list[str] = []
    fence: str | None = None
    body: list[str] = []
    for line in lines[start + 1 :]:
        if fence is not None:
            if line.startswith("```"):
                if fence == lang:
                    found.append("".join(body))
                fence, body = None, []
            else:
                body.append(line)
            continue
        if line.startswith("```"):
            fence = line[3:].strip()
        elif _ends_part(line, level):
            break
    return found


def _ends_part(line: str, level: int) -> bool:
    """A heading of `level` or higher; with level 0 (a bold run-in heading), the next one of either kind."""
    if level:
        return line.startswith("#") and len(line) - len(line.lstrip("#")) <= level
    return line.startswith(("**", "#"))


def sql_statements(block: str) -> list[str]:
    """A block's statements, split on the semicolons that end them (the queries hold none inside)."""
    return [q.strip() for q in block.split(";") if q.strip()]
