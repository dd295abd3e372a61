"""`VisionConfig`: the image side of a LLaVA-style checkpoint (a CLIP ViT tower, an MLP projector
and how image tokens stand in the prompt), read from the `config.json` of
`LlavaForConditionalGeneration` or `LlavaNextForConditionalGeneration`.

LLaVA-NeXT ("anyres") tiles a larger image: it picks the grid resolution that fits the image best
(`image_grid_pinpoints`), encodes each `image_size` tile plus the whole image squashed to one
tile, drops the tiles' padding rows or columns and ends each row of features with a learned
newline, so its image token count depends on the image's size (`num_tokens_for`).
LLaVA-NeXT-Video adds videos: each sampled frame goes through the tower as one tile, its patch
features pooled (`video_pool_stride`) before the projector, frames one after the other.

The decoder itself is described by the usual `ModelConfig` (read from `text_config`); this part
rides along as `ModelConfig.vision`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import ModelConfigError

_POOL_MODES = ("average", "max")
_SELECT_STRATEGIES = ("default", "full")
_ACTIVATIONS = ("quick_gelu", "gelu", "gelu_pytorch_tanh")


@dataclass(frozen=True)
class VisionConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    image_size: int
    patch_size: int
    num_channels: int = 3
    layer_norm_eps: float = 1e-5
    hidden_act: str = "quick_gelu"
    projector_hidden_act: str = "gelu"
    projector_bias: bool = True
    # Hidden states the projector reads: indexes into (embeddings, layer 1 out, ..., layer N out),
    # negative from the end; several are concatenated along the feature dim.
    feature_layers: tuple[int, ...] = (-2,)
    select_strategy: str = "default"  # "default" drops the CLS position, "full" keeps it
    image_token_id: int = 32000
    # LLaVA-NeXT: the (height, width) resolutions an image may be tiled at; () = one tile (LLaVA-1.5).
    image_grid_pinpoints: tuple[tuple[int, int], ...] = ()
    # LLaVA-NeXT-Video: the video token, and how each frame's patch grid is pooled.
    video_token_id: int | None = None
    video_pool_stride: int = 2
    video_pool_mode: str = "average"

    def __post_init__(self) -> None:
        if self.video_pool_mode not in _POOL_MODES or self.video_pool_stride < 1:
            raise ModelConfigError(
                f"unsupported video pooling {self.video_pool_mode!r} / stride {self.video_pool_stride}"
            )
        if self.select_strategy not in _SELECT_STRATEGIES:
            raise ModelConfigError(
                f"vision_feature_select_strategy must be one of {_SELECT_STRATEGIES}, got {self.select_strategy!r}"
            )
        for name in ("hidden_act", "projector_hidden_act"):
            if getattr(self, name) not in _ACTIVATIONS:
                raise ModelConfigError(f"unsupported vision activation {getattr(self, name)!r}")
        if self.image_size % self.patch_size:
            raise ModelConfigError("image_size must be a multiple of patch_size")
        if self.hidden_size % self.num_attention_heads:
            raise ModelConfigError("vision hidden_size must be a multiple of num_attention_heads")
        if self.image_grid_pinpoints and self.select_strategy != "default":
            raise ModelConfigError("tiled (anyres) images need vision_feature_select_strategy 'default'")
        for layer in self.feature_layers:
            if not -(self.num_hidden_layers + 1) <= layer <= self.num_hidden_layers:
                raise ModelConfigError(f"vision_feature_layer {layer} outside the tower's hidden states")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_image_tokens(self) -> int:
        """Prompt positions one image fills."""
        return self.num_patches + (1 if self.select_strategy == "full" else 0)

    @property
    def num_tokens_per_frame(self) -> int:
        """Prompt positions one video frame fills (its pooled patch grid)."""
        return (self.image_size // self.patch_size // self.video_pool_stride) ** 2

    @property
    def is_anyres(self) -> bool:
        return bool(self.image_grid_pinpoints)

    def num_tokens_for(self, height: int, width: int) -> int:
        """Prompt positions an image of `height x width` pixels fills."""
        if not self.is_anyres:
            return self.num_image_tokens
        grid_h, grid_w = best_resolution((height, width), self.image_grid_pinpoints)
        side = self.image_size // self.patch_size
        rows, cols = unpadded_shape(
            (height, width), side * (grid_h // self.image_size), side * (grid_w // self.image_size)
        )
        return self.num_image_tokens + rows * cols + rows  # base tile, tiles, a newline per row

    @property
    def num_layers_to_run(self) -> int:
        """Encoder layers up to the deepest hidden state the projector reads."""
        return max(layer % (self.num_hidden_layers + 1) for layer in self.feature_layers)


def best_resolution(size: tuple[int, int], resolutions: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """The (height, width) of `resolutions` that keeps most of an image of `size` (height,
    width) when scaled to fit, wasting the least area on ties."""
    height, width = size
    best, best_kept, best_waste = resolutions[0], -1, float("inf")
    for res_h, res_w in resolutions:
        scale = min(res_w / width, res_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        waste = res_w * res_h - kept
        if kept > best_kept or (kept == best_kept and waste < best_waste):
            best, best_kept, best_waste = (res_h, res_w), kept, waste
    return best


def unpadded_shape(size: tuple[int, int], rows: int, cols: int) -> tuple[int, int]:
    """The rows x cols feature grid of a tiled image without the rows (or columns) that cover
    only the padding added to fit its aspect ratio."""
    height, width = size
    if width / height > cols / rows:
        kept = int(round(height * (cols / width), 7))
        rows -= (rows - kept) // 2 * 2
    else:
        kept = int(round(width * (rows / height), 7))
        cols -= (cols - kept) // 2 * 2
    return rows, cols


def read_vision_config(raw: dict[str, Any]) -> VisionConfig:
    """The vision part of a LLaVA `config.json` dict."""
    vision = raw.get("vision_config")
    if not isinstance(vision, dict):
        raise ModelConfigError("a LLaVA config.json needs a vision_config")
    model_type = vision.get("model_type", "clip_vision_model")
    if model_type != "clip_vision_model":
        raise ModelConfigError(f"unsupported vision tower {model_type!r}; sglr supports CLIP ViT towers")
    layers = raw.get("vision_feature_layer", -2)
    try:
        return VisionConfig(
            hidden_size=int(vision["hidden_size"]),
            intermediate_size=int(vision["intermediate_size"]),
            num_hidden_layers=int(vision["num_hidden_layers"]),
            num_attention_heads=int(vision["num_attention_heads"]),
            image_size=int(vision["image_size"]),
            patch_size=int(vision["patch_size"]),
            num_channels=int(vision.get("num_channels", 3)),
            layer_norm_eps=float(vision.get("layer_norm_eps", 1e-5)),
            hidden_act=str(vision.get("hidden_act", "quick_gelu")),
            projector_hidden_act=str(raw.get("projector_hidden_act", "gelu")),
            projector_bias=bool(raw.get("multimodal_projector_bias", True)),
            feature_layers=tuple(int(x) for x in layers) if isinstance(layers, list) else (int(layers),),
            select_strategy=str(raw.get("vision_feature_select_strategy", "default")),
            image_token_id=int(raw.get("image_token_index", raw.get("image_token_id", 32000))),
            image_grid_pinpoints=tuple((int(h), int(w)) for h, w in raw.get("image_grid_pinpoints") or ()),
            video_token_id=None if raw.get("video_token_index") is None else int(raw["video_token_index"]),
            video_pool_stride=int(raw.get("spatial_pool_stride", 2)),
            video_pool_mode=str(raw.get("spatial_pool_mode", "average")),
        )
    except KeyError as exc:
        raise ModelConfigError(f"vision_config lacks required field {exc.args[0]!r}") from None
