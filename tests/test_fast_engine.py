"""Our BLOOM runner against transformers' own BloomForCausalLM, and against itself."""

from __future__ import annotations

import dataclasses
import itertools
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
import torch
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from model.answers.prompt import encode_prompts
from model.config import EngineSettings
from model.engine import Extractor, PreparingEngine
from model.runner.attention import alibi_slopes, available_backends
from model.runner.bloom import MIN_GEMM_ROWS
from model.runner.fast import MIN_SHARED_PREFIX, DocPrompts, FastRunner, prefill_ranges, shared_prefix
from model.runner.loading import load_model
from model.runner.protocol import Request
from ops.demo.samples import sample_documents
from ops.eval.accuracy import read_corpus
from ops.train.tiny import build_tiny_bloom
from schemas.decode import decode_document
from schemas.messages import Document

NEW_TOKENS = 12
REPO = Path(__file__).resolve().parents[1]
LOGIT_TOLERANCE = 1e-4


# Failed on a fresh machine with torch 2.13 and 2.15 alike (one digit of a record differs): the
# machine's kernels, not a dependency. Open; see the stop 9 note.
@pytest.fixture(scope="module")
def peaky_model(tmp_path_factory):
    """Random weights with a large init: varied greedy outputs, and no near-ties to blur a comparison."""
    texts = [raw["text"] for raw, _ in sample_documents(60, seed=1)]
    directory = tmp_path_factory.mktemp("peaky-bloom")
    build_tiny_bloom(directory, texts, seed=3, n_layer=3, hidden_size=96, n_head=6, initializer_range=0.3)
    settings = EngineSettings(path=str(directory), max_new_tokens=NEW_TOKENS)
    return load_model(settings), settings


def many_labels_documents(count: int, seed: int) -> list[Document]:
    """Documents of mixed lengths asking for 2-12 labels, so most have two prompts sharing a prefix."""
    rng = random.Random(seed)
    docs = []
    for i, (raw, _) in enumerate(sample_documents(count, seed=seed)):
        text = raw["text"] * rng.choice([1, 1, 2, 3])
        labels = [f"字段{j}" for j in range(rng.randint(3, 14))]
        raw = {"doc_id": f"d{i}", "text": text[: rng.randint(20, len(text))], "labels": labels}
        docs.append(decode_document(msgspec.json.encode(raw), 1 << 20))
    return docs


def one_group(tokenizer, docs: list[Document]) -> list[list[DocPrompts]]:
    """Every document's prompts (6 labels a prompt) in one group, each sharing its prefix."""
    per_doc = [encode_prompts(tokenizer, d, 6, 1024).prompts for d in docs]
    return [[DocPrompts(j, [Request(p) for p in prompts], shared_prefix(prompts)) for j, prompts in enumerate(per_doc)]]


