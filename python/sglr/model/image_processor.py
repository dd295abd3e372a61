"""The CLIP image preprocessing LLaVA checkpoints name in `preprocessor_config.json`.

Steps, as the Hugging Face CLIP processor (PIL backend) does them, so the pixels are the same:
RGB (transparent pixels composited onto white), resize so the shortest edge is `size` (PIL
bicubic by default), center crop, scale to [0, 1] (in float64, stored float32), then normalize
by the channel mean and std in float32. Output `[C, H, W]` float32.

`AnyresImageProcessor` (LLaVA-NeXT) first tiles: the image is resized to fit the best grid
resolution, zero-padded to it (centered) and cut into crop-sized tiles; the whole image squashed
to one tile comes first. Each tile then goes through the steps above. Output `[1 + tiles, C, H, W]`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sglr.errors import ModelConfigError

# OpenAI CLIP's statistics, the processor's defaults.
_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_BICUBIC = 3


@dataclass(frozen=True)
class ClipImageProcessor:
    shortest_edge: int = 224
    crop_height: int = 224
    crop_width: int = 224
    resample: int = _BICUBIC  # a PIL resampling filter id
    do_resize: bool = True
    do_center_crop: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, ...] = _CLIP_MEAN
    image_std: tuple[float, ...] = _CLIP_STD

    @classmethod
    def from_dict(cls, raw: dict[str, Any], image_size: int) -> ClipImageProcessor:
        """From `preprocessor_config.json`; sizes it leaves out default to the tower's `image_size`."""
        size = raw.get("size") or {}
        crop = raw.get("crop_size") or {}
        if isinstance(size, int):
            size = {"shortest_edge": size}
        if isinstance(crop, int):
            crop = {"height": crop, "width": crop}
        if "shortest_edge" not in size and size:
            raise ModelConfigError(f"unsupported image processor size {size!r}; expected shortest_edge")
        return cls(
            shortest_edge=int(size.get("shortest_edge", image_size)),
            crop_height=int(crop.get("height", image_size)),
            crop_width=int(crop.get("width", image_size)),
            resample=int(raw.get("resample", _BICUBIC)),
            do_resize=bool(raw.get("do_resize", True)),
            do_center_crop=bool(raw.get("do_center_crop", True)),
            do_rescale=bool(raw.get("do_rescale", True)),
            rescale_factor=float(raw.get("rescale_factor", 1 / 255)),
            do_normalize=bool(raw.get("do_normalize", True)),
            image_mean=tuple(float(x) for x in raw.get("image_mean", _CLIP_MEAN)),
            image_std=tuple(float(x) for x in raw.get("image_std", _CLIP_STD)),
        )

    def output_size(self, image_size: int) -> tuple[int, int]:
        """(height, width) of the pixels this processor gives for a tower of `image_size`."""
        if self.do_center_crop:
            return self.crop_height, self.crop_width
        return image_size, image_size

    def __call__(self, image: Any) -> torch.Tensor:
        """A PIL image -> `[3, H, W]` float32 pixel values."""
        image = _to_rgb(image)
        if self.do_resize:
            image = image.resize(self._resized_size(image.width, image.height), resample=self.resample)
        pixels = np.asarray(image)  # [H, W, 3] uint8
        if self.do_center_crop:
            pixels = _center_crop(pixels, self.crop_height, self.crop_width)
        values = pixels.astype(np.float32)
        if self.do_rescale:
            values = (pixels.astype(np.float64) * self.rescale_factor).astype(np.float32)
        if self.do_normalize:
            mean = np.asarray(self.image_mean, dtype=np.float32)
            std = np.asarray(self.image_std, dtype=np.float32)
            values = (values - mean) / std
        return torch.from_numpy(np.ascontiguousarray(values.transpose(2, 0, 1)))

    def _resized_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) with the shortest edge at `shortest_edge`, the long one truncated."""
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.shortest_edge, int(self.shortest_edge * long / short)
        return (new_short, new_long) if width <= height else (new_long, new_short)


@dataclass(frozen=True)
class AnyresImageProcessor:
    tile: ClipImageProcessor
    grid_pinpoints: tuple[tuple[int, int], ...]

    def __call__(self, image: Any) -> torch.Tensor:
        from sglr.model.vision_config import best_resolution

        image = _to_rgb(image)
        grid_h, grid_w = best_resolution((image.height, image.width), self.grid_pinpoints)
        fit_h, fit_w = _fit_size(image.height, image.width, grid_h, grid_w)
        fitted = np.asarray(image.resize((fit_w, fit_h), resample=self.tile.resample))
        top, left = (grid_h - fit_h) // 2, (grid_w - fit_w) // 2
        padded = np.zeros((grid_h, grid_w, 3), dtype=np.uint8)
        padded[top : top + fit_h, left : left + fit_w] = fitted
        side = self.tile.shortest_edge
        tile_h, tile_w = self.tile.crop_height, self.tile.crop_width
        tiles = [image.resize((side, side), resample=self.tile.resample)]
        tiles += [
            _pil(padded[i : i + tile_h, j : j + tile_w])
            for i in range(0, grid_h, tile_h)
            for j in range(0, grid_w, tile_w)
        ]
        return torch.stack([self.tile(tile) for tile in tiles])


def _fit_size(height: int, width: int, target_h: int, target_w: int) -> tuple[int, int]:
    """(height, width) of the image scaled to fit `target_h x target_w`, aspect kept (rounded up)."""
    scale_w, scale_h = target_w / width, target_h / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), target_h), target_w
    return target_h, min(math.ceil(width * scale_h), target_w)


def _pil(pixels: np.ndarray) -> Any:
    from PIL import Image

    return Image.fromarray(pixels)


ImageProcessor = ClipImageProcessor | AnyresImageProcessor


def load_image_processor(
    model_dir: str | Path, image_size: int, grid_pinpoints: tuple[tuple[int, int], ...] = ()
) -> ImageProcessor:
    """The checkpoint's processor (`preprocessor_config.json`, or the `image_processor` entry of
    the `processor_config.json` that `transformers` 5 writes), else CLIP's defaults at `image_size`."""
    model_dir = Path(model_dir)
    raw: dict[str, Any] = {}
    if (model_dir / "preprocessor_config.json").is_file():
        raw = json.loads((model_dir / "preprocessor_config.json").read_text())
    elif (model_dir / "processor_config.json").is_file():
        raw = json.loads((model_dir / "processor_config.json").read_text()).get("image_processor") or {}
    tile = ClipImageProcessor.from_dict(raw, image_size)
    if not grid_pinpoints:
        return tile
    pinpoints = raw.get("image_grid_pinpoints")
    grid = tuple((int(h), int(w)) for h, w in pinpoints) if pinpoints else grid_pinpoints
    return AnyresImageProcessor(tile, grid)


def _to_rgb(image: Any) -> Any:
    from PIL import Image

    if "A" in image.getbands() or image.info.get("transparency") is not None:
        background = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, image.convert("RGBA")).convert("RGB")
    return image.convert("RGB")


def _center_crop(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """The centered `height x width` window; zero padding where the image is smaller."""
    h, w = pixels.shape[:2]
    if h < height or w < width:
        padded = np.zeros((max(h, height), max(w, width), pixels.shape[2]), dtype=pixels.dtype)
        top, left = (padded.shape[0] - h + 1) // 2, (padded.shape[1] - w + 1) // 2
        padded[top : top + h, left : left + w] = pixels
        pixels, h, w = padded, padded.shape[0], padded.shape[1]
    top, left = (h - height) // 2, (w - width) // 2
    return pixels[top : top + height, left : left + width]
