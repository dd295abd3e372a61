"""LLaVA-1.5: a CLIP ViT tower, a two-layer MLP projector and a Llama-family decoder.

An image stands in the prompt as `num_image_tokens` copies of the image token; the decoder sees
the projected patch features at those positions instead of the token's embedding. Everything
after the embeddings is the text model's (a Llama-family `DecoderForCausalLM`), so decode steps, the KV cache and
the attention backends do not know images exist.

Checkpoint names come in two layouts, both read: the published one
(`language_model.model.*`, `language_model.lm_head`, `vision_tower.vision_model.*`) and the one
`transformers` 5 uses in memory (`model.language_model.*`, `model.vision_tower.*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F

from sglr.errors import ModelConfigError
from sglr.model.clip_vision import VISION_ACTIVATIONS, ClipVisionTower
from sglr.model.config import ModelConfig
from sglr.model.decoder import DecoderForCausalLM
from sglr.model.image_input import ImageInput, ImageSpan
from sglr.model.layers import Linear, load_named_weights
from sglr.model.lazy_tensor import LazyTensor
from sglr.model.parallel import TensorParallel
from sglr.model.vision_config import VisionConfig, best_resolution, unpadded_shape

# (checkpoint prefix, module prefix), first match wins.
_RENAMES = (
    ("language_model.model.", "model."),
    ("language_model.lm_head.", "lm_head."),
    ("model.language_model.", "model."),
    ("model.vision_tower.vision_model.", "vision_tower."),
    ("model.vision_tower.", "vision_tower."),
    ("vision_tower.vision_model.", "vision_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
    ("model.image_newline", "image_newline"),
)
# Features kept for images a prefill chunk split (bounded: a request may end mid-image).
_MAX_UNFINISHED = 16
# In the checkpoint, unused by LLaVA (it reads a hidden state before the final norm).
_UNUSED_SUFFIXES = ("vision_tower.post_layernorm.weight", "vision_tower.post_layernorm.bias")


class MultiModalProjector(torch.nn.Module):
    def __init__(self, vision: VisionConfig, text_hidden: int, dtype: torch.dtype) -> None:
        super().__init__()
        in_features = vision.hidden_size * len(vision.feature_layers)
        self.linear_1 = Linear(in_features, text_hidden, bias=vision.projector_bias, dtype=dtype)
        self.act = VISION_ACTIVATIONS[vision.projector_hidden_act]
        self.linear_2 = Linear(text_hidden, text_hidden, bias=vision.projector_bias, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(self.act(self.linear_1(x)))


class LlavaForConditionalGeneration(DecoderForCausalLM):
    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        if config.vision is None:
            raise ModelConfigError("a LLaVA model needs a vision config")
        super().__init__(config, dtype, max_positions, tp)
        self.vision = config.vision
        # Replicated on every tensor-parallel rank: it runs once per image, not per token.
        self.vision_tower = ClipVisionTower(config.vision, dtype)
        self.multi_modal_projector = MultiModalProjector(config.vision, config.hidden_size, dtype)
        self._unfinished: dict[bytes, torch.Tensor] = {}  # by content hash, oldest first
        self.num_images_encoded = 0

    def encode_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """`[N, C, H, W]` -> `[N, num_image_tokens, hidden]` in the decoder's embedding space."""
        return self.multi_modal_projector(self.vision_tower(pixel_values))

    def image_features(self, images: Sequence[ImageInput], device: torch.device) -> list[torch.Tensor]:
        """Each image's features `[num_tokens, hidden]`, all images through the tower at once."""
        pixels = torch.stack([image.pixel_values for image in images]).to(device)
        return list(self.encode_images(pixels))

    def embed_with_images(self, input_ids: torch.Tensor, spans: Sequence[ImageSpan]) -> torch.Tensor:
        """Token embeddings `[T, hidden]` with each span's image features in place. Each image
        is encoded once per call; an image whose positions a later chunk still has to compute
        keeps its features until that chunk (`_unfinished`), so a prefill split inside an image
        encodes it once."""
        embeds = self.model.embed_tokens(input_ids)
        features: dict[bytes, torch.Tensor] = {}
        todo: dict[bytes, ImageInput] = {}
        for span in spans:
            digest = span.image.content_hash
            if digest in self._unfinished:
                features[digest] = self._unfinished.pop(digest)
            elif digest not in features:
                todo[digest] = span.image
        if todo:
            encoded = self.image_features(list(todo.values()), embeds.device)
            self.num_images_encoded += len(todo)
            features.update(zip(todo, (f.to(embeds.dtype) for f in encoded), strict=True))
        for span in spans:
            rows = features[span.image.content_hash][span.first : span.first + span.length]
            embeds[span.batch_start : span.batch_start + span.length] = rows
            if span.first + span.length < span.image.num_tokens:
                self._unfinished[span.image.content_hash] = features[span.image.content_hash]
            else:
                self._unfinished.pop(span.image.content_hash, None)
        while len(self._unfinished) > _MAX_UNFINISHED:  # requests that ended mid-image
            self._unfinished.pop(next(iter(self._unfinished)))
        return embeds

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor | LazyTensor]]) -> None:
        ignored = ("lm_head.weight",) if self.config.tie_word_embeddings else ()
        load_named_weights(self, _renamed(weights), ignored_names=(*ignored, *_UNUSED_SUFFIXES))


