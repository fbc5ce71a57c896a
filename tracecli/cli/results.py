"""What each command produces, and how it renders itself.

A result answers, for the one output path of the CLI (``tracecli.cli.output.emit``): its
JSON text (``--json``), its rich view (a table, honouring ``--top``), the lines printed whole
after the view (advice to paste; ``None`` when there are none to print), its Chrome trace
document (``--chrome-trace``, where there is a timeline) and the text of its ``--out`` file
(``None`` where it writes none). Rich and the views are imported only when a view is asked
for: JSON output never needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Union

from ..render import jsonout

if TYPE_CHECKING:
    from ..model import Trace
    from ..pipeline import Inspected, Planned
    from ..planning.plan import BucketPlan
    from ..run import RunReport
    from .session import Session

__all__ = ["Result", "InspectResult", "RunResult", "RunExportResult", "TraceExportResult", "ExportResult",
           "PlanResult", "CompareResult", "DryRunResult", "ReplayResult", "CalibrationResult",
           "StatusResult", "CollectiveResult", "DiffResult"]


class Result:
    """A command's output in every form it has; by default, none but JSON."""

    def json_text(self) -> str:
        raise NotImplementedError

    def view(self, top: Optional[int] = None):
        """The rich renderable printed to standard output, or ``None``."""
        return None

    def lines(self) -> Optional[list[str]]:
        """Lines printed whole after the view (never cut or wrapped by a table), or ``None``."""
        return None

    def chrome_trace(self) -> Optional[dict]:
        return None

    def file_text(self) -> Optional[Union[str, Iterable[str]]]:
        """What ``--out`` (or ``export -o``) writes: text, or chunks of it."""
        return None


class InspectResult(Result):
    def __init__(self, inspected: Inspected, per_gradient: bool = False):
        self.inspected, self.per_gradient = inspected, per_gradient

    def json_text(self) -> str:
        i = self.inspected
        return jsonout.inspect_json(i.trace, i.ready, i.sizes, i.details, i.source)

    def view(self, top=None):
        from ..render.tables import inspect_view

        i = self.inspected
        return inspect_view(i.trace, i.ready, i.sizes, top=top, per_gradient=self.per_gradient,
                            details=i.details, compute_source=i.source)


class RunResult(Result):
    """A run's straggler report (``inspect RUN``)."""

    def __init__(self, report: RunReport):
        self.report = report

    def json_text(self) -> str:
        from ..render.run import run_json

        return jsonout.dumps(run_json(self.report))

    def view(self, top=None):
        from ..render.run import run_view

        return run_view(self.report, top)

    def chrome_trace(self):
        from ..render.run import run_chrome_trace

        return run_chrome_trace(self.report)


class RunExportResult(RunResult):
    """A run's aligned timeline (``export RUN --to chrome``)."""

    def view(self, top=None):
        return None

    def json_text(self) -> str:
        return ""

    def file_text(self):
        from ..render.run import run_chrome_trace

        return jsonout.dumps(run_chrome_trace(self.report))


class TraceExportResult(Result):
    """One trace's recorded timeline (``export TRACE --to chrome``), a Chrome trace."""

    def __init__(self, doc: dict):
        self.doc = doc

    def file_text(self):
        return jsonout.dumps(self.doc)


class ExportResult(Result):
    """The trace graph for other tools: GraphML or networkx node-link JSON, in chunks."""

    def __init__(self, trace: Trace, to: str):
        self.trace, self.to = trace, to

    def file_text(self):
        from ..render.graph import graphml_chunks, node_link_chunks

        return node_link_chunks(self.trace) if self.to == "json" else graphml_chunks(self.trace)


class PlanResult(Result):
    """A bucket plan; its JSON is also the plan file replay reads."""

    def __init__(self, planned: Planned):
        self.planned = planned
        self.plan = planned.plan
        self._text: Optional[str] = None

    @property
    def plan_text(self) -> str:
        if self._text is None:
            self._text = jsonout.dumps(self.plan.to_json())
        return self._text

    def json_text(self) -> str:
        return jsonout.dumps({**self.plan.to_json(),
                              "advice": [a.to_json() for a in self.planned.advice]})

    def view(self, top=None):
        if self.plan.fsdp is not None:
            from ..render.fsdp import fsdp_plan_view

            return fsdp_plan_view(self.plan, top)
        from ..render.plans import plan_view

        return plan_view(self.plan, top)

    def lines(self):
        from ..render.plans import plan_advice

        return plan_advice(self.plan, self.planned.advice)

    def chrome_trace(self):
        from ..render.plans import plan_chrome_trace

        return plan_chrome_trace(self.plan, self.planned.backward_names())

    def file_text(self):
        return self.plan_text


