"""LLaVA-1.5 and LLaVA-NeXT (tiled images) against `transformers` on tiny checkpoints it wrote
(CLIP tower, projector, Llama): the image processor gives the same pixels and image token
counts; greedy tokens are identical with one and two images, alone and batched; logits agree
after a whole prompt and after a prefill split inside an image."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
from llava_twin import expanded_prompt, hf_greedy, hf_logits, random_image, runner_greedy

from sglr.engine.kv import KVSlotAllocator
from sglr.errors import ModelConfigError
from sglr.model.config import ModelConfig
from sglr.model.forward_batch import ExtendRequest
from sglr.model.image_processor import load_image_processor
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny_llava import write_llava_checkpoint

NUM_NEW = 8
LOGIT_ATOL = 1e-4


@pytest.fixture(scope="module", params=["llava", "llava_next"])
def llava_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llava_checkpoint(tmp_path_factory.mktemp(request.param), seed=2, family=request.param)


@lru_cache(maxsize=2)
def runner_for(path: Path) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=2048, max_num_reqs=8))


def test_config_reads_the_tower_and_the_decoder(llava_path: Path) -> None:
    config = runner_for(llava_path).config
    assert config.architecture == json.loads((llava_path / "config.json").read_text())["architectures"][0]
    assert type(runner_for(llava_path).model).__name__ == config.architecture
    assert config.vision is not None and config.vision.num_image_tokens == 16
    assert config.hidden_size == 64 and config.vocab_size == 4160
    assert config.vision.num_layers_to_run == 2  # of 3: the second to last hidden state


def test_a_llava_config_without_a_clip_tower_is_refused() -> None:
    raw = {
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": {"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
                        "vocab_size": 10, "intermediate_size": 8, "num_hidden_layers": 1},
        "vision_config": {"model_type": "siglip_vision_model"},
    }  # fmt: skip
    with pytest.raises(ModelConfigError, match="siglip"):
        ModelConfig.from_dict(raw)


@pytest.mark.parametrize(
    ("width", "height", "mode"), [(40, 33, "RGB"), (20, 64, "RGB"), (28, 28, "RGB"), (13, 9, "RGBA")]
)
def test_preprocessing_equals_the_hugging_face_processor(
    llava_path: Path, width: int, height: int, mode: str
) -> None:
    from transformers import AutoProcessor

    image = random_image(width * height, width, height, mode)
    processor = AutoProcessor.from_pretrained(str(llava_path))
    reference = processor(text="<image>", images=[image], return_tensors="pt")
    vision = runner_for(llava_path).config.vision
    mine = load_image_processor(llava_path, 28, vision.image_grid_pinpoints)(image)
    assert mine.shape[-3:] == (3, 28, 28)
    torch.testing.assert_close(mine, reference["pixel_values"][0], atol=0, rtol=0)
    num_image_tokens = int((reference["input_ids"] == vision.image_token_id).sum())
    assert vision.num_tokens_for(height, width) == num_image_tokens


def test_one_image_greedy_matches_transformers(llava_path: Path) -> None:
    runner = runner_for(llava_path)
    ids, images, pixels = expanded_prompt(runner, [[74, 75, 223], 5, [1284, 90, 17]], llava_path)
    tokens, logits = runner_greedy(runner, [(ids, images)], NUM_NEW)
    assert tokens == [hf_greedy(llava_path, ids, pixels, NUM_NEW)]
    torch.testing.assert_close(logits[0], hf_logits(llava_path, ids, pixels)[-1], atol=LOGIT_ATOL, rtol=0)


def test_the_image_changes_the_output(llava_path: Path) -> None:
    """Guards the test above: the features really reach the decoder."""
    runner = runner_for(llava_path)
    a = expanded_prompt(runner, [[74], 5, [90]], llava_path)
    b = expanded_prompt(runner, [[74], 6, [90]], llava_path)
    _, logits_a = runner_greedy(runner, [a[:2]], 1)
    _, logits_b = runner_greedy(runner, [b[:2]], 1)
    assert (logits_a - logits_b).abs().max() > 1e-2


def test_two_images_greedy_matches_transformers(llava_path: Path) -> None:
    runner = runner_for(llava_path)
    ids, images, pixels = expanded_prompt(runner, [[74], 7, [300, 12], 8, [44]], llava_path)
    tokens, _ = runner_greedy(runner, [(ids, images)], NUM_NEW)
    assert tokens == [hf_greedy(llava_path, ids, pixels, NUM_NEW)]


def test_batched_requests_with_images_match_transformers(llava_path: Path) -> None:
    runner = runner_for(llava_path)
    pieces = [[[74, 75], 11, [9]], [[3, 4, 5, 6, 7]], [12, [40, 41], 13, [42]], [[88], 11, [9, 10]]]
    prompts = [expanded_prompt(runner, p, llava_path) for p in pieces]
    tokens, _ = runner_greedy(runner, [(ids, images) for ids, images, _ in prompts], NUM_NEW)
    assert tokens == [hf_greedy(llava_path, ids, pixels, NUM_NEW) for ids, _, pixels in prompts]


@pytest.mark.parametrize("split", [3, 9, 18])  # before, inside and after the image
def test_a_prefill_split_anywhere_gives_the_same_logits(llava_path: Path, split: int) -> None:
    runner = runner_for(llava_path)
    ids, images, pixels = expanded_prompt(runner, [[74, 75], 5, [9, 10, 11]], llava_path)
    allocator = KVSlotAllocator(runner.num_kv_slots)
    slots = allocator.try_alloc(len(ids))
    num_encoded = runner.model.num_images_encoded
    first = ExtendRequest(1, np.array(ids[:split]), slots[:0], slots[:split], images=images)
    runner.forward(runner.extend_batch([first]))
    rest = ExtendRequest(1, np.array(ids[split:]), slots[:split], slots[split:], images=images)
    logits = runner.forward(runner.extend_batch([rest])).next_token_logits[0]
    torch.testing.assert_close(logits, hf_logits(llava_path, ids, pixels)[-1], atol=LOGIT_ATOL, rtol=0)
    assert runner.model.num_images_encoded == num_encoded + 1  # once, even when split
    assert not runner.model._unfinished


@pytest.fixture(scope="module")
def video_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llava_checkpoint(tmp_path_factory.mktemp("video"), seed=5, family="llava_next_video")


def test_video_greedy_matches_transformers_alone_and_batched(video_path: Path) -> None:
    runner = runner_for(video_path)
    assert runner.config.vision is not None and runner.config.vision.num_tokens_per_frame == 4
    pieces = [
        [[74, 75], (1, 4), [9, 10]],  # a video of 4 frames
        [[74], 3, [300], (2, 3), [44]],  # an image and a video
        [[5, 6, 7]],
        [[88], 4, [9]],
    ]
    prompts = [expanded_prompt(runner, p, video_path) for p in pieces]
    expected = [hf_greedy(video_path, ids, pixels, NUM_NEW) for ids, _, pixels in prompts]
    alone = [runner_greedy(runner, [(ids, images)], NUM_NEW)[0][0] for ids, images, _ in prompts]
    batched, _ = runner_greedy(runner, [(ids, images) for ids, images, _ in prompts], NUM_NEW)
    assert alone == expected
    assert batched == expected
    _, logits = runner_greedy(runner, [prompts[0][:2]], 1)
    reference = hf_logits(video_path, prompts[0][0], prompts[0][2])[-1]
    torch.testing.assert_close(logits[0], reference, atol=LOGIT_ATOL, rtol=0)
