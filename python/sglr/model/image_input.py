"""`ImageInput`: one preprocessed image placed in a request's prompt, as the runner takes it.

The engine places an image at prompt positions `offset .. offset + num_tokens - 1` (the expanded
image token) and keeps `content_hash` for the prefix cache; the runner encodes the pixels when
an extend computes any of those positions and writes the features there, in place of the image
token's embedding. `ImageSpan` is the part of one image a batch computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class ImageInput:
    offset: int  # prompt position of the image's first token
    num_tokens: int
    pixel_values: torch.Tensor  # [C, H, W] (or [tiles, C, H, W] when tiled) float32, preprocessed
    content_hash: bytes  # sha256 of the pixels (and size): equal images, equal features
    original_size: tuple[int, int] = (0, 0)  # (height, width) before preprocessing (tiled models)
    is_video: bool = False  # pixel_values are a video's frames `[frames, C, H, W]`

    @property
    def end(self) -> int:
        return self.offset + self.num_tokens


@dataclass(frozen=True, eq=False)
class ImageSpan:
    """Features `first .. first + length - 1` of `image` go to batch token `batch_start ..`."""

    image: ImageInput
    batch_start: int
    first: int
    length: int


def spans_at(images: tuple[ImageInput, ...], start: int, end: int, batch_start: int) -> list[ImageSpan]:
    """The parts of `images` at positions `start .. end - 1`, computed from batch token `batch_start`."""
    spans = []
    for image in images:
        lo, hi = max(start, image.offset), min(end, image.end)
        if lo < hi:
            spans.append(ImageSpan(image, batch_start + lo - start, lo - image.offset, hi - lo))
    return spans
