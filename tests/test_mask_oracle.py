"""The device grammar (model/grammar/) allows exactly the token sets of the oracle (ops/oracle/, the
byte automaton the product decoded with before), at every step of the engine's decoding.

The one difference, by design: a value of a checked type (phone, ID number, e-mail) may start or go
on with half a character only if that character, as the source has it there, fits the type. The
oracle judged a half character by any source character sharing its first bytes, so it accepted half
of `，` as a phone value's start because `１` shares them; the row then had no legal token left but
end-of-sequence, with labels unanswered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.config import EngineSettings
from model.engine import Extractor
from model.grammar.constrainer import Constrainer
from model.grammar.device import DeviceGrammar
from model.runner.fast import FastRunner
from model.runner.loading import load_model
from ops.demo.samples import sample_documents
from ops.oracle import OracleConstrainer, OracleGrammar
from ops.train.tiny import build_tiny_bloom
from schemas.messages import Document
from tests.test_constraints import LABELS, TEXTS, document

TYPED = {"电话": "phone", "email": "email", "金额": "amount", "name": "organisation"}


@dataclass
class Differences:
    found: list[tuple[str, list[int], list[int]]] = field(default_factory=list)
    compared: int = 0  # rows compared, over all steps


class CheckingGrammar:
    """Masks with the device grammar and, beside it, asks the oracle; records where they differ."""

    def __init__(self, new: DeviceGrammar, old: OracleGrammar, texts: list[str | None], seen: Differences) -> None:
        self.new, self.old, self.texts, self.seen = new, old, texts, seen

    def start(self):
        return self.new.start(), self.old.start()

    def legal(self, state):
        legal, forced = self.new.legal(state[0])
        expected, _ = self.old.legal(state[1])
        for r in range(legal.shape[0]):
            a = legal[r].nonzero().flatten().tolist()
            b = expected[r].nonzero().flatten().tolist()
            self.seen.compared += 1
            if a != b and r < len(self.texts):
                self.seen.found.append((self.texts[r] or "", a, b))
        return legal, forced

    def advance(self, state, tokens):
        return self.new.advance(state[0], tokens), self.old.advance(state[1], tokens)


class CheckingConstrainer(Constrainer):
    def __init__(self, vocab, eos_id, device) -> None:
        super().__init__(vocab, eos_id, device)
        self.oracle = OracleConstrainer(vocab, eos_id, device)
        self.seen = Differences()

    def rows(self, text, chunks, types=None, edges=None):
        new = super().rows(text, chunks, types, edges)
        return [(n, o, text) for n, o in zip(new, self.oracle.rows(text, chunks, types, edges), strict=True)]

    def grammar(self, rows, prefixes, batch_rows, width):
        new = super().device_grammar([r and r[0] for r in rows], prefixes, batch_rows, width)
        old = self.oracle.grammar([r and r[1] for r in rows], prefixes, batch_rows, width)
        return CheckingGrammar(new, old, [r and r[2] for r in rows], self.seen)


@pytest.fixture(scope="module")
def checking(tmp_path_factory):
    texts = [raw["text"] for raw, _ in sample_documents(60, seed=5)] + ["None name Name email"]
    directory = tmp_path_factory.mktemp("oracle-bloom")
    build_tiny_bloom(directory, texts, seed=5, n_layer=2, hidden_size=64, n_head=4, initializer_range=0.3)
    settings_ = EngineSettings(path=str(directory), max_new_tokens=40)
    runner = FastRunner(load_model(settings_), settings_)
    runner.constrainer = CheckingConstrainer(runner.constrainer.tokens, runner.eos_id, runner.device)
    return Extractor(runner)


def explained(difference: tuple[str, list[int], list[int]], engine: Extractor) -> bool:
    """Whether the array grammar only refused half characters the oracle accepted (see the docstring)."""
    _, new, old = difference
    extra = set(old) - set(new)
    if not set(new) <= set(old) or not extra:
        return False
    by_id = engine.runner.constrainer.tokens.by_id
    return all(_ends_cut(by_id[t] or b"") for t in extra)


def _ends_cut(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return True
    return False


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=1, max_size=4), labels=LABELS, typed=st.booleans())
def test_the_array_grammar_allows_the_oracles_token_sets(checking: Extractor, texts, labels, typed) -> None:
    docs = [document(t, labels, f"d{i}") for i, t in enumerate(texts)]
    if typed:
        docs = [msgspec.structs.replace(d, field_types={k: v for k, v in TYPED.items() if k in labels}) for d in docs]
    checking.runner.constrainer.seen.found.clear()
    checking.extract(docs)
    assert checking.runner.constrainer.seen.compared > 0
    unexplained = [d for d in checking.runner.constrainer.seen.found if not explained(d, checking)]
    assert unexplained == []


def test_the_array_grammar_allows_the_oracles_token_sets_on_generated_documents(checking: Extractor) -> None:
    from ops.corpus import generate_corpus

    generated = list(generate_corpus(24, seed=31, brief=True))
    docs = [
        Document(doc_id=g.doc_id, text=g.text, task="extract", labels=tuple(g.values()), field_types=dict(TYPED))
        for g in generated
    ]
    checking.runner.constrainer.seen.found.clear()
    for start in range(0, len(docs), 8):
        checking.extract(docs[start : start + 8])
    unexplained = [d for d in checking.runner.constrainer.seen.found if not explained(d, checking)]
    assert unexplained == []
