"""The collectives FSDP issues over a step's program, in issue order, by torch 2.13's own
rules; and when each may start on a GPU, where the host runs ahead of the device.

FSDP2 (``_fully_shard/_fsdp_param_group.py``, ``_fsdp_state.py``):

- ``unshard`` issues a unit's all-gather unless one is pending or the unit is unsharded
  (``:371-414``); the unit's first compute waits for it (``wait_for_unshard``).
- pre-forward: unshard, wait, then the explicit forward prefetch list in order
  (``_fsdp_state.py:310-320``); post-forward: reshard (``True``: free; an int: keep the
  slice of a group that size, re-gathered on it in backward; ``False``: keep) and record the
  post-forward order (``:557-573``).
- pre-backward (once per unit): unshard, wait, then either the unit before it in
  post-forward order (implicit, ``:795-830``) or its explicit backward list
  (``_fsdp_state.py:384-391``); post-backward: one reduce-scatter of the gradients in
  ``reduce_dtype`` (HSDP: then an all-reduce of its output over the replicate group), then
  reshard.
- On a device, an implicit forward all-gather may start once the copy-out of the one two
  before it is done (``wait_for_unshard`` frees all-gather outputs one late, ``:416-470``);
  a prefetch or backward all-gather once its issuing unit's compute starts; a
  reduce-scatter once the unit's backward compute is done; the compute stream waits for the
  previous reduce-scatter before the next copy-in (``rs_wait``, ``:647-658``).

FSDP1 (``_runtime_utils.py``): pre-forward unshards unless prefetched, the stream waits for
every all-gather issued so far, then ``forward_prefetch`` unshards the next unit in forward
order if it still needs it (``:404-432``, ``:1240-1291``); post-forward reshards all but the
root (``:485-500``); the pre-backward hook unshards unless prefetched, waits, and with
``BACKWARD_PRE`` prefetches the unit before it in post-forward order if that one's own
hook has not run (``:653-693``); the post-backward hook reshards, prefetches with
``BACKWARD_POST``, then reduce-scatters (``:722-807``). ``limit_all_gathers`` blocks the
host before an unshard while two or more freed all-gather outputs are in flight
(``:297-303``): the all-gather waits for the oldest free.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple, Optional

from ...model import DTYPE_BYTES, CollectiveKind
from ...model.fsdp import BACKWARD, FORWARD, ROOT
from .model import unit_sizes
from .setup import Setup

__all__ = ["Issue", "Schedule", "schedule_of"]

AG, RS, AR = CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_REDUCE


class Issue(NamedTuple):
    """One collective as issued: ``after`` compute spans must have run before it may start;
    ``follows``: the collective it waits for (an HSDP all-reduce, its reduce-scatter)."""

    kind: CollectiveKind
    phase: str
    unit: str
    elements: int
    dtype: str
    group: int
    via: str
    by: str
    after: int
    follows: Optional[int] = None


class Schedule(NamedTuple):
    """The rules' answer: collectives in issue order, the compute spans (ms) with the
    collectives each waits for, and the most bytes of unsharded parameters, unsharded
    gradients and reduce-scatter buffers held at once."""

    issues: tuple[Issue, ...]
    spans: tuple[float, ...]
    waits: tuple[tuple[int, ...], ...]
    peak_bytes: int


def schedule_of(setup: Setup) -> Schedule:
    """FSDP's collectives over ``setup``'s program (see the module's docstring)."""
    engine = _Fsdp2(setup) if setup.system == "fsdp2" else _Fsdp1(setup)
    return engine.run()


class _Engine:
    def __init__(self, setup: Setup):
        self.s = setup
        self.issues: list[Issue] = []
        self.spans: list[float] = []
        self.waits: list[list[int]] = [[]]
        self.state = {u.name: "sharded" for u in setup.units}
        self.pending: dict[str, Optional[int]] = {}
        self.last_ag: dict[str, int] = {}
        self.sizes = {u.name: unit_sizes(u, setup.shard, setup.run_shard or setup.shard)
                      for u in setup.units}
        self.live: dict[tuple, int] = {}
        self.peak = 0

    def run(self) -> Schedule:
        for mark in self.s.program:
            if mark.kind == "compute":
                self.spans.append(mark.ms)
                self.waits.append([])
            elif mark.unit in self.state:
                getattr(self, mark.kind)(mark.unit)
        spans, waits = list(self.spans), self.waits
        if waits[-1]:  # collectives waited for after the last compute
            spans.append(0.0)
        else:
            waits = waits[:-1]
        return Schedule(tuple(self.issues), tuple(spans), tuple(tuple(w) for w in waits),
                        self.peak)

    # -- shared ------------------------------------------------------------------------

    def _hold(self, key: tuple, nbytes: int) -> None:
        self.live[key] = nbytes
        self.peak = max(self.peak, sum(self.live.values()))

    def _free(self, key: tuple) -> None:
        self.live.pop(key, None)

    def _issue(self, kind, phase, unit, elements, dtype, group, via, by, after, follows=None) -> int:
        self.issues.append(Issue(kind, phase, unit, elements, dtype, group, via, by, after, follows))
        return len(self.issues) - 1

    def _gather(self, u: str, phase: str, via: str, by: str, group: int, after: int) -> None:
        ag = self.sizes[u][0]
        if group <= 1:  # one rank: a copy, no collective (_fsdp_param_group.py:392-404)
            self.pending[u] = None
        else:
            k = self._issue(AG, phase, u, ag, self.s.param_dtype, group, via, by, after)
            self.pending[u] = self.last_ag[u] = k
        self._hold(("params", u), ag * DTYPE_BYTES.get(self.s.param_dtype, 4))

    def _wait(self, u: str) -> None:
        k = self.pending.pop(u, None)
        if k is not None:
            self.waits[-1].append(k)
        self.state[u] = "unsharded"

    def _reduce(self, u: str, by: str, after_rs: Optional[int] = None) -> Optional[int]:
        """The unit's reduce-scatter (and HSDP all-reduce), from its unsharded gradients;
        ``after_rs``: the reduce-scatter whose buffer its copy-in waits for."""
        rs = self.sizes[u][1]
        s = self.s
        if rs == 0:
            return None
        self._free(("grads", u))
        self._hold(("rs", "buffer"), rs * DTYPE_BYTES.get(s.reduce_dtype, 4))
        k = None
        after = len(self.spans)
        if s.shard > 1:
            k = self._issue(RS, BACKWARD, u, rs, s.reduce_dtype, s.shard, "post_backward", by,
                            after, after_rs)
        if s.replicate > 1:
            self._issue(AR, BACKWARD, u, rs // s.shard, s.reduce_dtype, s.replicate,
                        "post_backward", by, after, k)
        return k

    def _grads(self, u: str) -> None:
        self._hold(("grads", u), self.sizes[u][1] * DTYPE_BYTES.get(self.s.grad_dtype, 4))


class _Fsdp2(_Engine):
    def __init__(self, setup: Setup):
        super().__init__(setup)
        self.training: dict[str, str] = {}
        self.order: list[str] = []
        self.indices: dict[str, list[int]] = defaultdict(list)
        self.forward_gathers: list[int] = []  # span where each implicit forward AG's unit computes
        self.last_rs: Optional[int] = None

    def _unshard(self, u: str, phase: str, via: str, by: str) -> None:
        if u in self.pending or self.state[u] == "unsharded":
            return
        state = self.state[u]
        group = state if isinstance(state, int) else self.s.shard
        at = len(self.spans)
        if phase == FORWARD and via == "unshard":
            done = self.forward_gathers
            after = done[-2] if len(done) >= 2 else 0
            done.append(at)
        else:
            after = at
        self._gather(u, phase, via, by, group, after)

    def pre_forward(self, u: str) -> None:
        if self.training.get(u) == FORWARD:
            return
        self.training[u] = FORWARD
        self._unshard(u, FORWARD, "unshard", u)
        self._wait(u)
        for t in self.s.explicit_forward.get(u, ()):
            if t in self.state:
                self._unshard(t, FORWARD, "forward_prefetch", u)

    def post_forward(self, u: str) -> None:
        reshard = self.s.reshard.get(u, u != ROOT)
        if reshard is True or reshard == self.s.shard:
            self.state[u] = "sharded"
            self._free(("params", u))
        elif isinstance(reshard, int) and not isinstance(reshard, bool) and reshard > 1:
            self.state[u] = reshard
            ag = self.sizes[u][0]
            self._hold(("params", u), ag // reshard * DTYPE_BYTES.get(self.s.param_dtype, 4))
        self.training[u] = "idle"
        self.indices[u].append(len(self.order))
        self.order.append(u)

    def pre_backward(self, u: str) -> None:
        if self.training.get(u) == "pre_backward":
            return
        self.training[u] = "pre_backward"
        self._unshard(u, BACKWARD, "unshard", u)
        self._wait(u)
        self._grads(u)
        explicit = self.s.explicit_backward.get(u)
        if explicit is None:
            if self.indices[u]:
                curr = self.indices[u].pop()
                if curr > 0:
                    self._unshard(self.order[curr - 1], BACKWARD, "backward_prefetch", u)
        else:
            for t in explicit:
                if t in self.state:
                    self._unshard(t, BACKWARD, "backward_prefetch", u)

    def post_backward(self, u: str) -> None:
        if self.training.get(u) == "post_backward":
            return
        self.training[u] = "post_backward"
        if self.last_rs is not None:
            self.waits[-1].append(self.last_rs)  # rs_wait: the buffer before is reused
        k = self._reduce(u, u, self.last_rs)
        if k is not None:
            self.last_rs = k
        self.state[u] = "sharded"
        self._free(("params", u))


class _Fsdp1(_Engine):
    def __init__(self, setup: Setup):
        super().__init__(setup)
        self.pre_order: list[str] = []
        self.post_order: list[str] = []
        self.prefetched: set[str] = set()
        self.needs_backward: set[str] = set()
        self.ran_forward: set[str] = set()
        self.frees: list[int] = []  # span of each free not yet waited for (the rate limiter)
        self.floor = 0  # the host blocked until this span had run

    def _unshard(self, u: str, phase: str, via: str, by: str) -> None:
        if self.s.limit_all_gathers and len(self.frees) >= 2:
            self.floor = max(self.floor, self.frees.pop(0))
        if self.state[u] == "unsharded" or u in self.pending:
            return
        self._gather(u, phase, via, by, self.s.shard, self.floor)

    def _wait_all(self, u: str) -> None:
        """The stream waits for the unshard stream: every all-gather issued so far."""
        if self.issues:
            last = max((k for k in self.last_ag.values()), default=None)
            if last is not None:
                self.waits[-1].append(last)
        for t in list(self.pending):
            self.pending.pop(t)
            self.state[t] = "unsharded"
        self.state[u] = "unsharded"

    def _prefetch(self, target: Optional[str], phase: str, via: str, by: str, needed: set) -> None:
        if target is None or target not in needed or target in self.prefetched:
            return
        self._unshard(target, phase, via, by)
        self.prefetched.add(target)

    def pre_forward(self, u: str) -> None:
        if u in self.ran_forward:
            return
        self.ran_forward.add(u)
        self.pre_order.append(u)
        if u not in self.prefetched:
            self._unshard(u, FORWARD, "unshard", u)
        self._wait_all(u)
        if self.s.forward_prefetch:
            order = [n.name for n in self.s.units]
            k = order.index(u) + 1
            needed = {n for n in order if n not in self.ran_forward}
            self._prefetch(order[k] if k < len(order) else None, FORWARD, "forward_prefetch", u,
                           needed)

    def post_forward(self, u: str) -> None:
        if u != ROOT and self.s.reshard.get(u, True) is not False:
            self.state[u] = "sharded"
            self._free(("params", u))
            self.frees.append(len(self.spans))
        self.post_order.append(u)
        self.needs_backward.add(u)
        self.prefetched.discard(u)

    def pre_backward(self, u: str) -> None:
        if u not in self.needs_backward:
            return
        if u not in self.prefetched:
            self._unshard(u, BACKWARD, "unshard", u)
        self._wait_all(u)
        self.needs_backward.discard(u)
        self._grads(u)
        if self.s.backward_prefetch == "pre":
            self._prefetch(self._before(u), BACKWARD, "backward_prefetch", u, self.needs_backward)

    def post_backward(self, u: str) -> None:
        self.state[u] = "sharded"
        self._free(("params", u))
        self.prefetched.discard(u)
        self.frees.append(len(self.spans))
        if self.s.backward_prefetch == "post":
            self._prefetch(self._before(u), BACKWARD, "post_backward_prefetch", u,
                           self.needs_backward)
        self._reduce(u, u)

    def _before(self, u: str) -> Optional[str]:
        k = self.post_order.index(u) if u in self.post_order else 0
        return self.post_order[k - 1] if k > 0 else None
