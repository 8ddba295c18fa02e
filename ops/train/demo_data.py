"""What the demo model is trained on: a stream of fresh labelled prompts, one batch per step.

The first demo model saw every field set's labels, in order, on whole templated documents, and
so never learnt to say `None` where a window of a long document lacks the value: it guessed. Here
each step mixes three sources and asks about them as the product will, and more:

- open-vocabulary documents (ops/corpus/open_layouts.py): values built from parts (surnames and
  common hanzi, place + word + trade + legal form, jieba's dictionary) in key-value lines, slash- and
  pipe-separated ads, flattened tables, chat, e-mails, and prose with other roles' names beside the
  value; in 40% of them Latin-script and mixed names, English legal forms, addresses, dates in many
  forms and scan damage (ops/corpus/mixed_script.py);
- templated documents (ops/corpus/contract.py ...), brief or full, as before;
- free-phrased documents (ops/corpus/free.py): shuffled sentences, many wordings, values often left out;
- fragments as windows see them: a long document (ops/corpus/long.py) or a full one cut at sentence
  ends (model/windows/split.py cuts there too), values outside the cut answered `None`.

Label sets: the field set in its order (as the product asks) or shuffled, sometimes a few labels
left out, sometimes labels the document cannot hold (other kinds' labels, labels of no kind) mixed
in and answered `None`. Everything is a function of (seed, step): a resumed run sees the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from model.windows.split import SENTENCE_ENDS
from ops.corpus import KINDS, GeneratedDocument, generate_document
from ops.corpus.long import LONG_KINDS
from ops.train.recipe import TrainingExample, training_examples
from schemas.field_sets import FIELD_SETS
from schemas.messages import Document

# Labels no generated document holds a value for, whatever its kind.
UNHELD_LABELS = (
    "银行账号", "邮政编码", "传真号码", "车牌号码", "股票代码", "血型", "婚姻状况", "产品型号", "注册资本",
    "航班号", "快递单号", "税率", "开户行", "保险单号", "民族", "籍贯", "政治面貌", "身高", "专利号", "门牌号",
)  # fmt: skip
# Other kinds' labels that no document of another kind can hold (a contract has no diagnosis); the
# generic ones (人物, 地点, 性别, 联系电话 ...) are left out, as a document of any kind may hold them.
KIND_ONLY_LABELS = {
    "contract": ("签约日期", "合同金额", "合同期限", "签约地点"),
    "job_ad": ("薪资范围", "学历要求", "职位名称"),
    "resume": ("出生日期", "电子邮箱", "毕业院校"),
    "news": ("发布日期", "发布机构", "事件"),
    "medical": ("诊断结果", "主治医师", "就诊日期", "医院名称", "患者姓名"),
}
Values = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class DataMix:
    """Shares of each step's candidate documents and of the ways they are asked about."""

    open: float = 0.35
    free: float = 0.4  # of the rest after open-vocabulary documents
    fragment: float = 0.25  # of the rest after free documents: cut documents
    shuffled: float = 0.5
    dropped: float = 0.2
    foreign: float = 0.4
    # Of each step's candidates, drawn from a labelled corpus given to the run (`--corpus`: e.g. the
    # review desk's decisions, `seqstream-ops corpus from-reviews`); no draw at all without one.
    reviewed: float = 0.2


def asked_labels(kind: str, rng: random.Random, mix: DataMix) -> list[str]:
    labels = list(FIELD_SETS[kind])  # type: ignore[index]
    if rng.random() < mix.dropped:
        for _ in range(rng.randrange(1, 3)):
            labels.remove(rng.choice(labels))
    if rng.random() < mix.foreign:
        others = [label for other, own in KIND_ONLY_LABELS.items() if other != kind for label in own]
        pool = [label for label in [*others, *UNHELD_LABELS] if label not in FIELD_SETS[kind]]  # type: ignore[index]
        labels += rng.sample(pool, rng.randrange(1, 4))
        rng.shuffle(labels)  # a foreign label last every time would be a cue
    elif rng.random() < mix.shuffled:
        rng.shuffle(labels)
    return labels


