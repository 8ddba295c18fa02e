"""The command line: settings from the environment, file extraction, topic creation and its help."""

from __future__ import annotations

import json

import msgspec
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource

from ops.demo.samples import sample_documents
from ops.stress.worker_process import isolated_settings
from streams.cli.main import cli
from streams.kafka.topics import create_topics, topic_specs
from streams.settings import load_settings


def test_environment_overrides_and_rejects_unknown_names() -> None:
    settings = load_settings({"SEQSTREAM_BATCH__MAX_DOCUMENTS": "8", "SEQSTREAM_MODEL__ENTROPY_THRESHOLD": "3.5"})
    assert settings.batch.max_documents == 8 and settings.model.entropy_threshold == 3.5
    with pytest.raises(ValueError, match="max_documentz"):
        load_settings({"SEQSTREAM_BATCH__MAX_DOCUMENTZ": "8"})
    with pytest.raises(ValueError, match="batchs"):
        load_settings({"SEQSTREAM_BATCHS__MAX_DOCUMENTS": "8"})
    with pytest.raises(ValueError, match="max_documents"):
        load_settings({"SEQSTREAM_BATCH__MAX_DOCUMENTS": "many"})


def test_extract_a_file_without_kafka(tiny_model_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SEQSTREAM_MODEL__MAX_NEW_TOKENS", "16")
    source = tmp_path / "in.jsonl"
    good = [raw for raw, _ in sample_documents(3, seed=4)]
    source.write_bytes(b"\n".join([*(msgspec.json.encode(r) for r in good), b"{broken"]) + b"\n")
    target = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, ["--model", str(tiny_model_dir), "extract", str(source), "-o", str(target)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    settings = load_settings({})
    records = [line["record"] for line in lines if line["topic"] in (settings.topics.fields, settings.topics.review)]
    assert sorted(r["doc_id"] for r in records) == sorted(r["doc_id"] for r in good)
    [dead] = [line["record"] for line in lines if line["topic"] == settings.topics.dead_letter]
    assert dead["error_code"] == "not_json" and dead["offset"] == 3


def test_missing_model_is_a_clear_error_not_a_traceback(tmp_path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"doc_id": "a", "text": "x", "labels": ["l"]}\n')
    result = CliRunner().invoke(cli, ["--model", str(tmp_path / "nowhere"), "extract", str(source)])
    assert result.exit_code == 1 and "SEQSTREAM_MODEL__PATH" in result.output


@pytest.mark.kafka
def test_topics_are_created_once_with_their_policies(kafka_bootstrap, tiny_model_dir, tmp_path) -> None:
    settings, _ = isolated_settings(kafka_bootstrap, tiny_model_dir, tmp_path)
    first = create_topics(settings)
    assert set(first.values()) == {"created"}
    assert set(create_topics(settings).values()) == {"exists"}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    t = settings.topics
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in (t.fields, t.dead_letter)]
    configs = {r.name: f.result(timeout=30) for r, f in admin.describe_configs(resources).items()}
    assert configs[t.fields]["cleanup.policy"].value == "compact"
    assert configs[t.dead_letter]["cleanup.policy"].value == "delete"
    assert len(admin.list_topics(timeout=30).topics[t.raw].partitions) == settings.topics.partitions


def test_topics_help_names_every_topic_it_creates() -> None:
    # The default names end in what the help says: seqstream.raw -> raw, seqstream.dead-letter -> dead-letter.
    created = [spec.name.removeprefix("seqstream.") for spec in topic_specs(load_settings({}))]
    for args in (["topics", "--help"], ["topics", "create", "--help"]):
        shown = " ".join(CliRunner().invoke(cli, args).output.split())
        assert f"{len(created)} topics" in shown.replace("six", str(len(created)))
        assert all(name in shown for name in created), (created, shown)
