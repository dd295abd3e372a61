"""The model runner's settings from the engine's: one `RunnerConfig`, the same on every rank of
every node."""

from __future__ import annotations

from typing import Any

from sglr.engine.config import EngineConfig
from sglr.engine.lora_registry import parse_lora_paths, startup_adapters

GPU_MAX_RUNNING = 256


def runner_config_for(cfg: EngineConfig) -> Any:
    """The model runner's settings from the engine's (the same on every rank of every node)."""
    from sglr.engine.speculative.config import num_draft_rows_for
    from sglr.model.runner import RunnerConfig, resolve_device

    return RunnerConfig(
        model_path=cfg.model_path,
        dtype=cfg.dtype,
        device=cfg.device,
        kv_num_tokens=cfg.max_total_tokens,
        mem_fraction=cfg.mem_fraction_static,
        max_context_len=cfg.context_length,
        attention_backend=cfg.attention_backend,
        load_format=cfg.load_format,
        gguf_weights=cfg.gguf_weights,
        seed=cfg.seed,
        cuda_graph_max_bs=cfg.cuda_graph_max_bs,
        cuda_graph_extend_max_tokens=cfg.cuda_graph_extend_max_tokens,
        max_num_reqs=(cfg.max_running_requests or GPU_MAX_RUNNING) + 2,
        num_draft_rows=num_draft_rows_for(cfg, resolve_device(cfg.device).type == "cuda"),
        enable_lora=cfg.serves_lora,
        max_lora_rank=cfg.max_lora_rank,
        lora_target_modules=cfg.lora_target_modules,
        lora_adapters=startup_adapters(parse_lora_paths(cfg.lora_paths)),
        lora_backend=cfg.lora_backend,
        quantization=cfg.quantization,
        kv_cache_dtype=cfg.kv_cache_dtype,
    )
