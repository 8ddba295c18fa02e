"""The answer grammar as a mask over a batch's logits, with every row's state held in arrays.

A row's state is small: a literal state of its chunk's tables (model/grammar/literal.py), a bit mask
of the labels answered, and, inside a value, the value's label, its length in bytes and the source
positions where it may end (one flat list for the batch). Each step is a fixed sequence of vectorised
operations over all rows at once, whatever the number of rows: the literal tokens of every row's
state, the glue heads' value starts, the tokens occurring at every open value's end positions, and
end-of-sequence. No row is visited by Python, and the only value brought to the host per step is
the batch's chosen tokens (the tables live on the host).

The documents of a batch share one position space (each document's bytes, then one slot for its
end), so that every per-position table is one array.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from model.grammar.literal import ChunkTable, build_chunk_table, pad_steps
from model.grammar.source import CHECKED_TYPES, UNLIMITED, SourceTables, entries, prepare_source, reach
from model.grammar.token_bytes import TokenBytes
from model.grammar.vocab import VocabIndex, member
from schemas.field_sets import FieldType
from schemas.messages import Document

# Documents whose tables stay built: a few micro-batches' worth (the validation loop asks again).
SOURCES_KEPT = 128


@dataclass(frozen=True)
class RowGrammar:
    """One prompt's constraint: its document's tables, its chunk's, and its labels' checked types."""

    source: SourceTables
    chunk: ChunkTable
    types: tuple[FieldType | None, ...]


@dataclass
class State:
    """Rows' grammar states; `row` maps each to its batch row, ends are (row index here, position)."""

    row: np.ndarray
    literal: np.ndarray  # global literal state, -1 where none is possible
    answered: np.ndarray
    label: np.ndarray  # the open value's label (chunk index), -1 where no value is open
    length: np.ndarray  # the open value's bytes so far
    ended: np.ndarray
    end_row: np.ndarray
    end_pos: np.ndarray

    def take(self, index: np.ndarray) -> State:
        inverse = np.full(len(self.row), -1, dtype=np.int64)
        inverse[index] = np.arange(len(index))
        keep = inverse[self.end_row] >= 0
        return State(
            self.row[index],
            self.literal[index],
            self.answered[index],
            self.label[index],
            self.length[index],
            self.ended[index],
            inverse[self.end_row[keep]],
            self.end_pos[keep],
        )

    def put(self, index: np.ndarray, part: State) -> None:
        self.literal[index] = part.literal
        self.answered[index] = part.answered
        self.label[index] = part.label
        self.length[index] = part.length
        self.ended[index] = part.ended
        moved = np.zeros(len(self.row), dtype=bool)
        moved[index] = True
        gone = moved[self.end_row]
        rows = np.concatenate([self.end_row[~gone], index[part.end_row]])
        order = np.argsort(rows, kind="stable")
        self.end_row = rows[order]
        self.end_pos = np.concatenate([self.end_pos[~gone], part.end_pos])[order]


@dataclass
class LegalTokens:
    """One row's legal tokens: its own list and the value-start sets it may enter."""

    own: set[int]
    entries: list[frozenset[int]]

    def __contains__(self, token: int) -> bool:
        return token in self.own or any(token in e for e in self.entries)

    def few(self, most: int) -> set[int] | None:
        """All of them, where there are at most `most`."""
        if len(self.own) > most or any(len(e) > most for e in self.entries):
            return None
        every = self.own.union(*self.entries)
        return every if len(every) <= most else None


