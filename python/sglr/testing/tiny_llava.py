"""A tiny random-weight LLaVA-1.5 checkpoint written by `transformers` itself: a CLIP ViT tower,
the MLP projector and a Llama decoder (`LlavaForConditionalGeneration.save_pretrained`), with a
`LlavaProcessor` (the tiny models' tokenizer plus an `<image>` token, and a CLIP image
processor) saved beside it; or the same as LLaVA-NeXT (tiles on a grid of up to 56x56 pixels,
`LlavaNextProcessor`). For tests and benchmarks; nothing is downloaded:

    path = write_llava_checkpoint(tmp_path, seed=1)          # 28x28 images, 16 image tokens
    path = write_llava_checkpoint(tmp_path, seed=1, family="llava_next")
    path = write_llava_checkpoint(tmp_path, seed=1, family="llava_next_video")  # + <video>, 4 tokens a frame

The video family's processor is saved as LLaVA-NeXT's (images only): `transformers`' video
processor needs torchvision. Frames are preprocessed like images (CLIP steps, one tile each).

Weights are redrawn at unit activation scale (as `sglr.testing.tiny_families` does), so greedy
choices are not near-ties and image features move the logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_families import TEXT_CONFIG

IMAGE_TOKEN = "<image>"
VIDEO_TOKEN = "<video>"
_CONFIGS = {
    "llava": "LlavaConfig",
    "llava_next": "LlavaNextConfig",
    "llava_next_video": "LlavaNextVideoConfig",
}
_MODELS = {
    "llava": "LlavaForConditionalGeneration",
    "llava_next": "LlavaNextForConditionalGeneration",
    "llava_next_video": "LlavaNextVideoForConditionalGeneration",
}
# ChatML with content parts: an image part renders as the image token, a text part as its text.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}{{- '<image>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# The tiny text shape, with room for the image and video tokens in the vocabulary.
_TEXT: dict[str, Any] = {**TEXT_CONFIG, "vocab_size": 4160, "intermediate_size": 96}
_VISION: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "image_size": 28,
    "patch_size": 7,
    "projection_dim": 32,
}


def write_llava_checkpoint(
    path: Path,
    seed: int = 0,
    text: dict[str, Any] | None = None,
    vision: dict[str, Any] | None = None,
    family: str = "llava",
    **overrides: Any,
) -> Path:
    """Writes the checkpoint and its processor at `path`; `text` / `vision` override fields of
    those configs, `overrides` fields of the LLaVA config (e.g. `vision_feature_layer`).
    `family`: "llava" (LLaVA-1.5), "llava_next" (tiled images) or "llava_next_video"."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tiny_model_path("llama")))
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN, VIDEO_TOKEN]})
    tokenizer.chat_template = CHAT_TEMPLATE
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    vision_config = transformers.CLIPVisionConfig(**{**_VISION, **(vision or {})})
    size = vision_config.image_size
    tiled = family.startswith("llava_next")
    next_fields: dict[str, Any] = {
        "image_grid_pinpoints": [[size, 2 * size], [2 * size, size], [2 * size, 2 * size]]
    }
    if family == "llava_next_video":
        next_fields |= {
            "video_token_index": tokenizer.convert_tokens_to_ids(VIDEO_TOKEN),
            "spatial_pool_stride": 2,
        }
    config = getattr(transformers, _CONFIGS[family])(
        vision_config=vision_config,
        text_config=transformers.LlamaConfig(**{**_TEXT, **(text or {})}),
        image_token_index=image_token_id,
        projector_hidden_act="gelu",
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        **(next_fields if tiled else {}),
        **overrides,
    )
    torch.manual_seed(seed)
    model = getattr(transformers, _MODELS[family])(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                value = 1.0 + 0.1 * torch.randn(param.shape, generator=generator)
            elif name.endswith(".bias") or name.endswith("class_embedding"):
                value = 0.1 * torch.randn(param.shape, generator=generator)
            elif name.endswith(("embed_tokens.weight", "position_embedding.weight")):
                value = torch.randn(param.shape, generator=generator)
            else:  # unit-variance outputs: the fan-in is every dimension but the first
                fan_in = param[0].numel()
                value = torch.randn(param.shape, generator=generator) / fan_in**0.5
            param.copy_(value)
    model.save_pretrained(path)
    sizes = {"size": {"shortest_edge": size}, "crop_size": {"height": size, "width": size}}
    if tiled:
        image_processor = transformers.LlavaNextImageProcessorPil(
            **sizes, image_grid_pinpoints=next_fields["image_grid_pinpoints"]
        )
        processor_class = transformers.LlavaNextProcessor
    else:
        image_processor = transformers.CLIPImageProcessorPil(**sizes)
        processor_class = transformers.LlavaProcessor
    processor = processor_class(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=vision_config.patch_size,
        vision_feature_select_strategy="default",
        image_token=IMAGE_TOKEN,
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(path)
    return path
