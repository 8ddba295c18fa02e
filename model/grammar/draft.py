"""Copy drafts: guesses of the next several tokens, which model/runner/generate.py:decode_with_drafts
checks in one forward pass, keeping exactly what step-by-step constrained greedy would have chosen.

The guesses are cheap because the answer is mostly copied or fixed: tokens the grammar forces, the
next label in the order the prompt asks for them, and inside a value the prompt's own tokens after
the last place where the answer's recent tokens occur in it (the source text continuing the value).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.grammar.mask import GrammarBatch, State
from model.grammar.token_bytes import VALUE_BREAKS, TokenBytes

# Up to this many legal tokens, the grammar's own choice is worth a look: one spelling is forced.
FEW = 8

# Longest run of recent answer tokens looked up in the prompt; shorter runs are tried after. Long
# enough to tell apart two places a short value occurs (a name in the parties and in the signature).
LOOKUP_TOKENS = 8


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
    grammar: GrammarBatch | None, r: int, prompt: PromptIndex, generated: Sequence[int], limit: int
) -> list[int]:
    """Up to `limit` tokens greedy may well choose after `generated` for batch row r: what the grammar
    forces; at a line's start the next unanswered label in the order asked (answers follow it);
    inside a value, the prompt's tokens after the answer's last ones (the source text continuing the
    value), up to the first tab or newline, after which the grammar guesses again. A guess the
    grammar forbids ends the draft: constrained greedy never takes it."""
    if grammar is None or r >= len(grammar.rows) or grammar.rows[r] is None or grammar.state.ended[r]:
        return copied(prompt, generated, limit)
    vocab = grammar.vocab.bytes
    draft: list[int] = []
    state: State | None = grammar.state.take(np.array([r]))
    while len(draft) < limit and state is not None:
        guess = grammar_guess(grammar, state)
        if guess is None:
            break
        if not guess and state.label[0] >= 0:
            guess = copied(prompt, [*generated, *draft], limit - len(draft))
            breaks = [i for i, t in enumerate(guess) if VALUE_BREAKS.intersection(vocab.by_id[t] or b"")]
            guess = guess[: breaks[0] + 1] if breaks else guess
        if not guess:
            break  # a value starts here: the model picks which, a lookup would only guess
        for token in guess[: limit - len(draft)]:
            state = grammar.after(state, token)
            if state is None:
                return draft
            draft.append(token)
    return draft


def grammar_guess(grammar: GrammarBatch, state: State) -> list[int] | None:
    """The tokens the grammar forces or suggests next; None where it forces the end."""
    legal = grammar.legal_of(state)
    if len(legal) <= FEW:
        vocab = grammar.vocab.bytes
        spellings = {vocab.by_id[t] if t != grammar.eos_id else None for t in legal.tolist()}
        if spellings == {None}:
            return None
        if len(spellings) == 1:
            # One legal text, maybe under several ids (a byte-fallback twin): the tokenizer's own.
            return [vocab.ids[spellings.pop()][0]]
    return next_label(grammar, state)


def copied(prompt: PromptIndex, tail: Sequence[int], limit: int) -> list[int]:
    """The prompt's tokens after the longest run of `tail`'s last tokens that occurs in it."""
    for n in range(min(LOOKUP_TOKENS, len(tail)), 0, -1):
        following = prompt.after(tail[-n:], limit)
        if following is not None:
            return following
    return []


def next_label(grammar: GrammarBatch, state: State) -> list[int]:
    """At a line's head, the rest of the first unanswered label (and its `: `) that it may still
    spell, in tokens (longest first: the spelling a tokenizer gives); empty where that is not a guess."""
    row = grammar.rows[state.row[0]]
    if row is None or state.label[0] >= 0 or state.literal[0] < 0:
        return []
    prefix = row.chunk.line_prefix[state.literal[0] - grammar.state_offset[state.row[0]]]
    if prefix is None:
        return []
    answered = int(state.answered[0])
    for i, head in enumerate(row.chunk.heads):
        if not answered >> i & 1 and head.startswith(prefix):
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
