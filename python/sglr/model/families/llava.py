"""LLaVA-1.5, LLaVA-NeXT and LLaVA-NeXT-Video: a CLIP ViT tower and an MLP projector beside a
Llama, Mistral or Qwen2 decoder (`text_config`). Their model classes live in `sglr.model.llava`
(the tower in `sglr.model.clip_vision`), the image side of the config in
`sglr.model.vision_config`, preprocessing in `sglr.model.image_processor`."""

from __future__ import annotations

from sglr.model.family import Family, VisionParts


def _model_class(architecture: str) -> type:
    from sglr.model import llava  # torch: imported to build a model, not to read a config

    return getattr(llava, architecture)


FAMILY = Family(
    architectures={
        "LlavaForConditionalGeneration": None,
        "LlavaNextForConditionalGeneration": None,
        "LlavaNextVideoForConditionalGeneration": None,
    },
    vision=VisionParts(
        text_architectures=("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"),
        model_class=_model_class,
    ),
)
