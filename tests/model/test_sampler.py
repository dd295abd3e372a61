"""Sampler: greedy, sampled distributions (temperature, top-k/top-p/min-p masses), penalties,
seeded reproducibility, allowed-token masks and logprobs.

Distribution tests draw many samples in one call (one batch row per draw) and compare
frequencies with the expected distribution within 5 binomial standard deviations.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sglr.errors import SamplingError
from sglr.model.sampler import sample
from sglr.model.sampling import SamplingBatch
from sglr.model.token_mask import num_mask_words, pack_token_mask, unpack_token_mask
from sglr.sampling_params import SamplingParams

PROBS = torch.tensor([0.5, 0.3, 0.1, 0.06, 0.04])
LOGITS = PROBS.log()
NUM_DRAWS = 20000


def draw(config: SamplingParams, logits: torch.Tensor = LOGITS, num: int = NUM_DRAWS) -> np.ndarray:
    rows = logits[None, :].repeat(num, 1)
    batch = SamplingBatch.build([config] * num, logits.shape[0], "cpu")
    return sample(rows, batch).token_ids_cpu


def assert_frequencies(tokens: np.ndarray, expected: torch.Tensor) -> None:
    counts = np.bincount(tokens, minlength=expected.numel()) / tokens.size
    p = expected.numpy()
    tolerance = 5 * np.sqrt(p * (1 - p) / tokens.size) + 1e-9
    assert np.all(np.abs(counts - p) <= tolerance), (counts, p)


def test_greedy_is_argmax_and_ignores_other_settings() -> None:
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    configs = [SamplingParams(temperature=0.0, top_p=0.5, top_k=3)] * 3 + [SamplingParams(top_k=1)] * 3
    out = sample(logits, SamplingBatch.build(configs, 50, "cpu"))
    assert out.token_ids.tolist() == logits.argmax(-1).tolist()
    assert out.token_ids_cpu.tolist() == out.token_ids.tolist()


def test_plain_sampling_follows_softmax() -> None:
    assert_frequencies(draw(SamplingParams()), PROBS)


def test_temperature_sharpens_and_flattens() -> None:
    for temperature in (0.5, 2.0):
        expected = torch.softmax(LOGITS / temperature, dim=-1)
        assert_frequencies(draw(SamplingParams(temperature=temperature)), expected)


@pytest.mark.parametrize(
    ("config", "kept"),
    [
        (SamplingParams(top_k=2), [0, 1]),
        (SamplingParams(top_p=0.75), [0, 1]),  # mass before token 2 is 0.8 >= 0.75
        (SamplingParams(top_p=0.85), [0, 1, 2]),
        (SamplingParams(top_p=0.01), [0]),  # the top token always survives
        (SamplingParams(min_p=0.19), [0, 1, 2]),  # p >= 0.095
        (SamplingParams(min_p=0.25), [0, 1]),
        (SamplingParams(top_k=3, top_p=0.7, min_p=0.1), [0, 1]),  # joint: the strictest wins
    ],
)
def test_filters_keep_the_right_tokens_with_renormalized_mass(
    config: SamplingParams, kept: list[int]
) -> None:
    expected = torch.zeros_like(PROBS)
    expected[kept] = PROBS[kept] / PROBS[kept].sum()
    tokens = draw(config)
    assert set(np.unique(tokens).tolist()) <= set(kept)
    assert_frequencies(tokens, expected)


def test_filters_apply_per_row() -> None:
    configs = [SamplingParams(top_k=1 + i % 3) for i in range(3000)]
    rows = LOGITS[None, :].repeat(3000, 1)
    tokens = sample(rows, SamplingBatch.build(configs, 5, "cpu")).token_ids_cpu
    limits = np.array([1 + i % 3 for i in range(3000)])
    assert np.all(tokens < limits)


def test_penalties_change_the_greedy_choice_as_specified() -> None:
    logits = torch.tensor([[2.0, 1.9, -1.0, 0.0]] * 3 + [[-0.5, -1.0, -2.0, -0.6]])
    configs = [
        SamplingParams(temperature=0, presence_penalty=0.2),  # 2.0 - 0.2 < 1.9
        SamplingParams(temperature=0, frequency_penalty=0.04),  # 2.0 - 3 * 0.04 < 1.9
        SamplingParams(temperature=0, repetition_penalty=1.1),  # 2.0 / 1.1 < 1.9
        SamplingParams(temperature=0, repetition_penalty=1.5),  # negative logit multiplied: -0.75 < -0.6
    ]
    outputs = [[0], [0, 0, 0], [0], [0]]
    out = sample(logits, SamplingBatch.build(configs, 4, "cpu", output_ids=outputs))
    assert out.token_ids.tolist() == [1, 1, 1, 3]
    weak = [SamplingParams(temperature=0, frequency_penalty=0.04)]
    assert sample(logits[:1], SamplingBatch.build(weak, 4, "cpu", output_ids=[[0]])).token_ids.tolist() == [0]


def test_penalties_need_output_ids_and_logprobs_ignore_them() -> None:
    with pytest.raises(SamplingError, match="output_ids"):
        SamplingBatch.build([SamplingParams(presence_penalty=1.0)], 4, "cpu")
    logits = torch.tensor([[2.0, 1.9, -1.0, 0.0]])
    batch = SamplingBatch.build(
        [SamplingParams(temperature=0, presence_penalty=1.0)], 4, "cpu", output_ids=[[0]]
    )
    out = sample(logits, batch, return_logprobs=True)
    assert out.token_ids.tolist() == [1]
    np.testing.assert_allclose(out.logprobs.logprobs, logits.log_softmax(-1)[0, 1:2].numpy(), rtol=1e-6)


def test_seeded_requests_reproduce_whatever_the_batch() -> None:
    logits = torch.randn(1, 200, generator=torch.Generator().manual_seed(1))
    seeded = SamplingParams(temperature=1.0, seed=1234)

    def tokens_at(position: int, batch_size: int, step: int) -> int:
        configs = [SamplingParams()] * batch_size
        configs[position] = seeded
        steps = [0] * batch_size
        steps[position] = step
        rows = logits.repeat(batch_size, 1)
        return int(sample(rows, SamplingBatch.build(configs, 200, "cpu", steps=steps)).token_ids[position])

    first = tokens_at(0, 1, step=0)
    assert all(tokens_at(pos, size, step=0) == first for pos, size in [(0, 3), (2, 3), (5, 8)])
    by_step = {tokens_at(0, 1, step=s) for s in range(20)}
    assert len(by_step) > 5  # different steps draw differently
    other_seed = SamplingParams(temperature=1.0, seed=99)
    draws = [
        int(sample(logits, SamplingBatch.build([other_seed], 200, "cpu", steps=[s])).token_ids[0])
        for s in range(20)
    ]
    assert draws != [tokens_at(0, 1, step=s) for s in range(20)]


def test_seeded_draws_follow_the_distribution() -> None:
    configs = [SamplingParams(seed=s) for s in range(NUM_DRAWS)]
    rows = LOGITS[None, :].repeat(NUM_DRAWS, 1)
    assert_frequencies(sample(rows, SamplingBatch.build(configs, 5, "cpu")).token_ids_cpu, PROBS)


def test_mask_pack_unpack_round_trip_including_the_sign_bit() -> None:
    allowed = torch.rand(3, 70, generator=torch.Generator().manual_seed(2)) > 0.5
    allowed[:, 31] = True  # bit 31 makes the int32 word negative
    words = pack_token_mask(allowed)
    assert words.dtype == torch.int32 and words.shape == (3, num_mask_words(70)) == (3, 3)
    assert (words[:, 0] < 0).all()
    assert torch.equal(unpack_token_mask(words, 70), allowed)
    assert not unpack_token_mask(words[:, :2], 70)[:, 64:].any()  # tokens past the words: disallowed


def test_mask_restricts_greedy_and_sampled_tokens() -> None:
    vocab = 100
    logits = torch.randn(NUM_DRAWS // 10, vocab, generator=torch.Generator().manual_seed(3))
    allowed = torch.zeros(logits.shape, dtype=torch.bool)
    allowed[:, [5, 37, 64, 99]] = True
    words = pack_token_mask(allowed)
    greedy = sample(
        logits, SamplingBatch.build([SamplingParams(temperature=0)] * logits.shape[0], vocab, "cpu"), words
    )
    expected = logits.masked_fill(~allowed, float("-inf")).argmax(-1)
    assert torch.equal(greedy.token_ids, expected)
    sampled = sample(logits, SamplingBatch.build([SamplingParams()] * logits.shape[0], vocab, "cpu"), words)
    assert set(sampled.token_ids_cpu.tolist()) == {5, 37, 64, 99}


def test_mask_that_allows_nothing_is_an_error() -> None:
    words = torch.zeros((2, 1), dtype=torch.int32)
    words[0, 0] = 1
    with pytest.raises(SamplingError, match=r"rows \[1\]"):
        sample(torch.zeros(2, 20), SamplingBatch.build([SamplingParams()] * 2, 20, "cpu"), words)


def test_logprobs_and_top_logprobs_are_raw_model_logprobs() -> None:
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(4))
    configs = [SamplingParams(temperature=0.7, top_k=5)] * 2 + [SamplingParams(temperature=0)] * 2
    out = sample(logits, SamplingBatch.build(configs, 30, "cpu"), return_logprobs=True, top_logprobs_num=3)
    reference = logits.log_softmax(-1)
    chosen = reference.gather(1, out.token_ids[:, None]).squeeze(1)
    np.testing.assert_allclose(out.logprobs.logprobs, chosen.numpy(), rtol=1e-6)
    top_vals, top_ids = reference.topk(3, dim=-1)
    np.testing.assert_array_equal(out.logprobs.top_ids, top_ids.numpy())
    np.testing.assert_allclose(out.logprobs.top_logprobs, top_vals.numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"top_k": -2},
        {"min_p": 1.5},
        {"repetition_penalty": 0.0},
        {"frequency_penalty": 2.5},
        {"presence_penalty": -3.0},
        {"seed": 2**63},
        {"temperature": float("nan")},
    ],
)
def test_invalid_sampling_params_are_rejected(kwargs: dict) -> None:
    with pytest.raises(SamplingError):
        SamplingParams(**kwargs)


def test_logits_shape_must_match_batch() -> None:
    with pytest.raises(SamplingError, match="batch size"):
        sample(torch.zeros(3, 10), SamplingBatch.build([SamplingParams()] * 2, 10, "cpu"))


def test_penalty_counts_are_per_row_and_reject_unknown_tokens() -> None:
    batch = SamplingBatch.build(
        [SamplingParams(frequency_penalty=0.5)] * 3, 6, "cpu", output_ids=[[1, 1, 5], [], [0]]
    )
    assert batch.output_counts.tolist() == [[0, 2, 0, 0, 0, 1], [0] * 6, [1, 0, 0, 0, 0, 0]]
    with pytest.raises(SamplingError, match="outside the vocabulary"):
        SamplingBatch.build([SamplingParams(presence_penalty=0.5)], 4, "cpu", output_ids=[[4]])


def test_logit_bias_shifts_chosen_tokens_and_is_checked() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]] * 2)
    configs = [SamplingParams(temperature=0, logit_bias={3: 5.0}), SamplingParams(temperature=0)]
    assert sample(logits, SamplingBatch.build(configs, 4, "cpu")).token_ids.tolist() == [3, 0]
    banned = SamplingParams(logit_bias={0: float("-inf"), 1: float("-inf")})
    tokens = sample(logits.repeat(500, 1), SamplingBatch.build([banned] * 1000, 4, "cpu")).token_ids_cpu
    assert set(tokens.tolist()) == {2, 3}
    with pytest.raises(SamplingError, match="outside the vocabulary"):
        SamplingBatch.build([SamplingParams(logit_bias={4: 1.0})], 4, "cpu")


def test_batch_from_validated_sampling_params() -> None:
    greedy = SamplingParams(temperature=0.0)
    assert greedy.is_greedy
    config = SamplingParams(temperature=0.8, top_p=0.9, top_k=-1, min_p=0.05, presence_penalty=0.5, seed=-7,
                            logit_bias={2: 1.5})  # fmt: skip
    assert (config.temperature, config.top_p, config.min_p, config.presence_penalty) == (0.8, 0.9, 0.05, 0.5)
    assert not config.is_greedy and config.seed == -7 and config.logit_bias == {2: 1.5}
    batch = SamplingBatch.build([config], 10, "cpu", output_ids=[[]])
    assert batch.top_ks.tolist() == [10]  # "all tokens" clamps to the vocabulary
    assert sample(torch.zeros(1, 10), batch).token_ids.shape == (1,)
