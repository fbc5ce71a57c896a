"""The launcher's view of its ranks: what they said, how far they got, how they ended; when
to stop waiting for them, and the one message that names the rank at fault.

Each spawned rank says how many steps it has begun (a heartbeat: ``("beat", rank, n)``).
Every rank runs the same steps, each starting with a collective of every rank, so a rank
still short of step ``n`` while another began it more than ``--timeout`` ago is hung: the
others wait for it. The launcher then stops every rank at once: it does not wait for the
waiting ranks' own timeouts (under NCCL a collective times out after the group's timeout,
which covers the step, and then the watchdog sleeps 4 x ``TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC``,
15 s by default, for debug dumps before it rethrows and the process dies of SIGABRT: torch
2.13's include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:118-121 and :617
``getDumpTimeout()``; ProcessGroupNCCL.cpp's watchdog sleeps ``getDumpTimeout() * 4``,
"60 seconds", then ``handleException``). A rank killed by SIGABRT while another
lags is that abort, not the fault. When no rank begins a step for the longest a step may
take plus ``--timeout``, every rank is waiting: the ranks are stopped as stalled.

Blame, most telling first: a rank that died without a word (an exit status, a signal other
than SIGABRT); a rank's own error (not one of the timeouts or broken connections its
peers see when it fails); the ranks that lag (hung); a SIGABRT (NCCL's watchdog); the
first error; a stall.
"""

from __future__ import annotations

import signal
from typing import Any, Optional

from ..errors import ReplayError

__all__ = ["Watch", "NOISE", "describe_exit"]

NOISE = ("Connection closed by peer", "Connection reset", "Broken pipe", "timed out",
         "Timed out", "Timeout", "connection", "ECONNRESET")
SETTLE_S = 0.5  # after a first failure, how long the others get to say theirs


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


class Watch:
    """What ``world`` ranks said and did; ``timeout_s``: ``--timeout``; ``stall_s``: how
    long no rank may begin a step before they are all stopped."""

    def __init__(self, world: int, timeout_s: float, stall_s: float, now: float):
        self.world, self.timeout_s, self.stall_s = world, timeout_s, stall_s
        self.beats = [0] * world
        self.leads: list[tuple[int, float]] = []  # (count, when a rank first reached it)
        self.progressed = now
        self.result: Any = None
        self.errors: list[tuple[int, str, bool]] = []  # (rank, text, the user's to fix)
        self.exits: dict[int, int] = {}
        self.failed_at: Optional[float] = None
        self.why_stopped: Optional[str] = None

    def heard(self, message: tuple, now: float) -> None:
        kind = message[0]
        if kind == "beat":
            rank, count = message[1], message[2]
            if count > self.beats[rank]:
                if count > max(self.beats):
                    self.leads.append((count, now))
                self.beats[rank] = count
                self.progressed = now
        elif kind == "result":
            self.result = message[1]
        elif kind == "error":
            self.errors.append((message[1], message[2], bool(message[3:4] and message[3])))
            self.failed_at = self.failed_at or now

    def exited(self, rank: int, code: int, now: float) -> None:
        if rank not in self.exits:
            self.exits[rank] = code
            if code != 0:
                self.failed_at = self.failed_at or now

    def _reached(self, count: int) -> Optional[float]:
        """When a rank first began step ``count`` (``None``: none has)."""
        return next((when for n, when in self.leads if n >= count), None)

    def hung(self, now: float) -> list[int]:
        """Live ranks a peer has waited for longer than ``--timeout``."""
        late = []
        for rank, count in enumerate(self.beats):
            since = self._reached(count + 1)
            if rank not in self.exits and since is not None and now - since > self.timeout_s:
                late.append(rank)
        return late

    def done(self, now: float, quiet: bool) -> bool:
        """Stop waiting? ``quiet``: no message came in this poll."""
        if len(self.exits) == self.world and (quiet or self.failed_at is not None):
            return True
        if self.failed_at is not None and now - self.failed_at > SETTLE_S:
            return True
        if self.hung(now):
            self.why_stopped = "hung"
            return True
        if max(self.beats) > 0 and now - self.progressed > self.stall_s:
            self.why_stopped = "stalled"
            return True
        return False

    def verdict(self, alive: list[int]) -> Any:
        """Rank 0's result, or the :class:`~tracecli.errors.ReplayError` naming the fault;
        ``alive``: ranks still running when the launcher stopped waiting."""
        n = self.world
        stopped = f"all {n} ranks stopped"
        told = {rank for rank, _, _ in self.errors}
        silent = [(r, c) for r, c in sorted(self.exits.items()) if c != 0 and r not in told]
        aborted = [r for r, c in silent if c == -signal.SIGABRT]
        died = [(r, c) for r, c in silent if c != -signal.SIGABRT]
        if died:  # no word (os._exit, a signal, the OOM killer): the root cause
            rank, code = died[0]
            raise ReplayError(f"rank {rank} {describe_exit(code)}; {stopped}")
        own = [(r, t, user) for r, t, user in self.errors if user or not any(w in t for w in NOISE)]
        if own:
            rank, text, user = own[0]
            raise ReplayError(f"rank {rank}{':' if user else ' failed:'} {text}; {stopped}")
        lead = max(self.beats)
        behind = [r for r, b in enumerate(self.beats) if b < lead and r not in self.exits]
        if behind and (self.why_stopped == "hung" or aborted or self.errors):
            waiting = [r for r, b in enumerate(self.beats) if b == lead]
            raise ReplayError(f"{_ranks(behind)} did not respond for {self.timeout_s:g} s "
                              f"(hung?): {_ranks(waiting)} waited for "
                              f"{'them' if len(behind) > 1 else 'it'} in step {lead}; {stopped}")
        if aborted:
            raise ReplayError(f"rank {aborted[0]} was killed by SIGABRT (NCCL's watchdog aborts a "
                              f"rank whose collective timed out); {stopped}")
        if self.errors:
            rank, text, _ = self.errors[0]
            quiet = [r for r in alive if r not in told]
            suffix = f"; {_ranks(quiet)} did not respond (hung?)" if quiet else ""
            raise ReplayError(f"rank {rank} failed: {text}{suffix}; {stopped}")
        if self.why_stopped == "stalled":
            raise ReplayError(f"no rank began a step for {self.stall_s:g} s: every rank waits in a "
                              f"collective (a hung collective or a network fault); {stopped}")
        if self.result is None:
            raise ReplayError("the ranks finished without a result")
        return self.result