def transformers_greedy(hf_model, prompts: list[list[int]], pad_id: int):
    """transformers' generate(), greedy, left-padded: the tokens and logits of every step."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        out = hf_model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=False,
            num_beams=1,
            max_new_tokens=NEW_TOKENS,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=pad_id,
            eos_token_id=None,
        )
    return out.sequences[:, width:], torch.stack(out.logits, dim=1)  # [B, T], [B, T, V]


def ours_greedy(engine: FastRunner, groups: list[list[DocPrompts]]):
    tokens, logits = [], []
    for group in groups:
        seen: list[torch.Tensor] = []

        def observe(step_logits: torch.Tensor, seen: list[torch.Tensor] = seen) -> None:
            seen.append(step_logits.clone())

        rows = engine.generate_group(group, observe=observe).generations
        stacked = torch.stack(seen, dim=1)  # [rows, T, V]
        tokens += [g.token_ids for g in rows]
        logits += list(stacked[: len(rows)])
    return tokens, logits


def test_alibi_slopes_match_bloom_for_any_head_count() -> None:
    for n_head in range(1, 33):
        theirs = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), n_head, torch.float32)[:, 0, 1]
        assert torch.equal(alibi_slopes(n_head), theirs), n_head


def test_shared_prefix_leaves_every_prompt_a_token() -> None:
    assert shared_prefix([list(range(20)), list(range(20))]) == 19
    assert shared_prefix([list(range(20)), [*range(10), 99]]) == 10
    assert shared_prefix([list(range(20))]) == 0
    assert shared_prefix([[1, 2, 3], [1, 2, 4]]) == 0  # below the minimum worth sharing


def test_shared_prefix_is_the_longest_prefix_every_prompt_starts_with() -> None:
    rng = random.Random(5)
    for _ in range(500):
        stem = [rng.randrange(3) for _ in range(rng.randrange(30))]
        prompts = [stem[: rng.randrange(len(stem) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(1, 12))]]
        prompts += [[*stem, *(rng.randrange(3) for _ in range(rng.randrange(1, 12)))] for _ in range(rng.randrange(4))]
        limit = min(len(p) for p in prompts) - 1
        longest = max(n for n in range(limit + 1) if all(p[:n] == prompts[0][:n] for p in prompts))
        expected = longest if len(prompts) > 1 and longest >= MIN_SHARED_PREFIX else 0
        assert shared_prefix(prompts) == expected, prompts


@pytest.mark.parametrize("sharing", [True, False], ids=["prefix-sharing", "no-sharing"])
def test_same_greedy_tokens_and_logits_as_transformers(peaky_model, sharing: bool) -> None:
    """CPU default backend (eager); the other backends are held to it below."""
    loaded, settings = peaky_model
    engine = FastRunner(loaded, settings, prefix_sharing=sharing)
    docs = many_labels_documents(130, seed=8)
    per_doc = [encode_prompts(loaded.tokenizer, d, 6, 1024).prompts for d in docs]
    assert sum(len(p) for p in per_doc) >= 200
    # Mixed batch compositions: groups of 1 to 9 documents, lengths interleaved as they come.
    rng = random.Random(1)
    groups, i = [], 0
    while i < len(docs):
        size = rng.randint(1, 9)
        groups.append(
            [
                DocPrompts(j, [Request(p) for p in per_doc[j]], shared_prefix(per_doc[j]) if sharing else 0)
                for j in range(i, min(i + size, len(docs)))
            ]
        )
        i += size
    assert sharing == any(d.shared for g in groups for d in g)
    our_tokens, our_logits = ours_greedy(engine, groups)

    prompts = [p for g in groups for d in g for p in d.prompts]
    for start in range(0, len(prompts), 16):
        ref_tokens, ref_logits = transformers_greedy(loaded.model, prompts[start : start + 16], engine.pad_id)
        for row in range(len(ref_tokens)):
            ours = our_tokens[start + row]
            assert ours == ref_tokens[row, : len(ours)].tolist(), f"prompt {start + row}"
            diff = (our_logits[start + row][: len(ours)] - ref_logits[row, : len(ours)]).abs().max().item()
            assert diff <= LOGIT_TOLERANCE, f"prompt {start + row}: logits differ by {diff}"


def test_backends_agree_with_each_other(peaky_model) -> None:
    loaded, settings = peaky_model
    docs = many_labels_documents(12, seed=9)
    groups = one_group(loaded.tokenizer, docs)
    results = {}
    for backend in available_backends(torch.device("cpu")):
        results[backend] = ours_greedy(FastRunner(loaded, settings, backend=backend), groups)
    assert "flex" in results, "this torch has FlexAttention: it must be tested"
    base_tokens, base_logits = results["eager"]
    for backend, (tokens, logits) in results.items():
        assert tokens == base_tokens, backend
        assert max((a - b).abs().max().item() for a, b in zip(logits, base_logits, strict=True)) <= LOGIT_TOLERANCE


@pytest.mark.parametrize("backend", available_backends(torch.device("cpu")))
def test_the_caches_memory_layout_changes_no_number(peaky_model, backend: str) -> None:
    """Heads first (the product's cache but for flash-attn) and positions first (flash-attn's) hold
    the same keys and values: the same tokens, and logits apart by the GEMMs' rounding only."""
    loaded, settings = peaky_model
    docs = many_labels_documents(8, seed=11)
    groups = one_group(loaded.tokenizer, docs)
    heads_first = FastRunner(loaded, settings, backend=backend)
    positions_first = FastRunner(loaded, settings, backend=backend)
    positions_first.heads_first = False
    tokens, logits = ours_greedy(heads_first, groups)
    other_tokens, other_logits = ours_greedy(positions_first, groups)
    # In memory as named: each (row, head) holds its positions together, or each position its heads.
    assert all(c.k.transpose(1, 2).is_contiguous() for buffers in heads_first._buffers.values() for c in buffers)
    assert all(c.k.is_contiguous() for buffers in positions_first._buffers.values() for c in buffers)
    assert tokens == other_tokens
    apart = max((a - b).abs().max().item() for a, b in zip(logits, other_logits, strict=True))
    assert apart <= LOGIT_TOLERANCE  # as between the attention backends


