"""Constrained greedy decoding (model/grammar/): every answer parses, asks only for requested
labels and copies every value from the source, on random tiny BLOOMs and random texts."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.answers.parse import parse_extraction
from model.answers.prompt import encode_prompts
from model.answers.validate import Extraction
from model.config import EngineSettings
from model.engine import Extractor
from model.grammar.constrainer import Constrainer
from model.grammar.source import prepare_source
from model.grammar.source import reach as typed_reach
from model.grammar.token_bytes import TokenBytes
from model.grammar.vocab import VocabIndex
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from model.runner.reference import ReferenceRunner
from model.signals import allowed
from ops.corpus import generate_corpus
from ops.demo.samples import sample_documents
from ops.train.tiny import build_tiny_bloom
from schemas.decode import decode_document
from schemas.messages import Document, ReviewCode

NEW_TOKENS = 40
CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF)
LATIN = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789")
PUNCTUATION = st.sampled_from([" ", "，", "。", "：", ":", "、", "-", ".", ",", "\n", "\t", "（", "）", "N", "None"])
TEXTS = st.lists(st.one_of(CJK, LATIN, PUNCTUATION), min_size=1, max_size=120).map("".join).filter(str.strip)
LABEL_POOL = ["甲方", "乙方", "金额", "金额上限", "name", "Name", "日期", "电话", "email", "地址"]
LABELS = st.lists(st.sampled_from(LABEL_POOL), min_size=1, max_size=4, unique=True).map(tuple)
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", params=[(5, 0.3), (7, 1.0)], ids=["peaky", "very-peaky"])
def random_model(request, tmp_path_factory):
    seed, init = request.param
    texts = [raw["text"] for raw, _ in sample_documents(60, seed=seed)] + ["None name Name email"]
    directory = tmp_path_factory.mktemp("random-bloom")
    build_tiny_bloom(directory, texts, seed=seed, n_layer=2, hidden_size=64, n_head=4, initializer_range=init)
    settings_ = EngineSettings(path=str(directory), max_new_tokens=NEW_TOKENS)
    return load_model(settings_), settings_


def document(text: str, labels: tuple[str, ...], doc_id: str = "d") -> Document:
    raw = {"doc_id": doc_id, "text": text, "labels": list(labels)}
    return decode_document(msgspec.json.encode(raw), 1 << 20)


def partial_line_problems(line: str, labels: tuple[str, ...], text: str) -> list[str]:
    """A line cut by the token limit must still be the start of a valid line."""
    # Cut inside a label's character, the line ends in a replacement character.
    if any(f"{label}: ".startswith(line.rstrip("\ufffd")) for label in labels):
        return []
    label = next((label for label in labels if line.startswith(f"{label}: ")), None)
    if label is None:
        return [f"{line!r} starts no requested label's line"]
    *values, last = line.removeprefix(f"{label}: ").split("\t")
    # The last value may end inside a character: its text then ends in a replacement character.
    last = last.rstrip("\ufffd")
    whole = [v for v in values if v not in text]
    cut = [] if (not values and "None".startswith(last)) or last in text else [last]
    return [f"{v!r} not in source" for v in whole + cut]


def answer_problems(extraction: Extraction, doc: Document) -> list[str]:
    """What is wrong with each prompt's raw answer; a prompt cut by the token limit is judged on its
    complete lines, and its last line as the start of a line."""
    problems = []
    for trace in extraction.traces:
        output = "".join(trace.token_texts)
        if not trace.generation.finished:
            output, _, partial = output.rpartition("\n")
            problems += partial_line_problems(partial, trace.labels, doc.text)
        answer = parse_extraction(output, trace.labels, doc.text.__contains__)
        problems += [f"{code.value}: {text!r}" for code, _, text in answer.problems]
        if trace.generation.finished and set(answer.values) != set(trace.labels):
            problems.append(f"labels {sorted(answer.values)} answered, {sorted(trace.labels)} asked")
        problems += [
            f"{p.text!r} not in source" for pieces in answer.values.values() for p in pieces if p.text not in doc.text
        ]
    return problems


@EXAMPLES
@given(text=TEXTS, labels=LABELS)
def test_constrained_answers_parse_and_copy_the_source(random_model, text: str, labels: tuple[str, ...]) -> None:
    loaded, settings_ = random_model
    engine = Extractor(FastRunner(loaded, settings_))
    doc = document(text, labels)
    [extraction] = engine.extract([doc]).extractions
    assert answer_problems(extraction, doc) == []
    assert set(extraction.fields) <= set(labels)
    for spans in extraction.fields.values():
        for span in spans:
            assert doc.text[span.start : span.end] == span.text
    bad = {ReviewCode.NOT_IN_SOURCE, ReviewCode.UNKNOWN_LABEL, ReviewCode.DUPLICATE_LABEL, ReviewCode.MALFORMED_OUTPUT}
    finished = all(t.generation.finished for t in extraction.traces)
    assert not finished or not {r.code for r in extraction.reasons} & bad, extraction.reasons


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=2, max_size=5), labels=LABELS)
def test_constrained_runs_are_deterministic_and_engines_agree(random_model, texts: list[str], labels) -> None:
    """Twice the same batch gives the same tokens; the reference engine's LogitsProcessor agrees."""
    loaded, settings_ = random_model
    docs = [document(t, labels, f"d{i}") for i, t in enumerate(texts)]
    fast = Extractor(FastRunner(loaded, settings_))

    def tokens(engine) -> list[list[int]]:
        return [t.generation.token_ids for e in engine.extract(docs).extractions for t in e.traces]

    first = tokens(fast)
    assert tokens(fast) == first
    assert tokens(Extractor(ReferenceRunner(loaded, settings_))) == first


