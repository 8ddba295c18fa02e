"""Copy drafts: guesses of the next several tokens, which model/runner/generate.py:decode_with_drafts
checks in one forward pass, keeping exactly what step-by-step constrained greedy would have chosen.

The guesses are cheap because the answer is mostly copied or fixed: tokens the grammar forces, the
next label in the order the prompt asks for them, and inside a value the prompt's own tokens after
the last place where the answer's recent tokens occur in it (the source text continuing the value).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.grammar.mask import GrammarBatch, LegalTokens, State
from model.grammar.token_bytes import VALUE_BREAKS, TokenBytes

# Up to this many legal tokens, the grammar's own choice is worth a look: one spelling is forced.
FEW = 8

# Longest run of recent answer tokens looked up in the prompt; shorter runs are tried after. Long
# enough to tell apart two places a short value occurs (a name in the parties and in the signature).
LOOKUP_TOKENS = 8
# A copied guess longer than any draft is cut by the draft's own limit anyway.
LOOKUP_LIMIT = 64


class PromptIndex:
    """Where each token occurs in a prompt, so a lookup does not scan the prompt every step."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.prompt = list(prompt)
        self.at: dict[int, list[int]] = {}
        for i, token in enumerate(self.prompt):
            self.at.setdefault(token, []).append(i)

    def after(self, pattern: Sequence[int], limit: int) -> list[int] | None:
        """The `limit` tokens after the last occurrence of `pattern`, or None if it does not occur."""
        n = len(pattern)
        for end in reversed(self.at.get(pattern[-1], [])):
            if end + 1 >= n and self.prompt[end + 1 - n : end + 1] == list(pattern):
                return self.prompt[end + 1 : end + 1 + limit]
        return None


def propose(
    grammar: GrammarBatch | None,
    prompts: Sequence[PromptIndex],
    generated: Sequence[Sequence[int]],
    limits: Sequence[int],
) -> list[list[int]]:
    """Per batch row r, up to `limits[r]` tokens greedy may well choose after `generated[r]`: what the
    grammar forces; at a line's start the next unanswered label in the order asked (answers follow
    it); inside a value, the prompt's tokens after the answer's last ones (the source text continuing
    the value), up to the first tab or newline, after which the grammar guesses again. A guess the
    grammar forbids ends the row's draft: constrained greedy never takes it.

    The grammar is asked for every drafting row at once, once per drafted position."""
    drafts: list[list[int]] = [[] for _ in limits]  # rows past the prompts only pad the batch: limit 0
    walking = []
    for r, limit in enumerate(limits):
        if limit <= 0:
            continue
        if grammar is None or r >= len(grammar.rows) or grammar.rows[r] is None or grammar.state.ended[r]:
            drafts[r] = copied(prompts[r], generated[r], limit)
        else:
            walking.append(r)
    if grammar is None or not walking:
        return drafts
    rows = np.array(walking, dtype=np.int64)
    state = grammar.state.take(rows)
    queued: list[list[int]] = [[] for _ in walking]
    while len(rows):
        going, tokens = [], []
        for i, (r, legal) in enumerate(zip(rows.tolist(), grammar.legal_sets(state), strict=True)):
            draft = drafts[r]
            if not queued[i]:
                queued[i] = _guess(grammar, state, i, legal, prompts[r], [*generated[r], *draft])
                queued[i] = queued[i][: limits[r] - len(draft)]
            if not queued[i] or queued[i][0] not in legal:
                continue
            draft.append(queued[i].pop(0))
            if len(draft) < limits[r]:
                going.append(i)
                tokens.append(draft[-1])
        keep = np.array(going, dtype=np.int64)
        state = grammar.after(state.take(keep), np.array(tokens, dtype=np.int64))
        rows = rows[keep]
        queued = [queued[i] for i in going]
    return drafts


def _guess(
    grammar: GrammarBatch, state: State, i: int, legal: LegalTokens, prompt: PromptIndex, tail: list[int]
) -> list[int]:
    """Row i's next guess: the grammar's, else inside a value the source's continuation up to and
    including its first break; empty where the model must choose (a value starts, or it must end)."""
    guess = grammar_guess(grammar, state, i, legal)
    if guess is None:
        return []
    if not guess and state.label[i] >= 0:
        guess = copied(prompt, tail, LOOKUP_LIMIT)
        vocab = grammar.vocab.bytes
        breaks = [j for j, t in enumerate(guess) if VALUE_BREAKS.intersection(vocab.by_id[t] or b"")]
        guess = guess[: breaks[0] + 1] if breaks else guess
    return guess


def grammar_guess(grammar: GrammarBatch, state: State, i: int, legal: LegalTokens) -> list[int] | None:
    """The tokens the grammar forces or suggests next for row i of `state`; None where it forces the end."""
    few = legal.few(FEW)
    if few is not None:
        vocab = grammar.vocab.bytes
        spellings = {vocab.by_id[t] if t != grammar.eos_id else None for t in few}
        if spellings == {None}:
            return None
        if len(spellings) == 1:
            # One legal text, maybe under several ids (a byte-fallback twin): the tokenizer's own.
            return [vocab.ids[spellings.pop()][0]]
    return next_label(grammar, state, i)


def copied(prompt: PromptIndex, tail: Sequence[int], limit: int) -> list[int]:
    """The prompt's tokens after the longest run of `tail`'s last tokens that occurs in it."""
    for n in range(min(LOOKUP_TOKENS, len(tail)), 0, -1):
        following = prompt.after(tail[-n:], limit)
        if following is not None:
            return following
    return []


def next_label(grammar: GrammarBatch, state: State, i: int) -> list[int]:
    """At a line's head, the rest of the first unanswered label (and its `: `) that it may still
    spell, in tokens (longest first: the spelling a tokenizer gives); empty where that is not a guess."""
    batch_row = int(state.row[i])
    row = grammar.rows[batch_row]
    if row is None or state.label[i] >= 0 or state.literal[i] < 0:
        return []
    prefix = row.chunk.line_prefix[state.literal[i] - grammar.tables.state_offset[batch_row]]
    if prefix is None:
        return []
    answered = int(state.answered[i])
    for j, head in enumerate(row.chunk.heads):
        if not answered >> j & 1 and head.startswith(prefix):
            return spell(grammar.vocab.bytes, head[len(prefix) :])
    return []


def spell(vocab: TokenBytes, data: bytes) -> list[int]:
    """`data` as tokens, each the longest token its remaining bytes start with; empty if some byte
    has no token."""
    tokens: list[int] = []
    while data:
        for size in range(len(data), 0, -1):
            ids = vocab.ids.get(data[:size])
            if ids:
                tokens.append(ids[0])
                data = data[size:]
                break
        else:
            return []
    return tokens
