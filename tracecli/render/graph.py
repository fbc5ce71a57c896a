"""Exporting a trace's graph as a stream: networkx node-link JSON and GraphML.

Both are written from :meth:`Trace.nodes` and :meth:`Trace.edges`, the same lists the
networkx graph is built from, a node or edge at a time: a 200,000-record dump exports in
seconds without holding a networkx graph or the whole document in memory.

- node-link JSON: ``networkx.node_link_graph(json.loads(text), edges="links")`` reads it;
- GraphML: ``networkx.read_graphml`` reads it; nested values (op attributes, input lists)
  are JSON strings, unknown values are left out, as networkx writes them.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Iterator
from xml.sax.saxutils import escape, quoteattr

from ..model import EdgeKind, ParamMeta, Trace
from ..model.graph import edge_entry, jsonable, node_entry, plain
from .jsonout import COMPACT

__all__ = ["node_link_chunks", "graphml_chunks"]

_ROWS = 2048  # nodes or edges per chunk


def node_link_chunks(trace: Trace) -> Iterator[str]:
    """The document in chunks; each line holds up to 2,048 nodes or edges (one encoder
    call a line: calls, not bytes, are what cost)."""
    meta = jsonable(trace.meta.to_json())
    graph = COMPACT.encode({"path": trace.path, "format": trace.format, **meta})
    yield f'{{\n  "directed": true,\n  "multigraph": false,\n  "graph": {graph},\n  "nodes": ['
    yield from _rows(node_entry(*n) for n in trace.nodes())
    yield '\n  ],\n  "links": ['
    yield from _rows(edge_entry(*e) for e in trace.edges())
    yield "\n  ]\n}\n"


def _rows(entries: Iterator[dict]) -> Iterator[str]:
    batch, first = [], True
    for entry in entries:
        batch.append(entry)
        if len(batch) == _ROWS:
            yield ("\n    " if first else ",\n    ") + COMPACT.encode(batch)[1:-1]
            batch, first = [], False
    if batch:
        yield ("\n    " if first else ",\n    ") + COMPACT.encode(batch)[1:-1]


_GRAPHML_HEAD = ('<?xml version=\'1.0\' encoding=\'utf-8\'?>\n'
                 '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
                 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                 'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
                 'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n')
_RANK = {"boolean": 0, "int": 1, "double": 2, "string": 3}


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_SPECIAL = re.compile("[&<>\"\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """XML 1.0 has no place for most control characters: they become U+FFFD."""
    return _CONTROL.sub("\ufffd", text) if _CONTROL.search(text) else text


def _xml(text: str) -> str:
    """Element text, escaped (most strings need nothing: checked in one regex call)."""
    return escape(_xml_text(text)) if _SPECIAL.search(text) else text


def _attr(text: str) -> str:
    """A quoted attribute value."""
    return quoteattr(_xml_text(text)) if _SPECIAL.search(text) else f'"{text}"'


_TYPES = {bool: "boolean", int: "int", float: "double", str: "string"}
_JSON = json.JSONEncoder(ensure_ascii=False)  # as json.dumps(value, ensure_ascii=False)
_PLAIN_STR = re.compile('[^"\\\x00-\x1f\x7f-\uffff]*')


def _value(value: Any) -> tuple[str, Any]:
    """(GraphML type, value) of a plain node value; lists and objects as JSON text."""
    kind = _TYPES.get(type(value))
    if kind is not None:
        return kind, value
    if type(value) is list and all(type(v) is str and _PLAIN_STR.fullmatch(v) for v in value):
        return "string", "[" + ", ".join(f'"{v}"' for v in value) + "]"  # what json.dumps gives
    if isinstance(value, (list, dict)):
        return "string", _JSON.encode(value)
    return "string", str(value)


def _format(kind: str, value: Any) -> str:
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "double":
        return repr(float(value)) if not isinstance(value, str) else value
    if kind == "int":
        return str(value)
    return _xml(value if isinstance(value, str) else str(value))


def _formatter(kind: str, declared: str, sample: Any):
    """How to write one field whose values look like ``sample`` under its declared type."""
    if isinstance(sample, bool):
        return lambda v: "true" if v else "false"
    if isinstance(sample, enum.Enum):
        return lambda v: _xml(v.value)
    if isinstance(sample, (int, float)) and declared == "double":
        return lambda v: repr(float(v))
    if isinstance(sample, int):
        return str
    if isinstance(sample, float):
        return repr
    if isinstance(sample, str):
        return _xml
    return lambda v: _format(declared, _value(jsonable(v))[1])


def _node_data(trace: Trace, ids: dict[str, str], types: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(node id, its <data> lines). Records of one class share a few patterns of value
    types; each pattern's field writers are worked out once."""
    patterns: dict[tuple, list] = {}
    marks: dict[ParamMeta, str] = {}  # a parameter's marks, as their <data> lines
    for node, kind, record in trace.nodes():
        signature = (type(record), *map(type, record))
        plan = patterns.get(signature)
        if plan is None:
            plan = patterns[signature] = [
                (i, ids[name], _formatter(_value(jsonable(value))[0], types[name], value))
                for i, (name, value) in enumerate(zip(record._fields, record))
                if name != "id" and name != "meta" and value is not None]
        data = "".join([f'      <data key="{key}">{write(record[i])}</data>\n' for i, key, write in plan])
        meta = getattr(record, "meta", None)
        if isinstance(meta, ParamMeta):  # its columns last, as plain() lists them
            if meta not in marks:
                marks[meta] = "".join(f'      <data key="{ids[k]}">{_format(types[k], v)}</data>\n'
                                      for k, v in meta.columns().items())
            data += marks[meta]
        yield node, f'      <data key="{ids["type"]}">{kind.value}</data>\n' + data


