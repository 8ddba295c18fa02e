"""The word segmentation (model/answers/tagger.py: jieba-rs for blocks of Han characters, the
compiled part-of-speech Viterbi) cuts and tags every text as jieba does."""

from __future__ import annotations

import json
from pathlib import Path

import jieba.posseg
import pytest

from model.answers.tagger import _HAN, _NATIVE, _native_route, tagger, viterbi
from model.answers.words import _segment, _segmenters
from ops.demo.samples import sample_documents

CORPORA = sorted(p for p in Path("ops/corpus").glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))


def _texts() -> list[str]:
    hand_written = [json.loads(line)["text"] for path in CORPORA for line in path.read_text().splitlines() if line]
    generated = [raw["text"] for raw, _ in sample_documents(150, seed=3)]
    return hand_written + generated


def test_every_corpus_is_cut_and_tagged_as_jieba_does_it() -> None:
    """Ours (the cutter, then the tagger, sharing each block's route, as words_of runs them) against
    jieba's own cutter and tagger over a tokenizer of its own."""
    tokenizer, ours = _segmenters()
    plain = jieba.Tokenizer()
    theirs = jieba.posseg.POSTokenizer(plain)
    texts = _texts()
    assert len(texts) > 250
    differing = [
        t
        for t in texts
        if list(tokenizer.cut(t, HMM=True)) != list(plain.cut(t, HMM=True))
        or [(p.word, p.flag) for p in ours.cut(t)] != [(p.word, p.flag) for p in theirs.cut(t)]
    ]
    assert differing == []


@pytest.mark.parametrize("run", ["张", "宋志远", "恒信精密机械", "罗文斌在浦东新区张江路", "的的的的"])
def test_the_route_is_jiebas_route(run: str) -> None:
    from jieba.posseg import char_state_tab, prob_emit, prob_start, prob_trans

    _, expected = jieba.posseg.viterbi(run, char_state_tab.P, prob_start.P, prob_trans.P, prob_emit.P)
    assert viterbi(run) == expected


def test_random_runs_take_jiebas_route() -> None:
    """Runs of common characters and of characters jieba's tables lack (every emission the floor,
    where ties between states decide), seeded: the compiled Viterbi's route is jieba's for each."""
    import random

    from jieba.posseg import char_state_tab, prob_emit, prob_start, prob_trans

    rng = random.Random(7)
    common = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    rare = "龘靐齉爩鱻麤䶮㐀"
    for _ in range(400):
        run = "".join(rng.choice(common if rng.random() < 0.8 else rare) for _ in range(rng.randint(1, 9)))
        _, expected = jieba.posseg.viterbi(run, char_state_tab.P, prob_start.P, prob_trans.P, prob_emit.P)
        assert viterbi(run) == expected, run


def test_the_tagger_is_a_jieba_tokenizer() -> None:
    tokenizer, _ = _segmenters()
    assert isinstance(tagger(tokenizer), jieba.posseg.POSTokenizer)


def test_blocks_of_han_characters_are_cut_natively_and_the_others_by_jieba() -> None:
    tokenizer, _ = _segmenters()
    assert tokenizer.get_DAG("罗文斌在浦东新区张江路") is _NATIVE
    assert tokenizer.get_DAG("TI-RADS3类") is not _NATIVE
    tokenizer.forget()


def _words(block: str, route: dict[int, tuple[float, int]]) -> list[str]:
    words, at = [], 0
    while at < len(block):
        words.append(block[at : route[at][1] + 1])
        at += len(words[-1])
    return words


def test_a_block_with_digits_or_letters_takes_jiebas_route_read_off_jieba_rs() -> None:
    tokenizer, _ = _segmenters()
    # jieba's blocks (what its cutters cut with the dictionary) that are not Han characters alone.
    blocks = {b for t in _texts() for b in jieba.re_han_default.findall(t) if not _HAN.fullmatch(b)}
    blocks |= {"于2020年7月16日在南京签订本合同", "TI-RADS3类", "薪资12-34K", "iPhone15", "B超", "3D打印", "2型糖尿病"}
    assert len(blocks) > 500
    for block in sorted(blocks):
        dag, expected = jieba.Tokenizer.get_DAG(tokenizer, block), {}
        jieba.Tokenizer.calc(tokenizer, block, dag, expected)
        assert _words(block, _native_route(block, tokenizer.FREQ)) == _words(block, expected), block
    # A run of letters that is a dictionary word may be one step or several: jieba's own code decides.
    assert _native_route("担任CEO职务", {**tokenizer.FREQ, "CEO": 3}) is None
    assert _native_route("担任CEO职务", tokenizer.FREQ) is not None


def test_an_empty_text_has_its_one_edge_and_no_words() -> None:
    words = _segment("")
    assert words.edges == frozenset({0}) and words.tagged == () and words.persons == ()
