"""Typed errors raised across sglr.

The Rust core reports misuse as typed errors; the binding (`sglr._core`) raises the classes
below, so callers catch the same exceptions whether a check happened in Rust or in Python.
User mistakes subclass `ValueError` as well, so generic handlers keep working.
"""

from __future__ import annotations

# Re-exported: callers and the binding (`sglr._core`) read every error class here.
from sglr.base_error import SglrError
from sglr.constraint_errors import (  # noqa: F401
    BitmaskShapeError,
    ConstraintError,
    ConstraintTooLargeError,
    EmptyConstraintError,
    GrammarSyntaxError,
    InvalidRegexError,
    InvalidSchemaError,
    InvalidStructuralTagError,
    TokenNotAllowedError,
    UnknownStateError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
    VocabularyError,
)


class RadixError(SglrError):
    """Misuse of the radix tree (the KV-cache prefix index)."""


class LengthMismatchError(RadixError, ValueError):
    """Token ids and slot ids given to the radix tree differ in length."""


class UnknownNodeError(RadixError, ValueError):
    """A node handle that this tree never issued."""


class StaleNodeError(RadixError, ValueError):
    """A node handle whose node has been evicted, or whose tree has been reset."""


class UnlockError(RadixError, ValueError):
    """An unlock of a node whose lock count is already zero."""


class InvariantError(SglrError, AssertionError):
    """An internal invariant does not hold (a bug in sglr, never a user mistake)."""


class SlotAccountingError(InvariantError):
    """KV slots were freed twice, freed by a non-owner, or leaked."""


class InvalidRequestError(SglrError, ValueError):
    """A request the caller got wrong (bad sampling parameter, prompt too long, ...).

    `param` names the offending field when known; servers answer these with HTTP 400.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class LimitExceededError(InvalidRequestError):
    """A request (or one of its fields) over one of the limits of `sglr.limits`, refused before
    the work it would cost; `limit` names the limit."""

    def __init__(self, message: str, param: str | None = None, limit: str | None = None) -> None:
        super().__init__(message, param)
        self.limit = limit


class SessionError(InvalidRequestError):
    """A session request that cannot be served (`engine/sessions.py`): its `session_params.rid`
    is not a finished request of the session, or its prompt outgrows the session's capacity."""


class UnknownSessionError(SessionError):
    """The session named is not open (never opened, or closed)."""


class SessionLimitError(LimitExceededError, SessionError):
    """No room for another session (`max_sessions`) or for another request of one."""


class BodyTooLargeError(LimitExceededError):
    """A request body larger than the server's `max_body_bytes` (HTTP 413)."""


class HeadersTooLargeError(LimitExceededError):
    """A request line and headers larger than `sglr.limits.MAX_HEADER_BYTES` (HTTP 431)."""


class PathNotAllowedError(InvalidRequestError):
    """A file path a request names that the server may not read: outside the allowed
    directories (`..`, an absolute path elsewhere, a symlink out), NUL bytes, encoded traversal,
    or paths not accepted at all."""


class UrlNotAllowedError(InvalidRequestError):
    """A URL a request names that the server may not fetch: URLs not accepted, a scheme other
    than http(s), or a host that is (or resolves or redirects to) a loopback, link-local,
    private or otherwise non-public address not explicitly allowed."""


class LangError(SglrError):
    """Misuse or failure of the sglr language (programs, tracing, backends)."""


class ProgramError(LangError, RuntimeError):
    """A primitive of an LM program failed; raised where the program's result is read.

    `primitive` names the failing primitive (e.g. ``gen('answer')``); the original exception is
    chained as ``__cause__``.
    """

    def __init__(self, message: str, primitive: str | None = None) -> None:
        super().__init__(message)
        self.primitive = primitive


class TraceError(LangError, TypeError):
    """A program cannot be traced (it reads generated values or arguments in Python code)."""


class BackendError(LangError, RuntimeError):
    """A backend request failed: an HTTP error status, an error event or a malformed response."""


class BackendUnavailableError(LangError, NotImplementedError):
    """A backend that sglr does not provide yet (or that needs a component not installed)."""


class ModelNotFoundError(SglrError, FileNotFoundError):
    """A model path names nothing usable: no such file or directory, or not a model."""


class DefaultModelNotInstalledError(ModelNotFoundError):
    """No model path was given and the package that ships the default model is not installed."""


class GGUFError(SglrError, ValueError):
    """A GGUF checkpoint sglr cannot turn into a Hugging Face-format directory."""


class GGUFFormatError(GGUFError):
    """A file that is not a well-formed GGUF file: bad magic, unknown version, truncated or corrupt."""


class GGUFUnsupportedError(GGUFError):
    """A well-formed GGUF file using something sglr does not support: an architecture, a tensor
    type, a tensor name or a tokenizer."""