def _renamed(
    weights: Iterable[tuple[str, torch.Tensor | LazyTensor]],
) -> Iterator[tuple[str, torch.Tensor | LazyTensor]]:
    for name, tensor in weights:
        for old, new in _RENAMES:
            if name.startswith(old):
                name = new + name[len(old) :]
                break
        yield name, tensor


class LlavaNextForConditionalGeneration(LlavaForConditionalGeneration):
    """LLaVA-NeXT: an image comes as tiles (the whole image squashed, then the grid's tiles);
    the grid's features are laid out as one feature map, its padding rows or columns dropped,
    and each row ends with the learned `image_newline`, after the whole image's features."""

    def __init__(
        self, config: ModelConfig, dtype: torch.dtype, max_positions: int, tp: TensorParallel | None = None
    ) -> None:
        super().__init__(config, dtype, max_positions, tp)
        self.image_newline = torch.nn.Parameter(
            torch.empty(config.hidden_size, dtype=dtype), requires_grad=False
        )

    def image_features(self, images: Sequence[ImageInput], device: torch.device) -> list[torch.Tensor]:
        pixels = torch.cat([image.pixel_values for image in images]).to(device)
        per_tile = self.encode_images(pixels).split([image.pixel_values.shape[0] for image in images])
        return [self._pack(tiles, image.original_size) for tiles, image in zip(per_tile, images, strict=True)]

    def _pack(self, tiles: torch.Tensor, original_size: tuple[int, int]) -> torch.Tensor:
        """`[1 + tiles, side * side, hidden]` -> `[num_tokens_for(original_size), hidden]`."""
        vision = self.vision
        side = vision.image_size // vision.patch_size
        grid_h, grid_w = best_resolution(original_size, vision.image_grid_pinpoints)
        tiles_h, tiles_w = grid_h // vision.image_size, grid_w // vision.image_size
        hidden = tiles.shape[-1]
        # [tiles_h, tiles_w, side, side, hidden] -> one map [tiles_h * side, tiles_w * side, hidden]
        grid = tiles[1:].view(tiles_h, tiles_w, side, side, hidden).permute(0, 2, 1, 3, 4)
        grid = grid.reshape(tiles_h * side, tiles_w * side, hidden)
        rows, cols = unpadded_shape(original_size, tiles_h * side, tiles_w * side)
        top, left = (tiles_h * side - rows) // 2, (tiles_w * side - cols) // 2
        grid = grid[top : top + rows, left : left + cols]
        newline = self.image_newline.to(grid.dtype).expand(rows, 1, hidden)
        return torch.cat([tiles[0], torch.cat([grid, newline], dim=1).reshape(-1, hidden)])


class LlavaNextVideoForConditionalGeneration(LlavaNextForConditionalGeneration):
    """LLaVA-NeXT-Video: images as LLaVA-NeXT; a video's frames each through the tower, the
    patch grid pooled (`video_pool_stride`, average or max) before the projector, and the
    frames' features one after the other."""

    def image_features(self, images: Sequence[ImageInput], device: torch.device) -> list[torch.Tensor]:
        stills = [image for image in images if not image.is_video]
        videos = [image for image in images if image.is_video]
        by_input = dict(
            zip(map(id, stills), super().image_features(stills, device) if stills else [], strict=True)
        )
        if videos:
            frames = torch.cat([video.pixel_values for video in videos]).to(device)
            encoded = self.multi_modal_projector(self._pool(self.vision_tower(frames)))
            per_video = encoded.split([video.pixel_values.shape[0] for video in videos])
            by_input.update(
                (id(video), f.reshape(-1, f.shape[-1])) for video, f in zip(videos, per_video, strict=True)
            )
        return [by_input[id(image)] for image in images]

    def _pool(self, features: torch.Tensor) -> torch.Tensor:
        """`[frames, side * side, dim]` -> `[frames, (side // stride) ** 2, dim]`."""
        side = self.vision.image_size // self.vision.patch_size
        stride = self.vision.video_pool_stride
        grid = features.view(features.shape[0], side, side, -1).permute(0, 3, 1, 2)
        pool = F.avg_pool2d if self.vision.video_pool_mode == "average" else F.max_pool2d
        return pool(grid, stride, stride).flatten(2).transpose(1, 2)