class Constrainer:
    """Per engine: the vocabulary's tables once, each chunk's literal tables once, each document's
    source tables once (the validation loop asks again for the documents of the batch in hand)."""

    def __init__(self, vocab: TokenBytes, eos_id: int, device: torch.device, index: VocabIndex | None = None) -> None:
        self.tokens = vocab
        self.vocab = index or VocabIndex(vocab)
        self.eos_id = eos_id
        self.device = device
        self._chunks: dict[tuple[str, ...], ChunkTable] = {}
        self._sources: dict[str, SourceTables] = {}

    def rows(
        self, text: str, chunks: Sequence[tuple[str, ...]], types: Mapping[str, FieldType] | None = None
    ) -> list[RowGrammar]:
        source = self._sources.get(text)
        if source is None:
            if len(self._sources) >= SOURCES_KEPT:
                del self._sources[next(iter(self._sources))]  # the oldest: batches come in order
            source = self._sources[text] = prepare_source(text, self.vocab)
        types = types or {}
        out = []
        for labels in chunks:
            chunk = self._chunks.get(labels)
            if chunk is None:
                chunk = self._chunks[labels] = build_chunk_table(labels, self.tokens)
            checked = tuple(types.get(label) if types.get(label) in CHECKED_TYPES else None for label in labels)
            out.append(RowGrammar(source, chunk, checked))
        return out

    def for_document(
        self, doc: Document, source: str, chunks: Sequence[tuple[str, ...]], constrained: bool
    ) -> list[RowGrammar] | None:
        """One row per prompt of `doc`, or None where its decoding is free: the constraint is off, or
        the task is classification, whose answer is not copied from the text."""
        if not constrained or doc.task != "extract":
            return None
        return self.rows(source, chunks, doc.field_types)

    def batch(self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]] = ()) -> GrammarBatch:
        return GrammarBatch(rows, self.vocab, self.eos_id, self.device, prefixes)


