"""Contract parties against their key lines: where the text states a party's role on its own line
(委托方（甲方）：…, │ 用人单位 │ …, Party A: …), the name there is the party's value.

The shipped model's parties were wrong in 10 of the 12 hand-written contracts that have such lines
(in 5 it swapped the two); a party answered otherwise is asked again by the backoff.
"""

from __future__ import annotations

from model.answers.checks import PARTY_LABELS
from model.answers.validate import Extraction
from model.answers.words import FUNCTION_TAGS, words_of
from model.values.cues import keyed
from model.values.lexicon import organisation_ok
from model.values.mentions import mentions
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


# Tags of words that may be a party's name, or its start: people, organisations, other proper nouns,
# unknown and Latin words.
_NAME_TAGS = ("nr", "nt", "nz", "x", "eng")


def nameless_parties(doc: Document, extraction: Extraction) -> None:
    """A `type_mismatch` reason for each party value that names no one: one character (方), no
    letter (2024), one word of the dictionary that is no name (关于, 费用, 西安市), or a value led by
    a function word (和长沙). The shipped model answered such values for 8 parties of the hand-written
    corpora; with every value of a label so flagged, the backoff asks for it again."""
    if doc.task != "extract":
        return
    words = words_of(doc.text).tagged
    written = mentions(doc.text)
    names = (*written["person"], *written["organisation"])
    for label in sorted(PARTY_LABELS & set(doc.labels)):
        for span in extraction.fields.get(label, []):
            # A name cut short (江苏 of 江苏苏电智慧能源有限公司) is extended, not replaced; a company's
            # name reads as one whatever its first word (同 of 同兴万点科技有限公司 is tagged a preposition).
            cut = any(len(n) > len(span.text) and doc.text.startswith(n, span.start) for n in names)
            if cut or organisation_ok(span.text) or _names_someone(span.text.strip(), span.start, words):
                continue
            extraction.reasons.append(
                ReviewReason(
                    code=ReviewCode.TYPE_MISMATCH,
                    detail=f"{span.text!r} names no person or organisation",
                    label=label,
                    value=span.text,
                )
            )


def _names_someone(value: str, start: int, words: tuple[tuple[int, int, str], ...]) -> bool:
    if len(value) < 2 or not any(c.isalpha() for c in value):
        return False
    at = [(s, e, flag) for s, e, flag in words if start <= s < start + len(value)]
    if not at or at[0][0] != start:
        return True  # the value starts inside a word: the segmentation has nothing to say
    first_start, first_end, flag = at[0]
    if first_end - first_start == 1 and flag.startswith(FUNCTION_TAGS) and len(at) > 1:
        return False
    return not (len(at) == 1 and at[0][1] == start + len(value) and not flag.startswith(_NAME_TAGS))
