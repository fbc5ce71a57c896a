"""NCCL's own collective cost model, reproduced: constants per release (:mod:`.versions`),
the latency/bandwidth table (:mod:`.tuning`) and its argmin (:mod:`.algotime`), readers of
NCCL logs (:mod:`.nccllog`) and nccl-tests output (:mod:`.nccl_tests`)."""
