"""Random interleavings of route / finish / add / remove against `sglr.router.Router`, with
`check_invariants` (the Rust trees' invariants and their key bound) after every operation and
the routing properties checked on every route:

- a removed replica never gets a request;
- cache-aware, while balanced: a prompt whose prefix group was sent before to replicas still
  present goes to one of them (more than one only after imbalance spread the group);
- cache-aware, when the loads are imbalanced past the threshold: the least-loaded replica wins;
- the in-flight counts are the model's.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sglr.router import Router, RouterConfig

PREFIX_LEN = 8
BALANCE_ABS = 3


def group_prompt(group: int, suffix: int) -> list[int]:
    # Every prompt has the same length, so no prompt is a prefix of another one.
    return [100 + group] * PREFIX_LEN + [suffix]


class RouterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # rel 1.0: "imbalanced" is exactly "max - min > BALANCE_ABS".
        config = RouterConfig(
            policy="cache-aware",
            balance_abs_threshold=BALANCE_ABS,
            balance_rel_threshold=1.0,
            max_keys_per_tree=4096,
        )
        self.router = Router([0, 1, 2], config)
        self.present: set[int] = {0, 1, 2}
        self.removed: set[int] = set()
        self.next_id = 3
        self.in_flight: list[int] = []  # one entry per routed, unfinished request
        self.group_homes: dict[int, set[int]] = {}

    def loads(self) -> dict[int, int]:
        return {replica: self.in_flight.count(replica) for replica in self.present}

    @precondition(lambda self: self.present)
    @rule(group=st.integers(0, 5), suffix=st.integers(0, 50))
    def route(self, group: int, suffix: int) -> None:
        loads = self.loads()
        imbalanced = max(loads.values()) - min(loads.values()) > BALANCE_ABS
        replica = self.router.route(group_prompt(group, suffix))
        assert replica in self.present and replica not in self.removed
        if imbalanced:
            assert loads[replica] == min(loads.values())
        else:
            homes = self.group_homes.get(group, set()) & self.present
            assert not homes or replica in homes, (replica, homes)
        self.group_homes.setdefault(group, set()).add(replica)
        self.in_flight.append(replica)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        replica = self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1)))
        self.router.finish(replica)  # also for a replica removed meanwhile

    @rule()
    def add(self) -> None:
        self.router.add_replica(self.next_id)
        self.present.add(self.next_id)
        self.next_id += 1

    @precondition(lambda self: self.present)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        replica = data.draw(st.sampled_from(sorted(self.present)))
        self.router.remove_replica(replica)
        self.present.discard(replica)
        self.removed.add(replica)

    @invariant()
    def consistent(self) -> None:
        self.router.check_invariants()
        assert self.router.replica_ids == sorted(self.present)
        assert self.router.num_in_flight() == self.loads()


RouterMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)
test_router_state_machine = RouterMachine.TestCase


def test_trees_stay_within_the_key_bound_under_many_prefixes() -> None:
    """A small bound with far more distinct prefixes than fit: pruning keeps every tree at
    or under the bound, and the most recent route is still remembered in full."""
    router = Router([0, 1], RouterConfig(policy="cache-aware", max_keys_per_tree=200))
    for group in range(300):
        prompt = [group] * 30 + [7, 7]
        replica = router.route(prompt)
        router.finish(replica)
        router.check_invariants()
        assert router.num_routed_keys(replica) <= 200
        # The route just made is the one pruning spares: sending it again hits the same replica.
        assert router.route(prompt) == replica
        router.finish(replica)
    # Eviction takes whole leaves, so a full tree sits less than one key (32) under the bound.
    assert all(200 - 32 < router.num_routed_keys(replica) <= 200 for replica in router.replica_ids)