def test_output_does_not_depend_on_batch_mates(peaky_model) -> None:
    """Exact on CPU fp32: the same document alone, or among others of any length, in any order."""
    loaded, settings = peaky_model
    engine = Extractor(FastRunner(loaded, settings))
    docs = many_labels_documents(24, seed=10)

    def encoded(batch: list[Document]) -> dict[str, bytes]:
        return {e.doc_id: msgspec.json.encode(dataclasses.asdict(e)) for e in engine.extract(batch).extractions}

    alone = {d.doc_id: encoded([d])[d.doc_id] for d in docs[:6]}
    rng = random.Random(2)
    for _ in range(3):
        batch = rng.sample(docs, 16)
        batch += [d for d in docs[:6] if d not in batch]
        rng.shuffle(batch)
        together = encoded(batch)
        for doc_id, record in alone.items():
            assert together[doc_id] == record, doc_id


def test_prefill_ranges_cost_least_among_every_split() -> None:
    """Against every way to cut the rows into consecutive calls: the cost `prefill_ranges` minimises,
    each call its rows times its longest (at least MIN_GEMM_ROWS) plus a call's own cost."""
    rng = random.Random(5)

    def cost(lengths: list[int], ranges: list[tuple[int, int]], call: int) -> int:
        return sum((b - a) * max(MIN_GEMM_ROWS, *lengths[a:b]) + call for a, b in ranges)

    for _ in range(200):
        lengths = sorted(rng.randint(1, 600) for _ in range(rng.randint(1, 9)))
        call = rng.choice([0, 16, 64, 1024])
        ranges = prefill_ranges(lengths, call)
        assert [a for a, _ in ranges] == [0, *(b for _, b in ranges[:-1])] and ranges[-1][1] == len(lengths)
        every = []
        for mask in range(1 << (len(lengths) - 1)):
            cuts = [0, *(i + 1 for i in range(len(lengths) - 1) if mask >> i & 1), len(lengths)]
            every.append(cost(lengths, list(itertools.pairwise(cuts)), call))
        assert cost(lengths, ranges, call) == min(every)


def test_prefilling_in_one_call_or_one_per_row_changes_no_output(peaky_model) -> None:
    """Exact on CPU fp32: a group's rows prefilled together, padded to the longest, or each alone."""
    loaded, settings = peaky_model
    docs = many_labels_documents(12, seed=30)

    def records(call_tokens: int) -> tuple[list[bytes], int]:
        runner = FastRunner(loaded, settings)
        runner.call_tokens = call_tokens
        result = Extractor(runner).extract(docs)
        return [msgspec.json.encode(dataclasses.asdict(e)) for e in result.extractions], result.passes.forward

    (each_alone, forwards_alone), (together, forwards_together) = records(0), records(1 << 30)
    assert forwards_alone > forwards_together  # the rows were prefilled apart
    assert each_alone == together


def test_stepping_only_the_rows_still_going_changes_no_output() -> None:
    """Exact on CPU fp32: a batch whose ended rows move out of the model's step (`FastRunner._shrink`)
    gives the records of one that steps every row to the end. The shipped demo model on hand-written
    text: its rows end tens of steps apart (a random model's run to the limit together)."""
    settings = EngineSettings(path=str(REPO / "model" / "demo"))
    loaded = load_model(settings)
    docs = read_corpus(REPO / "ops" / "corpus" / "layouts.jsonl")[0][:16]

    def records(shrinking: bool) -> tuple[list[bytes], int]:
        runner = FastRunner(loaded, settings)
        shrunk = 0

        def shrink(going: torch.Tensor, ended: torch.Tensor) -> torch.Tensor | None:
            nonlocal shrunk
            kept = FastRunner._shrink(runner, going, ended) if shrinking else None
            shrunk += kept is not None
            return kept

        runner._shrink = shrink
        result = Extractor(runner).extract(docs)
        return [msgspec.json.encode(dataclasses.asdict(e)) for e in result.extractions], shrunk

    (shrinking, times), (stepping_all, never) = records(True), records(False)
    assert times > 0 and never == 0
    assert shrinking == stepping_all


