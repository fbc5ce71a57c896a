"""Exporting a trace's graph: networkx node-link JSON and GraphML, as text."""

from __future__ import annotations

import io

from .model import Trace
from .render.jsonout import dumps

__all__ = ["node_link_text", "graphml_text"]


def node_link_text(trace: Trace) -> str:
    """``networkx.node_link_graph(json.loads(text), edges="links")`` reads it back."""
    return dumps(trace.node_link())


def graphml_text(trace: Trace) -> str:
    buffer = io.BytesIO()
    trace.write_graphml(buffer)
    return buffer.getvalue().decode("utf-8")
