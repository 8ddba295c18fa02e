"""The device step proven without a device: the grammar's `legal` and `advance`, the signals and the
choice compile as one graph, and N steps of them read nothing back to the host, so on an accelerator
the loop runs ahead of the host between its end checks (model/runner/generate.py)."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from model.grammar import step
from model.signals import signal_tensors
from tests.test_device_grammar import EXTRA_COLUMNS, batch_rows, constrainer  # noqa: F401  (a fixture)

TOP_K = 4
STEPS = 12
# Ops whose output shape or value the host must read from the device before it can go on.
HOST_READS = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "repeat_interleave"}
# Tensor methods that hand data to Python (some never reach the dispatcher: tolist reads memory directly).
HOST_METHODS = {"tolist", "item", "numpy", "__bool__", "__int__", "__float__", "__index__", "cpu"}


class HostReadError(AssertionError):
    pass


class NoHostReads(TorchDispatchMode):
    """Fails on any op that makes the host wait for data (`nonzero_static` is allowed: its size is given)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in HOST_READS:
            raise HostReadError(f"{func} reads the device's data on the host")
        if name == "_to_copy" and (kwargs or {}).get("device") is not None:
            raise HostReadError(f"{func} copies between devices")
        return func(*args, **(kwargs or {}))


class NoHostMethods(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_METHODS:
            raise HostReadError(f"Tensor.{func.__name__} hands the device's data to Python")
        return func(*args, **(kwargs or {}))


def decode_step(tables, state, logits):
    """One step of the decode loop's device part, in its order: mask, signals and choice, advance."""
    legal, forced = step.legal(tables, state, static=True)
    chosen, *signals = signal_tensors(logits, legal, TOP_K, static=True)
    return chosen, forced, signals, step.advance(tables, state, chosen, static=True)


@pytest.fixture
def grammar(constrainer):  # noqa: F811  (the fixture imported above)
    texts = ["甲方：杭州云栖数智科技有限公司，电话 138 0013 8000，金额 12000 元。", "乙方 张伟 a@b.cn"]
    rows, n = batch_rows(constrainer, texts, ("甲方", "乙方", "电话", "email"), True, 1)
    return constrainer.device_grammar(rows, (), n, constrainer.vocab.size + EXTRA_COLUMNS)


def logits_for(grammar, steps: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(grammar.tables.rows, grammar.tables.trash, generator=generator) for _ in range(steps)]


def test_n_decode_steps_read_nothing_back_to_the_host(grammar) -> None:
    state, taken = grammar.start(), []
    with NoHostMethods(), NoHostReads():
        for logits in logits_for(grammar, STEPS):
            chosen, _, _, state = decode_step(grammar.tables, state, logits)
            taken.append(chosen)
    # The same tokens as the eager path a CPU takes, which brings positions to the host.
    state = grammar.start()
    for logits, chosen in zip(logits_for(grammar, STEPS), taken, strict=True):
        legal, _ = step.legal(grammar.tables, state)
        assert torch.equal(signal_tensors(logits, legal, TOP_K)[0], chosen)
        state = step.advance(grammar.tables, state, chosen)


def test_the_guard_fails_on_each_kind_of_host_read(grammar) -> None:
    """The check above can fail: the CPU's own path and each way of handing data to Python trip it."""
    state = grammar.start()
    for read in (
        lambda: step.legal(grammar.tables, state, static=False),  # nonzero: its shape is the data's
        lambda: state.ended.any().item(),
        lambda: bool(state.ended.any()),
        lambda: state.label.tolist(),
        lambda: state.label.to("meta"),
    ):
        with pytest.raises(HostReadError), NoHostMethods(), NoHostReads():
            read()


def test_the_decode_step_compiles_as_one_graph(grammar) -> None:
    """fullgraph=True fails on any graph break. The aot_eager backend traces exactly what inductor
    would take; inductor's own CPU code generation fails on the step's bool-as-bytes views (torch
    2.15: `cannot convert unsigned char* to bool*`), a code-generation limit, not a break."""
    compiled = torch.compile(decode_step, fullgraph=True, dynamic=False, backend="aot_eager")
    eager_state = compiled_state = grammar.start()
    for logits in logits_for(grammar, 4):
        chosen, forced, signals, compiled_state = compiled(grammar.tables, compiled_state, logits)
        e_chosen, e_forced, e_signals, eager_state = decode_step(grammar.tables, eager_state, logits)
        assert torch.equal(chosen, e_chosen) and torch.equal(forced, e_forced)
        assert all(torch.equal(a, b) for a, b in zip(signals, e_signals, strict=True))
        assert all(
            torch.equal(a, b) for a, b in zip(vars(compiled_state).values(), vars(eager_state).values(), strict=True)
        )
