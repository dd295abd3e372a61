"""The CLIP ViT image encoder LLaVA reads patch features from.

Pre-norm transformer over `[CLS] + patches` with full (bidirectional) attention; it runs once per
image, outside the paged KV cache, so plain `scaled_dot_product_attention` does. Only the layers
up to the deepest hidden state the projector reads run (LLaVA-1.5 reads the second to last).
Module names follow the checkpoints (`embeddings.patch_embedding`, `encoder.layers.N.self_attn`,
`pre_layrnorm` with its historical spelling); q/k/v load into one fused projection.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sglr.model.layers import Linear
from sglr.model.vision_config import VisionConfig


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


VISION_ACTIVATIONS = {"quick_gelu": quick_gelu, "gelu": F.gelu, "gelu_pytorch_tanh": _gelu_tanh}


class ClipEmbeddings(torch.nn.Module):
    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        h = config.hidden_size
        self.class_embedding = torch.nn.Parameter(torch.empty(h, dtype=dtype), requires_grad=False)
        self.patch_embedding = torch.nn.Conv2d(
            config.num_channels, h, config.patch_size, stride=config.patch_size, bias=False, dtype=dtype
        )
        self.position_embedding = torch.nn.Embedding(config.num_patches + 1, h, dtype=dtype)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """`[N, C, H, W]` -> `[N, 1 + patches, hidden]`."""
        patches = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))
        patches = patches.flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(patches.shape[0], 1, -1)
        return torch.cat([cls, patches], dim=1) + self.position_embedding.weight


class ClipAttention(torch.nn.Module):
    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = h // self.num_heads
        self.qkv_proj = Linear(h, (h, h, h), bias=True, dtype=dtype, shard_names=("q", "k", "v"))
        self.out_proj = Linear(h, h, bias=True, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, length, h = x.shape
        q, k, v = (
            t.view(n, length, self.num_heads, self.head_dim).transpose(1, 2)
            for t in self.qkv_proj(x).chunk(3, dim=-1)
        )
        out = F.scaled_dot_product_attention(q, k, v)  # scale head_dim ** -0.5, no mask
        return self.out_proj(out.transpose(1, 2).reshape(n, length, h))


class ClipMLP(torch.nn.Module):
    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        self.act = VISION_ACTIVATIONS[config.hidden_act]
        self.fc1 = Linear(config.hidden_size, config.intermediate_size, bias=True, dtype=dtype)
        self.fc2 = Linear(config.intermediate_size, config.hidden_size, bias=True, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class ClipEncoderLayer(torch.nn.Module):
    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        eps = config.layer_norm_eps
        self.layer_norm1 = torch.nn.LayerNorm(config.hidden_size, eps=eps, dtype=dtype)
        self.self_attn = ClipAttention(config, dtype)
        self.layer_norm2 = torch.nn.LayerNorm(config.hidden_size, eps=eps, dtype=dtype)
        self.mlp = ClipMLP(config, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class ClipEncoder(torch.nn.Module):
    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            ClipEncoderLayer(config, dtype) for _ in range(config.num_hidden_layers)
        )


class ClipVisionTower(torch.nn.Module):
    """`forward` gives the hidden states the projector reads, CLS dropped or kept per the config."""

    def __init__(self, config: VisionConfig, dtype: torch.dtype) -> None:
        super().__init__()
        self.config = config
        self.embeddings = ClipEmbeddings(config, dtype)
        self.pre_layrnorm = torch.nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, dtype=dtype)
        self.encoder = ClipEncoder(config, dtype)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """`[N, C, H, W]` -> `[N, num_image_tokens, hidden * len(feature_layers)]`."""
        config = self.config
        wanted = [layer % (config.num_hidden_layers + 1) for layer in config.feature_layers]
        hidden = self.pre_layrnorm(self.embeddings(pixel_values))
        states = [hidden]
        for layer in self.encoder.layers[: config.num_layers_to_run]:
            hidden = layer(hidden)
            states.append(hidden)
        features = torch.cat([states[i] for i in wanted], dim=-1)
        return features[:, 1:] if config.select_strategy == "default" else features
