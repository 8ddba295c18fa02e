"""The reference engine: transformers' own `generate()`, greedy, in left-padded batches.

Simple on purpose: it is the correctness oracle for faster engines and the baseline of benchmarks.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from model.answers.retry import Continuation
from model.config import EngineSettings
from model.engine import ExtractionFlow, Prepared, decode_settings
from model.grammar.mask import GrammarBatch, RowGrammar
from model.runner.loading import LoadedModel
from model.signals import Generation, StepSignals, collect_generations, cut, step_signals
from schemas.messages import ModelInfo, Timings


@dataclass
class Prompt:
    doc_index: int
    token_ids: list[int]
    constraint: RowGrammar | None = None
    fed: list[int] = field(default_factory=list)  # tokens its grammar has already been fed


class _GreedySignals(LogitsProcessor):
    """Inside generate(): the grammar's mask (fed each row's last token) and each step's signals,
    from the raw scores, as the fast engine's greedy step takes them. Greedy search then takes the
    argmax of the masked scores, which is the signals' choice."""

    def __init__(self, top_k: int, constraint: GrammarBatch | None) -> None:
        self.top_k = top_k
        self.constraint = constraint
        self.steps: list[StepSignals] = []
        self.first_step_at: float | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.first_step_at is None:
            self.first_step_at = time.perf_counter()
        elif self.constraint is not None:
            self.constraint.advance(input_ids[:, -1])
        if self.constraint is None:
            self.steps.append(step_signals(scores, self.top_k))
            return scores
        legal, forced = self.constraint.legal(scores)
        signals = step_signals(scores, self.top_k, legal)
        signals.forced = forced
        self.steps.append(signals)
        return scores.masked_fill(~legal, float("-inf"))


class ReferenceEngine(ExtractionFlow):
    def __init__(self, loaded: LoadedModel, settings: EngineSettings) -> None:
        super().__init__(loaded.tokenizer, settings, loaded.device)
        self.loaded = loaded
        self.info = ModelInfo(
            name=loaded.name,
            engine="reference",
            attention=str(getattr(loaded.model.config, "_attn_implementation", "eager")),
            dtype=str(loaded.dtype).removeprefix("torch."),
            device=str(loaded.device),
            demo=loaded.demo,
            decode=decode_settings(settings),
        )
        self.generation_config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=settings.max_new_tokens,
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
        )

    def generate(self, prepared: list[Prepared], timings: Timings) -> list[list[Generation]]:
        prompts = [
            Prompt(d, ids, row)
            for d, p in enumerate(prepared)
            for ids, row in zip(p.encoded.prompts, p.grammars or [None] * len(p.encoded.prompts), strict=True)
        ]
        per_doc: list[list[Generation]] = [[] for _ in prepared]
        for prompt, generation in zip(prompts, self.generate_all(prompts, timings), strict=True):
            per_doc[prompt.doc_index].append(generation)
        return per_doc

    def continue_greedy(self, requests: list[Continuation], timings: Timings) -> list[Generation]:
        """Greedy continuations of prompts extended by kept tokens (the validation loop's re-decodes)."""
        out: list[Generation] = []
        step = self.settings.prompts_per_forward
        for start in range(0, len(requests), step):
            batch = requests[start : start + step]
            limit = max(1, *(r.max_new_tokens for r in batch))
            prompts = [Prompt(i, r.prompt + r.prefix, r.row, r.prefix) for i, r in enumerate(batch)]
            for r, generation in zip(batch, self.generate_batch(prompts, timings, max_new_tokens=limit), strict=True):
                out.append(cut(generation, r.max_new_tokens))
        return out

    def generate_all(self, prompts: list[Prompt], timings: Timings) -> list[Generation]:
        """Greedy generations in prompt order; prompts of similar length share a forward pass."""
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i].token_ids))
        results: list[Generation | None] = [None] * len(prompts)
        step = self.settings.prompts_per_forward
        for group_start in range(0, len(order), step):
            group = order[group_start : group_start + step]
            for index, generation in zip(group, self.generate_batch([prompts[i] for i in group], timings), strict=True):
                results[index] = generation
        return [g for g in results if g is not None]

    @torch.inference_mode()
    def generate_batch(
        self, prompts: list[Prompt], timings: Timings, max_new_tokens: int | None = None
    ) -> list[Generation]:
        batch = [p.token_ids for p in prompts]
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in batch])
        attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
        constraint = None
        if any(p.constraint for p in prompts):
            constraint = self.constrainer.batch([p.constraint for p in prompts], [p.fed for p in prompts])
        recorder = _GreedySignals(self.settings.top_alternatives, constraint)
        started = time.perf_counter()
        self.loaded.model.generate(
            input_ids=input_ids.to(self.loaded.device),
            attention_mask=attention_mask.to(self.loaded.device),
            generation_config=self._config(max_new_tokens),
            logits_processor=LogitsProcessorList([recorder]),
        )
        finished = time.perf_counter()
        first_step = recorder.first_step_at or finished
        timings.prefill_ms += (first_step - started) * 1000
        timings.decode_ms += (finished - first_step) * 1000
        if constraint is not None:
            timings.constrain_ms += constraint.seconds * 1000
        return collect_generations(recorder.steps, self.eos_id)

    def _config(self, max_new_tokens: int | None) -> GenerationConfig:
        if max_new_tokens is None or max_new_tokens == self.generation_config.max_new_tokens:
            return self.generation_config
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max_new_tokens
        return config