class CompareResult(PlanResult):
    """Every strategy side by side; its plan (for ``--out`` and the timeline) is the best
    predicted one."""

    def json_text(self) -> str:
        return jsonout.dumps({**jsonout.compare_doc(self.planned.rows),
                              "advice": [a.to_json() for a in self.planned.advice]})

    def view(self, top=None):
        from ..render.plans import compare_view

        return compare_view(self.planned.rows, self.plan)

    def lines(self):
        from ..render import fsdp
        from ..render.advice import advice_lines

        return advice_lines(self.planned.advice, self.plan.cost.name) + \
            fsdp.advice_lines(self.planned.rows)


class DryRunResult(Result):
    """The plan a replay would run, with its prediction; nothing ran, so nothing is written."""

    def __init__(self, plan: BucketPlan, world: int, backend: str, iters: int, warmup: int):
        self.plan, self.world, self.backend, self.iters, self.warmup = \
            plan, world, backend, iters, warmup

    def json_text(self) -> str:
        return jsonout.dumps(self.plan.to_json())

    def view(self, top=None):  # the last line is prose: it wraps at the console's width
        from rich.console import Group
        from rich.text import Text

        if self.plan.fsdp is not None:
            from ..render.fsdp import fsdp_plan_view

            view = fsdp_plan_view(self.plan, top)
        else:
            from ..render.plans import plan_view

            view = plan_view(self.plan, top)
        return Group(view, Text(
            f"dry run: {self.world} ranks ({self.backend}) would replay {self.iters} "
            f"iterations after {self.warmup} warm-up; nothing was started"))


class ReplayResult(Result):
    """A replay's report: predicted against measured, and both as a timeline."""

    def __init__(self, report):
        self.report = report
        self._text: Optional[str] = None

    def json_text(self) -> str:
        if self._text is None:
            self._text = jsonout.dumps(self.report.to_json())
        return self._text

    def view(self, top=None):
        from ..render.replay import replay_view

        return replay_view(self.report, top)

    def chrome_trace(self):
        from ..render.replay import replay_chrome_trace

        return replay_chrome_trace(self.report)

    def file_text(self):
        return self.json_text()


class CalibrationResult(Result):
    """A calibration profile: the file plan-buckets reads with ``--calibration``."""

    def __init__(self, report, nccl=None):
        self.report, self.nccl = report, nccl  # nccl: NCCL's model of the topology given

    def json_text(self) -> str:
        doc = self.report.to_json()
        if self.nccl is not None:  # what NCCL's model predicts at each measured size
            from ..model import CollectiveKind

            k = CollectiveKind.ALL_REDUCE
            doc["nccl_model"] = {"summary": self.nccl.summary(), "topology": self.nccl.topology_doc(),
                                 "points": [{"bytes": p.bytes, "predicted_ms": self.nccl.time_ms(k, p.bytes),
                                             "algorithm": (self.nccl.algorithm_protocol(k, p.bytes) or ("none",))[0],
                                             "protocol": (self.nccl.algorithm_protocol(k, p.bytes) or (0, "none"))[1]}
                                            for p in self.report.points]}
        return jsonout.dumps(doc)

    def view(self, top=None):
        from ..render.replay import calibration_view

        return calibration_view(self.report, self.nccl)

    def file_text(self):
        return self.json_text()


class StatusResult(Result):
    """What a directory's session remembers."""

    def __init__(self, session: Session):
        self.session = session

    def json_text(self) -> str:
        return jsonout.dumps(self.session.to_json())

    def lines(self):
        from ..render.status import status_lines

        return status_lines(self.session)


class CollectiveResult(Result):
    """``tracecli collective``: NCCL's predicted table of a collective, with measurements."""

    def __init__(self, op: str, model, rows, measured: Optional[str] = None,
                 gpus_per_thread: Optional[int] = None):
        self.op, self.model, self.rows, self.measured = op, model, rows, measured
        self.gpus_per_thread = gpus_per_thread  # the measured run's nccl-tests -g

    def json_text(self) -> str:
        m = self.model
        return jsonout.dumps({
            "collective": self.op, "topology": m.topology_doc(), "model": m.summary(),
            "measured_file": self.measured, "measured_gpus_per_thread": self.gpus_per_thread,
            "rows": [r.to_json(self.measured is not None) for r in self.rows]})

    def view(self, top=None):
        from ..render.collective import collective_view

        return collective_view(self.op, self.model, self.rows, self.measured)


class DiffResult(Result):
    """Two runs side by side (``tracecli diff``), and did the advice work (``--plan``)."""

    def __init__(self, diff, advice=None):
        self.diff, self.advice = diff, advice

    def json_text(self) -> str:
        from ..render.diff import diff_json

        return jsonout.dumps(diff_json(self.diff, self.advice))

    def view(self, top=None):
        from ..render.diff import diff_view

        return diff_view(self.diff, self.advice)
