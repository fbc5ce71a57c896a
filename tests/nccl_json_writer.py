"""nccl-tests' JSON file (``-J``) of given rows, laid out as nccl-tests' own writer lays it out:
what the -J reader's tests and the fuzz campaign start from (no real -J file is public here)."""

__all__ = ["as_json"]


def as_json(rows, binary="./build/broadcast_perf_mpi", processes=2, ngpus=1, **part):
    """nccl-tests' -J file of ``rows`` as its writer lays it out: one line, its keys in its
    order, doubles as ``%lf``, booleans as the strings "true"/"false" (``jsonBool``), the
    devices list inside ``config`` (src/util.cu at v2.19.6: jsonOutputInit :349-378,
    writeDeviceReport's config :643-731, writeBenchmarkLinePreamble/Body :459-523,
    writeResultFooter :776-792)."""
    def body(us, algbw, busbw, extra):
        fields = {"time": f"{us:f}", "alg_bw": f"{algbw:f}", "bus_bw": f"{busbw:f}", "nwrong":
                  "0.000000", **extra}
        return "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"
    res = ",".join(
        '{"size":%d,"count":%d,"type":"float","redop":"none","root":"     0",'
        '"out_of_place":%s,"in_place":%s,"actual_iterations":20,"experiment_name":""}'
        % (r.bytes, r.count, body(r.time_us, r.algbw_gbps, r.busbw_gbps, part),
           body(r.inplace_time_us, r.algbw_gbps, r.busbw_gbps, {})) for r in rows)
    dev = ",".join('{"rank":%d,"group":0,"pid":%d,"hostname":"node%d","device":0,'
                   '"device_hex":"0000:01:00","device_info":"NVIDIA GeForce RTX 5090"}'
                   % (p, 100 + p, p) for p in range(processes))
    return ('{"version":3,"start_time":"2026-01-02 03:04:05","args":["%s","-b","1K"],'
            '"env":["NCCL_DEBUG=INFO"],"nccl_version":22907,"config":{"nthreads":1,"ngpus":%d,'
            '"minimum_bytes":1024,"maximum_bytes":134217728,"step_factor":2,"warmup_iters":5,'
            '"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,'
            '"blocking_collectives":"false","per_iter_timing":"false","per_iter_skip":0,'
            '"parallel_init":"false","devices":[%s]},"results":[%s],"out_of_bounds":{"count":0,'
            '"okay":"true"},"average_bus_bandwidth":{"bandwidth":1.5,"okay":"unchecked"},'
            '"errors":[""],"end_time":"2026-01-02 03:05:06"}' % (binary, ngpus, dev, res))
