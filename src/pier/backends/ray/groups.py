"""The instances pier holds on the cluster: one detached placement group of one bundle per instance, named after it,
shared by the copies packed into it, removed when the last one stops. A new instance goes to the node with the
fewest instances of its variant (`placement.choose_node`, a soft target: Ray places it elsewhere when that node
is full). When a node dies, Ray places its instances again on nodes with room; copies follow them there.

Every call into Ray here blocks (a round trip to the cluster's control store): callers run them in a thread.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from pier.backends.ray.placement import GROUP_PREFIX, Node, Reservation, choose_node

log = logging.getLogger("pier.backends.ray")


def live_nodes() -> list[Node]:
    import ray

    return [Node(n["NodeID"], n.get("NodeManagerAddress", ""), bool(n.get("Alive")), dict(n.get("Resources", {})),
                 dict(n.get("Labels") or {})) for n in ray.nodes()]


class Groups:
    def __init__(self) -> None:
        self._handles: dict[str, Any] = {}  # group name -> PlacementGroup
        self._variants: dict[str, str] = {}  # group name -> the variant whose instance it is
        self._users: dict[str, set[str]] = {}  # group name -> copy ids packed into it
        self._targets: dict[str, str] = {}  # group name -> the node it was asked to go to
        self._lock = threading.Lock()

    def acquire(self, copy_id: str, wanted: Reservation, variant: str) -> Any:
        """The instance's placement group, created if it does not exist yet; `copy_id` now uses it."""
        with self._lock:
            self._users.setdefault(wanted.group, set()).add(copy_id)
            self._variants[wanted.group] = variant
            handle = self._handles.get(wanted.group)
            if handle is None or self.state(handle) == "REMOVED":
                handle = self._existing(wanted.group)
                if handle is None or self.state(handle) == "REMOVED":
                    handle = self._create(wanted, variant)
                self._handles[wanted.group] = handle
            return handle

    def adopt(self, copy_id: str, group: str, variant: str) -> None:
        """A copy an earlier gateway started uses `group`."""
        with self._lock:
            self._users.setdefault(group, set()).add(copy_id)
            self._variants[group] = variant

    def release(self, copy_id: str, group: str) -> None:
        """`copy_id` no longer uses `group`; the group goes when nobody does."""
        import ray

        with self._lock:
            users = self._users.get(group, set())
            users.discard(copy_id)
            if users:
                return
            self._users.pop(group, None)
            self._variants.pop(group, None)
            self._targets.pop(group, None)
            handle = self._handles.pop(group, None) or self._existing(group)
            if handle is not None:
                ray.util.remove_placement_group(handle)
                log.info("instance %s released", group)

    def sweep(self) -> list[str]:
        """Remove pier's placement groups in this namespace that no copy uses (left by an earlier gateway)."""
        import ray

        removed = []
        with self._lock:
            for entry in self._table().values():
                name = entry.get("name", "")
                if not name.startswith(GROUP_PREFIX) or name in self._users or entry.get("state") == "REMOVED":
                    continue
                handle = self._existing(name)
                if handle is not None and handle.id.hex() == entry.get("placement_group_id"):
                    ray.util.remove_placement_group(handle)
                    removed.append(name)
        if removed:
            log.info("removed %d instance(s) no copy uses: %s", len(removed), ", ".join(removed))
        return removed

    def node_of(self, handle: Any) -> str | None:
        """The node holding the group's bundle, once placed."""
        entry = self._entry(handle)
        if entry.get("state") != "CREATED":
            return None
        node: str | None = (entry.get("bundles_to_node_id") or {}).get(0)
        return node

    def state(self, handle: Any) -> str:
        return str(self._entry(handle).get("state", "REMOVED"))

    def placed(self) -> dict[str, str]:
        """Each of pier's groups that is placed, and its node."""
        placed = {}
        for entry in self._table().values():
            name = entry.get("name", "")
            nodes = entry.get("bundles_to_node_id") or {}
            if name in self._users and entry.get("state") == "CREATED" and 0 in nodes:
                placed[name] = nodes[0]
        return placed

    # ---- in Ray

    def _create(self, wanted: Reservation, variant: str) -> Any:
        from ray.util import placement_group

        # Where pier's instances are, or are headed while Ray places them.
        where = {**{name: node for name, node in self._targets.items() if name in self._users}, **self.placed()}
        same = Counter(node for name, node in where.items() if self._variants.get(name) == variant)
        target = choose_node(wanted, live_nodes(), same, Counter(where.values()))
        if target is not None:
            self._targets[wanted.group] = target
        options: dict[str, Any] = {"strategy": "STRICT_PACK", "name": wanted.group, "lifetime": "detached"}
        if wanted.labels:
            options["bundle_label_selector"] = [dict(wanted.labels)]
        if target is not None:
            options["_soft_target_node_id"] = target
        log.info("instance %s: reserving %s%s", wanted.group, wanted.describe(),
                 f", preferably on node {target}" if target else "")
        try:
            return placement_group([dict(wanted.bundle)], **options)
        except TypeError:  # a Ray without the soft target: it still spreads when nodes fill up
            options.pop("_soft_target_node_id", None)
            return placement_group([dict(wanted.bundle)], **options)

    @staticmethod
    def _existing(name: str) -> Any:
        import ray

        try:
            handle = ray.util.get_placement_group(name)
        except ValueError:
            return None
        return handle

    @staticmethod
    def _table() -> dict[str, Any]:
        from ray.util import placement_group_table

        table: dict[str, Any] = placement_group_table()
        return table

    @staticmethod
    def _entry(handle: Any) -> dict[str, Any]:
        from ray.util import placement_group_table

        entry: dict[str, Any] = placement_group_table(handle)
        return entry
