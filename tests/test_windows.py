"""Long documents read in windows: the split and the merge as pure functions, then the real engine path."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.answers.validate import AlarmedStep, DecodeTrace, Extraction
from model.config import EngineSettings
from model.signals import Generation
from model.windows.engine import schedule
from model.windows.merge import merge_windows
from model.windows.split import SENTENCE_ENDS, Window, split_text
from schemas.messages import ReviewCode, ReviewReason, Span

FILLER = "合同甲乙方应当依法履行义务本条款未尽事宜按国家有关规定执行"
VALUES = ["张伟", "上海恒达物流有限公司", "2024年3月15日"]
MERGE_SETTINGS = EngineSettings(path="unused", confidence_threshold=0.85, entropy_threshold=2.5)


def _no_decode(token_ids) -> str:
    raise AssertionError("these extractions have no alarmed steps to spell")


@st.composite
def tokenised_texts(draw, min_chars: int = 1, max_chars: int = 400) -> tuple[str, list[int]]:
    """A text of filler and sentence ends, and a tokenisation of it (1-3 characters a token)."""
    alphabet = st.sampled_from([*FILLER, *SENTENCE_ENDS])
    text = draw(st.text(alphabet, min_size=min_chars, max_size=max_chars))
    return text, draw(tokenisations(text))


@st.composite
def tokenisations(draw, text: str) -> list[int]:
    ends, at = [], 0
    while at < len(text):
        at = min(at + draw(st.integers(1, 3)), len(text))
        ends.append(at)
    return ends


def tokens_in(ends: list[int], start: int, end: int) -> int:
    """Tokens with at least one character in [start, end)."""
    starts = [0, *ends[:-1]]
    return sum(1 for s, e in zip(starts, ends, strict=True) if s < end and e > start)


@settings(max_examples=300, deadline=None)
@given(tokenised_texts(), st.integers(2, 60), st.integers(0, 40))
def test_windows_cover_the_text_within_the_budget_and_overlap(text_and_ends, budget: int, overlap: int) -> None:
    text, ends = text_and_ends
    windows = split_text(text, ends, budget, overlap)
    assert windows[0].start == 0 and windows[-1].end == len(text)
    for w in windows:
        assert w.start < w.end and tokens_in(ends, w.start, w.end) <= budget
        assert w.start <= w.own_start <= w.own_end <= w.end
    assert windows[0].own_start == 0 and windows[-1].own_end == len(text)
    for before, after in pairwise(windows):
        assert before.start < after.start <= before.end < after.end  # each window adds text, none is skipped
        assert after.start < before.end or min(overlap, budget // 2) == 0
        assert before.own_end == after.own_start
    # Any run of up to (overlap - 1) tokens lies whole in some window.
    overlap = min(overlap, budget // 2)
    starts = [0, *ends[:-1]]
    for first in range(len(ends)):
        last = min(first + max(overlap - 1, 1), len(ends)) - 1
        lo, hi = starts[first], ends[last]
        assert any(w.start <= lo and hi <= w.end for w in windows), (lo, hi)


def test_a_cut_lands_after_a_sentence_end_near_it() -> None:
    text = "甲" * 50 + "。" + "乙" * 60
    windows = split_text(text, list(range(1, len(text) + 1)), budget=56, overlap=8)
    assert windows[0].end == 51  # after the 。, not at the 56th character
    assert text[windows[1].start - 1] in SENTENCE_ENDS or windows[1].start == 51 - 8


def window_extraction(doc_text: str, window: Window, label: str, values: list[str], confidence: float) -> Extraction:
    """What a model that copies perfectly reports for one window: every value it sees whole at its
    first place in the window, and the visible part of a value the window's end cuts through."""
    text = doc_text[window.start : window.end]
    spans = []
    for value in values:
        at = text.find(value)
        if at >= 0:
            spans.append(Span(text=value, start=at, end=at + len(value), confidence=confidence, margin=0.5))
            continue
        global_at = doc_text.find(value)
        if global_at < window.end < global_at + len(value):  # cut by this window's end
            part = doc_text[global_at : window.end]
            local = global_at - window.start
            spans.append(Span(text=part, start=local, end=local + len(part), confidence=confidence, margin=0.5))
    return Extraction(doc_id="d", fields={label: spans})


