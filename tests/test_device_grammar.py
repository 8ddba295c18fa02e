"""The device grammar (model/grammar/device.py: tables, state and step as tensors) allows exactly the
array grammar's tokens (model/grammar/host.py on the host) and flags the same steps as
forced, at every step of random walks through legal tokens: several documents and label chunks per
batch, padding rows, typed values, re-decodes' fed prefixes and window-like fragments of texts."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.answers.checks import boundary_problem, word_edges
from model.grammar.constrainer import Constrainer
from model.grammar.token_bytes import TokenBytes
from model.signals import allowed
from ops.demo.samples import sample_documents
from ops.train.tiny import build_tiny_bloom
from schemas.messages import Document
from tests.test_constraints import LABELS, TEXTS

# 乙方 (and 甲方 untyped) are held to a person's word edges, `name` to a name's.
TYPES = {"电话": "phone", "email": "email", "金额": "amount", "甲方": "id_card", "name": "organisation"}
STEPS = 40
# The model's vocabulary may be wider than the tokenizer's: masks are that wide.
EXTRA_COLUMNS = 3


@pytest.fixture(scope="module")
def constrainer(tmp_path_factory) -> Constrainer:
    texts = [raw["text"] for raw, _ in sample_documents(60, seed=5)] + ["None name Name email 138 0013 8000 a@b.cn"]
    directory = tmp_path_factory.mktemp("grammar-bloom")
    build_tiny_bloom(directory, texts, seed=5, n_layer=1, hidden_size=16, n_head=1)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    return Constrainer(TokenBytes.from_tokenizer(tokenizer), tokenizer.eos_token_id, torch.device("cpu"))


def batch_rows(constrainer: Constrainer, texts: list[str], labels: tuple[str, ...], typed: bool, padding: int):
    types = {k: v for k, v in TYPES.items() if k in labels} if typed else None
    chunks = [labels[i : i + 2] for i in range(0, len(labels), 2)]
    rows = [
        row for text in texts for row in constrainer.rows(text, chunks, types, word_edges(text, labels, types or {}))
    ]
    return rows, len(rows) + padding


def walk(constrainer: Constrainer, rows, n: int, prefixes, rng: random.Random) -> list[list[int]]:
    """Both grammars stepped together through random legal tokens; returns the tokens taken."""
    width = constrainer.vocab.size + EXTRA_COLUMNS
    device = constrainer.device_grammar(rows, prefixes, n, width)
    host = constrainer.host_grammar(rows, prefixes, n, width)
    d_state, h_state = device.start(), host.start()
    taken: list[list[int]] = [[] for _ in range(n)]
    for step in range(STEPS):
        d_legal, d_forced = device.legal(d_state)
        h_mask, h_forced = host.legal(h_state)
        h_legal = allowed(h_mask)
        assert d_legal.shape == h_legal.shape == (n, width)
        for r in range(n):
            assert d_legal[r].nonzero().flatten().tolist() == h_legal[r].nonzero().flatten().tolist(), (step, r)
        assert d_forced.tolist() == h_forced.tolist(), step
        tokens = []
        for r in range(n):
            choices = h_legal[r].nonzero().flatten().tolist()
            others = [t for t in choices if t != constrainer.eos_id]
            # End seldom, so that walks go deep into values and lines.
            pick = rng.choice(others if others and rng.random() < 0.95 else choices)
            tokens.append(pick)
            taken[r].append(pick)
        chosen = torch.tensor(tokens)
        d_state, h_state = device.advance(d_state, chosen), host.advance(h_state, chosen)
    return taken


EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@EXAMPLES
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=3),
    labels=LABELS,
    typed=st.booleans(),
    padding=st.integers(0, 2),
    seed=st.integers(0, 2**16),
)
def test_device_masks_and_forced_steps_equal_the_host_grammars(constrainer, texts, labels, typed, padding, seed):
    rows, n = batch_rows(constrainer, texts, labels, typed, padding)
    walk(constrainer, rows, n, (), random.Random(seed))


@EXAMPLES
@given(texts=st.lists(TEXTS, min_size=1, max_size=2), labels=LABELS, typed=st.booleans(), seed=st.integers(0, 2**16))
def test_fed_prefixes_leave_both_grammars_in_the_same_state(constrainer, texts, labels, typed, seed):
    """A re-decode's grammar is fed the kept tokens first, some rows more than others."""
    rng = random.Random(seed)
    rows, n = batch_rows(constrainer, texts, labels, typed, 1)
    taken = walk(constrainer, rows, n, (), rng)
    prefixes = [t[: rng.randrange(len(t) + 1)] for t in taken[: len(rows)]]
    # Past an end-of-sequence a row is not fed.
    prefixes = [p[: p.index(constrainer.eos_id)] if constrainer.eos_id in p else p for p in prefixes]
    walk(constrainer, rows, n, prefixes, rng)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), typed=st.booleans())
