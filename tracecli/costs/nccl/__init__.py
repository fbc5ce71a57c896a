"""NCCL's own collective cost model, reproduced: constants per release (:mod:`.versions`),
the latency/bandwidth table and its argmin (:mod:`.tuning`), readers of NCCL logs
(:mod:`.nccllog`) and nccl-tests output (:mod:`.nccl_tests`)."""
