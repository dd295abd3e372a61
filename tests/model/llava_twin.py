"""LLaVA test helpers: random images, prompts with expanded image tokens, the runner driven
greedily with images, and the same through `transformers` (the oracle)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from sglr.engine.kv import KVSlotAllocator
from sglr.model.forward_batch import ExtendRequest
from sglr.model.image_input import ImageInput
from sglr.model.image_processor import load_image_processor
from sglr.model.runner import ModelRunner


def random_image(seed: int, width: int = 40, height: int = 33, mode: str = "RGB"):
    from PIL import Image

    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4}[mode]
    return Image.fromarray(rng.integers(0, 256, (height, width, channels), dtype=np.uint8), mode)


def expanded_prompt(
    runner: ModelRunner, pieces: list[list[int] | int | tuple[int, int]], model_dir: Path
) -> tuple[list[int], tuple[ImageInput, ...], torch.Tensor | None]:
    """`pieces`: token lists, image seeds and `(seed, num_frames)` videos, in order. Returns the ids (each image as its run of
    image tokens), the runner's image inputs and the pixels for `transformers` (a dict of its
    keyword arguments: `pixel_values`, and `image_sizes` for tiled models)."""
    vision = runner.config.vision
    assert vision is not None
    processor = load_image_processor(model_dir, vision.image_size, vision.image_grid_pinpoints)
    ids: list[int] = []
    images = []
    videos = []
    for piece in pieces:
        if isinstance(piece, tuple):
            seed, num_frames = piece
            tile = getattr(processor, "tile", processor)
            frames = torch.stack([tile(random_image(seed * 100 + f, 36, 30)) for f in range(num_frames)])
            digest = hashlib.sha256(frames.numpy().tobytes()).digest()
            num_tokens = num_frames * vision.num_tokens_per_frame
            videos.append(ImageInput(len(ids), num_tokens, frames, digest, is_video=True))
            ids += [vision.video_token_id] * num_tokens
        elif isinstance(piece, int):
            width, height = 30 + piece % 17 * 3, 25 + piece % 11 * 4
            pixels = processor(random_image(piece, width, height))
            digest = hashlib.sha256(pixels.numpy().tobytes() + bytes(str((height, width)), "ascii")).digest()
            num_tokens = vision.num_tokens_for(height, width)
            images.append(ImageInput(len(ids), num_tokens, pixels, digest, (height, width)))
            ids += [vision.image_token_id] * num_tokens
        else:
            ids += piece
    inputs = hf_pixels(images, vision.is_anyres)
    if videos:
        inputs = (inputs or {}) | {"pixel_values_videos": torch.stack([v.pixel_values for v in videos])}
    return ids, tuple(sorted(images + videos, key=lambda i: i.offset)), inputs


def hf_pixels(images: list[ImageInput], tiled: bool) -> dict | None:
    if not images:
        return None
    if not tiled:
        return {"pixel_values": torch.stack([image.pixel_values for image in images])}
    max_tiles = max(image.pixel_values.shape[0] for image in images)
    padded = [
        torch.cat(
            [
                i.pixel_values,
                i.pixel_values.new_zeros(max_tiles - i.pixel_values.shape[0], *i.pixel_values.shape[1:]),
            ]
        )
        for i in images
    ]
    return {
        "pixel_values": torch.stack(padded),
        "image_sizes": torch.tensor([i.original_size for i in images]),
    }


def runner_greedy(
    runner: ModelRunner, prompts: list[tuple[list[int], tuple[ImageInput, ...]]], num_new: int
) -> tuple[list[list[int]], torch.Tensor]:
    """Greedy ids for each prompt, all in one batch (one extend, then decodes); also the
    logits after each prompt."""
    allocator = KVSlotAllocator(runner.num_kv_slots)
    extends = []
    for row, (ids, images) in enumerate(prompts, start=1):
        slots = allocator.try_alloc(len(ids))
        extends.append(ExtendRequest(row, np.array(ids), slots[:0], slots, images=images))
    out = runner.forward(runner.extend_batch(extends))
    first_logits = out.next_token_logits.clone()
    tokens = [[int(t)] for t in out.next_token_logits.argmax(-1).tolist()]
    lens = [len(ids) for ids, _ in prompts]
    for _ in range(num_new - 1):
        lens = [n + 1 for n in lens]
        slots = allocator.try_alloc(len(prompts))
        rows = list(range(1, len(prompts) + 1))
        out = runner.forward(runner.decode_batch(rows, [t[-1] for t in tokens], lens, slots))
        for t, nxt in zip(tokens, out.next_token_logits.argmax(-1).tolist(), strict=True):
            t.append(int(nxt))
    return tokens, first_logits


@lru_cache(maxsize=2)
def load_hf_llava(path: Path) -> torch.nn.Module:
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def hf_greedy(path: Path, ids: list[int], pixels: dict | None, num_new: int) -> list[int]:
    model = load_hf_llava(path)
    with torch.no_grad():
        out = model.generate(
            input_ids=torch.tensor([ids]),
            **(pixels or {}),
            max_new_tokens=num_new,
            min_new_tokens=num_new,
            do_sample=False,
        )
    return out[0, len(ids) :].tolist()


def hf_logits(path: Path, ids: list[int], pixels: dict | None) -> torch.Tensor:
    """fp32 logits `[len, V]` at every position."""
    with torch.no_grad():
        return load_hf_llava(path)(input_ids=torch.tensor([ids]), **(pixels or {})).logits[0].float()