class SchedulerError(SglrError):
    """Misuse of the batch scheduler (`sglr._core.Scheduler`)."""


class DuplicateRequestError(SchedulerError, ValueError):
    """A request id that the scheduler already holds."""


class EmptyPromptError(SchedulerError, ValueError):
    """A request without prompt tokens."""


class RequestTooLargeError(SchedulerError, ValueError):
    """A request longer than the scheduler's `max_request_tokens`."""


class SchedulerConfigError(SchedulerError, ValueError):
    """An invalid scheduler setting (unknown policy, zero budget, bad ratio bounds, ...)."""


class EngineConfigError(SglrError, ValueError):
    """An engine option is out of range or unknown."""


class EngineClosedError(SglrError, RuntimeError):
    """The engine was shut down (or its scheduler loop died); no request is accepted."""


class RequestAbortedError(SglrError, RuntimeError):
    """A request ended without a result (aborted by the caller or the engine)."""


class WorkerError(EngineClosedError):
    """A scheduler or model worker process failed to start, died or stopped answering; the
    engine it served accepts no more requests."""


class EngineInternalError(SglrError, RuntimeError):
    """The engine failed while running a request (a bug or a device failure, not the caller's
    mistake); the request ends with it, the engine carries on."""


class ModelError(SglrError):
    """A model checkpoint, its config, or a forward batch is unusable."""


class ModelConfigError(ModelError, ValueError):
    """A `config.json` names an unsupported architecture or has inconsistent shapes."""


class UnsupportedAttentionError(ModelConfigError):
    """The chosen attention backend cannot compute an attention variant the model needs
    (sliding window, logit soft-capping); raised when the backend is built."""


class CheckpointError(ModelError, ValueError):
    """Weights are missing, unexpected, of the wrong shape, or the model path does not resolve."""


class BatchError(ModelError, ValueError):
    """A forward batch is malformed (bad lengths, positions past the context, out-of-range slots)."""


class KVCacheCapacityError(ModelError, ValueError):
    """The KV cache cannot be sized as asked (too little memory, or a size below the minimum)."""


class HiCacheStorageError(SglrError, RuntimeError):
    """The KV tier's storage directory is unusable (another server holds it, it cannot be
    created or written)."""


class CorruptPageError(HiCacheStorageError, ValueError):
    """A stored KV page is truncated, fails its checksum, or belongs to another model or
    prefix; it is skipped (recomputed), never used."""


class LoraError(SglrError):
    """A LoRA adapter that cannot be served, or a request naming one that is not loaded."""


class LoraAdapterError(LoraError, ValueError):
    """An adapter directory sglr cannot load: no PEFT LoRA config or weights, a module it does
    not adapt (embeddings, the head), DoRA, unknown tensors, a rank over `max_lora_rank`, or
    shapes that do not fit the base model (the message names the module)."""


class UnknownLoraError(LoraError, InvalidRequestError):
    """A request names an adapter that is not loaded (never served by the base instead)."""


class LoraNotFoundError(UnknownLoraError):
    """An unload names an adapter that is not loaded: there is nothing to unload (HTTP 404,
    where a generation naming one is a bad request)."""


class UnknownModelError(InvalidRequestError):
    """An OpenAI request's `model` names neither the served model nor a loaded LoRA adapter
    (HTTP 404 with OpenAI's code `model_not_found`)."""


class LoraCapacityError(LoraError, RuntimeError):
    """No room for another adapter: `max_loaded_loras` are loaded and all of them are in use."""


class SamplingError(SglrError, ValueError):
    """Sampling parameters or a token mask are invalid."""


class InvalidSamplingParamsError(InvalidRequestError, SamplingError):
    """A request's sampling parameters are out of range (rejected before anything runs)."""


class SamplingLimitError(LimitExceededError, InvalidSamplingParamsError):
    """Sampling parameters over a fixed limit of `sglr.limits` (stop strings, logit bias, ...)."""


class RouterError(SglrError):
    """Misuse of the data-parallel router (`sglr.router`, `sglr._core.PrefixForest`)."""


class UnknownReplicaError(RouterError, ValueError):
    """A replica id the router does not hold (never added, or removed)."""


class DuplicateReplicaError(RouterError, ValueError):
    """A replica id the router already holds."""


class RouterConfigError(RouterError, ValueError):
    """An invalid router setting (unknown policy, zero tree capacity, bad thresholds)."""


class NoReplicaAvailableError(RouterError, RuntimeError):
    """Every replica is dead or removed: the request has nowhere to go."""


class UnknownWorkerError(RouterError, ValueError):
    """A worker URL the router does not hold."""


class DuplicateWorkerError(RouterError, ValueError):
    """A worker URL the router already holds."""
