"""Values of a closed-vocabulary label that hold none of its words (学历 华南理, 学历 中): the shipped
model answered such cut pieces of the text, and a `type_mismatch` reason makes the backoff ask for
the label again among its cued spellings (本科, 硕士 ...)."""

from __future__ import annotations

from model.answers.validate import Extraction
from model.values.cues import in_vocabulary
from schemas.messages import Document, ReviewCode, ReviewReason


def unworded_values(doc: Document, extraction: Extraction) -> None:
    """A `type_mismatch` reason for each value of a closed-vocabulary label that holds none of its words."""
    if doc.task != "extract":
        return
    for label in doc.labels:
        for span in extraction.fields.get(label, []):
            if not in_vocabulary(label, span.text):
                extraction.reasons.append(
                    ReviewReason(
                        code=ReviewCode.TYPE_MISMATCH,
                        detail=f"{span.text!r} holds no word of {label}'s vocabulary",
                        label=label,
                        value=span.text,
                    )
                )
