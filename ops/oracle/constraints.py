"""The answer grammar (ops/oracle/automaton.py) as a mask over the vocabulary, for greedy decoding in batches.

Per row, a small state machine on the CPU decides *which kind* of token may come next; the vocabulary-
wide part is tensor work on the logits' device:

- inside a value: the tokens whose bytes occur in the source right where the value so far may end,
  gathered from one (position, token) match list per document, built once;
- where a value may start (after `label: ` or a tab, possibly inside the same token, as BPE glues the
  space to the value): one token set per head (` `, `: `, `\\t`, ...) and document, built once;
- everything else (labels, `: `, `None`, tab, newline) is a short walk of the literal bytes, cached.

Tokens that would run from a value into what follows it (`value\\n`) are not allowed: every byte has a
token of its own, so this never leaves a row without a legal token.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from model.grammar.source import WordEdges
from model.grammar.token_bytes import TokenBytes
from model.values.field_types import FieldType
from ops.oracle.automaton import Config, Grammar, Source, Value, ValueStart

# Up to this many end positions, a value's continuations are sliced per position, else gathered.
FEW_ENDS = 32
# Documents whose match index stays built: a few micro-batches' worth.
INDEXES_KEPT = 128


class SourceIndex:
    """Where every token's bytes occur in one document: built once, queried every step."""

    def __init__(self, text: str, vocab: TokenBytes, device: torch.device) -> None:
        self.source = Source(text)
        self.vocab = vocab
        self.device = device
        matches = vocab.tokens_at(self.source.data, range(len(self.source.data)))
        # Per position, where the tokens found there end.
        self.steps: dict[int, set[int]] = {}
        for p, t in matches:
            self.steps.setdefault(p, set()).add(p + len(vocab.by_id[t]))
        self._alive: dict[str, frozenset[int]] = {}
        # Matches come sorted by position: the tokens at position p are match_tok[first[p]:first[p + 1]].
        self.match_pos = torch.tensor([p for p, _ in matches], dtype=torch.long, device=device)
        self.match_tok = torch.tensor([t for _, t in matches], dtype=torch.long, device=device)
        self.first = [0] * (len(self.source.data) + 2)
        for p, _ in matches:
            self.first[p + 1] += 1
        for p in range(1, len(self.first)):
            self.first[p] += self.first[p - 1]
        self._entries: dict[tuple[bytes, str | None], torch.Tensor] = {}

    def continuations(self, ends: frozenset[int] | Sequence[int]) -> torch.Tensor:
        """Tokens whose bytes occur in the source at one of `ends` (an id may repeat)."""
        if len(ends) <= FEW_ENDS:
            # Inside a value few positions remain: slices beat a gather over every match.
            return torch.cat([self.match_tok[self.first[e] : self.first[e + 1]] for e in ends] or [self.match_tok[:0]])
        at = torch.zeros(len(self.source.data) + 1, dtype=torch.bool, device=self.device)
        at[torch.tensor(list(ends), dtype=torch.long, device=self.device)] = True
        return self.match_tok[at[self.match_pos]]

    def alive(self, name: str, ends: frozenset[int]) -> frozenset[int]:
        """The positions from which tokens of the source reach one of `ends` (cached under `name`)."""
        if name not in self._alive:
            alive = set(ends)
            for p in range(len(self.source.data), -1, -1):
                if p not in alive and any(e in alive for e in self.steps.get(p, ())):
                    alive.add(p)
            self._alive[name] = frozenset(alive)
        return self._alive[name]

    def entries(
        self, head: bytes, edges: tuple[str, frozenset[int] | None, frozenset[int]] | None = None
    ) -> torch.Tensor:
        """Tokens made of `head` and then the start of a value; for a word-edge class or checked type
        `edges` (its name, starts or None for any, and ends), at one of its starts and into a place
        that still reaches its ends."""
        key = (head, edges and edges[0])
        if key not in self._entries:
            if edges is None and not head:
                ids = self.continuations(self.source.starts)
            else:
                at = [p for p in self.source.starts if edges is None or edges[1] is None or p in edges[1]]
                found = self.vocab.tokens_at(self.source.data, at, head)
                if edges is not None:
                    alive = self.alive(edges[0], edges[2])
                    found = [(p, t) for p, t in found if p + len(self.vocab.by_id[t]) - len(head) in alive]
                ids = torch.tensor(sorted({t for _, t in found}), dtype=torch.long, device=self.device)
            self._entries[key] = ids
        return self._entries[key]


