"""Type stubs for the Rust extension `sglr._core` (hand-written; keep in step with rust/py)."""

from collections.abc import Iterator, Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

__version__: str

IdArray: TypeAlias = npt.NDArray[np.int32] | npt.NDArray[np.uint32] | npt.NDArray[np.int64] | Sequence[int]
NodeHandle: TypeAlias = int

class RadixTree:
    """Token-prefix index over KV slot ids (page size 1) with LRU leaf eviction and locks.

    The tree never frees memory: `insert` reports how many leading tokens were already cached
    (the caller frees its duplicate slots) and `evict` returns slot ids for the pool.
    Errors: `sglr.errors.LengthMismatchError`, `UnknownNodeError`, `StaleNodeError`,
    `UnlockError`, `InvariantError`; `TypeError`/`ValueError` for malformed id arrays.
    """

    def __init__(self) -> None: ...
    def match_prefix(
        self, tokens: IdArray, namespace: str | None = None
    ) -> tuple[npt.NDArray[np.int32], NodeHandle]:
        """Slots of the longest cached prefix and the node it ends at (splits an edge if the
        match ends inside it; marks the path as recently used)."""
    def match_prefix_len(self, tokens: IdArray, namespace: str | None = None) -> tuple[int, NodeHandle]: ...
    def insert(self, tokens: IdArray, slots: IdArray, namespace: str | None = None) -> int:
        """Caches `tokens` with KV `slots`; returns the number of leading tokens already cached."""
    def insert_with_node(
        self, tokens: IdArray, slots: IdArray, namespace: str | None = None
    ) -> tuple[int, NodeHandle]: ...
    def match_prefix_batch(
        self, tokens_list: Sequence[IdArray], namespace: str | None = None
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], list[NodeHandle]]:
        """`match_prefix` over many sequences in one call, GIL released: `(slots, offsets,
        nodes)` where sequence `i` matched `slots[offsets[i]:offsets[i + 1]]`."""
    def insert_batch(
        self, tokens_list: Sequence[IdArray], slots_list: Sequence[IdArray], namespace: str | None = None
    ) -> list[int]:
        """`insert` over many sequences in one call, GIL released; stops at the first error."""
    def lock_batch(self, nodes: Sequence[NodeHandle]) -> None:
        """Locks each node; all or nothing."""
    def unlock_batch(self, nodes: Sequence[NodeHandle]) -> None:
        """Unlocks each node; all or nothing."""
    def lock(self, node: NodeHandle) -> None: ...
    def unlock(self, node: NodeHandle) -> None: ...
    def lock_ref(self, node: NodeHandle) -> int: ...
    def evict(self, num_tokens: int) -> npt.NDArray[np.int32]:
        """Drops at least `num_tokens` (or all evictable) tokens, LRU leaves first; returns their slots."""
    def evictable_size(self) -> int: ...
    def protected_size(self) -> int: ...
    def total_size(self) -> int: ...
    def num_nodes(self) -> int: ...
    def reset(self) -> None: ...
    def check_invariants(self) -> None: ...
    def dump(self, namespace: str | None = None) -> list[tuple[int, list[int], list[int], int]]:
        """Depth-first `(depth, tokens, slots, lock_ref)` rows, children by first token."""
    def summarize(
        self, max_nodes: int, max_depth: int, max_head_tokens: int
    ) -> tuple[int, int, list[tuple[int, str | None, int, int, int, int, int, int, int, list[int]]]]:
        """Bounded summary (GIL released): `(num_nodes, num_tokens, nodes)`, each node `(parent,
        namespace, depth, prefix_len, num_tokens, num_subtree_tokens, num_hits, lock_ref,
        idle_ticks, head_tokens)`, parents first (`parent` a position, -1 at the top)."""

