"""The device decode step proven without a device: the grammar's `legal` and `advance`
(model/grammar/step.py), the signals and the greedy choice (model/signals.py) compile as one graph,
and N steps of them, on their static path (the one a device takes), read nothing from the data on
the host. Tiny shapes: the inductor compile takes ~20 s of this file's ~35 s on 2 cores (loaded).
Inductor, not a tracing backend: its CPU code generator once failed on step.py's byte views."""

from __future__ import annotations

import random

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from model.grammar.state import DeviceState
from model.grammar.step import advance, legal
from model.grammar.tables import DeviceTables
from model.signals import signal_tensors
from tests.test_constraints import LABELS as GRAMMAR_LABELS
from tests.test_constraints import TEXTS
from tests.test_device_grammar import EXTRA_COLUMNS, batch_rows, constrainer  # noqa: F401 (a fixture)

TOP_K = 3
STEPS = 12
LABELS = ("甲方", "乙方", "电话", "金额")


def decode_step(tables: DeviceTables, state: DeviceState, logits: torch.Tensor):
    """One step of decode_n_tokens' loop body as the device runs it: mask, signals and choice,
    the grammar advanced."""
    allowed, forced = legal(tables, state, static=True)
    signals = signal_tensors(logits, allowed, TOP_K, static=True)
    return advance(tables, state, signals[0], static=True), signals, forced


def device_batch(constrainer, seed: int):  # noqa: F811 (the fixture)
    rng = random.Random(seed)
    texts = ["甲方：星河科技有限公司，电话 138 0013 8000，金额 12,000 元。乙方：李明"]
    rows, n = batch_rows(constrainer, texts, LABELS, typed=rng.random() < 0.5, padding=1)
    width = constrainer.vocab.size + EXTRA_COLUMNS
    grammar = constrainer.device_grammar(rows, (), n, width)
    generator = torch.Generator().manual_seed(seed)
    logits = [torch.randn(n, width, generator=generator) for _ in range(STEPS)]
    return grammar.tables, grammar.start(), logits


def test_legal_advance_signals_and_choice_compile_as_one_graph(constrainer) -> None:  # noqa: F811
    """fullgraph=True fails on any graph break; the compiled step takes the eager step's tokens."""
    tables, state, logits = device_batch(constrainer, seed=1)
    torch._dynamo.reset()
    compiled = torch.compile(decode_step, fullgraph=True, dynamic=False)
    eager_state = compiled_state = state
    for step_logits in logits:
        eager_state, eager, eager_forced = decode_step(tables, eager_state, step_logits)
        compiled_state, signals, forced = compiled(tables, compiled_state, step_logits)
        assert torch.equal(signals[0], eager[0])
        assert torch.equal(forced, eager_forced)
        assert torch.equal(compiled_state.ends, eager_state.ends)
        assert torch.equal(compiled_state.literal, eager_state.literal)


class HostReads(TorchDispatchMode):
    """Fails on an operator whose result the host must read from the data: a scalar read
    (`item`, `bool`, `int`), `nonzero` without a static size, masked selection, a copy between devices."""

    BANNED = frozenset(
        {
            torch.ops.aten._local_scalar_dense.default,
            torch.ops.aten.nonzero.default,
            torch.ops.aten.masked_select.default,
            torch.ops.aten.unique_consecutive.default,
            torch.ops.aten._unique2.default,
        }
    )

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.BANNED:
            raise AssertionError(f"host read in the decode step: {func}")
        if func in (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default):
            source = args[1] if func is torch.ops.aten.copy_.default else args[0]
            target = args[0].device if func is torch.ops.aten.copy_.default else kwargs.get("device", source.device)
            if torch.device(target) != source.device:
                raise AssertionError(f"device copy in the decode step: {source.device} -> {target}")
        return func(*args, **kwargs)


class HostMethods(TorchFunctionMode):
    """`tolist`, `numpy` and `cpu` never reach the dispatcher on a CPU tensor: caught where they are called."""

    BANNED = frozenset(
        {torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.cpu, torch.Tensor.item, torch.Tensor.__bool__}
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.BANNED:
            raise AssertionError(f"host read in the decode step: {func.__name__}")
        return func(*args, **(kwargs or {}))


def test_decode_steps_read_nothing_on_the_host_between_end_checks(constrainer) -> None:  # noqa: F811
    tables, state, logits = device_batch(constrainer, seed=2)
    ended = torch.zeros(tables.rows, dtype=torch.bool)
    for i, step_logits in enumerate(logits):
        with HostReads(), HostMethods():
            state, signals, _ = decode_step(tables, state, step_logits)
            ended |= signals[0] == tables.eos_id
        # The loop's end check, outside: the only read the host makes, every END_CHECK_STEPS steps.
        if (i + 1) % 4 == 0 and bool(ended.all()):
            break
    assert i > 0


def test_the_watch_catches_the_eager_cpu_path(constrainer) -> None:  # noqa: F811
    """The watch can fail: the CPU's eager path (nonzero over set words) is caught."""
    tables, state, logits = device_batch(constrainer, seed=3)
    state, _, _ = decode_step(tables, state, logits[0])
    state, _, _ = decode_step(tables, state, logits[1])
    try:
        with HostReads(), HostMethods():
            legal(tables, state, static=False)
    except AssertionError as error:
        assert "host read" in str(error)
    else:
        raise AssertionError("the eager CPU path's nonzero went unseen")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=2),
    labels=GRAMMAR_LABELS,
    typed=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_an_illegal_token_leaves_a_row_nothing_but_the_end(constrainer, texts, labels, typed, seed) -> None:  # noqa: F811
    """`advance` accepts exactly what `legal` allows. Walks through legal tokens never ask what an
    illegal one does, so an off-by-one between the two (a value let run one byte past its reach)
    went unseen: here, at every step, each row also takes a near miss (a token occurring in the
    source where its open value may end, or one legal elsewhere), after which it may only end."""
    rng = random.Random(seed)
    rows, n = batch_rows(constrainer, texts, labels, typed, 1)
    grammar = constrainer.device_grammar(rows, (), n, constrainer.vocab.size + EXTRA_COLUMNS)
    tables, state = grammar.tables, grammar.start()
    eos, probed = tables.eos_id, 0
    near: set[int] = set()
    for _ in range(24):
        allowed, _ = grammar.legal(state)
        near |= set(allowed.nonzero()[:, 1].tolist())
        live = (~state.ended & ~tables.free).tolist()
        probes, chosen = [], []
        for r in range(n):
            mine = set(allowed[r].nonzero().flatten().tolist())
            # Nearest misses first: tokens whose bytes occur where the row's open value may end, refused
            # (a type, a word edge, the value's reach); else a token legal elsewhere.
            at = (tables.row_offset[r] + state.ends[r, : tables.value_width].nonzero().flatten()).clamp(
                max=len(tables.pos_tok) - 1
            )
            misses = sorted(set(tables.pos_tok[at].flatten().tolist()) - mine - {eos, tables.trash})
            misses = misses or sorted(near - mine - {eos})
            probes.append(rng.choice(misses) if misses and live[r] else eos)
            others = sorted(mine - {eos})
            chosen.append(rng.choice(others if others and rng.random() < 0.95 else sorted(mine)))
        after, _ = grammar.legal(grammar.advance(state, torch.tensor(probes)))
        for r in range(n):
            if live[r] and probes[r] != eos:
                probed += 1
                assert after[r].nonzero().flatten().tolist() in ([], [eos]), (r, probes[r])
        state = grammar.advance(state, torch.tensor(chosen))
    assert probed > 0