def test_preparing_the_next_batch_while_one_runs_changes_no_output(peaky_model) -> None:
    """`run(prepare(d)) == extract(d)`, with batch t+1 prepared on another thread while batch t runs."""
    loaded, settings = peaky_model
    engine = Extractor(FastRunner(loaded, settings))
    assert isinstance(engine, PreparingEngine)
    batches = [many_labels_documents(8, seed=s) for s in (20, 21, 22)]

    def encoded(result) -> list[bytes]:
        return [msgspec.json.encode(dataclasses.asdict(e)) for e in result.extractions]

    serial = [encoded(engine.extract(b)) for b in batches]
    with ThreadPoolExecutor(max_workers=1) as ahead:
        pending = ahead.submit(engine.prepare, batches[0])
        overlapped = []
        for following in [*batches[1:], None]:
            prepared = pending.result()
            if following is not None:
                pending = ahead.submit(engine.prepare, following)
            overlapped.append(encoded(engine.run(prepared)))
    assert overlapped == serial


def test_compiled_decode_step_matches_eager(peaky_model) -> None:
    loaded, settings = peaky_model
    docs = many_labels_documents(6, seed=11)
    groups = one_group(loaded.tokenizer, docs)
    compiled_engine = FastRunner(loaded, settings, compile_decode=True)
    assert compiled_engine.info.attention.endswith("+compiled")
    plain_tokens, plain_logits = ours_greedy(FastRunner(loaded, settings, compile_decode=False), groups)
    tokens, logits = ours_greedy(compiled_engine, groups)
    assert tokens == plain_tokens
    assert max((a - b).abs().max().item() for a, b in zip(logits, plain_logits, strict=True)) <= LOGIT_TOLERANCE


def test_replicas_share_a_batch_without_changing_any_output(peaky_model) -> None:
    """Two replicas (on the CPU here, one per GPU in production) give the single engine's results."""
    from model.build import build_engine
    from model.replicas import ReplicaPool

    loaded, settings = peaky_model
    docs = many_labels_documents(10, seed=12)
    # Two CPU replicas run side by side in one process and compete for its intra-op threads, which
    # lets the BLAS pick other splits (and roundings); one thread each stands in for one GPU each.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = Extractor(FastRunner(loaded, settings)).extract(docs)
        pool = build_engine(msgspec.structs.replace(settings, device="cpu,cpu"))
        assert isinstance(pool.inner, ReplicaPool) and pool.info.device == "cpu,cpu"  # inside the window layer
        shared = pool.extract(docs)
    finally:
        torch.set_num_threads(threads)
    assert [dataclasses.asdict(e) for e in shared.extractions] == [dataclasses.asdict(e) for e in single.extractions]
    assert shared.generated_tokens == single.generated_tokens


def test_a_batch_fits_the_cache_with_its_longest_prompt_and_largest_room(engine_settings: EngineSettings) -> None:
    """Each re-decode fits the cache alone; a long prompt beside another's larger room would not."""
    runner = FastRunner(load_model(engine_settings), engine_settings)
    long_prompt, short_prompt = [5] * (runner.max_len - 40), [5] * 10
    rooms = [30, runner.max_len - 20]
    both = [[Request(long_prompt)], [Request(short_prompt)]]
    assert [[d.index for d in g] for g in runner.plan(both, rooms)] == [[1], [0]]
    assert [[d.index for d in g] for g in runner.plan(both, [30, 30])] == [[1, 0]]
    requests = [
        Request(long_prompt, max_new_tokens=rooms[0], doc=0),
        Request(short_prompt, max_new_tokens=rooms[1], doc=1),
    ]
    generated = runner.generate(requests)
    assert [len(g.token_ids) <= r for g, r in zip(generated.generations, rooms, strict=True)] == [True, True]
