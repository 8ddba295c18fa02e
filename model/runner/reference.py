"""The reference runner: transformers' own `generate()`, greedy, in left-padded batches.

Simple on purpose: it is the correctness oracle for faster engines and the baseline of benchmarks.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Sequence

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from model.config import EngineSettings, decode_settings
from model.grammar.constrainer import new_constrainer
from model.grammar.protocol import Grammar
from model.runner.loading import LoadedModel
from model.runner.protocol import Generated, Passes, Request
from model.runner.quantize import QuantizeError
from model.signals import Generation, StepSignals, collect_generations, cut, masked, step_signals
from schemas.messages import ModelInfo


class _GreedySignals(LogitsProcessor):
    """Inside generate(): the grammar's mask (its state advanced by each row's last token) and each
    step's signals, from the raw scores, as the fast engine's greedy step takes them. Greedy search
    then takes the argmax of the masked scores, which is the signals' choice. `seconds`: the host
    time the grammar took."""

    def __init__(self, top_k: int, grammar: Grammar | None) -> None:
        self.top_k = top_k
        self.grammar = grammar
        self.state = grammar.start() if grammar is not None else None
        self.steps: list[StepSignals] = []
        self.first_step_at: float | None = None
        self.seconds = 0.0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        started = time.perf_counter()
        if self.first_step_at is None:
            self.first_step_at = started
        elif self.grammar is not None:
            self.state = self.grammar.advance(self.state, input_ids[:, -1])
        if self.grammar is None:
            self.steps.append(step_signals(scores, self.top_k))
            return scores
        legal, forced = self.grammar.legal(self.state)
        self.seconds += time.perf_counter() - started
        signals = step_signals(scores, self.top_k, legal)
        signals.forced = forced
        self.steps.append(signals)
        return masked(scores, legal)


class ReferenceRunner:
    def __init__(self, loaded: LoadedModel, settings: EngineSettings) -> None:
        if settings.quantize != "none":
            raise QuantizeError(
                f'quantize = "{settings.quantize}" is the fast engine\'s; the reference engine decodes '
                "with transformers' weights as loaded"
            )
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.settings = settings
        self.eos_id = int(loaded.tokenizer.eos_token_id)
        self.pad_id = int(loaded.tokenizer.pad_token_id)
        self.constrainer = new_constrainer(loaded.tokenizer, loaded.device)
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

    def generate(self, requests: Sequence[Request]) -> Generated:
        """Greedy generations in the requests' order; requests of similar length share a forward
        pass, and each generation is cut to its request's limit."""
        limits = [self.settings.max_new_tokens if r.max_new_tokens is None else r.max_new_tokens for r in requests]
        order = sorted(range(len(requests)), key=lambda i: len(requests[i].prompt) + len(requests[i].prefix))
        out: list[Generation] = [Generation()] * len(requests)
        spent = Generated()
        step = self.settings.prompts_per_forward
        for start in range(0, len(order), step):
            group = order[start : start + step]
            generated = self.generate_batch([requests[i] for i in group], max(1, *(limits[i] for i in group)))
            for i, generation in zip(group, generated.generations, strict=True):
                out[i] = cut(generation, limits[i])
            spent += dataclasses.replace(generated, generations=[])
        spent.generations = out
        return spent

    @torch.inference_mode()
    def generate_batch(self, requests: list[Request], max_new_tokens: int | None = None) -> Generated:
        """One call of transformers' generate() over the requests' prompts and prefixes, left-padded."""
        batch = [r.prompt + r.prefix for r in requests]
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in batch])
        attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
        grammar = None
        if any(r.grammar for r in requests):
            rows, fed = [r.grammar for r in requests], [r.prefix for r in requests]
            grammar = self.constrainer.grammar(rows, fed, len(requests), self.loaded.model.config.vocab_size)
        recorder = _GreedySignals(self.settings.top_alternatives, grammar)
        started = time.perf_counter()
        self.loaded.model.generate(
            input_ids=input_ids.to(self.loaded.device),
            attention_mask=attention_mask.to(self.loaded.device),
            generation_config=self._config(max_new_tokens),
            logits_processor=LogitsProcessorList([recorder]),
        )
        finished = time.perf_counter()
        first_step = recorder.first_step_at or finished
        # Value-only rows are cut where they end, the others at end-of-sequence; generate() decodes
        # every row on until all have reached end-of-sequence or the limit.
        value_only = [r.value_only for r in requests]
        generations = collect_generations(recorder.steps, self.eos_id, value_only, self.constrainer.tokens.breaking)
        return Generated(
            generations,
            prefill_ms=(first_step - started) * 1000,
            decode_ms=(finished - first_step) * 1000,
            constrain_ms=recorder.seconds * 1000,
            # generate() runs one prefill and a pass per step but the last.
            passes=Passes(len(recorder.steps), max(len(recorder.steps) - 1, 0)),
        )

    def _config(self, max_new_tokens: int | None) -> GenerationConfig:
        if max_new_tokens is None or max_new_tokens == self.generation_config.max_new_tokens:
            return self.generation_config
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max_new_tokens
        return config
