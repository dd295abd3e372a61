"""`ImagePrompter`: a tokenized prompt plus its images and videos -> the prompt the model runs.

Each image token in the prompt (one per image, in order) is expanded into the image's run of
tokens (`VisionConfig.num_tokens_for`), each video token into its frames' runs; a prompt without
any placeholders of a kind gets them all after its BOS token (or first). Images and videos are
read and preprocessed here, on the caller's side, and come out as the runner's `ImageInput`s;
beside the ids goes their prefix-cache form (`cache_keys.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sglr.engine.images.cache_keys import image_cache_keys, pixel_digest
from sglr.engine.images.loading import ImageLimits, load_image
from sglr.engine.images.video import load_video_frames
from sglr.errors import InvalidRequestError
from sglr.model.image_input import ImageInput
from sglr.model.image_processor import load_image_processor
from sglr.model.vision_config import VisionConfig


@dataclass(frozen=True)
class PromptWithImages:
    ids: list[int]
    images: tuple[ImageInput, ...]  # images and videos, by position
    keys: np.ndarray  # int32, as long as `ids`


@dataclass(frozen=True)
class _Placed:
    """One image or video before its position is known: pixels, token count, digest."""

    pixels: torch.Tensor
    num_tokens: int
    digest: bytes
    size: tuple[int, int]
    is_video: bool


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

    @property
    def takes_videos(self) -> bool:
        return self.vision.video_token_id is not None

    def build(
        self, ids: Sequence[int], image_data: Sequence[Any], video_data: Sequence[Any] = ()
    ) -> PromptWithImages:
        limits = self.limits
        if len(image_data) + len(video_data) > limits.max_images:
            raise InvalidRequestError(
                f"{len(image_data) + len(video_data)} images and videos in one request; "
                f"the limit is {limits.max_images}",
                param="image_data" if image_data else "video_data",
            )
        if video_data and not self.takes_videos:
            raise InvalidRequestError("this model does not take videos", param="video_data")
        ids = list(ids)
        placed: dict[int, list[_Placed]] = {}
        if image_data:
            image_token = self.vision.image_token_id
            ids = self._placeholders(ids, image_token, len(image_data), "image")
            placed[image_token] = [self._image(item, f"image_data[{i}]") for i, item in enumerate(image_data)]
        if video_data:
            video_token = self.vision.video_token_id
            assert video_token is not None
            ids = self._placeholders(ids, video_token, len(video_data), "video")
            placed[video_token] = [self._video(item, f"video_data[{i}]") for i, item in enumerate(video_data)]
        out_ids: list[int] = []
        keys: list[np.ndarray] = []
        inputs = []
        for token in ids:
            queue = placed.get(token)
            if not queue:
                out_ids.append(token)
                keys.append(np.array([token], dtype=np.int32))
                continue
            item = queue.pop(0)
            inputs.append(
                ImageInput(len(out_ids), item.num_tokens, item.pixels, item.digest, item.size, item.is_video)
            )
            out_ids += [token] * item.num_tokens
            keys.append(image_cache_keys(item.digest, item.num_tokens, self.vocab_size))
        return PromptWithImages(out_ids, tuple(inputs), np.concatenate(keys))

    def _placeholders(self, ids: list[int], token: int, count: int, kind: str) -> list[int]:
        num_placeholders = sum(1 for t in ids if t == token)
        if num_placeholders == 0:
            at = 1 if ids and ids[0] == self.bos_token_id else 0
            return ids[:at] + [token] * count + ids[at:]
        if num_placeholders != count:
            raise InvalidRequestError(
                f"the prompt holds {num_placeholders} {kind} tokens for {count} {kind}s", param=f"{kind}_data"
            )
        return ids

    def _image(self, item: Any, param: str) -> _Placed:
        image = load_image(item, param, self.limits)
        size = (image.height, image.width)
        pixels = self.processor(image)
        # A tiled image's features depend on its size too (the padding dropped).
        digest = pixel_digest(pixels, size if self.vision.is_anyres else ())
        return _Placed(pixels, self.vision.num_tokens_for(*size), digest, size, is_video=False)

    def _video(self, item: Any, param: str) -> _Placed:
        frames = load_video_frames(item, param, self.limits)
        tile = getattr(self.processor, "tile", self.processor)  # a frame is one tile
        pixels = torch.stack([tile(frame) for frame in frames])
        digest = pixel_digest(pixels, (-1,))  # never equal to an image's
        num_tokens = len(frames) * self.vision.num_tokens_per_frame
        return _Placed(pixels, num_tokens, digest, (frames[0].height, frames[0].width), is_video=True)
