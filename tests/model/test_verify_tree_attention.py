"""Tree attention of a speculative verify pass, in each CPU attention path: a decode batch whose
rows are a draft tree's nodes (each through a draft row holding its prefix and tree path, built
by `engine/speculative/verify_batch.py`) gives every node the logits that running its path as
ordinary tokens gives (an extend of prompt + path in a fresh row). Paths: the torch backend with
the Rust decode kernel and without it, the Triton backend (its CPU interpreter), and the fused
quantized decode step on a 4-bit tiny GGUF."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gguf_testing import ALL_4BIT, TinySpec, write_tiny_gguf

from sglr.engine.kv.request_kv import RequestKV
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.engine.speculative.verify_batch import layout_verify
from sglr.kernels.torch_backend import TorchAttentionBackend
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path

EMPTY = np.zeros(0, dtype=np.int64)
PROMPT = [5, 17, 33, 2, 41, 8, 19, 23, 4]
LAST = 12  # the request's last token (its KV is written by the verify pass)


def _tree() -> DraftTree:
    tree = DraftTree()
    a = tree.add(ROOT, 7)
    b = tree.add(ROOT, 9)
    c = tree.add(a, 11)
    tree.add(c, 13)
    tree.add(b, 15)
    tree.add(a, 3)
    return tree


def _verify_logits(runner: ModelRunner, tree: DraftTree) -> torch.Tensor:
    n = len(PROMPT)
    runner.forward_extend([ExtendRequest(1, np.array(PROMPT), EMPTY, np.arange(1, n + 1))])
    kv = RequestKV(row=1, slots=np.arange(1, n + 2 + len(tree), dtype=np.int32), num_computed=n)
    kv.num_reserved = n + 1 + len(tree)
    req = SimpleNamespace(kv=kv, output_ids=[LAST], rid="r")
    layout = layout_verify([req], [tree], runner.draft_rows, None)
    out = runner.forward_decode(
        layout.req_rows,
        layout.input_ids,
        layout.seq_lens,
        layout.out_slots,
        layout.row_writes,
        layout.row_copies,
    )
    return out.next_token_logits.clone()


def _path_logits(runner: ModelRunner, tokens: list[int]) -> torch.Tensor:
    """The logits after `tokens`, run as one extend in row 2 on slots of its own."""
    first = runner.num_kv_slots - len(tokens) + 1
    slots = np.arange(first, first + len(tokens))
    return (
        runner.forward_extend([ExtendRequest(2, np.array(tokens), EMPTY, slots)]).next_token_logits[0].clone()
    )


def _check(runner: ModelRunner) -> None:
    tree = _tree()
    verified = _verify_logits(runner, tree)
    paths = [[]] + [tree.path_tokens(node) for node in range(len(tree))]
    expected = torch.stack([_path_logits(runner, [*PROMPT, LAST, *path]) for path in paths])
    # The root row is plain decode: its distance to the extend is what this path differs by.
    scale = float((verified[0] - expected[0]).abs().max())
    error = (verified - expected).abs().max(dim=1).values
    assert error.max() <= 4 * scale + 1e-5, (error, scale)
    # ... and a node that saw the wrong path would be far off: the rows differ among themselves.
    assert float((expected[1] - expected[2]).abs().max()) > 100 * (4 * scale + 1e-5)


@pytest.mark.parametrize("backend", ["torch-kernel", "torch", "triton"])
def test_each_draft_node_sees_its_prefix_and_its_path(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend == "torch":
        monkeypatch.setattr(TorchAttentionBackend, "use_cpu_decode_kernel", False)
    runner = ModelRunner(
        RunnerConfig(
            tiny_model_path("llama"),
            device="cpu",
            dtype="float32",
            kv_num_tokens=256,
            max_num_reqs=4,
            num_draft_rows=8,
            attention_backend="triton" if backend == "triton" else "torch",
        )
    )
    _check(runner)


def test_the_fused_quantized_step_verifies_trees(gguf_cache) -> None:
    path = gguf_cache / "llama.gguf"
    write_tiny_gguf(
        path, TinySpec(architecture="llama", tensor_types=ALL_4BIT, intermediate_size=128), seed=3
    )
    runner = ModelRunner(
        RunnerConfig(path, device="cpu", kv_num_tokens=256, max_num_reqs=4, num_draft_rows=8)
    )
    assert runner.fused_decode is not None
    tree = _tree()
    verified = _verify_logits(runner, tree)
    # The fused step's rows are independent (batched steps equal unbatched ones bit for bit), so
    # each node's logits equal a plain decode step of its path's last token over its path.
    n = len(PROMPT)
    for node in range(len(tree)):
        tokens = [LAST, *tree.path_tokens(node)]
        slots = list(range(1, n + 1)) + [200 + i for i in range(len(tokens))]
        row = 3
        runner.forward_extend([ExtendRequest(row, np.array(PROMPT), EMPTY, np.arange(1, n + 1))])
        for i, token in enumerate(tokens):
            out = runner.forward_decode([row], [token], [n + i + 1], [slots[n + i]])
        assert torch.equal(out.next_token_logits[0], verified[1 + node]), node
