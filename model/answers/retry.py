"""The validation loop: a value that fails its checks is decoded again from where it went wrong.

Where it went wrong = the value's least certain step (smallest top-1 minus top-2 margin). There the
next-best legal tokens replace the greedy one and decoding goes on greedily, at most
`RETRIES_PER_VALUE` of them per value, each from the first generation. They are decoded together,
in one call (a row's tokens do not depend on its batch mates), and the first in order that passes
is kept: what trying them in turn would keep, in one round of the model instead of up to three.
Deterministic: the same generation always gives the same alternatives in the same order. A value
still failing keeps the first generation's text and goes to review with its reason
(model/answers/validate.py).

A person's or organisation's name that fails its lexicon (model/values/lexicon.py) is re-decoded locally:
the value only, up to where it ends, and the rest of the answer stays as it was. Other failures
decode on to the end, as a value that was wrong can make what follows it wrong too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from model.answers.parse import read_extraction
from model.answers.validate import Decode, cut_off, detokenize, piece_steps, step_margin, value_problem
from model.grammar.protocol import Row
from model.grammar.token_bytes import VALUE_BREAKS
from model.runner.protocol import Request
from model.signals import Generation
from schemas.messages import Document, ReviewCode

RETRIES_PER_VALUE = 3
# Types re-decoded as a value only, and the most tokens such a value may take.
LOCAL_TYPES = frozenset({"person", "organisation"})
LOCAL_VALUE_TOKENS = 32


# The runner's generations for re-decode requests, in their order.
Redecode = Callable[[list[Request]], list[Generation]]
# A fresh grammar state for (document, chunk), or None where decoding is not constrained.
RowFor = Callable[[int, int], Row | None]


@dataclass
class Revisit:
    doc: int
    chunk: int
    label: str
    step: int
    end: int  # the step after the failing value's last token
    alternatives: list[int]
    base: Generation  # the generation the alternatives come from
    attempts: int = 0


@dataclass
class ChunkState:
    generation: Generation
    retries: dict[str, int] = field(default_factory=dict)


def first_failure(doc: Document, labels: Sequence[str], generation: Generation, decode: Decode, skip: set[str]):
    """(label, step, end) of the earliest failing value of a label not in `skip`, or None: its least
    certain step, and the step after its last token."""
    output, ends = detokenize(generation.token_ids, decode)
    answer = read_extraction(output, tuple(labels), doc.text)
    failing = []
    for label, pieces in answer.values.items():
        if label in skip:
            continue
        for piece in pieces:
            steps = piece_steps(piece, ends)
            # A value cut by the token limit would be cut again: only the limit can fix it.
            if steps and not cut_off(generation, piece, output) and redecodable(doc, label, piece.text):
                least = min(steps, key=lambda s: step_margin(generation, s))
                failing.append((min(steps), label, least, max(steps) + 1))
                break
    return min(failing)[1:] if failing else None


def alternatives(generation: Generation, step: int) -> list[int]:
    """The legal tokens at `step` other than the greedy one, best first (a masked token has p = 0)."""
    chosen = generation.token_ids[step]
    ranked = zip(generation.top_ids[step], generation.top_probs[step], strict=True)
    return [t for t, p in ranked if t != chosen and p > 0][:RETRIES_PER_VALUE]


def splice(base: Generation, step: int, token: int, rest: Generation) -> Generation:
    """`base` up to `step`, `token` chosen at `step` (with that step's signals), then `rest`."""
    return base.steps(0, step) + base.choosing(step, token) + rest


def splice_value(base: Generation, step: int, end: int, token: int, rest: Generation, decode: Decode):
    """`base` with its value's steps from `step` to `end` replaced by `token` and `rest` up to where
    the new value ends (a tab, newline or end of sequence); `base` from `end` on kept. None if the
    new value did not end within `rest`."""
    local = [token, *rest.token_ids]
    stop = next((i for i, t in enumerate(local) if VALUE_BREAKS.intersection(decode([t]).encode())), None)
    if stop is None and rest.finished:
        stop = len(local) - 1  # the end-of-sequence token
    if stop is None:
        return None
    # The new value up to its end, then `base` from where its old value ended (and as it ended).
    return splice(base, step, token, rest).steps(0, step + stop) + base.steps(end)


def revisit(
    docs: Sequence[Document],
    chunks: Sequence[Sequence[tuple[str, ...]]],
    prompts: Sequence[Sequence[list[int]]],
    generations: list[list[Generation]],
    decode: Decode,
    row_for: RowFor,
    redecode: Redecode,
    max_new_tokens: int,
) -> list[list[dict[str, int]]]:
    """Re-decode failing values in place in `generations`; returns the retries per doc, chunk and label."""
    states = [[ChunkState(g) for g in doc_generations] for doc_generations in generations]
    open_: list[Revisit] = []
    for d, doc in enumerate(docs):
        if doc.task != "extract":
            continue
        for c in range(len(chunks[d])):
            open_ += _next_revisit(docs, chunks, states, d, c, decode)
    while open_:
        rows = [row_for(r.doc, r.chunk) for r in open_]
        is_local = [_local(docs[r.doc], r.label, row) for r, row in zip(open_, rows, strict=True)]
        requests = []
        for n, (r, row, local) in enumerate(zip(open_, rows, is_local, strict=True)):
            kept = r.base.token_ids[: r.step]
            room = max_new_tokens - len(kept) - 1
            limit = min(room, LOCAL_VALUE_TOKENS) if local else room
            # A value's alternatives as one document: they share the prompt and the answer up to
            # the value, which the runner then computes once for all of them.
            for token in r.alternatives:
                request = Request(prompts[r.doc][r.chunk], row, [*kept, token], limit, doc=n, value_only=local)
                requests.append(request)
        rests = iter(redecode(requests))
        still_open = []
        for r, local in zip(open_, is_local, strict=True):
            state = states[r.doc][r.chunk]
            labels = chunks[r.doc][r.chunk]
            # All decoded, the first that passes kept: what trying them in turn would keep.
            for token, rest in [(token, next(rests)) for token in r.alternatives]:
                r.attempts += 1
                if local:
                    candidate = splice_value(r.base, r.step, r.end, token, rest, decode)
                else:
                    candidate = splice(r.base, r.step, token, rest)
                if candidate is not None and not _label_fails(docs[r.doc], labels, candidate, decode, r.label):
                    state.generation = candidate
                    break
            state.retries[r.label] = r.attempts
            still_open += _next_revisit(docs, chunks, states, r.doc, r.chunk, decode)
        open_ = still_open
    for d, doc_states in enumerate(states):
        generations[d] = [s.generation for s in doc_states]
    return [[s.retries for s in doc_states] for doc_states in states]


def _local(doc: Document, label: str, row: Row | None) -> bool:
    """Whether the label's value is re-decoded alone. Unconstrained, a token may run from the value
    into what follows: no local cut there."""
    return row is not None and doc.field_types.get(label) in LOCAL_TYPES


def _next_revisit(docs, chunks, states, d: int, c: int, decode: Decode) -> list[Revisit]:
    state = states[d][c]
    found = first_failure(docs[d], chunks[d][c], state.generation, decode, set(state.retries))
    if found is None:
        return []
    label, step, end = found
    options = alternatives(state.generation, step)
    if not options:
        state.retries[label] = 0
        return _next_revisit(docs, chunks, states, d, c, decode)
    return [Revisit(d, c, label, step, end, options, state.generation)]


def _label_fails(doc: Document, labels: Sequence[str], generation: Generation, decode: Decode, label: str) -> bool:
    output, _ = detokenize(generation.token_ids, decode)
    answer = read_extraction(output, tuple(labels), doc.text)
    return label not in answer.values or any(redecodable(doc, label, p.text) for p in answer.values[label])


def redecodable(doc: Document, label: str, text: str) -> bool:
    """A value fails a check that a re-decode may pass. A name cut mid-word is not re-decoded: the
    grammar keeps name-like values on word edges (model/answers/checks.py:word_edges), and what the
    check finds beyond that (a bare surname) goes to review."""
    problem = value_problem(doc, label, text)
    return problem is not None and problem[0] is not ReviewCode.VALUE_BOUNDARY
