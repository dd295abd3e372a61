"""`DataParallelEngine`: N engine replicas behind one `Engine`-compatible facade (what
`sglr-server --dp-size N` serves). It sits above the engine and uses the routing policy
(`sglr.router.policy`), nothing of the router's HTTP program.

Each replica is a full `Engine` with its own worker-process group (its own tensor-parallel
group of `tp_size` ranks, on GPU the devices `base_gpu_id + i * tp_size ...`), its own KV
cache and scheduler. The facade owns the `Router` and every replica; it routes each call to
one replica and counts it in flight there until its result or stream ends.

Routing key: the prompt's token ids when the caller gives `input_ids`, else its text as UTF-8
bytes (a text prefix shared by two prompts is a token prefix shared by them too, so the route
is the same and the front does not tokenize twice). A batch goes to one replica, keyed on its
first sequence, so its sequences share one cache. A LoRA adapter's requests key apart
(`sglr.router.keys.with_adapter`): each replica caches prefixes per adapter. Adapters load and
unload on every replica (a load that fails on one is undone on those that took it).

Dead replicas: a replica whose engine stops is removed from the router before the next
route, so requests avoid it; the facade stays alive while any replica is.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits, merge_summaries
from sglr.errors import EngineClosedError, NoReplicaAvailableError
from sglr.router.keys import with_adapter
from sglr.router.policy import Router, RouterConfig

logger = logging.getLogger(__name__)


class DataParallelEngine:
    def __init__(
        self,
        model_path: str | None = None,
        *,
        dp_size: int,
        router_config: RouterConfig | None = None,
        **kwargs: Any,
    ) -> None:
        from sglr.engine.engine import Engine

        if dp_size < 1:
            from sglr.errors import EngineConfigError

            raise EngineConfigError("dp_size must be at least 1")
        if dp_size > 1 and kwargs.get("dist_init_addr"):
            from sglr.errors import EngineConfigError

            # One address would make every replica's ranks meet in one group.
            raise EngineConfigError("--dist-init-addr cannot be combined with --dp-size > 1")
        tp_size = int(kwargs.get("tp_size") or 1)
        self.replicas: list[Any] = []
        try:
            for index in range(dp_size):
                self.replicas.append(
                    Engine(model_path=model_path, **_replica_options(kwargs, index, tp_size))
                )
        except BaseException:
            for replica in self.replicas:
                replica.shutdown()
            raise
        self.router = Router(range(dp_size), router_config)
        self._lock = threading.Lock()
        self._removed: set[int] = set()
        self._closed = False
        first = self.replicas[0]
        # What the server reads about the model is the same on every replica.
        self.config = first.config
        self.runner = first.runner
        self.tokenizer = first.tokenizer
        self.model_path = first.model_path
        self.served_model_name = first.served_model_name
        self.context_len = first.context_len
        self.max_running_requests = sum(replica.max_running_requests for replica in self.replicas)

    # ----- generation -----

    async def async_generate(self, *args: Any, **kwargs: Any) -> Any:
        replica = self._route(_routing_key(args, kwargs))
        try:
            outcome = await self.replicas[replica].async_generate(*args, **kwargs)
        except BaseException:
            self.router.finish(replica)
            raise
        if kwargs.get("stream"):
            return _FinishingStream(outcome, lambda: self.router.finish(replica))
        self.router.finish(replica)
        return outcome

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            raise NotImplementedError("DataParallelEngine streams only through async_generate")
        replica = self._route(_routing_key(args, kwargs))
        try:
            return self.replicas[replica].generate(*args, **kwargs)
        finally:
            self.router.finish(replica)

    def check_prompt_text(self, text: str, field: str) -> None:
        self.replicas[0].check_prompt_text(text, field)

    def abort(self, rid: str) -> None:
        # Aborting an id a replica does not hold is a no-op there; asking every live replica
        # is cheaper than remembering every id's route.
        for replica in self._live_replicas():
            replica.abort(rid)

    def flush_cache(self) -> bool:
        self._check_open()
        return all([replica.flush_cache() for replica in self._live_replicas()])

    # ----- LoRA adapters (the same on every replica) -----

    def load_lora_adapter(self, lora_name: str, lora_path: str) -> Any:
        self._check_open()
        loaded: list[Any] = []
        ref = None
        try:
            for replica in self._live_replicas():
                ref = replica.load_lora_adapter(lora_name, lora_path)
                loaded.append(replica)
        except BaseException:
            for replica in loaded:  # all or none: a name must mean one adapter everywhere
                with contextlib.suppress(Exception):
                    replica.unload_lora_adapter(lora_name)
            raise
        if ref is None:
            raise EngineClosedError("every data-parallel replica has stopped")
        return ref

    def unload_lora_adapter(self, lora_name: str) -> None:
        self._check_open()
        for replica in self._live_replicas():
            replica.unload_lora_adapter(lora_name)

    def lora_adapters(self) -> list[Any]:
        return self.replicas[0].lora_adapters()

    def get_stats(self) -> dict[str, Any]:
        per_replica = [replica.get_stats() for replica in self._live_replicas()]
        merged: dict[str, Any] = {}
        for stats in per_replica:
            for name, value in stats.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    merged[name] = merged.get(name, 0) + value
                elif name == "lora_traffic":  # per-adapter counters: summed per adapter
                    for lora_id, counts in value.items():
                        into = merged.setdefault(name, {}).setdefault(lora_id, dict.fromkeys(counts, 0))
                        for key, num in counts.items():
                            into[key] += num
                else:
                    merged.setdefault(name, value)
        merged["dp_size"] = len(self.replicas)
        merged["num_live_replicas"] = len(per_replica)
        merged["replica_num_in_flight"] = self.router.num_in_flight()
        merged["replicas"] = per_replica
        return merged

    def get_tree_summary(self, limits: TreeSummaryLimits | None = None) -> TreeSummary:
        """Each live replica's prefix-cache summary, one after another (`merge_summaries`)."""
        return merge_summaries([replica.get_tree_summary(limits) for replica in self._live_replicas()])

    def get_waiting_queue(self, limit: int = 20) -> list[Any]:
        """Each live replica's queue interleaved (replicas admit side by side), `limit` in all."""
        queues = [replica.get_waiting_queue(limit) for replica in self._live_replicas()]
        rows = [row for rank in itertools.zip_longest(*queues) for row in rank if row is not None]
        return rows[:limit]

    @property
    def is_alive(self) -> bool:
        """Accepting requests: not shut down, and at least one replica is running."""
        return not self._closed and any(replica.is_alive for replica in self.replicas)

    @property
    def worker_pids(self) -> list[int]:
        return [pid for replica in self.replicas for pid in replica.worker_pids]

    def check_invariants(self) -> None:
        for replica in self._live_replicas():
            replica.check_invariants()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for replica in self.replicas:
            replica.shutdown()

    def __enter__(self) -> DataParallelEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # ----- internals -----

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("the engine has been shut down")

    def _live_replicas(self) -> list[Any]:
        return [replica for replica in self.replicas if replica.is_alive]

    def _route(self, key: Sequence[int] | str) -> int:
        self._check_open()
        with self._lock:
            for index, replica in enumerate(self.replicas):
                if index not in self._removed and not replica.is_alive:
                    logger.warning("replica %d stopped; routing around it", index)
                    self._removed.add(index)
                    self.router.remove_replica(index)
        try:
            return self.router.route(key)
        except NoReplicaAvailableError:
            raise EngineClosedError("every data-parallel replica has stopped") from None