def fragment(doc: GeneratedDocument, rng: random.Random, longest: int) -> tuple[str, dict[str, list[str]]]:
    """A cut of `doc` of at most `longest` characters, starting and ending after sentence ends where
    there are any (a window's cut snaps to them), with the values wholly inside it."""
    text = doc.text
    size = rng.randrange(min(120, longest), longest + 1)
    ends = [i + 1 for i, char in enumerate(text) if char in SENTENCE_ENDS]
    starts = [0, *(e for e in ends if e <= len(text) - size)]
    start = rng.choice(starts)
    stops = [e for e in ends if start < e <= start + size]
    end = max(stops) if stops and rng.random() < 0.8 else min(len(text), start + size)
    inside = {label: [s.text for s in spans if start <= s.start and s.end <= end] for label, spans in doc.truth.items()}
    return text[start:end], inside


def labelled(doc_id: str, text: str, kind: str, values: Values, rng: random.Random, mix: DataMix):
    labels = asked_labels(kind, rng, mix)
    document = Document(doc_id=doc_id, text=text, task="extract", labels=tuple(labels), field_set=kind)
    return document, {label: list(values.get(label, ())) for label in labels}


class DocumentStream:
    """Step -> batch: fresh documents from the mix, brief or full by the curriculum (`plan`:
    ops.train.demo_model.DemoPlan), as many rows of similar length as fit the token budget."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        plan,
        seed: int,
        mix: DataMix = DataMix(),
        corpus: Sequence[GeneratedDocument] = (),
    ) -> None:
        self.tokenizer, self.plan, self.seed, self.mix, self.corpus = tokenizer, plan, seed, mix, corpus
        self.kinds = sorted(KINDS)

    def full_share(self, step: int) -> float:
        return self.plan.full_share * min(1.0, step / max(1, self.plan.curriculum_steps))

    def max_chars(self, step: int) -> int:
        progress = min(1.0, step / max(1, self.plan.curriculum_steps))
        return int(self.plan.first_full_chars + (self.plan.max_train_chars - self.plan.first_full_chars) * progress)

    def candidate(self, rng: random.Random, index: int, brief: bool, limit: int):
        """A labelled document no longer than `limit` characters, or None when the one drawn is longer."""
        kind = rng.choice(self.kinds)
        mix = self.mix
        if self.corpus and rng.random() < mix.reviewed:
            doc = self.corpus[index % len(self.corpus)]
            if len(doc.text) > limit:
                return None
            field_set = doc.kind if doc.kind in FIELD_SETS else None
            document = Document(
                doc_id=doc.doc_id, text=doc.text, task="extract", labels=tuple(doc.truth), field_set=field_set
            )
            return document, doc.values()
        if rng.random() < mix.open:
            doc = generate_document(kind, self.seed, index, open_vocab=True)
            text, values = doc.text, doc.values()
        elif rng.random() < mix.free:
            doc = generate_document(kind, self.seed, index, free=True, brief=brief or rng.random() < 0.5)
            text, values = doc.text, doc.values()
        elif rng.random() < mix.fragment:
            if kind in LONG_KINDS and rng.random() < 0.7:
                doc = generate_document(kind, self.seed, index, long=True, chars=rng.randrange(3000, 6000))
            else:
                doc = generate_document(kind, self.seed, index)
            text, values = fragment(doc, rng, limit)
        else:
            doc = generate_document(kind, self.seed, index, brief=brief)
            text, values = doc.text, doc.values()
        if len(text) > limit:
            return None
        return labelled(doc.doc_id, text, kind, values, rng, mix)

    def __call__(self, step: int) -> list[TrainingExample]:
        rng = random.Random(self.seed * 1_000_003 + step)
        brief = rng.random() >= self.full_share(step)
        limit = self.plan.brief_chars if brief else self.max_chars(step)
        recipe = self.plan.recipe
        rows: list[TrainingExample] = []
        candidates = self.plan.max_candidates
        for index in range(step * candidates, (step + 1) * candidates):
            drawn = self.candidate(rng, index, brief, limit)
            if drawn is None:
                continue
            new = training_examples(self.tokenizer, [drawn], recipe.labels_per_prompt, recipe.max_input_tokens)
            longest = max(len(e.prompt) + len(e.answer) for e in [*rows, *new])
            if rows and longest * (len(rows) + len(new)) > self.plan.batch_tokens:
                return rows
            rows.extend(new)
        raise RuntimeError(f"step {step}: {candidates} documents drawn and the batch is not full")
