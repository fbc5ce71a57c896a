"""A line under a NCCL model's times (:meth:`.model.NcclModel.minorant`): what the planner's
bounds (tracecli/planning/optimal.py) may take as the least time of any bucket.

The line is the fitted floors plus the least latency of any enabled (algorithm, protocol)
pair, and the bytes at the best bandwidth of any, on every channel, each scaled by the
smallest of the fitted factors that could time it (NVLS has its own where it differs; LL on a
network its own share, at LL's best bandwidth; a per-channel transport never runs faster than
NCCL's bandwidth); where nothing is fitted, NCCL's own least latency and best bandwidth. The
latencies are those of the table the time model reads, without the latency a network reports
to NCCL (a knob for NCCL's choice that no time includes). A thousandth below, for NCCL's
float32 arithmetic.
"""

from __future__ import annotations

from ..model import Linear
from .transports import PER_CHANNEL

__all__ = ["minorant_of"]


def minorant_of(model, kind, table, func: int) -> Linear:
    """The line at or below ``model``'s ``time_ms`` of ``kind`` at every size; ``table``:
    NCCL's tuning table of the model (``None`` on one rank), ``func`` its index of ``kind``'s
    collective."""
    if table is None:
        return Linear(0.0, 0.0)
    pairs = [(table.lat[func][a][p], table.bw[func][a][p], p) for a in range(len(table.bw[func]))
             for p in range(3) if table.bw[func][a][p] > 0]
    if not pairs:
        return Linear(0.0, 0.0)
    lat = min(max(lat, 0.0) for lat, _, _ in pairs)
    charged = model.charged_bytes(kind, 1 << 20) / float(1 << 20)
    per_byte = charged / (1000.0 * max(bw for _, bw, _ in pairs))
    line = Linear(lat, per_byte)
    hit = model.time_params()
    if hit is not None:
        p, several = hit[0], model.topology.nodes > 1
        fixed = p.floor + (p.net_floor if several else 0.0)
        # a bound under every pick: the smaller factor where NVLS has its own
        k_lat = min(p.lat, p.lat_nvls)
        k_bw = min(p.bw, p.bw_nvls_sm100) if model.compcap >= 100 else p.bw
        ring = p.ring_net if several else 0.0
        k_bw = min(k_bw, p.bw + ring)
        if model.link_net in PER_CHANNEL:  # per channel, never faster than NCCL's bandwidth
            k_bw = min(k_bw, 1.0)
        slope = k_bw * per_byte
        # LL on a network may run faster than bw says (a negative share), but only at LL's
        # own bandwidth: its slope bounds LL's picks apart
        ll = min(p.ll_net, 0.0) if several else 0.0
        ll_bw = max((bw for _, bw, q in pairs if q == 0), default=0.0)
        if ll < 0 and ll_bw > 0:
            slope = min(slope, (p.bw + min(ring, 0.0) + ll) * charged / (1000.0 * ll_bw))
        # the fill adds time; the channel term takes at most chan of bw back
        line = Linear(fixed + k_lat * lat, slope) \
            if min(p.floor, p.net_floor, k_lat, k_bw, p.fill,
                   p.bw + min(ring, 0.0) + ll + p.chan) >= 0 else Linear(0.0, 0.0)
    return Linear(0.999 * line.latency_ms / 1000.0, 0.999 * line.ms_per_byte / 1000.0)