def test_window_fragments_of_real_documents(constrainer, seed, typed):
    """Windows are slices of a long document cut anywhere between characters."""
    rng = random.Random(seed)
    text = "".join(raw["text"] for raw, _ in sample_documents(6, seed=seed % 97))
    cuts = sorted(rng.sample(range(1, len(text)), 3))
    fragments = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if text[a:b].strip()]
    labels = tuple(rng.sample(["甲方", "乙方", "金额", "电话", "email", "日期"], 4))
    rows, n = batch_rows(constrainer, fragments, labels, typed, 0)
    walk(constrainer, rows, n, (), rng)


class HostConstrainer(Constrainer):
    """The engine's constrainer with the host grammar (the oracle) in the decode loop."""

    def grammar(self, rows, prefixes, batch_rows, width):
        return self.host_grammar(rows, prefixes, batch_rows, width)


class DeviceConstrainer(Constrainer):
    """The engine's constrainer with the device grammar in the decode loop, on a CPU too."""

    def grammar(self, rows, prefixes, batch_rows, width):
        return self.device_grammar(rows, prefixes, batch_rows, width)


def test_the_fast_engine_decodes_the_same_tokens_with_the_device_grammar_and_the_oracle(tmp_path) -> None:
    """On the engine benchmark's documents (ops/bench/engine.py checks its 64; here 12, typed)."""
    import msgspec

    from model.config import EngineSettings
    from model.engine import Extractor
    from model.runner.fast import FastRunner
    from model.runner.loading import load_model
    from ops.bench.engine import long_documents

    texts = [raw["text"] for raw, _ in sample_documents(120, seed=1)]
    build_tiny_bloom(tmp_path, texts, seed=3, n_layer=1, hidden_size=32, n_head=2, initializer_range=0.3)
    settings_ = EngineSettings(path=str(tmp_path), max_new_tokens=48)
    loaded = load_model(settings_)
    docs = long_documents(12, seed=0)
    docs = [msgspec.structs.replace(d, field_types={k: v for k, v in TYPES.items() if k in d.labels}) for d in docs]
    device_runner = FastRunner(loaded, settings_)
    device_runner.constrainer = DeviceConstrainer(
        device_runner.constrainer.tokens, device_runner.eos_id, device_runner.device
    )
    device = Extractor(device_runner)
    runner = FastRunner(loaded, settings_)
    runner.constrainer = HostConstrainer(runner.constrainer.tokens, runner.eos_id, runner.device)
    host = Extractor(runner)

    def tokens(engine: Extractor) -> list[list[int]]:
        return [t.generation.token_ids for e in engine.extract(docs).extractions for t in e.traces]

    def forced(engine: Extractor) -> list[list[bool]]:
        return [t.generation.forced for e in engine.extract(docs).extractions for t in e.traces]

    assert tokens(device) == tokens(host)
    assert forced(device) == forced(host)


def test_name_like_values_start_and_end_on_word_edges(constrainer):
    """A value cut inside a word is illegal by construction: every finished value of walks through
    name-like labels passes the boundary check (model/answers/checks.py), a bare surname and a word
    inside an organisation's name (瑞安 of 成都瑞安信息技术股份有限公司) aside, which no position tells."""
    labels = ("甲方", "乙方", "name", "地址")
    types = {"name": "organisation"}
    checked = 0
    for seed in range(12):
        rng = random.Random(seed)
        text = "".join(raw["text"] for raw, _ in sample_documents(2, seed=seed))
        doc = Document(doc_id="d", text=text, task="extract", labels=labels, field_types=types)
        rows = constrainer.rows(text, [labels[:2], labels[2:]], types, word_edges(text, labels, types))
        for tokens in walk(constrainer, rows, len(rows), (), rng):
            data = b"".join(constrainer.tokens.by_id[t] or b"" for t in tokens if t != constrainer.eos_id)
            lines = data.decode(errors="replace").split("\n")
            for i, line in enumerate(lines):
                label, _, answer = line.partition(": ")
                values = answer.split("\t")
                if i == len(lines) - 1 and constrainer.eos_id not in tokens:
                    values = values[:-1]  # the walk stopped inside it
                for value in values:
                    if value and value != "None" and label in ("甲方", "乙方", "name"):
                        checked += 1
                        problem = boundary_problem(doc, label, value)
                        # What no word edge tells: a bare surname, a word inside an organisation's name.
                        told = ("only a surname", "part of the organisation")
                        assert problem is None or problem.startswith(told), (label, value, problem)
    assert checked > 20
