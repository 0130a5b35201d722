"""Which groups to measure: every power-of-two group size 2..W of the first ranks, and, when the job spans
nodes, groups with one rank per node, so intra- and inter-node costs are separated. Pure functions."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    ranks: tuple[int, ...]  # global ranks, in order
    hosts: tuple[str, ...]  # host of each rank
    kind: str  # "intra" (one node), "inter" (one rank per node) or "mixed" (several ranks on several nodes)

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))

    def describe(self) -> dict:
        return {"size": self.size, "ranks": list(self.ranks), "hosts": sorted(set(self.hosts)),
                "nodes": self.nodes, "kind": self.kind}

    def label(self) -> str:
        return f"group of {self.size} ({self.kind}, ranks {list(self.ranks)}, {self.nodes} node(s))"


def powers_of_two(low: int, high: int) -> list[int]:
    sizes, g = [], 1
    while g <= high:
        if g >= low:
            sizes.append(g)
        g *= 2
    return sizes


def _kind(hosts: tuple[str, ...]) -> str:
    distinct = len(set(hosts))
    if distinct == 1:
        return "intra"
    return "inter" if distinct == len(hosts) else "mixed"


def plan_groups(hosts_by_rank: list[str]) -> list[Group]:
    """Groups for a job whose rank r runs on hosts_by_rank[r]; rank 0 is in every group (it gathers results)."""
    world = len(hosts_by_rank)
    groups: dict[tuple[int, ...], Group] = {}

    def add(ranks):
        ranks = tuple(ranks)
        hosts = tuple(hosts_by_rank[r] for r in ranks)
        groups.setdefault(ranks, Group(ranks, hosts, _kind(hosts)))

    node_of_rank0 = [r for r in range(world) if hosts_by_rank[r] == hosts_by_rank[0]]
    for g in powers_of_two(2, len(node_of_rank0)):
        add(node_of_rank0[:g])
    first_rank_per_node = list(dict.fromkeys(hosts_by_rank))  # hosts in order of first appearance
    leaders = [hosts_by_rank.index(h) for h in first_rank_per_node]
    for g in powers_of_two(2, len(leaders)):
        add(leaders[:g])
    for g in powers_of_two(2, world):
        add(range(g))
    return list(groups.values())
