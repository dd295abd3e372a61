"""`ChainedIds` feeds decode rows the previous step's sampled ids on the device, and
`SampleOutput.token_ids_cpu` reads the same ids on the host (after the queued copy on CUDA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sglr.errors import BatchError
from sglr.model.chained_ids import ChainedIds
from sglr.model.sampler import SampleOutput, sample
from sglr.model.sampling import SamplingBatch
from sglr.sampling_params import SamplingParams


def test_rows_take_the_named_sampled_ids_and_the_rest_keep_theirs() -> None:
    input_ids = torch.tensor([7, 0, 9, 0, 0])
    sampled = torch.tensor([101, 102, 103, 104])
    ChainedIds(sampled, np.array([3, 0, 2]), np.array([1, 3, 4])).write_into(input_ids)
    assert input_ids.tolist() == [7, 104, 9, 101, 103]


def test_sources_and_rows_must_pair_up() -> None:
    with pytest.raises(BatchError, match="2 sources for 1 rows"):
        ChainedIds(torch.tensor([1, 2]), np.array([0, 1]), np.array([0])).write_into(
            torch.zeros(2, dtype=torch.int64)
        )


def _greedy_sample(device: str) -> tuple[torch.Tensor, SampleOutput]:
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0)).to(device)
    batch = SamplingBatch.build([SamplingParams(temperature=0)] * 6, 50, logits.device)
    result = sample(logits, batch)
    return logits, result


def test_host_ids_are_the_device_ids_on_cpu() -> None:
    logits, result = _greedy_sample("cpu")
    assert result.copy_done is None
    assert result.token_ids_cpu.tolist() == logits.argmax(dim=-1).tolist()


@pytest.mark.gpu
def test_host_ids_arrive_after_the_queued_copy_on_cuda() -> None:
    logits, result = _greedy_sample("cuda")
    assert result.copy_done is not None and result.host_ids.is_pinned()
    queued = torch.tensor([0, 0, 0, 0, 0, 0], device="cuda")
    ChainedIds(result.token_ids, np.arange(6), np.arange(6)).write_into(queued)  # before the host reads
    expected = logits.argmax(dim=-1).cpu().tolist()
    assert result.token_ids_cpu.tolist() == expected == queued.cpu().tolist()
