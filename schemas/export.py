"""JSON Schema files for the BI and ops teams, generated from the structs (one source of truth)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from schemas.messages import MESSAGE_TYPES

JSON_DIR = Path(__file__).parent / "json"


def render_schemas() -> dict[str, bytes]:
    """File name -> pretty JSON Schema bytes, stable across runs so drift shows in a diff."""
    rendered = {}
    for name, struct in MESSAGE_TYPES.items():
        schema = msgspec.json.schema(struct)
        rendered[f"{name}.schema.json"] = msgspec.json.format(msgspec.json.encode(schema), indent=2) + b"\n"
    return rendered


def export_schemas(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, content in render_schemas().items():
        path = directory / file_name
        path.write_bytes(content)
        written.append(path)
    return written