def _attribute_types(trace: Trace) -> dict[str, str]:
    """GraphML declares every attribute (name, type) before the nodes. Records of one class
    repeat a few patterns of value types, so each new pattern is looked at once; a name seen
    with several types takes the widest (as networkx does)."""
    types: dict[str, str] = {"type": "string"}
    seen: set[tuple] = set()
    for _, _, record in trace.nodes():
        signature = (type(record), *map(type, record))
        if signature in seen:
            continue
        seen.add(signature)
        for key, value in plain(record).items():
            if value is not None:
                kind = _value(value)[0]
                if key not in types or _RANK[kind] > _RANK[types[key]]:
                    types[key] = kind
    return types


def graphml_chunks(trace: Trace) -> Iterator[str]:
    types = _attribute_types(trace)
    ids = {key: f"d{i}" for i, key in enumerate(types)}
    lines = [_GRAPHML_HEAD]
    for key, kind in types.items():
        lines.append(f'  <key id="{ids[key]}" for="node" attr.name={quoteattr(key)} '
                     f'attr.type="{kind}" />\n')
    lines.append('  <key id="e0" for="edge" attr.name="kind" attr.type="string" />\n')
    lines.append('  <key id="e1" for="edge" attr.name="index" attr.type="int" />\n')
    lines.append('  <key id="g0" for="graph" attr.name="path" attr.type="string" />\n')
    lines.append('  <key id="g1" for="graph" attr.name="format" attr.type="string" />\n')
    lines.append(f'  <graph edgedefault="directed">\n'
                 f'    <data key="g0">{_xml(trace.path)}</data>\n'
                 f'    <data key="g1">{_xml(trace.format)}</data>\n')
    yield "".join(lines)
    batch: list[str] = []
    quoted: dict[str, str] = {}
    for node, data in _node_data(trace, ids, types):
        quoted[node] = q = _attr(node)
        batch.append(f"    <node id={q}>\n{data}    </node>\n")
        if len(batch) == _ROWS:
            yield "".join(batch)
            batch = []
    kinds = {kind: f'>\n      <data key="e0">{kind.value}</data>\n' for kind in EdgeKind}
    get = quoted.get
    for u, v, attrs in trace.edges():
        index = attrs.get("index")
        batch.append(f"    <edge source={get(u) or _attr(u)} target={get(v) or _attr(v)}"
                     f"{kinds[attrs['kind']]}"
                     + (f'      <data key="e1">{index}</data>\n    </edge>\n' if index is not None
                        else "    </edge>\n"))
        if len(batch) == _ROWS:
            yield "".join(batch)
            batch = []
    yield "".join(batch) + "  </graph>\n</graphml>\n"