@st.composite
def long_documents(draw):
    """Filler with a value at the head, one across the first window's end and one at the tail.

    Characters are tokens here and the filler has no sentence end, so the first window ends at
    character `budget` exactly (the split's snapping is the test above's business).
    """
    budget = draw(st.integers(30, 80))
    overlap = draw(st.integers(12, budget // 2))
    filler = draw(st.text(st.sampled_from(FILLER), min_size=3 * budget, max_size=8 * budget))
    head, across, tail = VALUES
    at = budget - draw(st.integers(1, len(across) - 1))  # starts before the cut, ends after it
    body = filler[: at - len(head)] + across + filler[at - len(head) :]
    return head + body + tail, budget, overlap


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_documents(), st.sampled_from([0.9, 0.99]))
def test_values_at_the_head_across_a_boundary_and_at_the_tail_are_found_once(document, confidence: float) -> None:
    text, budget, overlap = document
    windows = split_text(text, list(range(1, len(text) + 1)), budget, overlap)
    across = text.find(VALUES[1])
    assert across < windows[0].end < across + len(VALUES[1])
    parts = [window_extraction(text, w, "人物", VALUES, confidence) for w in windows]
    for w, part in zip(windows, parts, strict=True):  # each window's spans read its own text
        assert all(text[w.start + s.start : w.start + s.end] == s.text for s in part.fields["人物"])
    merged = merge_windows("d", ("人物",), windows, parts, frozenset(), MERGE_SETTINGS, _no_decode)
    spans = merged.fields["人物"]
    assert sorted(s.text for s in spans) == sorted(VALUES)  # each once, no cut-off fragment
    for span in spans:
        assert text[span.start : span.end] == span.text and span.start == text.find(span.text)
        window = windows[span.window]
        assert window.start <= span.start and span.end <= window.end


def span(text: str, start: int, confidence: float) -> Span:
    return Span(text=text, start=start, end=start + len(text), confidence=confidence, margin=0.1)


def test_a_single_value_label_keeps_its_most_confident_candidate_and_the_others_as_alternatives() -> None:
    text = "甲方：恒达公司。" + "条款" * 20 + "甲方：远航公司。"
    windows = [Window(0, 30, 0, 24), Window(18, len(text), 24, len(text))]
    first = Extraction(doc_id="d", fields={"甲方": [span("恒达公司", 3, 0.97)], "人物": [span("恒达", 3, 0.9)]})
    second = Extraction(
        doc_id="d", fields={"甲方": [span("远航公司", 45 - 18, 0.91)], "人物": [span("远航", 27, 0.95)]}
    )
    merged = merge_windows("d", ("甲方", "人物"), windows, [first, second], {"甲方"}, MERGE_SETTINGS, _no_decode)
    assert [(s.text, s.start, s.window) for s in merged.fields["甲方"]] == [("恒达公司", 3, 0)]
    assert [(s.text, s.start, s.window) for s in merged.alternatives["甲方"]] == [("远航公司", 45, 1)]
    assert [s.text for s in merged.fields["人物"]] == ["恒达", "远航"]  # several values: the union
    unsure = Extraction(doc_id="d", fields={"人物": [span("远航", 27, 0.4)]})
    merged = merge_windows("d", ("人物",), windows, [first, unsure], set(), MERGE_SETTINGS, _no_decode)
    assert [s.text for s in merged.fields["人物"]] == ["恒达"]  # a guess below the threshold is no field
    assert [(s.text, s.window) for s in merged.alternatives["人物"]] == [("远航", 1)]


def test_the_same_span_from_two_windows_counts_once_and_overlaps_go_to_the_owning_window() -> None:
    text = "前言" * 10 + "北京市朝阳区人民医院" + "后记" * 10
    windows = [Window(0, 28, 0, 24), Window(20, len(text), 24, len(text))]
    # The first window sees the name cut by its end; the second sees it whole, in the part it owns.
    first = Extraction(doc_id="d", fields={"医院名称": [span("北京市朝阳区人", 20, 0.99)]})
    second = Extraction(doc_id="d", fields={"医院名称": [span("北京市朝阳区人民医院", 0, 0.9)]})
    merged = merge_windows("d", ("医院名称",), windows, [first, second], frozenset(), MERGE_SETTINGS, _no_decode)
    assert [(s.text, s.start) for s in merged.fields["医院名称"]] == [("北京市朝阳区人民医院", 20)]
    same = merge_windows("d", ("医院名称",), windows, [second, second], frozenset(), MERGE_SETTINGS, _no_decode)
    assert len(same.fields["医院名称"]) == 1


def test_reasons_about_a_candidate_the_merge_dropped_go_with_it() -> None:
    text = "张伟" + "。" * 40 + "张伟"
    windows = [Window(0, 30, 0, 21), Window(12, len(text), 21, len(text))]
    low = ReviewReason(code=ReviewCode.LOW_CONFIDENCE, detail="confidence 0.5", label="姓名", value="李雷")
    incomplete = ReviewReason(code=ReviewCode.INCOMPLETE_OUTPUT, detail="prompt 0 hit the limit")
    first = Extraction(doc_id="d", fields={"姓名": [span("张伟", 0, 0.99)]}, reasons=[incomplete])
    repeat = ReviewReason(code=ReviewCode.LOW_CONFIDENCE, detail="confidence 0.5", label="姓名", value="张伟")
    second = Extraction(doc_id="d", fields={"姓名": [span("张伟", 30, 0.5)]}, reasons=[low, repeat])
    merged = merge_windows("d", ("姓名",), windows, [first, second], {"姓名"}, MERGE_SETTINGS, _no_decode)
    assert [(s.text, s.start) for s in merged.fields["姓名"]] == [("张伟", 0)]  # a repeated mention is one value
    assert [r.code for r in merged.reasons] == [ReviewCode.INCOMPLETE_OUTPUT]
    assert "window 1 of 2" in merged.reasons[0].detail


def test_first_windows_go_before_any_long_documents_further_windows() -> None:
    calls = schedule([5, 1, 1, 3], budget=4)
    assert calls[0] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert [pair for call in calls for pair in call][4:] == [(0, 1), (0, 2), (0, 3), (0, 4), (3, 1), (3, 2)]
    assert all(len(call) <= 4 for call in calls)
    assert sorted(p for call in calls for p in call) == sorted(
        (d, w) for d, n in enumerate([5, 1, 1, 3]) for w in range(n)
    )


def test_a_window_s_alarms_stand_only_for_what_the_merged_record_keeps() -> None:
    """Window 0 holds 甲方's value; window 1 has none and guesses (kept there, an alternative after the
    merge) and hesitates over 人物, which no window finds. Only the kept value's and the undecided
    label's alarmed steps stay, numbered across the document's prompts."""
    text = "甲方：恒达公司。" + "条款" * 20 + "远航。"
    windows = [Window(0, 30, 0, 24), Window(18, len(text), 24, len(text))]
    flat = Generation(
        token_ids=list(range(10, 20)), probs=[0.5] * 10, entropies=[3.0] * 10, top_ids=[[1, 2]] * 10,
        top_probs=[[0.5, 0.2]] * 10, finished=True,
    )  # fmt: skip
    trace = DecodeTrace(("甲方", "人物"), flat, ["x"] * 10)
    first = Extraction(
        doc_id="d",
        fields={"甲方": [span("恒达公司", 3, 0.97)], "人物": []},
        alarmed=[AlarmedStep(3.0, 0, 1, "甲方", "恒达公司"), AlarmedStep(3.0, 0, 6, "人物", None)],
        traces=[trace],
    )
    second = Extraction(
        doc_id="d",
        fields={"甲方": [span("远航", 45 - 18, 0.6)], "人物": []},
        alarmed=[
            AlarmedStep(3.1, 0, 1, "甲方", "远航"),  # the guess's token
            AlarmedStep(3.2, 0, 2, "甲方", None),  # a value start that was not kept
            AlarmedStep(3.3, 0, 7, "人物", None),
        ],
        traces=[trace],
    )
    merged = merge_windows(
        "d", ("甲方", "人物"), windows, [first, second], {"甲方"}, MERGE_SETTINGS, lambda ids: f"<{ids[0]}>"
    )
    assert [s.text for s in merged.fields["甲方"]] == ["恒达公司"]
    assert [s.text for s in merged.alternatives["甲方"]] == ["远航"]
    kept = [(a.chunk, a.step, a.label, a.value) for a in merged.alarmed]
    assert kept == [(0, 1, "甲方", "恒达公司"), (0, 6, "人物", None), (1, 7, "人物", None)]
    assert merged.alarmed_steps == 3
    assert [(a.chunk, a.step, a.chosen.text) for a in merged.alarms] == [(0, 1, "<11>"), (0, 6, "<16>"), (1, 7, "<17>")]
    [reason] = [r for r in merged.reasons if r.code is ReviewCode.ENTROPY_ALARM]
    assert reason.detail.startswith("3 deciding decode steps")
    # With the kept value sure and no label left undecided, the window's guess alone raises no alarm.
    first.alarmed, second.alarmed = [], second.alarmed[:2]
    quiet = merge_windows("d", ("甲方", "人物"), windows, [first, second], {"甲方"}, MERGE_SETTINGS, _no_decode)
    assert quiet.alarmed == [] and quiet.alarms == [] and not quiet.needs_review


def test_a_window_s_document_checks_are_dropped_in_the_merge() -> None:
    """A window without a label's value is no empty record: the document checks judge the merged record."""
    text = "张伟" + "。" * 40 + "张伟"
    windows = [Window(0, 30, 0, 21), Window(12, len(text), 21, len(text))]
    empty = ReviewReason(code=ReviewCode.EMPTY_RECORD, detail="0 of 1 labels have a value")
    unclaimed = ReviewReason(code=ReviewCode.UNCLAIMED_VALUE, detail="a phone", label="电话", value="13800138000")
    first = Extraction(doc_id="d", fields={"姓名": [span("张伟", 0, 0.99)]}, reasons=[unclaimed])
    second = Extraction(doc_id="d", fields={"姓名": []}, reasons=[empty])
    merged = merge_windows("d", ("姓名",), windows, [first, second], {"姓名"}, MERGE_SETTINGS, _no_decode)
    assert merged.reasons == []
