"""SeqGPT's prompt, byte for byte as the reference code builds it (the model was tuned on it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from schemas.messages import Document

# Tokenizer classes whose call adds nothing to their Rust tokenizer's ids (a subclass may: a prefix
# space, a legacy mode); the tokenizers the loader gives a BLOOM model are of this class.
_PLAIN_FAST = (PreTrainedTokenizerFast,)
# Tokens between the text and the window's end that a re-tokenised boundary may claim.
BOUNDARY_SLACK = 4

TASK_WORDS = {"extract": "抽取", "classify": "分类"}
LABEL_JOINER = "，"  # full-width comma, U+FF0C
GEN_TOKEN = "[GEN]"


def build_prompt(text: str, task: str, labels: Sequence[str]) -> str:
    return f"输入: {text}\n{prompt_tail(task, labels)}"


def prompt_tail(task: str, labels: Sequence[str]) -> str:
    """What follows the text's line: the only part of a document's prompts that differs between its chunks."""
    return f"{TASK_WORDS[task]}: {LABEL_JOINER.join(labels)}\n输出: {GEN_TOKEN}"


def chunk_labels(labels: Sequence[str], size: int) -> list[tuple[str, ...]]:
    """Extraction asks for at most `size` labels per prompt (smaller sets recall more).

    Near-equal chunks, as the reference's `np.array_split(labels, ceil(n / size))` makes them: 7 labels
    with size 6 give 4 + 3, not 6 + 1 (the model was tuned on prompts chunked that way). The first
    `n % k` chunks take one label more. Classification keeps the whole label set in one prompt: the
    model must choose among all of them.
    """
    count = -(-len(labels) // size)
    small, extra = divmod(len(labels), count) if count else (0, 0)
    chunks, start = [], 0
    for i in range(count):
        end = start + small + (1 if i < extra else 0)
        chunks.append(tuple(labels[start:end]))
        start = end
    return chunks


def prompt_chunks(doc: Document, labels_per_prompt: int) -> list[tuple[str, ...]]:
    if doc.task == "classify":
        return [doc.labels]
    return chunk_labels(doc.labels, labels_per_prompt)


def encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return token_ids(tokenizer, [text])[0]


def token_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """`tokenizer(texts)["input_ids"]`. A plain fast tokenizer's ids come from its Rust tokenizer
    directly, without the offsets, masks and Python objects the call builds and a prompt never reads
    (a third of the time: 0.1 against 0.3 ms a document); the same ids (tests/test_prompt.py)."""
    backend = tokenizer.backend_tokenizer if type(tokenizer) in _PLAIN_FAST else None
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return tokenizer(texts)["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch_fast(texts)]


def prompt_overhead(tokenizer: PreTrainedTokenizerBase, task: str, chunks: Sequence[tuple[str, ...]]) -> int:
    """Tokens the longest of the chunks' prompts takes around the text."""
    return max(len(encode(tokenizer, build_prompt("", task, c))) for c in chunks)


def token_ends(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Per token of `text` on its own, the character where the token ends."""
    return [end for _, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]


def fits(
    tokenizer: PreTrainedTokenizerBase, text: str, task: str, chunks: Sequence[tuple[str, ...]], max_input_tokens: int
) -> bool:
    """Whether every chunk's prompt holds `text` whole: the test `fit_text` applies before it cuts."""
    return prompt_overhead(tokenizer, task, chunks) + len(token_ends(tokenizer, text)) <= max_input_tokens


def fit_text(
    tokenizer: PreTrainedTokenizerBase, doc: Document, chunks: list[tuple[str, ...]], max_input_tokens: int
) -> tuple[str, bool]:
    """The document text, cut at its tail if its longest prompt would exceed the input window.

    Never at its head: the reference code's left truncation silently drops a document's start.
    Documents longer than the window reach an engine as windows (model/windows/split.py) that fit; this cut
    remains for a caller that reads the head only (the evaluation's head-only baseline).
    """
    overhead = prompt_overhead(tokenizer, doc.task, chunks)
    ends = token_ends(tokenizer, doc.text)
    if overhead + len(ends) <= max_input_tokens:
        return doc.text, False
    keep = max(max_input_tokens - overhead - BOUNDARY_SLACK, 1)
    while True:
        text = doc.text[: ends[keep - 1]]
        longest = max(len(encode(tokenizer, build_prompt(text, doc.task, c))) for c in chunks)
        if longest <= max_input_tokens or keep == 1:
            return text, True
        keep = max(keep - BOUNDARY_SLACK, 1)


class EncodedDocument(NamedTuple):
    chunks: list[tuple[str, ...]]
    prompts: list[list[int]]  # token ids, one prompt per chunk
    truncated: bool
    text: str  # the part of the document the prompts hold: all values must come from it


def encode_if_short(
    tokenizer: PreTrainedTokenizerBase, doc: Document, chunks: list[tuple[str, ...]], max_input_tokens: int
) -> EncodedDocument | None:
    """Every chunk's prompt, where the longest stays clear of the window's edge."""
    prompts = encode_chunk_prompts(tokenizer, doc.text, doc.task, chunks)
    if max(len(p) for p in prompts) <= max_input_tokens - BOUNDARY_SLACK:
        return EncodedDocument(chunks, prompts, False, doc.text)
    return None


def encode_chunk_prompts(
    tokenizer: PreTrainedTokenizerBase, text: str, task: str, chunks: Sequence[tuple[str, ...]]
) -> list[list[int]]:
    """Each chunk's prompt tokenised as a whole, with the text tokenised once, in one batched call.

    The first prompt is tokenised whole, and every chunk's tail alone. Where the first prompt's
    tokens end with its tail's, the tokenizer split the prompt where the tail starts (after the
    text line's newline, before the task word), so the text's tokens are those before it, and the
    same holds for every chunk: the text is the same and each tail starts with the same task word,
    and a split depends on the text either side of it. Elsewhere (a tokenizer that merges across
    that newline or adds tokens around a text) every prompt is tokenised whole.
    """
    if len(chunks) >= 2:
        first, *tails = token_ids(
            tokenizer, [build_prompt(text, task, chunks[0]), *(prompt_tail(task, c) for c in chunks)]
        )
        head = len(first) - len(tails[0])
        if head > 0 and first[head:] == tails[0]:
            return [first, *(first[:head] + tail for tail in tails[1:])]
    return token_ids(tokenizer, [build_prompt(text, task, c) for c in chunks])


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, doc: Document, labels_per_prompt: int, max_input_tokens: int
) -> EncodedDocument:
    chunks = prompt_chunks(doc, labels_per_prompt)
    # Most documents fit: one batched call tokenises every chunk's prompt, and the window check
    # (the text tokenised alone, then cut) runs only where the longest prompt comes near the window.
    short = encode_if_short(tokenizer, doc, chunks, max_input_tokens)
    if short is not None:
        return short
    text, truncated = fit_text(tokenizer, doc, chunks, max_input_tokens)
    return EncodedDocument(
        chunks, [encode(tokenizer, build_prompt(text, doc.task, c)) for c in chunks], truncated, text
    )
