"""SeqGPT's prompt, byte for byte as the reference code builds it (the model was tuned on it)."""

from __future__ import annotations

from collections.abc import Sequence

TASK_WORDS = {"extract": "抽取", "classify": "分类"}
LABEL_JOINER = "，"  # full-width comma, U+FF0C
GEN_TOKEN = "[GEN]"


def build_prompt(text: str, task: str, labels: Sequence[str]) -> str:
    return f"输入: {text}\n{TASK_WORDS[task]}: {LABEL_JOINER.join(labels)}\n输出: {GEN_TOKEN}"


def chunk_labels(labels: Sequence[str], size: int) -> list[tuple[str, ...]]:
    """Extraction asks for at most `size` labels per prompt (smaller sets recall more).

    Classification keeps the whole label set in one prompt: the model must choose among all of them.
    """
    return [tuple(labels[i : i + size]) for i in range(0, len(labels), size)]
