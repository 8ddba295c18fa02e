"""Contract parties against their key lines: where the text states a party's role on its own line
(委托方（甲方）：…, │ 用人单位 │ …, Party A: …), the name there is the party's value.

The shipped model's parties were wrong in 10 of the 12 hand-written contracts that have such lines
(in 5 it swapped the two); a party answered otherwise is asked again by the backoff.
"""

from __future__ import annotations

from model.answers.checks import PARTY_LABELS
from model.answers.validate import Extraction
from model.values.cues import keyed
from schemas.messages import Document, ReviewCode, ReviewReason


def keyed_value(doc: Document, label: str) -> str | None:
    """The one value the text's keys give a label (委托方（甲方）：…, 来源：新华网), if they give one."""
    values = {"".join(c.text.split()): c.text for c in keyed(doc.text, label)}
    return next(iter(values.values())) if len(values) == 1 else None


def unkeyed_parties(doc: Document, extraction: Extraction) -> set[str]:
    """Party labels answered with values that are not the name their key line gives: the text states
    the role itself, and the shipped model swapped the parties or took a name from elsewhere (the
    signer's for the company: 甲方 Kevin 刘 beside 委托方（甲方）：苏州青羽智能科技有限公司)."""
    wrong = set()
    for label in PARTY_LABELS & set(doc.labels):
        keyed = keyed_value(doc, label)
        answered = {"".join(s.text.split()) for s in extraction.fields.get(label, [])}
        if keyed is not None and answered and "".join(keyed.split()) not in answered:
            wrong.add(label)
    return wrong


def reopen_unkeyed_parties(doc: Document, extraction: Extraction) -> set[str]:
    """`unkeyed_parties` answered `None` again, each beside an `unclaimed_value` reason that keeps what
    the model said, so that the backoff asks for them (offered the key line's name, see
    `candidates.offered`). Done before the open labels are found: a reopened party is one of them."""
    reopened = unkeyed_parties(doc, extraction) if doc.task == "extract" else set()
    for label in sorted(reopened):
        keyed = keyed_value(doc, label)
        answered = [s.text for s in extraction.fields.pop(label)]
        extraction.reasons.append(
            ReviewReason(
                code=ReviewCode.UNCLAIMED_VALUE,
                detail=f"the text's key line names {keyed!r} for this label; the model answered {answered}",
                label=label,
                value=keyed,
            )
        )
    return reopened
