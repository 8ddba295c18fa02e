"""Corrections become training data: the review desk's decisions, read back from the broker by
`seqstream-ops corpus from-reviews`, as a labelled corpus the eval reads and the fine-tune mixes in."""

from __future__ import annotations

import uuid

import pytest
from click.testing import CliRunner

from ops.cli import cli
from ops.corpus.generate import read_documents, read_truth
from ops.train.demo_data import DataMix, DocumentStream
from ops.train.demo_model import DEMO_PLAN, tokenizer_texts
from ops.train.recipe import make_tokenizer
from streams.review.decision import Choice
from streams.review.queue import Queue
from tests.test_review_desk import desk_settings, poll_until, publish, review_record


@pytest.mark.kafka
def test_accepted_and_corrected_decisions_become_a_labelled_corpus_that_training_reads(
    kafka_bootstrap, tmp_path
) -> None:
    settings = desk_settings(kafka_bootstrap, partitions=1)
    # "again-1" is accepted, then its newer version rejected: the later decision withdraws the first.
    records = [review_record(d) for d in ("keep-1", "fix-1", "drop-1", "again-1", "again-1")]
    publish(settings, records)
    queue = Queue(settings, f"test-{uuid.uuid4().hex[:6]}")
    b = records[1].text.index("王伟")
    try:
        poll_until([queue], lambda: queue.depth() == 5)
        for choice in (
            Choice("ann", "accept", {}),
            Choice("ann", "accept", {"乙方": [(b, b + 2)], "甲方": []}),
            Choice("ann", "reject", {}, "not a contract"),
            Choice("ann", "accept", {}),
            Choice("ann", "reject", {}, "not a contract after all"),
        ):
            queue.decide(queue.next_for("ann").at, choice)
    finally:
        queue.close()

    out = tmp_path / "reviewed.jsonl"
    env = {"SEQSTREAM_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap}
    env |= {f"SEQSTREAM_TOPICS__{t.upper()}": getattr(settings.topics, t) for t in ("review", "audit")}
    result = CliRunner().invoke(cli, ["corpus", "from-reviews", "-o", str(out), "--idle-timeout", "3"], env=env)
    assert result.exit_code == 0, result.output
    assert "wrote 2 reviewed documents" in result.output

    truth = read_truth(out)
    assert set(truth) == {"keep-1", "fix-1"}  # a rejection teaches no values
    assert truth["keep-1"]["甲方"] == ["上海恒达物流有限公司"] and truth["keep-1"]["乙方"] == []
    assert truth["fix-1"]["甲方"] == [] and truth["fix-1"]["乙方"] == ["王伟"]
    documents = read_documents(out)
    assert {d.kind for d in documents} == {"contract"} and all(d.text == records[0].text for d in documents)
    for doc in documents:
        assert all(doc.text[s.start : s.end] == s.text for spans in doc.truth.values() for s in spans)

    # The fine-tune's stream draws them: with every draw from the corpus, each prompt is one of its texts.
    tokenizer = make_tokenizer(DEMO_PLAN.recipe, tokenizer_texts(1, 20))
    stream = DocumentStream(tokenizer, DEMO_PLAN, seed=1, mix=DataMix(reviewed=1.0), corpus=documents)
    examples = stream(0)
    assert examples and all(records[0].text in tokenizer.decode(e.prompt) for e in examples)
    assert any("王伟" in tokenizer.decode(e.answer) for e in examples)