def test_without_the_constraint_the_same_model_breaks_the_properties(random_model) -> None:
    """The property test could fail: unconstrained, the same models write lines that are no answer."""
    loaded, settings_ = random_model
    engine = Extractor(FastRunner(loaded, msgspec.structs.replace(settings_, constrained=False)))
    docs = [document(raw["text"], ("甲方", "乙方", "金额")) for raw, _ in sample_documents(8, seed=4)]
    extractions = engine.extract(docs).extractions
    assert any(answer_problems(e, d) for e, d in zip(extractions, docs, strict=True))


def test_memorised_model_invents_values_only_without_the_constraint(memorised_model_dir: Path) -> None:
    """A model that did learn the format writes invented values on unseen documents; constrained, none."""
    settings_ = EngineSettings(path=str(memorised_model_dir), max_new_tokens=160)
    loaded = load_model(settings_)
    unseen = [document(g.text, tuple(g.values())) for g in generate_corpus(4, seed=99, brief=True)]
    codes = {
        constrained: {
            r.code
            for e in Extractor(FastRunner(loaded, msgspec.structs.replace(settings_, constrained=constrained)))
            .extract(unseen)
            .extractions
            for r in e.reasons
        }
        for constrained in (False, True)
    }
    assert ReviewCode.NOT_IN_SOURCE in codes[False]
    assert not codes[True] & {ReviewCode.NOT_IN_SOURCE, ReviewCode.MALFORMED_OUTPUT, ReviewCode.UNKNOWN_LABEL}


def test_end_of_sequence_waits_for_every_label(random_model) -> None:
    loaded, _ = random_model
    tokenizer = loaded.tokenizer
    constrainer = Constrainer(TokenBytes.from_tokenizer(tokenizer), tokenizer.eos_token_id, torch.device("cpu"))
    [row] = constrainer.rows("甲方：王伟，乙方：李娜。", [("甲方", "乙方")])
    grammar = constrainer.host_grammar([row], [], 1, len(tokenizer))
    state = grammar.start()
    for token in tokenizer("甲方: 王伟\n乙方: None", add_special_tokens=False)["input_ids"]:
        legal = allowed(grammar.legal(state)[0])
        assert legal[0, token], tokenizer.decode([token])
        assert not legal[0, tokenizer.eos_token_id]
        state = grammar.advance(state, torch.tensor([token]))
    assert allowed(grammar.legal(state)[0])[0, tokenizer.eos_token_id]