@dataclass
class LiteralOptions:
    tokens: torch.Tensor
    heads: list[tuple[bytes, int]]  # (bytes before a value starts inside the token, label)
    end: bool


class RowConstraint:
    """One prompt's grammar state, fed the tokens chosen for its row."""

    def __init__(self, grammar: Grammar, index: SourceIndex, eos_id: int) -> None:
        self.grammar = grammar
        self.index = index
        self.vocab = index.vocab
        self.eos_id = eos_id
        self.configs: frozenset[Config] = grammar.initial()
        self.ended = False
        self._literal: dict[frozenset, LiteralOptions] = {}
        self._typed_entries: dict[tuple[bytes, int], torch.Tensor] = {}

    def allowed(self, configs: frozenset[Config] | None = None) -> torch.Tensor:
        """Token ids legal as the next token (end-of-sequence included when it is), from the row's
        state or from `configs` (a state looked ahead to)."""
        eos = torch.tensor([self.eos_id], dtype=torch.long, device=self.index.device)
        if configs is None:
            if self.ended:
                return eos
            configs = self.configs
        if not configs:
            return eos
        literal = self.literal_options(configs)
        parts = [literal.tokens]
        for head, label in literal.heads:
            parts.append(self._entries(head, label))
        for c in configs:
            if isinstance(c, Value):
                parts.append(self._typed(self._continuations(c), c.label, c.text))
            elif isinstance(c, ValueStart):
                parts.append(self._entries(b"", c.label))
        if literal.end:
            parts.append(eos)
        allowed = torch.cat(parts)
        return allowed if allowed.numel() else eos

    def advance(self, token_id: int) -> None:
        if self.ended:
            return
        if token_id == self.eos_id:
            self.ended = True
            return
        self.configs = self.after(self.configs, token_id)

    def after(self, configs: frozenset[Config], token_id: int) -> frozenset[Config]:
        """The state `configs` leads to by `token_id` (not end-of-sequence)."""
        data = self.vocab.by_id[token_id] if token_id < len(self.vocab.by_id) else None
        return self.grammar.advance(configs, data) if data else frozenset()

    def literal_options(self, configs: frozenset[Config]) -> LiteralOptions:
        key = frozenset(_literal_key(c, self.grammar) for c in configs)
        if key not in self._literal:
            self._literal[key] = self._walk_literals(configs)
        return self._literal[key]

    def _walk_literals(self, configs: frozenset[Config]) -> LiteralOptions:
        """Breadth-first over the literal bytes, as deep as some token still starts with them."""
        tokens: set[int] = set()
        heads: set[tuple[bytes, int]] = set()
        frontier: list[tuple[bytes, Config]] = [(b"", c) for c in configs]
        while frontier:
            head, c = frontier.pop()
            if head and isinstance(c, ValueStart):
                heads.add((head, c.label))
            for b in self.grammar.literal_bytes(c):
                longer = head + bytes([b])
                if not self.vocab.starts_some_token(longer):
                    continue
                # A value's own bytes are the entry sets' business, not the literal walk's.
                following = [n for n in self.grammar.step(c, b) if not isinstance(n, Value)]
                if following:
                    tokens.update(self.vocab.ids.get(longer, ()))
                frontier.extend((longer, n) for n in following)
        ids = torch.tensor(sorted(tokens), dtype=torch.long, device=self.index.device)
        return LiteralOptions(ids, sorted(heads), self.grammar.accepts_end(configs))

    def _entries(self, head: bytes, label: int) -> torch.Tensor:
        key = (head, label)
        if key not in self._typed_entries:
            self._typed_entries[key] = self._typed(self.index.entries(head, self._edges(label)), label, b"", len(head))
        return self._typed_entries[key]

    def _edges(self, label: int) -> tuple[str, frozenset[int] | None, frozenset[int]] | None:
        g = self.grammar
        name = g.edge_class[label]
        return None if name is None else (name, g.edge_starts[label], g.edge_ends[label])

    def _continuations(self, c: Value) -> torch.Tensor:
        """Tokens occurring at the value's ends; for a word-edge class, only into a place that still
        reaches one of its ends."""
        edges = self._edges(c.label)
        if edges is None:
            return self.index.continuations(c.ends)
        alive = self.index.alive(edges[0], edges[2])
        by_id, first = self.vocab.by_id, self.index.first
        ids = [
            t
            for e in c.ends
            for t in self.index.match_tok[first[e] : first[e + 1]].tolist()
            if e + len(by_id[t]) in alive
        ]
        return torch.tensor(ids, dtype=torch.long, device=self.index.device)

    def _typed(self, ids: torch.Tensor, label: int, text: bytes, skip: int = 0) -> torch.Tensor:
        """`ids` less the tokens that would take a typed value off every viable prefix."""
        if self.grammar.types[label] is None:
            return ids
        by_id = self.vocab.by_id
        keep = [t for t in ids.tolist() if self.grammar.viable(label, text + by_id[t][skip:])]
        return torch.tensor(keep, dtype=torch.long, device=ids.device)


