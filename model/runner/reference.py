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
from model.signals import Generation, StepSignals, collect_generations, cut, entropy, step_signals
from schemas.messages import ModelInfo, Timings


@dataclass
class Prompt:
    doc_index: int
    token_ids: list[int]
    constraint: RowGrammar | None = None
    fed: list[int] = field(default_factory=list)  # tokens its grammar has already been fed


class _Constrain(LogitsProcessor):
    """The answer grammar inside generate(): fed each row's last token, masks the next step."""

    def __init__(self, constraint: GrammarBatch) -> None:
        self.constraint = constraint
        self.started = False
        self.forced: list[torch.Tensor] = []
        self.entropies: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.started:
            self.constraint.advance(input_ids[:, -1])
        self.started = True
        masked, forced = self.constraint.apply(scores)
        self.forced.append(forced)
        self.entropies.append(entropy(scores))  # the model's own uncertainty, before the mask
        return masked


class _RecordSignals(LogitsProcessor):
    """Watches each step's logits without changing them, so generate() stays pure greedy."""

    def __init__(self, top_k: int) -> None:
        self.top_k = top_k
        self.steps: list[StepSignals] = []
        self.first_step_at: float | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.first_step_at is None:
            self.first_step_at = time.perf_counter()
        self.steps.append(step_signals(scores, self.top_k))
        return scores


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
        recorder = _RecordSignals(self.settings.top_alternatives)
        processors: list[LogitsProcessor] = [recorder]
        constrain = None
        if any(p.constraint for p in prompts):
            # Before the recorder: the signals are those of the masked distribution, as in the fast engine.
            constrain = _Constrain(self.constrainer.batch([p.constraint for p in prompts], [p.fed for p in prompts]))
            processors.insert(0, constrain)
        started = time.perf_counter()
        self.loaded.model.generate(
            input_ids=input_ids.to(self.loaded.device),
            attention_mask=attention_mask.to(self.loaded.device),
            generation_config=self._config(max_new_tokens),
            logits_processor=LogitsProcessorList(processors),
        )
        finished = time.perf_counter()
        first_step = recorder.first_step_at or finished
        timings.prefill_ms += (first_step - started) * 1000
        timings.decode_ms += (finished - first_step) * 1000
        if constrain is not None:
            timings.constrain_ms += constrain.constraint.seconds * 1000
            for step, forced, full in zip(recorder.steps, constrain.forced, constrain.entropies, strict=True):
                step.forced = forced
                step.entropy = full
        return collect_generations(recorder.steps, self.eos_id)

    def _config(self, max_new_tokens: int | None) -> GenerationConfig:
        if max_new_tokens is None or max_new_tokens == self.generation_config.max_new_tokens:
            return self.generation_config
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max_new_tokens
        return config
