"""Planning scale: every strategy's planning time on 100,000 and 1,000,000 gradients.

Targets (2-core machine): optimal on 100,000 under 1 s and on 1,000,000 under 10 s; the
greedy strategies on 1,000,000 under 3 s. Timings cover the strategy alone (grouping),
and strategy + timeline simulation.

    python benchmarks/plan_scale.py [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import random
import time

from tracecli.planning import StrategyOptions, predicted
from tracecli.planning.base import Grad
from tracecli.costs import AlphaBeta as CostModel
from tracecli.planning.strategies import STRATEGIES
from tracecli.planning.timeline import simulate

TARGETS = {("optimal", 100_000): 1.0, ("optimal", 1_000_000): 10.0}
GREEDY_TARGET = 3.0  # every other strategy on 1,000,000


def synthetic(n: int, seed: int = 0) -> list[Grad]:
    """Gradients with ResNet/transformer-like sizes (log-uniform 256 B .. 64 MiB) and
    ready times spread over a 200 ms backward, in readiness order."""
    rng = random.Random(seed)
    grads, clock = [], 50.0
    for i in range(n):
        size = int(2 ** rng.uniform(8, 26)) // 4 * 4
        clock += rng.expovariate(n / 200.0)
        dtype = "float16" if rng.random() < 0.1 else "float32"
        grads.append(Grad(f"g{i}", size, dtype, size // 4, clock, n - 1 - i))
    return grads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    cost = CostModel("ib-hdr", 5.0, 23.0, 64)
    print(f"{'gradients':>10} {'strategy':<11} {'buckets':>9} {'strategy s':>10} "
          f"{'+timeline s':>11}  target")
    for n in args.sizes:
        grads = synthetic(n)
        backward_end = grads[-1].ready_ms + 1.0
        for name in predicted():
            opts = StrategyOptions(max_bytes=25 * 2**20, agg_small_grads_max_bytes=32 * 1024,
                                   spec="pscpu:32k:xring")
            start = time.perf_counter()
            grouping = STRATEGIES[name].group(grads, opts, cost)
            grouped = time.perf_counter()
            simulate(grads, grouping, cost, 50.0, backward_end)
            done = time.perf_counter()
            target = TARGETS.get((name, n), GREEDY_TARGET if n >= 1_000_000 and name != "optimal" else None)
            verdict = "" if target is None else (f"< {target:g} s " + ("ok" if grouped - start < target else "MISSED"))
            print(f"{n:>10,} {name:<11} {len(grouping.buckets):>9,} {grouped - start:>10.2f} "
                  f"{done - start:>11.2f}  {verdict}")


if __name__ == "__main__":
    main()