def _literal_key(c: Config, grammar: Grammar) -> object:
    """What the literal walk depends on: a value's end positions matter only as 'may it end here'."""
    if isinstance(c, Value):
        return ("value", c.answered, c.label, grammar.can_end(c))
    return c


# Below this many legal ids (duplicates included) a row may be forced; above, it is not worth a check.
FEW = 8


class BatchConstraint:
    """Masks a batch's logits to its rows' grammars; rows without one (padding) are left free."""

    def __init__(self, rows: Sequence[RowConstraint | None]) -> None:
        self.rows = list(rows)
        # Host time spent masking and advancing (on a GPU, kernel time only where the host waits).
        self.seconds = 0.0

    def legal(self, logits: torch.Tensor, which: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Which tokens each row may take ([rows, V] bool), and per row whether exactly one was legal
        (a forced step). `which`, if given, names the batch row each of `logits`' rows is; rows
        without a grammar (padding) are left free."""
        started = time.perf_counter()
        which = range(logits.shape[0]) if which is None else which
        assert len(which) == logits.shape[0], (len(which), logits.shape)
        grammars = [self.rows[r] if r < len(self.rows) else None for r in which]
        free = [i for i, row in enumerate(grammars) if row is None]
        picked = [(i, row.allowed()) for i, row in enumerate(grammars) if row is not None]
        legal = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
        if free:
            legal[free] = True
        forced = [False] * logits.shape[0]
        if picked:
            rows = torch.cat([torch.full_like(ids, i) for i, ids in picked])
            ids = torch.cat([ids for _, ids in picked])
            legal[rows, ids] = True
            for i, row_ids in picked:
                forced[i] = row_ids.numel() == 1 or (row_ids.numel() <= FEW and row_ids.unique().numel() == 1)
        self.seconds += time.perf_counter() - started
        return legal, torch.tensor(forced, dtype=torch.bool, device=logits.device)

    def advance(self, chosen: torch.Tensor, which: Sequence[int] | None = None) -> None:
        """Feed each row its chosen token; `which` as in `legal`."""
        started = time.perf_counter()
        which = range(chosen.shape[0]) if which is None else which
        for r, token_id in zip(which, chosen.tolist(), strict=True):
            if r < len(self.rows) and self.rows[r] is not None:
                self.rows[r].advance(token_id)
        self.seconds += time.perf_counter() - started


class Constrainer:
    """Builds row constraints for an engine: the vocabulary's bytes once, each document's index once."""

    def __init__(self, vocab: TokenBytes, eos_id: int, device: torch.device) -> None:
        self.vocab = vocab
        # The name the product's Constrainer gives the vocabulary's bytes: the extraction flow reads it.
        self.tokens = vocab
        self.eos_id = eos_id
        self.device = device
        # The validation loop asks again for the documents of the batch in hand: index each once.
        self._indexes: dict[str, SourceIndex] = {}

    def rows(
        self,
        text: str,
        chunks: Sequence[tuple[str, ...]],
        types: Mapping[str, FieldType] | None = None,
        edges: WordEdges | None = None,
    ) -> list[RowConstraint]:
        index = self._indexes.get(text)
        if index is None:
            if len(self._indexes) >= INDEXES_KEPT:
                del self._indexes[next(iter(self._indexes))]  # the oldest: batches come in order
            index = self._indexes[text] = SourceIndex(text, self.vocab, self.device)
        return [RowConstraint(Grammar(index.source, chunk, types, edges), index, self.eos_id) for chunk in chunks]

    def forget_documents(self) -> None:
        self._indexes.clear()
