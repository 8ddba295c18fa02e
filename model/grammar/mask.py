"""The answer grammar on the host: every row's state in numpy arrays, stepped with vectorised numpy.
No longer the decode loop's grammar (that is model/grammar/device.py, on the engine's device): it is
the oracle the device grammar is held to (tests/test_device_grammar.py), the grammar the reference
engine's logits processor and the copy drafts' proposer read, and the home of the Constrainer that
builds both from a batch's rows.

A row's state is small: a literal state of its chunk's tables (model/grammar/literal.py), a bit mask
of the labels answered, and, inside a value, the value's label, its length in bytes and the source
positions where it may end (one flat list for the batch). The tables are model/grammar/layout.py's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from model.grammar.device import DeviceGrammar
from model.grammar.layout import RowGrammar, build_layout
from model.grammar.literal import ChunkTable, build_chunk_table
from model.grammar.source import CHECKED_TYPES, UNLIMITED, SourceTables, WordEdges, prepare_source
from model.grammar.tables import device_tables
from model.grammar.token_bytes import TokenBytes
from model.grammar.vocab import VocabIndex, member
from schemas.field_sets import FieldType

# Documents whose tables stay built: a few micro-batches' worth (the validation loop asks again).
SOURCES_KEPT = 128


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
        # The decode loop's grammar: the device one or the host one; None picks by the device.
        self.grammar_on_device: bool | None = None
        self._chunks: dict[tuple[str, ...], ChunkTable] = {}
        self._sources: dict[str, SourceTables] = {}

    def rows(
        self,
        text: str,
        chunks: Sequence[tuple[str, ...]],
        types: Mapping[str, FieldType] | None = None,
        edges: WordEdges | None = None,
    ) -> list[RowGrammar]:
        """One row per chunk of `text`; a label's values are held to its checked type or, for a
        name-like label, to the word edges `edges` gives it (the same for every call with `text`)."""
        source = self._sources.get(text)
        if source is None or (edges is not None and not edges.tables.keys() <= source.ends.keys()):
            if len(self._sources) >= SOURCES_KEPT:
                del self._sources[next(iter(self._sources))]  # the oldest: batches come in order
            source = self._sources[text] = prepare_source(text, self.vocab, edges)
        types = types or {}
        classes = edges.classes if edges is not None else {}
        out = []
        for labels in chunks:
            chunk = self._chunks.get(labels)
            if chunk is None:
                chunk = self._chunks[labels] = build_chunk_table(labels, self.tokens)
            kinds = tuple(t if (t := types.get(label)) in CHECKED_TYPES else classes.get(label) for label in labels)
            out.append(RowGrammar(source, chunk, kinds))
        return out

    def batch(self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]] = ()) -> GrammarBatch:
        return GrammarBatch(rows, self.vocab, self.eos_id, self.device, prefixes)

    def grammar(
        self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> DeviceGrammar | HostGrammar:
        """The decode loop's grammar of a batch of `batch_rows` rows (those past `rows` pad it: free),
        its rows fed `prefixes`, masking `width` tokens (the model's vocabulary): on an accelerator
        the device grammar, which never waits for the host; on a CPU, where there is nothing to wait
        for, the host grammar, whose numpy steps cost a fraction of the device grammar's ~150 small
        torch operations (tests/test_device_grammar.py holds the two to the same tokens)."""
        on_device = self.device.type != "cpu" if self.grammar_on_device is None else self.grammar_on_device
        if not on_device:
            return HostGrammar(self.batch(rows, prefixes), batch_rows, width)
        return self.device_grammar(rows, prefixes, batch_rows, width)

    def device_grammar(
        self, rows: Sequence[RowGrammar | None], prefixes: Sequence[Sequence[int]], batch_rows: int, width: int
    ) -> DeviceGrammar:
        """The device grammar, whatever the device (arguments as `grammar`'s)."""
        rows = [*rows, *[None] * (batch_rows - len(rows))]
        layout = build_layout(rows, self.vocab, self.device)
        return DeviceGrammar(device_tables(layout, self.vocab, self.eos_id, width, self.device), prefixes)


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
        self.tables = build_layout(self.rows, vocab, device)
        n = len(self.rows)
        free = self.free = self.tables.free
        self._entry_sets: dict[int, frozenset[int]] = {}
        self.state = State(
            row=np.arange(n),
            literal=np.where(free, -1, self.tables.state_offset),
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
            dense = self.tables.entry_rows[torch.from_numpy(round_ids).to(self.tables.entry_rows.device)].to(device)
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
        sizes = np.array([len(self.tables.entry_ids[i]) for i in glue_ids], dtype=np.int64)
        single = sizes == 1
        one = np.array([self.tables.entry_ids[i][0] for i in glue_ids[single]], dtype=np.int64)
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
            self._entry_sets[i] = frozenset(self.tables.entry_ids[i].tolist())
        return self._entry_sets[i]

    def _legal(self, part: State) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
        """(row, token) pairs of literal steps, end-of-sequence and value continuations; and the
        rows and dense entry-row ids of value starts after glue heads."""
        live = ~part.ended & ~self.free[part.row]
        can_end = self._can_end(part)
        sources_row, sources_state = self._literal_sources(part, live, can_end)
        answered = part.answered[sources_row]
        tok = self.tables.lit_tok[sources_state]
        ok = (tok != self.vocab.size) & self._conditions(
            answered, self.tables.lit_done[sources_state], self.tables.lit_need[sources_state]
        )
        i, k = np.nonzero(ok)
        rows = [sources_row[i]]
        toks = [tok[i, k]]
        # End-of-sequence: a line end or a value that may end, once every label is answered.
        complete = answered == self.tables.complete[part.row[sources_row]]
        eos = complete & (self.tables.eos_kind[sources_state] != 0)
        rows.append(sources_row[eos])
        toks.append(np.full(int(eos.sum()), self.eos_id))
        # Value starts after glue heads.
        head = self.tables.glue_head[sources_state]
        good = (head >= 0) & ((answered[:, None] & self.tables.glue_done[sources_state]) == 0)
        i, k = np.nonzero(good)
        glue_row = sources_row[i]
        label = self.tables.glue_label[sources_state[i], k]
        kind = self.tables.row_type[part.row[glue_row], label]
        set_id = self.tables.row_source[part.row[glue_row]] * self.tables.n_heads + head[i, k]
        entry = self.tables.entry_row[set_id * len(self.tables.type_names) + kind]
        glue_rows, glue_ids = glue_row[entry >= 0], entry[entry >= 0]
        # Value continuations: tokens occurring at an open value's end positions.
        at = live[part.end_row]
        end_row, end_pos = part.end_row[at], part.end_pos[at]
        lo, hi = self.tables.first[end_pos], self.tables.first[end_pos + 1]
        counts = hi - lo
        flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        cont_row = np.repeat(end_row, counts)
        cont_tok = self.tables.match_tok[flat]
        kind = self.tables.row_type[part.row[cont_row], part.label[cont_row]]
        if kind.any():
            start = np.repeat(end_pos, counts) - part.length[cont_row]
            ends_at = np.repeat(end_pos, counts) + self.vocab.lengths[cont_tok]
            fits = self.tables.alive[kind, ends_at]
            for t in np.unique(kind[kind > 0]):
                sel = kind == t
                fits[sel] &= ends_at[sel] <= self.tables.reach[t][start[sel]]
            cont_row, cont_tok = cont_row[fits], cont_tok[fits]
        rows.append(cont_row)
        toks.append(cont_tok)
        return (np.concatenate(rows), np.concatenate(toks)), glue_rows, glue_ids

    def _can_end(self, part: State) -> np.ndarray:
        """Per row: a value is open and may end here (some end position is a character boundary, and a
        word edge where its label's values end on words)."""
        out = np.zeros(len(part.row), dtype=bool)
        kind = self.tables.row_type[part.row[part.end_row], part.label[part.end_row]]
        out[part.end_row[self.tables.end_ok[kind, part.end_pos]]] = True
        return out

    def _literal_sources(self, part: State, live: np.ndarray, can_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, literal state) pairs: each row's own literal state, and the way out of its open value."""
        own = np.flatnonzero(live & (part.literal >= 0))
        out = np.flatnonzero(live & can_end & (part.label >= 0))
        exits = self.tables.exit_state[part.row[out], part.label[out]]
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
        tok = self.tables.lit_tok[sources_state]
        answered = part.answered[sources_row]
        hit = (tok == tokens[sources_row][:, None]) & self._conditions(
            answered, self.tables.lit_done[sources_state], self.tables.lit_need[sources_state]
        )
        found = hit.any(axis=1)
        k = hit.argmax(axis=1)
        literal = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=np.int64)
        order = np.flatnonzero(found)[::-1]  # the row's own state is listed first: write it last
        literal[sources_row[order]] = self.tables.lit_next[sources_state[order], k[order]]
        done[sources_row[order]] = self.tables.lit_done[sources_state[order], k[order]]
        # A value opened after a glue head.
        head = self.tables.glue_head[sources_state]
        good = (head >= 0) & ((answered[:, None] & self.tables.glue_done[sources_state]) == 0)
        i, g = np.nonzero(good)
        glue_row = sources_row[i]
        set_id = self.tables.row_source[part.row[glue_row]] * self.tables.n_heads + head[i, g]
        key = set_id * (size + 1) + tokens[glue_row]
        lo = np.searchsorted(self.tables.entry_key, key, "left")
        hi = np.searchsorted(self.tables.entry_key, key, "right")
        counts = hi - lo
        flat = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        new_row = np.repeat(glue_row, counts)
        new_label = np.repeat(self.tables.glue_label[sources_state[i], g], counts)
        new_done = np.repeat(self.tables.glue_done[sources_state[i], g], counts)
        start = self.tables.entry_pos[flat]
        new_pos = start + self.tables.entry_taken[flat]
        kind = self.tables.row_type[part.row[new_row], new_label]
        fits = new_pos <= self._reach(kind, start)
        new_row, new_pos, new_label, new_done = new_row[fits], new_pos[fits], new_label[fits], new_done[fits]
        label = np.full(n, -1, dtype=np.int64)
        length = np.zeros(n, dtype=np.int64)
        label[new_row] = new_label
        length[new_row] = self.tables.entry_taken[flat][fits]
        done[new_row] |= new_done
        opened = np.zeros(n, dtype=bool)
        opened[new_row] = True
        # An open value continued: the token occurs at one of its end positions.
        at = live[part.end_row] & ~opened[part.end_row]
        end_row, end_pos = part.end_row[at], part.end_pos[at]
        t = tokens[end_row]
        occurs = member(self.tables.match_key, end_pos * (size + 1) + t)
        end_row, end_pos, t = end_row[occurs], end_pos[occurs], t[occurs]
        moved = end_pos + self.vocab.lengths[t]
        kind = self.tables.row_type[part.row[end_row], part.label[end_row]]
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
            out[sel] = self.tables.reach[t][start[sel]]
        return out


def _rounds(rows: np.ndarray, ids: np.ndarray):
    """(rows, ids) in rounds in which no row repeats: an in-place OR by index would keep one of two."""
    while len(rows):
        first = np.unique(rows, return_index=True)[1]
        yield rows[first], ids[first]
        rest = np.ones(len(rows), dtype=bool)
        rest[first] = False
        rows, ids = rows[rest], ids[rest]


class HostGrammar:
    """The host grammar behind the Grammar protocol (model/grammar/protocol.py): `batch` over `rows`
    batch rows (those past its own are free), masks `width` tokens wide. The oracle the device
    grammar is held to, and the decode loop's grammar on a CPU, where it is the faster of the two."""

    def __init__(self, batch: GrammarBatch, rows: int, width: int) -> None:
        self.batch = batch
        self.rows = rows
        self.width = width

    def start(self) -> State:
        return self.batch.state.take(np.arange(len(self.batch.rows)))

    def legal(self, state: State) -> tuple[torch.Tensor, torch.Tensor]:
        self.batch.state = state
        shape = torch.empty(1, 1, device=self.batch.device).expand(self.rows, self.width)
        return self.batch.legal(shape)

    def advance(self, state: State, tokens: torch.Tensor) -> State:
        self.batch.state = state.take(np.arange(len(state.row)))
        self.batch.advance(tokens)
        return self.batch.state