def test_a_checked_value_ends_only_where_a_whole_value_of_its_type_does(random_model) -> None:
    """A phone may not stop a digit short (a trained model that did went to review with the value
    extended), nor be a landline's head; the oracle says the same of every step."""
    from ops.oracle import OracleConstrainer
    from ops.oracle.constraints import RowConstraint

    loaded, _ = random_model
    tokenizer = loaded.tokenizer
    eos = tokenizer.eos_token_id
    text = "联系电话：13812345678，总机 010-1234。"
    vocab = TokenBytes.from_tokenizer(tokenizer)
    constrainer = Constrainer(vocab, eos, torch.device("cpu"))
    [oracle_row] = OracleConstrainer(vocab, eos, torch.device("cpu")).rows(text, [("电话",)], {"电话": "phone"})
    for answer, whole in (("13812345678", {"13812345678"}), ("010-1234", set())):
        [row] = constrainer.rows(text, [("电话",)], {"电话": "phone"})
        grammar = constrainer.host_grammar([row], [], 1, len(tokenizer))
        state = grammar.start()
        oracle = RowConstraint(oracle_row.grammar, oracle_row.index, eos)
        spelled = ""
        for token in tokenizer(f"电话: {answer}", add_special_tokens=False)["input_ids"]:
            legal = allowed(grammar.legal(state)[0])[0]
            assert legal.nonzero().flatten().tolist() == sorted(set(oracle.allowed().tolist()))
            if not legal[token]:
                break  # a landline's head leads nowhere the grammar lets a phone end
            state = grammar.advance(state, torch.tensor([token]))
            oracle.advance(token)
            spelled += tokenizer.decode([token])
            value = spelled.split(": ", 1)[1] if ": " in spelled else ""
            assert bool(allowed(grammar.legal(state)[0])[0, eos]) == (value in whole), value
        assert (spelled == f"电话: {answer}") == bool(whole)


def test_a_typed_value_may_not_start_on_half_a_character_it_cannot_become() -> None:
    # Judged as nothing, half of 招 passed as a phone prefix; then no token could follow it and
    # the row fell back to end-of-sequence with labels unanswered.
    text = "招聘电话：１３８ 0013 8000"
    tables = prepare_source(text, VocabIndex(TokenBytes(by_id=[b"x"], ids={b"x": (0,)}, ordered=[b"x"])))
    reach = typed_reach(tables, "phone")
    assert reach[0] == 0  # no phone starts on 招, whole or half
    digit = len("招聘电话：".encode())
    assert reach[digit] == len(text.encode())  # a full-width digit, half read, may become a phone
    assert len("招聘电话：１３８ 00".encode()) <= reach[digit]


def test_values_come_only_from_the_text_the_prompt_holds(random_model) -> None:
    # A document cut at its tail: what the model never saw cannot be copied either.
    loaded, settings_ = random_model
    settings_ = msgspec.structs.replace(settings_, max_input_tokens=48)
    engine = Extractor(FastRunner(loaded, settings_))
    texts = [raw["text"] for raw, _ in sample_documents(8, seed=3)]
    # Each head is followed by other documents' text, so a value copied from the tail would show.
    docs = [document(texts[i] + "".join(texts[4:]) * 2, ("甲方", "乙方", "金额"), f"d{i}") for i in range(4)]
    for doc, extraction in zip(docs, engine.extract(docs).extractions, strict=True):
        held = encode_prompts(loaded.tokenizer, doc, settings_.labels_per_prompt, settings_.max_input_tokens)
        assert held.truncated and len(held.text) < len(doc.text)
        assert all(s.end <= len(held.text) for spans in extraction.fields.values() for s in spans)
        assert all(r.code != ReviewCode.NOT_IN_SOURCE for r in extraction.reasons)
