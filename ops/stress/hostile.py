"""Hostile raw-topic messages: hypothesis strategies for the unit fuzz test, and a seeded generator
of the same kinds for the end-to-end run (hypothesis would shrink by rerunning a broker test).

Kinds: arbitrary bytes, arbitrary JSON, JSON nested thousands deep, strings near and over the size
limit, control characters, and SeqGPT's own prompt syntax (newline, colons, the full-width comma,
`[GEN]`, `输出:`) inside the text and the labels.
"""

from __future__ import annotations

import json
import random

from hypothesis import strategies as st

# What SeqGPT's prompt `输入: {text}\n抽取: {labels}\n输出: [GEN]` is made of, plus what terminals,
# parsers and byte-order logic stumble on.
PROMPT_PIECES = ["\n", ":", "：", "，", "\t", "\r", "[GEN]", "输出: ", "输入: ", "抽取: ", "分类: ", "None", " "]
CONTROL_PIECES = ["\x00", "\x07", "\x1b[31m", "\u202e", "\ufeff", "\u2028", "\x7f", "\ud7ff", "\U0010ffff"]
TEXT_PIECES = ["甲方", "乙方", "王伟", "2024年3月5日", "上海", "合同", "a", "0"]
PIECES = PROMPT_PIECES + CONTROL_PIECES + TEXT_PIECES


def _deep(depth: int, opener: str, closer: str) -> str:
    return opener * depth + closer * depth


# -------------------------------------------------------------- hypothesis strategies

hostile_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=40).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def document_like(draw: st.DrawFn) -> bytes:
    """Shaped like a raw document, with hostile values where the fields are."""
    doc: dict[str, object] = {"doc_id": draw(st.text(min_size=1, max_size=12) | hostile_text)}
    if draw(st.booleans()):
        doc["text"] = draw(hostile_text)
    if draw(st.booleans()):
        doc["labels"] = draw(st.lists(hostile_text, max_size=5) | json_values)
    else:
        doc["field_set"] = draw(st.sampled_from(["contract", "resume", "news", "nope", ""]))
    if draw(st.booleans()):
        doc["metadata"] = draw(json_values)
    if draw(st.booleans()):
        doc["task"] = draw(st.sampled_from(["extract", "classify", "EXTRACT", ""]))
    return json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@st.composite
def deep_json(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(100, 20_000))
    nested = _deep(depth, *draw(st.sampled_from([("[", "]"), ('{"a":', "}")])))
    where = draw(st.sampled_from(["bare", "metadata", "labels", "text"]))
    if where == "bare":
        return nested.encode()
    return f'{{"doc_id": "deep", "text": "正文", "{where}": {nested}}}'.encode()


@st.composite
def huge_string(draw: st.DrawFn, limit: int) -> bytes:
    size = draw(st.sampled_from([limit - 200, limit - 1, limit, limit + 1, 4 * limit]))
    filler = draw(st.sampled_from(["长", "a", "\\u0000", "\n"]))
    text = filler * max(size // len(filler.encode()), 1)
    return json.dumps({"doc_id": "huge", "text": text, "labels": ["甲方"]}, ensure_ascii=False).encode()


def hostile_messages(limit: int) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        document_like(),
        deep_json(),
        huge_string(limit),
    )


# ------------------------------------------------------------ seeded generator (end to end)


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def seeded_hostile_messages(n: int, seed: int, limit: int) -> list[bytes]:
    """`n` distinct hostile messages; each kind in turn, randomised by `seed`."""
    rng = random.Random(seed)
    out: list[bytes] = []
    for i in range(n):
        kind = i % 8
        doc_id = f"h{seed}-{i}"
        if kind == 0:  # arbitrary bytes, made unique by their index
            value = f"{i}:".encode() + rng.randbytes(rng.randint(0, 200))
        elif kind == 1:  # prompt syntax and control characters in the text, plain labels
            value = _dump({"doc_id": doc_id, "text": "合同" + _text(rng, 30), "labels": ["甲方", "签约日期"]}, rng)
        elif kind == 2:  # the same in the labels
            labels = list(dict.fromkeys(_text(rng, rng.randint(1, 4)) for _ in range(rng.randint(1, 4))))
            value = _dump({"doc_id": doc_id, "text": _text(rng, 20) + "正文", "labels": labels}, rng)
        elif kind == 3:  # deep JSON
            depth = rng.randint(1_000, 50_000)
            value = f'{{"doc_id": "{doc_id}", "text": "正文", "metadata": {_deep(depth, "[", "]")}}}'.encode()
        elif kind == 4:  # around the size limit
            size = rng.choice([limit - 300, limit + 1, 3 * limit])
            value = _dump({"doc_id": doc_id, "text": "长" * (size // 3), "labels": ["甲方"]}, rng)
        elif kind == 5:  # wrong shapes
            value = _dump(rng.choice([[doc_id], doc_id, {"doc_id": doc_id, "text": [1]}, {"doc_id": doc_id}]), rng)
        elif kind == 6:  # control characters in doc_id and metadata
            value = _dump({"doc_id": doc_id + rng.choice(CONTROL_PIECES), "text": "正文", "field_set": "contract"}, rng)
        else:  # invalid UTF-8 and lone surrogates inside otherwise valid JSON
            bad = rng.choice([b"\xff\xfe", b"\xc3\x28", b"\\ud800", b"\xed\xa0\x80"])
            value = b'{"doc_id": "' + doc_id.encode() + b'", "text": "x' + bad + b'", "labels": ["a"]}'
        out.append(value)
    assert len(set(out)) == len(out)
    return out


def _dump(value: object, rng: random.Random) -> bytes:
    return json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
