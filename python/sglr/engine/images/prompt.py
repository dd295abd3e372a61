"""`ImagePrompter`: a tokenized prompt plus its images -> the prompt the model runs.

Each image token in the prompt (one per image, in order) is expanded into the model's
`num_image_tokens` copies; a prompt without any gets them all after its BOS token (or first).
The images are read and preprocessed here, on the caller's side, and come out as the runner's
`ImageInput`s; beside the ids goes their prefix-cache form (`cache_keys.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sglr.engine.images.cache_keys import image_cache_keys, pixel_digest
from sglr.engine.images.loading import ImageLimits, load_image
from sglr.errors import InvalidRequestError
from sglr.model.image_input import ImageInput
from sglr.model.image_processor import load_image_processor
from sglr.model.vision_config import VisionConfig


@dataclass(frozen=True)
class PromptWithImages:
    ids: list[int]
    images: tuple[ImageInput, ...]
    keys: np.ndarray  # int32, as long as `ids`


class ImagePrompter:
    def __init__(
        self,
        model_dir: str | Path,
        vision: VisionConfig,
        vocab_size: int,
        bos_token_id: int | None,
        limits: ImageLimits | None = None,
    ) -> None:
        self.vision = vision
        self.vocab_size = vocab_size
        self.bos_token_id = bos_token_id
        self.limits = limits or ImageLimits()
        self.processor = load_image_processor(model_dir, vision.image_size, vision.image_grid_pinpoints)

    def build(self, ids: Sequence[int], image_data: Sequence[Any]) -> PromptWithImages:
        limits = self.limits
        if len(image_data) > limits.max_images:
            raise InvalidRequestError(
                f"{len(image_data)} images in one request; the limit is {limits.max_images}",
                param="image_data",
            )
        image_token = self.vision.image_token_id
        ids = list(ids)
        num_placeholders = sum(1 for t in ids if t == image_token)
        if num_placeholders == 0:
            at = 1 if ids and ids[0] == self.bos_token_id else 0
            ids[at:at] = [image_token] * len(image_data)
        elif num_placeholders != len(image_data):
            raise InvalidRequestError(
                f"the prompt holds {num_placeholders} image tokens for {len(image_data)} images",
                param="image_data",
            )
        loaded = [load_image(item, f"image_data[{i}]", limits) for i, item in enumerate(image_data)]
        sizes = [(image.height, image.width) for image in loaded]
        pixels = [self.processor(image) for image in loaded]
        out_ids: list[int] = []
        keys: list[np.ndarray] = []
        images = []
        for token in ids:
            if token != image_token:
                out_ids.append(token)
                keys.append(np.array([token], dtype=np.int32))
                continue
            index = len(images)
            values, size = pixels[index], sizes[index]
            num_tokens = self.vision.num_tokens_for(*size)
            # A tiled image's features depend on its size too (the padding dropped).
            digest = pixel_digest(values, size if self.vision.is_anyres else ())
            images.append(ImageInput(len(out_ids), num_tokens, values, digest, size))
            out_ids += [image_token] * num_tokens
            keys.append(image_cache_keys(digest, num_tokens, self.vocab_size))
        return PromptWithImages(out_ids, tuple(images), np.concatenate(keys))
