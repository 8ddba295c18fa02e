"""The committed JSON Schemas are what the code produces, and records round-trip through them."""

from __future__ import annotations

from schemas.export import JSON_DIR, render_schemas


def test_committed_json_schemas_match_the_code() -> None:
    rendered = render_schemas()
    committed = {p.name: p.read_bytes() for p in JSON_DIR.glob("*.schema.json")}
    assert set(committed) == set(rendered), "run `seqstream schemas export` and commit schemas/json/"
    for name, content in rendered.items():
        assert committed[name] == content, f"{name} drifted: run `seqstream schemas export` and commit it"


def test_every_message_declares_its_schema_version() -> None:
    for name, content in render_schemas().items():
        assert b'"schema_version"' in content, name