class _FinishingStream:
    """A replica's `DeltaStream` that tells the router when it ends (exhausted or closed)."""

    def __init__(self, stream: Any, on_end: Any) -> None:
        self._stream = stream
        self._on_end = on_end
        self._ended = False
        self.num_prompt_tokens = stream.num_prompt_tokens

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return await self._stream.__anext__()
        except BaseException:
            self._end()
            raise

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end()


def _routing_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sequence[int] | str:
    lora_path = kwargs.get("lora_path")
    adapter = lora_path[0] if isinstance(lora_path, list) and lora_path else lora_path
    return with_adapter(_prompt_key(args, kwargs), adapter if isinstance(adapter, str) else None)


def _prompt_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sequence[int] | str:
    input_ids = kwargs.get("input_ids")
    if input_ids:
        return input_ids[0] if isinstance(input_ids[0], list) else input_ids
    prompt = kwargs.get("prompt", args[0] if args else None)
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    return prompt or ""


def _replica_options(options: dict[str, Any], index: int, tp_size: int) -> dict[str, Any]:
    """Replica `index`'s engine options: its own devices and its own rendezvous port."""
    options = dict(options)
    if options.get("base_gpu_id") is not None:
        options["base_gpu_id"] = options["base_gpu_id"] + index * tp_size
    elif index:
        options["base_gpu_id"] = index * tp_size
    if options.get("nccl_port"):
        options["nccl_port"] = options["nccl_port"] + index
    return options
