"""PyTorch FSDP (FSDP2 ``fully_shard``, FSDP1 ``FullyShardedDataParallel``): its units,
the collectives it issues and when, exactly as torch 2.13 does (issue 27).

- :mod:`.model`: the planner's view of a run (units, sizes, what the run set);
- :mod:`.observed`: the as-run plan (``--strategy observed``);
- :mod:`.details`: what an FSDP plan carries beside its buckets.
"""
