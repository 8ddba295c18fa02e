"""Which lexicon-backoff picks may go to the fields topic: the check that vouches for a pick.

The backoff (model/answers/backoff.py) makes the model choose among candidates where it answered
`None`; the model's share among them says nothing about whether the pick is right (issue 31: 0.99
or more for right and wrong picks alike). What does, measured on the hand-written corpora with the
shipped model (`python -m ops.eval.gate` prints the picks by source, candidates, route and right or not):

| picks of the shipped model, right / wrong         | freeform | layouts | mixed (held out) |
| ------------------------------------------------- | -------- | ------- | ---------------- |
| a LAC entity, the only candidate                  | 38 / 7   | 20 / 11 | 11 / 14          |
| a LAC entity, among several                       | 9 / 10   | 19 / 30 | 10 / 43          |
| the organisation detector's                       | 1 / 8    | 5 / 2   | 0 / 5            |
| the amount detector's, the only candidate         | 4 / 0    | 4 / 1   | 2 / 2            |
| a phone, e-mail or date detector's, among several | 2 / 1    | 2 / 0   | 3 / 0            |
| a phone, e-mail or date detector's, the only one  | 5 / 0    | 17 / 0  | 6 / 0            |

So a pick is vouched for when it is the label's only candidate, found by the typed detector of the
label's own type (a phone for a phone label, not LAC's `TIME` for a date label), that type is a
phone, an e-mail or a date, and the value reads as that type (its normal form). A date LAC's `TIME`
tags with the same span keeps LAC as its source (`offered` lists LAC's first) and is not vouched:
that is how it was measured; re-measure before crediting the detector there too. The rule was fitted
on freeform and layouts (22 picks vouched, 0 wrong) and checked on mixed (6 vouched, 0 wrong).
Amounts are left out: a detector's amount may lack the currency or the figure's head written before
it (每年二十万元, 美元肆万伍仟元整, an OCR break inside 人民币叁拾\\n陆万元整), 1 wrong of 9 in the fit.
Zero wrong of 28 bounds the wrong share at about 11% (rule of three), not at 2%: the rule is
narrow on purpose, and a wider one needs more hand-written picks to measure. Re-measured after phones,
dates and e-mails broken by OCR became mentions (599bb8c): 5 / 17 / 11 picks vouched on freeform /
layouts / mixed, 0 wrong (33 in all: the bound is about 9%). A cue's lone pick (a form's keyed values,
model/values/forms.py, among them) is not vouched: right 81 times, wrong 4 (5%).
"""

from __future__ import annotations

from collections.abc import Sequence

from model.values.normalize import Mismatch, normal_form
from schemas.messages import Candidate, Document

# The detector types whose lone candidate is vouched for (see the table above).
VOUCHED_TYPES = frozenset({"phone", "email", "date"})


def vouched(doc: Document, label: str, candidates: Sequence[Candidate]) -> bool:
    """Whether the backoff's pick for `label` (its only candidate) may go to fields on its own."""
    kind = doc.field_types.get(label)
    if kind not in VOUCHED_TYPES or len(candidates) != 1:
        return False
    [pick] = candidates
    outcome = normal_form(kind, pick.text)
    return pick.source == kind and outcome is not None and not isinstance(outcome, Mismatch)
