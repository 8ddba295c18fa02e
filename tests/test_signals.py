"""The step signals (model/signals.py) against their definitions written plainly: masked
log-softmax for the choice and its probabilities, the full distribution for the entropy."""

from __future__ import annotations

import pytest
import torch

from model.signals import allowed, masked, signal_tensors

K = 5


def plainly(logits: torch.Tensor, legal: torch.Tensor | None, k: int):
    masked = logits if legal is None else logits.masked_fill(~legal, float("-inf"))
    log_probs = torch.log_softmax(masked, dim=-1)
    full = torch.log_softmax(logits, dim=-1)
    chosen = masked.argmax(dim=-1)  # ties to the lowest id
    top = log_probs.topk(k + 1, dim=-1)
    return (
        chosen,
        log_probs.gather(-1, chosen[:, None])[:, 0].exp(),
        -(full.exp() * full).sum(-1),
        top.values.exp(),
    )


def cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 300, generator=generator) * 4
    legal = torch.rand(6, 300, generator=generator) < 0.1
    legal[1] = False
    legal[1, [7, 250]] = True  # fewer legal tokens than k + 1
    legal[2] = True  # a free row
    logits[3, [10, 20, 200]] = 30.0  # a three-way tie: the lowest id wins
    legal[3, [10, 20, 200]] = True
    logits[4, :] = 9.0  # every kept top-k entry ties: the choice looks past them
    legal[4] = True
    logits[5, 0] = 200.0  # the model bets everything on an illegal token: the legal mass underflows
    legal[5, 0] = False
    legal[5, [3, 4]] = True
    return [(logits, legal)]


@pytest.mark.parametrize("masked", [True, False])
def test_signals_match_their_plain_definitions(masked: bool) -> None:
    for logits, legal in cases():
        legal = legal if masked else None
        chosen, prob, entropy, top_ids, top_probs = signal_tensors(logits, legal, K)
        want_chosen, want_prob, want_entropy, want_top = plainly(logits, legal, K)
        assert chosen.tolist() == want_chosen.tolist()
        torch.testing.assert_close(prob, want_prob)
        torch.testing.assert_close(entropy, want_entropy, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(top_probs, want_top)
        # The runners-up are the top of the masked distribution, in order, led by the choice.
        untied = top_probs[:, 0] > top_probs[:, 1]
        assert top_ids[untied, 0].tolist() == chosen[untied].tolist()


def test_the_compiled_signals_are_the_eager_ones() -> None:
    compiled = torch.compile(signal_tensors, dynamic=True)
    for logits, legal in cases():
        for mask in (legal, None):
            eager = signal_tensors(logits, mask, K)
            fused = compiled(logits, mask, K)
            assert fused[0].tolist() == eager[0].tolist()
            for a, b in zip(fused[1:], eager[1:], strict=True):
                torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("static", [True, False])
def test_an_additive_mask_gives_the_bool_masks_signals_to_the_bit(static: bool) -> None:
    """A host grammar on a CPU hands over 0.0 / -inf instead of True / False (model/grammar/protocol.py):
    every signal is the same number, ties, spills past the top-k and an underflowed legal mass included."""
    for logits, legal in cases():
        additive = torch.zeros(legal.shape).masked_fill_(~legal, float("-inf"))
        by_bool = signal_tensors(logits, legal, K, static)
        by_sum = signal_tensors(logits, additive, K, static)
        for a, b in zip(by_bool, by_sum, strict=True):
            assert torch.equal(a, b)
        # What a processor or a test reads off either kind of mask.
        assert torch.equal(allowed(additive), legal) and allowed(legal) is legal
        assert torch.equal(masked(logits, additive), masked(logits, legal))
