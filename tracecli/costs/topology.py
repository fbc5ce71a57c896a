"""Where the ranks are: nodes x GPUs per node; the total rank count is derived."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CostModelError
from ..limits import MAX_RANKS

__all__ = ["Topology", "MAX_RANKS"]



@dataclass(frozen=True)
class Topology:
    """``nodes`` machines of ``gpus_per_node`` ranks each.

    A model that knows one level only (every link alike, as the alpha-beta line) describes
    its ranks as one node of them: ``Topology.flat(8)``.

    >>> Topology(2, 8).ranks, Topology.flat(4)
    (16, Topology(nodes=1, gpus_per_node=4))
    """

    nodes: int
    gpus_per_node: int

    def __post_init__(self):
        if self.nodes < 1 or self.gpus_per_node < 1 or self.ranks > MAX_RANKS:
            raise CostModelError(f"a topology needs at least one node and one GPU per node, and at "
                             f"most {MAX_RANKS} ranks, not {self.nodes} x {self.gpus_per_node}")

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node

    @classmethod
    def flat(cls, ranks: int) -> "Topology":
        return cls(1, ranks)