class Admission:
    """One request admitted by `Scheduler.select`: prefill `token_ids[prefix_len:prefix_len + extend_len]`."""

    rid: int
    prefix_len: int
    """Tokens whose KV exists: the matched cache prefix (new admission) or the chunks already run."""
    extend_len: int
    """Tokens to prefill in this step (the chunk size)."""
    is_prompt_done: bool
    """False: a chunk of a longer prompt; the scheduler continues it first next step."""
    is_continuation: bool
    """A later chunk: no new lock, no prefix slots (the engine already holds them)."""
    node: NodeHandle | None
    """Tree node locked by this decision (new admissions); the engine unlocks it when done."""
    waited_steps: int
    is_urgent: bool
    """Offered ahead of the policy order (requeued, or by the starvation guard)."""

class Decision:
    """The outcome of one `Scheduler.select`, applied by the engine in one go: its KV pool takes
    the locks, evicts `num_tokens_to_evict` cached tokens, allocates `num_prefill_tokens` slots
    and runs the admissions. The scheduler itself never evicts or frees anything."""

    step: int
    admitted: list[Admission]
    prefix_slots: npt.NDArray[np.int32]
    """Matched prefix slots of all admissions, concatenated."""
    prefix_offsets: npt.NDArray[np.int64]
    """`prefix_slots[prefix_offsets[i]:prefix_offsets[i + 1]]` belongs to `admitted[i]`."""
    num_tokens_to_evict: int
    """Cached (unlocked) tokens to evict before `num_prefill_tokens` slots can be allocated."""
    num_prefill_tokens: int
    stop_reason: str
    """'queue_exhausted', 'prefill_budget', 'memory' or 'running_cap'."""
    def prefix_slots_of(self, i: int) -> npt.NDArray[np.int32]: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Admission]: ...

class Scheduler:
    """Cache-aware admission (SGLang's Algorithm 1) over a waiting queue held in Rust.

    Policies: 'lpm', 'dfs-weight', 'fcfs', 'lof', 'random'. Each step, `select` offers waiting
    requests (a chunked prefill in progress first, then requeued and starving ones, then
    policy order) while they fit: free slots + evictable cache - reserved output
    (`new_token_ratio` * clipped `max_new_tokens`), the per-step prefill budget (prompts beyond
    it are chunked) and `max_running_requests`. Admitted prefixes are locked in the tree; the
    engine owns those locks afterwards. The GIL is released during selection.
    Errors: `sglr.errors.DuplicateRequestError`, `EmptyPromptError`, `RequestTooLargeError`,
    `SchedulerConfigError`; `TypeError`/`ValueError` for malformed arguments.
    """

    def __init__(
        self,
        policy: str = "lpm",
        *,
        max_prefill_tokens: int = 16384,
        max_running_requests: int = 256,
        enable_chunked_prefill: bool = True,
        in_batch_share_min_len: int | None = 32,
        starvation_guard: bool = True,
        max_wait_steps: int | None = 1000,
        max_wait_s: float | None = 30.0,
        clip_max_new_tokens: int = 4096,
        init_new_token_ratio: float = 0.7,
        min_new_token_ratio: float = 0.098,
        new_token_ratio_decay_steps: int = 600,
        retract_decode_steps: int = 20,
        max_request_tokens: int | None = None,
        max_match_tokens_per_step: int = 1 << 20,
        seed: int = 0,
    ) -> None: ...
    def add_request(
        self,
        rid: int,
        token_ids: IdArray,
        max_new_tokens: int,
        namespace: str | None = None,
        *,
        arrival_time: float | None = None,
        max_prefix_len: int | None = None,
        priority_key: int = 0,
    ) -> None:
        """Queues a request at the back (`arrival_time` on `time.monotonic()`'s clock).
        `max_prefix_len` caps the cached prefix it may reuse (positions past it are computed,
        e.g. for prompt logprobs); the last token is always computed. Smaller `priority_key`s
        are offered first whatever the policy (which orders equal keys)."""
    def requeue(
        self,
        rid: int,
        token_ids: IdArray,
        max_new_tokens: int,
        namespace: str | None = None,
        *,
        arrival_time: float | None = None,
        max_prefix_len: int | None = None,
        priority_key: int = 0,
    ) -> None:
        """Puts a retracted request (prompt + output so far) back at the head of the queue
        (of its `priority_key`'s requests)."""
    def remove(self, rid: int) -> bool:
        """Drops a held request (abort); False if it was not held."""
    def select(
        self,
        tree: RadixTree,
        num_free_slots: int,
        running_tokens_left: IdArray | None = None,
        *,
        now: float | None = None,
    ) -> Decision:
        """One admission step. `running_tokens_left[i]`: output tokens running request i may
        still generate. Mutates `tree` (matches and locks; never evicts)."""
    def __len__(self) -> int: ...
    def __contains__(self, rid: object) -> bool: ...
    @property
    def chunked_rid(self) -> int | None: ...
    @property
    def step(self) -> int: ...
    @property
    def policy(self) -> str: ...
    @property
    def num_starved_admissions(self) -> int: ...
    @property
    def new_token_ratio(self) -> float: ...
    @new_token_ratio.setter
    def new_token_ratio(self, value: float) -> None: ...
    def decay_new_token_ratio(self) -> float:
        """After a decode step without retraction."""
    def reset_new_token_ratio(self) -> None:
        """When the engine goes idle."""
    def on_retract(self, num_decoded_tokens: int, num_max_new_tokens: int, num_running: int) -> float:
        """After a retraction, with sums over the requests still running."""
    def check_invariants(self) -> None: ...

