"""The pipeline: from a request to what the CLI prints, one step per module.

- :mod:`.cost`: which cost model a request gets;
- :mod:`.compute`: readiness, compute times and the planner's input of a trace;
- :mod:`.observed`: the plan the profiled run used (``--strategy observed``);
- :mod:`.trace`: plan, compare and inspect one trace;
- :mod:`.runs`: plan and compare from a whole run's per-rank traces;
- :mod:`.replay`: what a replay plans from, on which ranks, checked.

Each step stays a pure function in its own package (analysis, costs, planning); what the
user should hear about comes back as ``notices``, and the library never prints.
"""

from .compute import ComputeRequest, inputs
from .cost import DEFAULT_GPUS, CostRequest, resolve_cost, trace_cost, trace_times
from .observed import as_run
from .planned import Planned
from .trace import (Inspected, compare_trace, gradient_details, inspect_trace, plan_trace,
                    prepare)

__all__ = ["ComputeRequest", "CostRequest", "Planned", "plan_trace", "compare_trace",
           "prepare", "inputs", "gradient_details", "resolve_cost", "trace_cost", "trace_times", "as_run",
           "DEFAULT_GPUS", "Inspected", "inspect_trace"]