class GrammarBatch:
    """Masks a batch's logits to its rows' grammars; rows without one (padding) are left free."""

    def __init__(
        self,
        rows: Sequence[RowGrammar | None],
        vocab: VocabIndex,
        eos_id: int,
        device: torch.device,
        prefixes: Sequence[Sequence[int]] = (),
    ) -> None:
        started = time.perf_counter()
        self.vocab = vocab
        self.eos_id = eos_id
        self.device = device
        self.rows = list(rows)
        self._layout(self.rows)
        n = len(self.rows)
        free = np.array([r is None for r in self.rows], dtype=bool)
        self.free = free
        self.state = State(
            row=np.arange(n),
            literal=np.where(free, -1, self.state_offset),
            answered=np.zeros(n, dtype=np.int64),
            label=np.full(n, -1, dtype=np.int64),
            length=np.zeros(n, dtype=np.int64),
            ended=np.zeros(n, dtype=bool),
            end_row=np.zeros(0, dtype=np.int64),
            end_pos=np.zeros(0, dtype=np.int64),
        )
        # Host time spent preparing, masking and advancing (on a GPU, kernel time only where the host waits).
        self.seconds = time.perf_counter() - started
        for step in range(max((len(p) for p in prefixes), default=0)):
            which = np.array([r for r, p in enumerate(prefixes) if len(p) > step], dtype=np.int64)
            self.advance(np.array([prefixes[r][step] for r in which], dtype=np.int64), which)

    # ------------------------------------------------------------------ layout
    def _layout(self, rows: list[RowGrammar | None]) -> None:
        vocab = self.vocab
        size = vocab.size
        sources: dict[int, int] = {}
        chunks: dict[int, int] = {}
        source_list: list[SourceTables] = []
        chunk_list: list[ChunkTable] = []
        for r in rows:
            if r is None:
                continue
            if id(r.source) not in sources:
                sources[id(r.source)] = len(source_list)
                source_list.append(r.source)
            if id(r.chunk) not in chunks:
                chunks[id(r.chunk)] = len(chunk_list)
                chunk_list.append(r.chunk)
        # One position space: each document's bytes and its end slot.
        sizes = np.array([s.size + 1 for s in source_list], dtype=np.int64)
        self.source_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(self.source_offset[-1])
        self.boundary = np.concatenate([s.boundary for s in source_list]) if source_list else np.zeros(0, bool)
        match_pos = np.concatenate(
            [s.match_pos + o for s, o in zip(source_list, self.source_offset, strict=False)] or [np.zeros(0, np.int64)]
        )
        self.match_tok = np.concatenate([s.match_tok for s in source_list] or [np.zeros(0, np.int64)])
        self.first = np.searchsorted(match_pos, np.arange(total + 1))
        self.match_key = match_pos * (size + 1) + self.match_tok
        # Literal tables, states concatenated.
        state_offsets = np.concatenate([[0], np.cumsum([len(c.steps) for c in chunk_list])]).astype(np.int64)
        self.lit_tok, self.lit_next, self.lit_done, self.lit_need = pad_steps(chunk_list, size)
        self.eos_kind = np.array([e for c in chunk_list for e in c.eos], dtype=np.int64)
        heads: dict[bytes, int] = {}
        glue_rows = [g for c in chunk_list for g in c.glues]
        for glues in glue_rows:
            for g in glues:
                heads.setdefault(g.head, len(heads))
        width = max([1] + [len(g) for g in glue_rows])
        self.glue_head = np.full((len(glue_rows), width), -1, dtype=np.int64)
        self.glue_label = np.zeros((len(glue_rows), width), dtype=np.int64)
        self.glue_done = np.zeros((len(glue_rows), width), dtype=np.int64)
        for s, glues in enumerate(glue_rows):
            for k, g in enumerate(glues):
                self.glue_head[s, k], self.glue_label[s, k], self.glue_done[s, k] = heads[g.head], g.label, g.done
        # Per row: its document, its chunk's first state, all labels, exits per label, checked types.
        n = len(rows)
        most = max([1] + [len(r.chunk.labels) for r in rows if r is not None])
        self.row_source = np.zeros(n, dtype=np.int64)
        self.state_offset = np.zeros(n, dtype=np.int64)
        self.complete = np.zeros(n, dtype=np.int64)
        self.exit_state = np.full((n, most), -1, dtype=np.int64)
        types = sorted({t for r in rows if r is not None for t in r.types if t is not None})
        self.type_names: list[FieldType | None] = [None, *types]
        self.row_type = np.zeros((n, most), dtype=np.int64)
        for i, r in enumerate(rows):
            if r is None:
                continue
            offset = state_offsets[chunks[id(r.chunk)]]
            self.row_source[i] = sources[id(r.source)]
            self.state_offset[i] = offset
            self.complete[i] = r.chunk.complete
            self.exit_state[i, : len(r.chunk.labels)] = offset + np.array(r.chunk.exit_state)
            self.row_type[i, : len(r.types)] = [self.type_names.index(t) for t in r.types]
        # How far a checked type's value may run from each start, in the shared position space.
        self.reach = [np.full(total + 1, UNLIMITED, dtype=np.int64)]
        for kind in types:
            users = {sources[id(r.source)] for r in rows if r is not None and kind in r.types}
            spans = [
                reach(s, kind) + o if d in users else np.full(s.size + 1, UNLIMITED, dtype=np.int64)
                for d, (s, o) in enumerate(zip(source_list, self.source_offset, strict=False))
            ]
            self.reach.append(np.concatenate([*spans, np.array([UNLIMITED])]))
        # Glue entries per (document, head): sorted by (set, token); set = document * heads + head.
        self.n_heads = max(1, len(heads))
        keys, pos, taken = [], [], []
        for d, s in enumerate(source_list):
            for head, h in heads.items():
                e = entries(s, vocab, head)
                keys.append((d * self.n_heads + h) * (size + 1) + e.tok)
                pos.append(e.pos + self.source_offset[d])
                taken.append(e.taken)
        key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        order = np.argsort(key, kind="stable")
        self.entry_key = key[order]
        self.entry_pos = np.concatenate(pos)[order] if pos else np.zeros(0, np.int64)
        self.entry_taken = np.concatenate(taken)[order] if taken else np.zeros(0, np.int64)
        # Dense token rows per (set, type) for the mask, built on the logits' device.
        n_types = len(self.type_names)
        self.entry_row = np.full(len(source_list) * self.n_heads * n_types, -1, dtype=np.int64)
        dense = []
        sets = len(source_list) * self.n_heads
        for set_id in range(sets):
            lo, hi = np.searchsorted(self.entry_key, [set_id * (size + 1), (set_id + 1) * (size + 1)])
            for t in range(n_types):
                tok = self.entry_key[lo:hi] - set_id * (size + 1)
                if t:
                    p = self.entry_pos[lo:hi]
                    tok = tok[p + self.entry_taken[lo:hi] <= self.reach[t][p]]
                if not len(tok):
                    continue
                self.entry_row[set_id * n_types + t] = len(dense)
                dense.append(np.unique(tok))
        self.entry_rows = torch.zeros(max(1, len(dense)), size, dtype=torch.bool)
        for i, tok in enumerate(dense):
            self.entry_rows[i, torch.from_numpy(tok)] = True
        self.entry_rows = self.entry_rows.to(self.device)
        self.entry_ids = dense
        self._entry_sets: dict[int, frozenset[int]] = {}

    def all_ended(self) -> bool:
        """Every row has chosen end-of-sequence (known on the host: advance brought the tokens)."""
        return bool(self.state.ended.all())

    # ------------------------------------------------------------------ masking
    def legal(self, logits: torch.Tensor, which: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Which tokens each row may take ([rows, V] bool, on the logits' device), and per row whether
        exactly one was legal (a forced step); the logits give the shape and device, not values.
        `which`, if given, names the batch row each of `logits`' rows is (a draft's verification
        masks only the rows still verifying); rows without a grammar (padding) are left free."""
        started = time.perf_counter()
        index = np.arange(logits.shape[0]) if which is None else np.asarray(which, dtype=np.int64)
        assert len(index) == logits.shape[0], (len(index), logits.shape)
        inside = index < len(self.rows)
        part = self.state.take(index[inside])
        (rows, toks), glue_rows, glue_ids = self._legal(part)
        n = len(part.row)
        # Rows left with nothing legal (a dead end the grammar cannot reach, kept for safety) may end.
        has = np.zeros(n, dtype=bool)
        has[rows] = True
        has[glue_rows] = True
        free = self.free[part.row]
        empty = np.flatnonzero(~has & ~free)
        rows, toks = np.concatenate([rows, empty]), np.concatenate([toks, np.full(len(empty), self.eos_id)])
        forced = self._forced(n, rows, toks, glue_rows, glue_ids) & ~free
        # Few passes over [rows, vocabulary]: they are most of a step's cost on a CPU.
        device = logits.device
        legal = torch.zeros(n, logits.shape[1], dtype=torch.bool, device=device)
        legal[torch.from_numpy(rows).to(device), torch.from_numpy(toks).to(device)] = True
        for round_rows, round_ids in _rounds(glue_rows, glue_ids):
            at = torch.from_numpy(round_rows).to(device)
            dense = self.entry_rows[torch.from_numpy(round_ids).to(self.entry_rows.device)].to(device)
            legal[at, : dense.shape[1]] |= dense
        if free.any():
            legal[torch.from_numpy(free).to(device)] = True
        all_forced = np.zeros(len(index), dtype=bool)
        all_forced[inside] = forced
        if not inside.all():
            full = torch.ones(logits.shape, dtype=torch.bool, device=device)
            full[torch.from_numpy(np.flatnonzero(inside)).to(device)] = legal
            legal = full
        forced = torch.from_numpy(all_forced).to(device)
        self.seconds += time.perf_counter() - started
        return legal, forced

    def _forced(self, n: int, rows, toks, glue_rows, glue_ids) -> np.ndarray:
        """Per row, whether exactly one token id is legal (from the host's lists: no pass over the mask)."""
        sizes = np.array([len(self.entry_ids[i]) for i in glue_ids], dtype=np.int64)
        single = sizes == 1
        one = np.array([self.entry_ids[i][0] for i in glue_ids[single]], dtype=np.int64)
        rows = np.concatenate([rows, glue_rows[single]])
        toks = np.concatenate([toks, one])
        distinct = np.unique(rows * (self.vocab.size + 1) + toks) // (self.vocab.size + 1)
        count = np.bincount(distinct, minlength=n)
        many = np.zeros(n, dtype=bool)
        many[glue_rows[~single]] = True
        return (count == 1) & ~many

    def legal_sets(self, part: State) -> list[LegalTokens]:
        """Per row of `part` (live rows with a grammar), its legal tokens as the host lists them: the
        draft proposer asks whether a guess is legal, and which few tokens are, without a pass over
        the vocabulary."""
        (rows, toks), glue_rows, glue_ids = self._legal(part)
        order = np.argsort(rows, kind="stable")
        bounds = np.searchsorted(rows[order], np.arange(len(part.row) + 1))
        toks = toks[order].tolist()
        glue: list[list[frozenset[int]]] = [[] for _ in part.row]
        for r, i in zip(glue_rows.tolist(), glue_ids.tolist(), strict=True):
            glue[r].append(self._entry_set(i))
        out = []
        for i, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
            own = set(toks[lo:hi])
            # As in `legal`: a row left with nothing may end.
            out.append(LegalTokens(own if own or glue[i] else {self.eos_id}, glue[i]))
        return out

    def _entry_set(self, i: int) -> frozenset[int]:
        if i not in self._entry_sets:
            self._entry_sets[i] = frozenset(self.entry_ids[i].tolist())
        return self._entry_sets[i]

    def _legal(self, part: State) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
        """(row, token) pairs of literal steps, end-of-sequence and value continuations; and the
        rows and dense entry-row ids of value starts after glue heads."""
        live = ~part.ended & ~self.free[part.row]
        can_end = self._can_end(part)
        sources_row, sources_state = self._literal_sources(part, live, can_end)
        answered = part.answered[sources_row]
        tok = self.lit_tok[sources_state]
        ok = (tok != self.vocab.size) & self._conditions(
            answered, self.lit_done[sources_state], self.lit_need[sources_state]
        )
        i, k = np.nonzero(ok)
        rows = [sources_row[i]]
        toks = [tok[i, k]]
        # End-of-sequence: a line end or a value that may end, once every label is answered.
        complete = answered == self.complete[part.row[sources_row]]
        eos = complete & (self.eos_kind[sources_state] != 0)
        rows.append(sources_row[eos])
        toks.append(np.full(int(eos.sum()), self.eos_id))
        # Value starts after glue heads.
        head = self.glue_head[sources_state]
        good = (head >= 0) & ((answered[:, None] & self.glue_done[sources_state]) == 0)
        i, k = np.nonzero(good)
        glue_row = sources_row[i]
        label = self.glue_label[sources_state[i], k]
        kind = self.row_type[part.row[glue_row], label]
        set_id = self.row_source[part.row[glue_row]] * self.n_heads + head[i, k]
        entry = self.entry_row[set_id * len(self.type_names) + kind]
        glue_rows, glue_ids = glue_row[entry >= 0], entry[entry >= 0]
        # Value continuations: tokens occurring at an open value's end positions.
        at = live[part.end_row]
        end_row, end_pos = part.end_row[at], part.end_pos[at]
        lo, hi = self.first[end_pos], self.first[end_pos + 1]
        counts = hi - lo
        flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        cont_row = np.repeat(end_row, counts)
        cont_tok = self.match_tok[flat]
        kind = self.row_type[part.row[cont_row], part.label[cont_row]]
        if kind.any():
            start = np.repeat(end_pos, counts) - part.length[cont_row]
            ends_at = np.repeat(end_pos, counts) + self.vocab.lengths[cont_tok]
            fits = np.ones(len(cont_row), dtype=bool)
            for t in np.unique(kind[kind > 0]):
                sel = kind == t
                fits[sel] = ends_at[sel] <= self.reach[t][start[sel]]
            cont_row, cont_tok = cont_row[fits], cont_tok[fits]
        rows.append(cont_row)
        toks.append(cont_tok)
        return (np.concatenate(rows), np.concatenate(toks)), glue_rows, glue_ids

    def _can_end(self, part: State) -> np.ndarray:
        """Per row: a value is open and may end here (some end position is a character boundary)."""
        out = np.zeros(len(part.row), dtype=bool)
        out[part.end_row[self.boundary[part.end_pos]]] = True
        return out

    def _literal_sources(self, part: State, live: np.ndarray, can_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, literal state) pairs: each row's own literal state, and the way out of its open value."""
        own = np.flatnonzero(live & (part.literal >= 0))
        out = np.flatnonzero(live & can_end & (part.label >= 0))
        exits = self.exit_state[part.row[out], part.label[out]]
        return np.concatenate([own, out]), np.concatenate([part.literal[own], exits])

    @staticmethod
    def _conditions(answered: np.ndarray, done: np.ndarray, need: np.ndarray) -> np.ndarray:
        answered = answered[:, None]
        return ((answered & done) == 0) & ((need < 0) | ((need & ~answered) != 0))

    # ------------------------------------------------------------------ advancing
    def advance(self, chosen: torch.Tensor | np.ndarray, which: Sequence[int] | None = None) -> None:
        """Feed each row its chosen token; `which` as in `legal`."""
        started = time.perf_counter()
        tokens = chosen.cpu().numpy() if isinstance(chosen, torch.Tensor) else np.asarray(chosen)
        index = np.arange(len(tokens)) if which is None else np.asarray(which, dtype=np.int64)
        inside = index < len(self.rows)
        index, tokens = index[inside], tokens[inside].astype(np.int64)
        part = self.state.take(index)
        self.state.put(index, self.after(part, tokens))
        self.seconds += time.perf_counter() - started

    def after(self, part: State, tokens: np.ndarray) -> State:
        """`part`'s rows after one token each (legal ones: the caller has checked)."""
        size = self.vocab.size
        n = len(part.row)
        live = ~part.ended & ~self.free[part.row]
        ended = part.ended | (tokens == self.eos_id)
        live &= tokens != self.eos_id
        can_end = self._can_end(part)
        # Literal walks: the row's own state wins over the way out of its value (they agree where both hold).
        sources_row, sources_state = self._literal_sources(part, live, can_end)
        tok = self.lit_tok[sources_state]
        answered = part.answered[sources_row]
        hit = (tok == tokens[sources_row][:, None]) & self._conditions(
            answered, self.lit_done[sources_state], self.lit_need[sources_state]
        )
        found = hit.any(axis=1)
        k = hit.argmax(axis=1)
        literal = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=np.int64)
        order = np.flatnonzero(found)[::-1]  # the row's own state is listed first: write it last
        literal[sources_row[order]] = self.lit_next[sources_state[order], k[order]]
        done[sources_row[order]] = self.lit_done[sources_state[order], k[order]]
        # A value opened after a glue head.
        head = self.glue_head[sources_state]
        good = (head >= 0) & ((answered[:, None] & self.glue_done[sources_state]) == 0)
        i, g = np.nonzero(good)
        glue_row = sources_row[i]
        set_id = self.row_source[part.row[glue_row]] * self.n_heads + head[i, g]
        key = set_id * (size + 1) + tokens[glue_row]
        lo = np.searchsorted(self.entry_key, key, "left")
        hi = np.searchsorted(self.entry_key, key, "right")
        counts = hi - lo
        flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        new_row = np.repeat(glue_row, counts)
        new_label = np.repeat(self.glue_label[sources_state[i], g], counts)
        new_done = np.repeat(self.glue_done[sources_state[i], g], counts)
        start = self.entry_pos[flat]
        new_pos = start + self.entry_taken[flat]
        kind = self.row_type[part.row[new_row], new_label]
        fits = new_pos <= self._reach(kind, start)
        new_row, new_pos, new_label, new_done = new_row[fits], new_pos[fits], new_label[fits], new_done[fits]
        label = np.full(n, -1, dtype=np.int64)
        length = np.zeros(n, dtype=np.int64)
        label[new_row] = new_label
        length[new_row] = self.entry_taken[flat][fits]
        done[new_row] |= new_done
        opened = np.zeros(n, dtype=bool)
        opened[new_row] = True
        # An open value continued: the token occurs at one of its end positions.
        at = live[part.end_row] & ~opened[part.end_row]
        end_row, end_pos = part.end_row[at], part.end_pos[at]
        t = tokens[end_row]
        occurs = member(self.match_key, end_pos * (size + 1) + t)
        end_row, end_pos, t = end_row[occurs], end_pos[occurs], t[occurs]
        moved = end_pos + self.vocab.lengths[t]
        kind = self.row_type[part.row[end_row], part.label[end_row]]
        fits = moved <= self._reach(kind, end_pos - part.length[end_row])
        end_row, moved = end_row[fits], moved[fits]
        label[end_row] = part.label[end_row]
        length[end_row] = part.length[end_row] + self.vocab.lengths[tokens[end_row]]
        rows = np.concatenate([new_row, end_row])
        pos = np.concatenate([new_pos, moved])
        order = np.argsort(rows, kind="stable")
        return replace(
            part,
            literal=np.where(live, literal, part.literal),
            answered=np.where(live, part.answered | done, part.answered),
            label=np.where(live, label, part.label),
            length=np.where(live, length, part.length),
            ended=ended,
            end_row=rows[order],
            end_pos=pos[order],
        )

    def _reach(self, kind: np.ndarray, start: np.ndarray) -> np.ndarray:
        out = np.full(len(kind), UNLIMITED, dtype=np.int64)
        for t in np.unique(kind[kind > 0]):
            sel = kind == t
            out[sel] = self.reach[t][start[sel]]
        return out


def _rounds(rows: np.ndarray, ids: np.ndarray):
    """(rows, ids) in rounds in which no row repeats: an in-place OR by index would keep one of two."""
    while len(rows):
        first = np.unique(rows, return_index=True)[1]
        yield rows[first], ids[first]
        rest = np.ones(len(rows), dtype=bool)
        rest[first] = False
        rows, ids = rows[rest], ids[rest]