# --- constraints (rust/fsm): regex / JSON-schema FSMs over a tokenizer's vocabulary ---

StateId: TypeAlias = int

class Vocabulary:
    """Token id -> bytes of a tokenizer, immutable and shareable (build it once per model).

    `tokens[i]` is `bytes` (raw), `str` (decoded with `encoding`: "utf8", "byte_level" for
    the GPT-2 alphabet, "sentencepiece" for `▁` and `<0xNN>`) or `None` (special / unused:
    never allowed). EOS ids are allowed exactly in accepting states.
    Errors: `sglr.errors.VocabularyError`; `TypeError` for other item types.
    """

    def __init__(
        self, tokens: Sequence[bytes | str | None], eos_token_ids: IdArray, encoding: str = "utf8"
    ) -> None: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def num_mask_words(self) -> int:
        """int32 words per bitmask row: ceil(vocab_size / 32)."""
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def fingerprint(self) -> int:
        """Content hash; equal vocabularies have equal fingerprints (a cache key)."""
    def token_bytes(self, token_id: int) -> bytes | None: ...
    def memory_bytes(self) -> int: ...
    def clear_caches(self) -> None:
        """Forgets trie walks shared between FSMs of this vocabulary."""
    def __len__(self) -> int: ...

class TokenFsm:
    """A compiled constraint: per-state allowed-token masks (memoised on first use) and
    jump-forward strings. Immutable and thread-safe; share one per (constraint, vocabulary).

    Errors: `sglr.errors.InvalidRegexError`, `UnsupportedRegexError`,
    `ConstraintTooLargeError`, `EmptyConstraintError`, `InvalidSchemaError`,
    `UnsupportedSchemaError` (with `.keyword`, `.path`), `UnknownStateError`,
    `TokenNotAllowedError`, `BitmaskShapeError`.
    """

    @staticmethod
    def from_regex(
        pattern: str,
        vocabulary: Vocabulary,
        *,
        dfa_size_limit: int | None = None,
        nfa_size_limit: int | None = None,
    ) -> TokenFsm:
        """The whole output must match `pattern` (anchored at both ends)."""
    @staticmethod
    def from_json_schema(
        schema: str,
        vocabulary: Vocabulary,
        *,
        whitespace_pattern: str | None = None,
        additional_properties: bool = False,
        implied_types: bool = True,
        max_any_depth: int | None = 3,
        max_recursion_depth: int | None = None,
        dfa_size_limit: int | None = None,
        nfa_size_limit: int | None = None,
        max_regex_len: int | None = None,
        max_unrolled_length: int | None = 32,
        properties_any_order: bool = False,
    ) -> TokenFsm:
        """`max_any_depth`: nesting unrolled inside values the schema leaves free; None: any
        depth, which no regex holds, so such schemas raise `UnsupportedSchemaError` (the grammar
        path takes them). `max_regex_len` (None: 4 KiB): a longer schema regex (1 to 5 ms of
        DFA construction per KiB) raises `ConstraintTooLargeError`, and a string length bound
        past `max_unrolled_length` (None: any) `UnsupportedSchemaError`: the grammar path
        (lexemes built on first use, long strings counted) takes such schemas."""
    @property
    def pattern(self) -> str:
        """The regex enforced (for a schema, the regex it compiled to)."""
    @property
    def start_state(self) -> StateId: ...
    @property
    def terminal_state(self) -> StateId:
        """The state after EOS; only EOS is allowed from it."""
    @property
    def num_states(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def num_mask_words(self) -> int: ...
    def is_accepting(self, state: StateId) -> bool: ...
    def is_terminal(self, state: StateId) -> bool: ...
    def fill_bitmask(self, state: StateId, out: npt.NDArray[np.int32]) -> None:
        """Writes the mask into `out` (1-D int32, >= num_mask_words; extra words zeroed):
        bit t of word t // 32 set iff token t is allowed."""
    def allowed_token_ids(self, state: StateId) -> npt.NDArray[np.int32]: ...
    def advance(self, state: StateId, token: int) -> StateId:
        """Raises `TokenNotAllowedError` when the mask of `state` forbids `token`."""
    def try_advance(self, state: StateId, token: int) -> StateId | None: ...
    def advance_many(self, state: StateId, tokens: IdArray) -> StateId: ...
    def advance_bytes(self, state: StateId, data: bytes) -> StateId | None: ...
    def jump_forward(self, state: StateId) -> tuple[bytes, StateId]:
        """Longest forced byte string from `state` (never past an accepting state, never
        ending inside a UTF-8 character) and the state after it."""
    def build_all(self, max_states: int = ...) -> int:
        """Computes the masks of every token-reachable state (at most `max_states`)."""
    def stats(self) -> dict[str, int]:
        """num_states, num_rows_built, num_dense_rows, memory_bytes."""
    def check_invariants(self) -> None: ...

def fill_bitmasks(
    fsms: Sequence[TokenFsm],
    states: IdArray,
    out: npt.NDArray[np.int32],
    rows: IdArray | None = None,
) -> None:
    """Row `rows[i]` (default `i`) of the 2-D int32 `out` gets the mask of `fsms[i]` in
    `states[i]`; all inputs are checked before writing; the GIL is released."""

def json_schema_to_regex(
    schema: str,
    *,
    whitespace_pattern: str | None = None,
    additional_properties: bool = False,
    implied_types: bool = True,
    max_any_depth: int | None = 3,
    max_recursion_depth: int | None = None,
    max_regex_len: int | None = None,
    max_unrolled_length: int | None = 32,
    properties_any_order: bool = False,
) -> str: ...

class GrammarConstraint:
    """A compiled grammar (EBNF or recursive JSON schema) over one vocabulary; lexeme DFAs are
    built on first use. Raises `sglr.errors.GrammarSyntaxError` (with `line` / `column`),
    `UnsupportedSchemaError`, `EmptyConstraintError` or `ConstraintTooLargeError`."""

    @staticmethod
    def from_ebnf(text: str, vocabulary: Vocabulary) -> GrammarConstraint: ...
    @staticmethod
    def from_json_schema(
        schema: str,
        vocabulary: Vocabulary,
        *,
        whitespace_pattern: str | None = None,
        additional_properties: bool = False,
        implied_types: bool = True,
        properties_any_order: bool = False,
    ) -> GrammarConstraint:
        """`additional_properties` and `implied_types` as in `JsonSchemaConfig`: False / True
        read schemas as generation wants, True / False as the JSON Schema specification does;
        `properties_any_order` too (declared properties in any order, each at most once)."""
    @staticmethod
    def from_structural_tag(
        structures: list[tuple[str, str, str]],
        triggers: list[str],
        vocabulary: Vocabulary,
        *,
        whitespace_pattern: str | None = None,
        additional_properties: bool = False,
        implied_types: bool = True,
    ) -> GrammarConstraint:
        """Free text in which each trigger opens a `(begin, schema JSON text, end)` segment;
        a malformed tag raises `InvalidStructuralTagError` naming its `field`."""
    def start(self) -> GrammarState: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def num_rules(self) -> int: ...
    @property
    def num_lexemes(self) -> int: ...
    @property
    def num_lexemes_built(self) -> int: ...
    @property
    def memory_bytes(self) -> int:
        """Bytes held by the lexeme DFAs built so far and the memoised lexeme masks."""
    @property
    def num_lexeme_masks(self) -> int: ...

class GrammarState:
    """One output's position in a grammar (a parse chart); `copy()` is independent."""

    def copy(self) -> GrammarState: ...
    @property
    def is_accepting(self) -> bool: ...
    @property
    def is_finished(self) -> bool: ...
    @property
    def num_bytes(self) -> int: ...
    def try_advance(self, token: int) -> bool:
        """Takes a token (EOS only when accepting); False and no change when forbidden."""
    def advance_bytes(self, data: bytes) -> bool: ...
    def forced_bytes(self) -> bytes:
        """The bytes every continuation starts with (not taken)."""
    def fill_bitmask(self, out: npt.NDArray[np.int32]) -> None: ...
    def check_invariants(self) -> None: ...

def fill_grammar_bitmasks(states: Sequence[GrammarState], out: npt.NDArray[np.int32], rows: IdArray) -> None:
    """Row `rows[i]` of the 2-D int32 `out` is zeroed and gets the mask of `states[i]`; the GIL
    is released."""

def json_schema_is_recursive(schema: str) -> bool:
    """Whether the schema has a `$ref` cycle (compiled by the grammar path, any depth)."""

def json_schema_to_ebnf(
    schema: str,
    name: str,
    *,
    whitespace_pattern: str | None = None,
    additional_properties: bool = False,
    properties_any_order: bool = False,
) -> str:
    """The schema's grammar as GBNF rules with start rule `name` (others `name_<id>`), to embed
    in a larger EBNF grammar; raises what `GrammarConstraint.from_json_schema` raises."""

class PrefixForest:
    """The router's approximate prefix trees, one per replica (integer ids): what was sent
    where, each tree bounded to `max_keys_per_tree` keys by LRU pruning of leaves.

    Keys are token ids or text bytes. Errors: `sglr.errors.UnknownReplicaError`,
    `DuplicateReplicaError`, `RouterConfigError`, `InvariantError`.
    """

    def __init__(self, max_keys_per_tree: int) -> None: ...
    def add_replica(self, replica: int) -> None: ...
    def remove_replica(self, replica: int) -> None: ...
    def replica_ids(self) -> list[int]: ...
    def num_keys(self, replica: int) -> int: ...
    def match_lens(self, key: Sequence[int] | np.ndarray) -> list[tuple[int, int]]: ...
    def best_match(self, key: Sequence[int] | np.ndarray) -> tuple[int, int] | None:
        """`(replica, matched_len)` with the longest stored prefix (ties: lowest id)."""
    def insert(self, replica: int, key: Sequence[int] | np.ndarray) -> None: ...
    def route(
        self,
        key: Sequence[int] | np.ndarray,
        loads: dict[int, int],
        balance_abs_threshold: int,
        balance_rel_threshold: float,
        cache_threshold: float,
    ) -> tuple[int, int]:
        """The cache-aware policy in one call: match every replica in `loads` (`{replica:
        requests in flight}`); if the loads are imbalanced (max - min > abs and max > rel *
        min) take the shortest queue, else the longest match when it covers at least
        `cache_threshold` of the key, else the replica holding the fewest keys; insert `key`
        there from where its match ended. Returns `(replica, matched_len)`. Raises
        `NoReplicaAvailableError` for empty `loads`, `UnknownReplicaError`."""
    def check_invariants(self) -> None: ...

def scan_id_prompt(body: bytes, field: str) -> tuple[npt.NDArray[np.uint32], bool] | None:
    """`(ids, stream)` of a JSON request body whose member `field` is a non-empty list of
    integer literals in u32 range (`stream`: the member `stream` is `true`), read without building
    Python objects; None for any other body (parse it instead)."""

def cpu_isa() -> tuple[str, str, str | None]:
    """`(isa, cpu, requested)`: the instruction set the CPU kernels use, the best this CPU offers
    and the `SGLR_CPU_ISA` cap (None when unset), read once per process. ValueError when
    `SGLR_CPU_ISA` is not `portable`, `avx2` or `avx512vnni`."""

class GgufMatrix:
    """A matrix in a GGUF file's block formats, kept as stored and owned by Rust: Q4_0, Q4_1,
    Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; parts of different formats stacked by rows."""

    def __init__(self, parts: Sequence[tuple[str, npt.NDArray[np.uint8]]], cols: int) -> None:
        """`parts`: `(GGUF type name, [rows, bytes_per_row] blocks)` in row order. Raises
        ValueError for a type without a kernel, a wrong length or a non-finite scale."""
    @staticmethod
    def from_levels(
        levels: npt.NDArray[np.uint8], scales: npt.NDArray[np.float32], zeros: npt.NDArray[np.float32]
    ) -> GgufMatrix:
        """4-bit blocks from levels (0..15) and per-32 `scales` / `zeros`: `(q - 8) * scale + zero`."""
    @property
    def rows(self) -> int: ...
    @property
    def cols(self) -> int: ...
    @property
    def num_bytes(self) -> int: ...
    @property
    def type_names(self) -> list[str]: ...
    def matmul(
        self, inputs: npt.NDArray[np.float32], out: npt.NDArray[np.float32], num_threads: int = 1
    ) -> None: ...
    def dequantize(
        self, out: npt.NDArray[np.float32] | npt.NDArray[np.int16], num_threads: int = 1
    ) -> None: ...
    def dequantize_rows(self, row_ids: IdArray, out: npt.NDArray[np.float32]) -> None: ...

class Q8Matrix:
    """GGUF Q8_0 blocks (int8 levels, one f32 scale per 32), owned by Rust."""

    def __init__(self, levels: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]) -> None: ...
    @property
    def shape(self) -> tuple[int, int]: ...
    def arrays(self) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]: ...
    def matmul(
        self, inputs: npt.NDArray[np.float32], out: npt.NDArray[np.float32], num_threads: int = 1
    ) -> None: ...
    def matmul_f32(
        self, inputs: npt.NDArray[np.float32], out: npt.NDArray[np.float32], num_threads: int = 1
    ) -> None: ...
    def dequantize_rows(self, row_ids: IdArray, out: npt.NDArray[np.float32]) -> None: ...

class CpuDecodeModel:
    """A Llama-shaped model's whole decode step in one call (rust/kernels' decode)."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        intermediate_size: int,
        rms_norm_eps: float,
        attention_scale: float,
        layers: Sequence[tuple[object, ...]],
        final_norm: npt.NDArray[np.float32],
        head: Q8Matrix | GgufMatrix | None,
        rope_cos: npt.NDArray[np.float32],
        rope_sin: npt.NDArray[np.float32],
        num_threads: int,
    ) -> None: ...
    @property
    def output_width(self) -> int: ...
    @property
    def isa(self) -> str:
        """The instruction set its step uses: `portable`, `avx2` or `avx512vnni`."""
    def step(
        self,
        hidden: npt.NDArray[np.float32],
        positions: IdArray,
        slot_table: npt.NDArray[np.int32],
        seq_lens: IdArray,
        out_slots: IdArray,
        k_cache: npt.NDArray[np.int16] | npt.NDArray[np.float32],
        v_cache: npt.NDArray[np.int16] | npt.NDArray[np.float32],
        out: npt.NDArray[np.float32],
    ) -> None: ...
