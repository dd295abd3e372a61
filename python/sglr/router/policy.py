"""Routing policies over replicas identified by small integers.

`Router` owns the per-replica load (requests in flight, counted by the router itself: it
sends them and hears them end) and, for `cache-aware`, the approximate prefix trees of what
was sent where (`sglr._core.PrefixForest`). Callers pair every `route` with one `finish`.
"""

from __future__ import annotations

import random
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from sglr.errors import NoReplicaAvailableError, RouterConfigError, UnknownReplicaError

ROUTER_POLICIES = ("cache-aware", "round-robin", "shortest-queue", "random")
# From this many ids on, a u32 `array` key goes to the trees as a numpy view (read in place);
# a shorter one is read as a sequence, which costs less than making the view.
_VIEW_MIN_IDS = 32


@dataclass(frozen=True)
class RouterConfig:
    policy: str = "cache-aware"
    # Load counts as imbalanced when both hold: max - min > abs and max > rel * min. Then the
    # cache is ignored and the shortest queue wins, so a hot prefix cannot pile on one replica.
    balance_abs_threshold: int = 32
    balance_rel_threshold: float = 1.5
    # Below this fraction of the key matched anywhere, the request counts as new: it goes to
    # the replica with the least routed so far, which spreads distinct prefixes evenly.
    cache_threshold: float = 0.5
    # Bound on each replica's tree (keys = tokens or bytes); old leaves are pruned past it.
    max_keys_per_tree: int = 1 << 21
    seed: int = 0

    def __post_init__(self) -> None:
        if self.policy not in ROUTER_POLICIES:
            raise RouterConfigError(f"unknown router policy {self.policy!r}; one of {ROUTER_POLICIES}")
        if self.balance_abs_threshold < 0 or self.balance_rel_threshold < 1.0:
            raise RouterConfigError("balance thresholds must be abs >= 0 and rel >= 1")
        if not 0.0 <= self.cache_threshold <= 1.0:
            raise RouterConfigError("cache_threshold must lie in [0, 1]")
        if self.max_keys_per_tree < 1:
            raise RouterConfigError("max_keys_per_tree must be at least 1")


class Router:
    """Thread-safe: the server's event loop and caller threads may route concurrently."""

    def __init__(self, replica_ids: Sequence[int], config: RouterConfig | None = None) -> None:
        from sglr._core import PrefixForest

        self.config = config or RouterConfig()
        self._lock = threading.Lock()
        self._num_in_flight: dict[int, int] = {}
        self._forest = PrefixForest(self.config.max_keys_per_tree)
        self._random = random.Random(self.config.seed)
        self._next_round_robin = 0
        for replica in replica_ids:
            self.add_replica(replica)

    # -- membership ---------------------------------------------------------------------
    def add_replica(self, replica: int) -> None:
        with self._lock:
            self._forest.add_replica(replica)
            self._num_in_flight[replica] = 0

    def remove_replica(self, replica: int) -> None:
        """The replica gets nothing from now on (requests already sent still `finish`)."""
        with self._lock:
            if replica not in self._num_in_flight:
                raise UnknownReplicaError(f"unknown replica {replica}")
            self._forest.remove_replica(replica)
            del self._num_in_flight[replica]

    @property
    def replica_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._num_in_flight)

    def num_in_flight(self) -> dict[int, int]:
        with self._lock:
            return dict(self._num_in_flight)

    def num_routed_keys(self, replica: int) -> int:
        return self._forest.num_keys(replica)

    def check_invariants(self) -> None:
        """The trees' own invariants, one tree per replica with a load count, every tree
        within its key bound, no negative load. Raises `InvariantError`."""
        from sglr.errors import InvariantError

        with self._lock:
            self._forest.check_invariants()
            if self._forest.replica_ids() != sorted(self._num_in_flight):
                raise InvariantError("the trees' replicas differ from the load counts' replicas")
            for replica, num_in_flight in self._num_in_flight.items():
                if num_in_flight < 0:
                    raise InvariantError(f"replica {replica} has {num_in_flight} requests in flight")
                if self._forest.num_keys(replica) > self.config.max_keys_per_tree:
                    raise InvariantError(f"replica {replica}'s tree is over its key bound")

    # -- routing ------------------------------------------------------------------------
    def route(self, key: Sequence[int] | str) -> int:
        """Picks a replica for a request whose prompt is `key` (token ids, or text when the
        front does not tokenize) and counts it in flight there."""
        if isinstance(key, str):
            import numpy as np

            # One u32 per byte, as an array the trees read without copying (a list of ints
            # would be converted on every call into them: ~10x slower for a long prompt).
            # (`surrogatepass`: a lone surrogate, which a JSON escape can carry, still routes;
            # the worker refuses the request.)
            key = np.frombuffer(key.encode("utf-8", "surrogatepass"), dtype=np.uint8).astype(np.uint32)
        elif isinstance(key, array) and len(key) >= _VIEW_MIN_IDS and key.itemsize == 4:
            import numpy as np

            key = np.frombuffer(key, dtype=np.uint32)  # the same, without a copy
        with self._lock:
            if not self._num_in_flight:
                raise NoReplicaAvailableError("no replica is available")
            replica = self._choose(key)
            self._num_in_flight[replica] += 1
            return replica

    def finish(self, replica: int) -> None:
        with self._lock:
            # A replica removed meanwhile has no count left to lower.
            if replica in self._num_in_flight:
                self._num_in_flight[replica] = max(0, self._num_in_flight[replica] - 1)

    def _choose(self, key: Sequence[int]) -> int:
        policy = self.config.policy
        if policy == "round-robin":
            replicas = sorted(self._num_in_flight)
            replica = replicas[self._next_round_robin % len(replicas)]
            self._next_round_robin += 1
            return replica
        if policy == "random":
            return self._random.choice(sorted(self._num_in_flight))
        if policy == "shortest-queue":
            return self._shortest_queue(sorted(self._num_in_flight))
        # cache-aware: the whole rule (imbalance, then longest match over `cache_threshold`,
        # else the replica holding the least) runs in one call that also records the route,
        # so each request crosses into Rust once and its matched prefix is compared once.
        config = self.config
        replica, _ = self._forest.route(
            key,
            self._num_in_flight,
            config.balance_abs_threshold,
            config.balance_rel_threshold,
            config.cache_threshold,
        )
        return replica

    def _shortest_queue(self, replicas: list[int]) -> int:
        return min(replicas, key=lambda replica: (self._num_in_flight[replica], replica))
