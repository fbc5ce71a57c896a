"""Multi-rank scale input: a run of K per-rank Kineto traces of about S MB each, made from a
real run (issue 16; the benchmark ``benchmarks/multirank_scale.py`` reads what this writes).

The source is a real run (default ``tests/fixtures/multirank/gloo4_straggler_offsets``, 4
gloo ranks with a straggler and clock offsets) or one real rank's trace. Output rank ``r`` is
source rank ``r % n``: its profiled steps are repeated, each copy shifted by the same period
on every rank, ``ProfilerStep#K`` renumbered (copy ``c`` of step ``K`` is ``K + c * steps``),
``External id``, flow ``id`` and ``Ev Idx`` moved past the previous copy's, so every rank has
the same collectives in the same order, and a run made from a run stays matchable with the
source's own waits. Ranks past the source's get a clock offset of their own (deterministic,
within +-1 ms) on top of their source rank's, a pid of their own, and ``distributedInfo``
says their rank and the new world size. ``run.json`` beside the traces lists, per rank, the
source file and the offset added (tests and the benchmark can check offsets at scale).

Written as a stream from per-event templates (the source is parsed once; each copy is
formatted and written, never the whole file held): memory stays that of the source.

    python benchmarks/multirank_input.py [--ranks 64] [--mb 20] [--source PATH] [--out DIR]
                                         [--gzip] [--jobs N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "tests" / "fixtures" / "multirank" / "gloo4_straggler_offsets"
GAP_US = 1000.0                  # between the end of one copy and the start of the next
MAX_RANKS = 100_000
MAX_MB = 10_000
# a number slot replaces a whole JSON string; the step slot sits inside the name
_SLOT = re.compile(r'"@@@(TS|PID|TID|EID|FID|EVX)@@@"|@@@(STEP)@@@')


def _load(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def source_files(source: Path) -> list[Path]:
    """The source run's traces in rank order: ``truth.json``'s ``files`` where there is one,
    else every ``*.json``/``*.json.gz`` ordered by ``distributedInfo.rank``; or the one file."""
    if source.is_file():
        return [source]
    truth = source / "truth.json"
    if truth.is_file():
        files = json.loads(truth.read_text())["files"]
        return [source / files[str(r)] for r in range(len(files))]
    found = [p for p in source.iterdir() if p.name.endswith((".json", ".json.gz"))]
    return sorted(found, key=lambda p: _load(p).get("distributedInfo", {}).get("rank", 0))


class Template:
    """One source rank, parsed once: the header, the once-only events, and each repeated
    event as text fragments around the slots a copy changes."""

    def __init__(self, path: Path):
        doc = _load(path)
        events = doc.pop("traceEvents")
        self.header = doc
        self.pid = next(e["pid"] for e in events if e.get("ph") == "X" and isinstance(e.get("pid"), int))
        body = [e for e in events if e.get("ph") in ("X", "s", "f") and e.get("cat") != "Trace"]
        self.once = [e for e in events if not (e.get("ph") in ("X", "s", "f") and e.get("cat") != "Trace")]
        self.start = min(e["ts"] for e in body)
        self.end = max(e["ts"] + e.get("dur", 0) for e in body)
        self.id_stride = 1 + max([e.get("args", {}).get("External id", 0) for e in body]
                                 + [e.get("id", 0) for e in body if isinstance(e.get("id"), int)])
        self.ev_stride = 1 + max(e.get("args", {}).get("Ev Idx", 0) for e in body)
        steps = {int(e["name"].split("#")[1]) for e in body
                 if str(e.get("name", "")).startswith("ProfilerStep#")}
        self.first_step, self.steps = min(steps), max(steps) - min(steps) + 1
        self.parts = [self._split(e) for e in sorted(body, key=lambda e: e["ts"])]

    def _split(self, e: dict) -> tuple:
        e = json.loads(json.dumps(e))
        values = {"TS": e["ts"]}
        e["ts"] = "@@@TS@@@"
        for key, slot in (("pid", "PID"), ("tid", "TID")):
            if isinstance(e.get(key), int) and e[key] != 0:
                values[slot] = e[key] - self.pid
                e[key] = f"@@@{slot}@@@"
        args = e.get("args", {})
        for key, slot in (("External id", "EID"), ("Ev Idx", "EVX")):
            if isinstance(args.get(key), int):
                values[slot] = args[key]
                args[key] = f"@@@{slot}@@@"
        if isinstance(e.get("id"), int):
            values["FID"] = e["id"]
            e["id"] = "@@@FID@@@"
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep#"):
            values["STEP"] = int(name.split("#")[1])
            e["name"] = "ProfilerStep#@@@STEP@@@"
        chunks = _SLOT.split(json.dumps(e))
        # split with two groups: text, number slot or None, step slot or None, text, ...
        pieces, order = [chunks[0]], []
        for i in range(1, len(chunks), 3):
            order.append(chunks[i] or chunks[i + 1])
            pieces.append(chunks[i + 2])
        return pieces, order, values

    def copy_text(self, copy: int, period: float, offset: float, pid: int) -> str:
        shift = copy * period + offset
        ids, evs, steps = copy * self.id_stride, copy * self.ev_stride, copy * self.steps
        out = []
        for pieces, order, v in self.parts:
            row = [pieces[0]]
            for i, slot in enumerate(order):
                if slot == "TS":
                    row.append(f"{v['TS'] + shift:.3f}")
                elif slot in ("PID", "TID"):
                    row.append(str(v[slot] + pid))
                elif slot in ("EID", "FID"):
                    row.append(str(v[slot] + ids))
                elif slot == "EVX":
                    row.append(str(v["EVX"] + evs))
                else:
                    row.append(str(v["STEP"] + steps))
                row.append(pieces[i + 1])
            out.append("".join(row))
        return ",\n".join(out)


def added_offset_us(rank: int, sources: int) -> int:
    """The clock offset a rank past the source's gets on top of its source rank's: a
    deterministic spread within +-1000 us; 0 for the source ranks themselves."""
    return 0 if rank < sources else (rank * 7919) % 2001 - 1000


def _header(t: Template, rank: int, world: int, name: str) -> str:
    head = dict(t.header)
    info = dict(head.get("distributedInfo") or {"backend": "gloo"})
    info.update(rank=rank, world_size=world)
    if info.get("pg_config"):
        info["pg_config"] = [dict(pg, pg_size=world, ranks=list(range(world)))
                             for pg in info["pg_config"]]
    head["distributedInfo"] = info
    head["trace_id"] = f"{rank:08X}" + str(head.get("trace_id", "0" * 32))[8:]
    head["traceName"] = name
    text = json.dumps(head)
    return text[:-1] + ', "traceEvents": [\n'


def _once(t: Template, offset: float, pid: int, span_end: float) -> list[str]:
    out = []
    for e in t.once:
        e = dict(e)
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = round(e["ts"] + offset if e.get("name") != "Record Window End"
                            else span_end + offset, 3)
        for key in ("pid", "tid"):
            if isinstance(e.get(key), int) and e[key] != 0:
                e[key] = e[key] - t.pid + pid
        if e.get("cat") == "Trace" and isinstance(e.get("dur"), (int, float)):
            e["dur"] = round(span_end - e["ts"] + offset, 3)
        out.append(json.dumps(e))
    return out


def write_rank(t: Template, path: Path, rank: int, world: int, copies: int, period: float,
               offset: float, compress: bool) -> tuple[int, int]:
    """Write one rank; return (bytes of JSON, bytes of the file)."""
    pid = 100_000 + 1_000 * rank
    span_end = t.start + (copies - 1) * period + (t.end - t.start)
    opener = (lambda p: gzip.open(p, "wt", compresslevel=1)) if compress else (lambda p: open(p, "w"))
    written = 0
    with opener(path) as out:
        def put(text: str) -> None:
            nonlocal written
            out.write(text)
            written += len(text)

        put(_header(t, rank, world, path.name))
        put(",\n".join(_once(t, offset, pid, span_end)))
        for c in range(copies):
            put(",\n" + t.copy_text(c, period, offset, pid))
        put("\n]}\n")
    return written, path.stat().st_size


def _job(args: tuple) -> tuple[int, int]:
    src, path, rank, world, copies, period, offset, compress = args
    return write_rank(Template(Path(src)), Path(path), rank, world, copies, period, offset, compress)


def expected_from_truth(truth: dict, run: dict) -> dict:
    """What the made run should be found to hold, from the source run's ``truth.json``: each
    rank's clock offset (the issue's convention: ahead of rank 0) and, per repeated injected
    step, the ranks that arrived last (every copy of the source's straggler ties)."""
    n, world = truth["world_size"], run["world_size"]
    offset = {r: truth["clock_offset_us"][str(r % n)] + run["ranks"][str(r)]["offset_added_us"]
              for r in range(world)}
    stragglers = [{"step": s["step"] + c * run["steps_per_copy"], "source_step": s["step"],
                   "ranks": [r for r in range(world) if r % n == s["rank"]],
                   "sleep_ms": s["sleep_ms"]}
                  for c in range(run["copies"]) for s in truth["stragglers"]]
    return {"clock_offset_us": {str(r): round(v - offset[0], 3) for r, v in offset.items()},
            "stragglers": sorted(stragglers, key=lambda s: s["step"])}


def make_run(out: Path, ranks: int = 64, megabytes: float = 20.0, source: Path = DEFAULT_SOURCE,
             compress: bool = False, jobs: int = 1) -> dict:
    """Write ``ranks`` traces of about ``megabytes`` MB (uncompressed JSON) each into ``out``
    and ``run.json`` describing them; return that description."""
    if not 1 <= ranks <= MAX_RANKS or not 0 < megabytes <= MAX_MB:
        raise ValueError(f"ranks must be 1..{MAX_RANKS} and megabytes in (0, {MAX_MB}]")
    files = source_files(Path(source))
    templates = [Template(p) for p in files]
    period = max(t.end - t.start for t in templates) + GAP_US
    sample = len(templates[0].copy_text(0, period, 0.0, 0)) + 2
    copies = max(1, round(megabytes * 1e6 / sample))
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if compress else ".json"
    plan = []
    for r in range(ranks):
        s = r % len(files)
        plan.append((str(files[s]), str(out / f"rank{r}{suffix}"), r, ranks, copies, period,
                     float(added_offset_us(r, len(files))), compress))
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            sizes = list(pool.map(_job, plan))
    else:
        sizes = [write_rank(templates[r % len(files)], Path(p[1]), *p[2:]) for r, p in enumerate(plan)]
    run = {
        "source": str(source), "world_size": ranks, "copies": copies,
        "steps_per_copy": templates[0].steps, "period_us": period,
        "steps": [templates[0].first_step + k for k in range(copies * templates[0].steps)],
        "ranks": {str(r): {"file": Path(p[1]).name, "source_file": Path(p[0]).name,
                           "source_rank": r % len(files), "offset_added_us": p[6],
                           "json_bytes": size[0], "bytes": size[1]}
                  for r, (p, size) in enumerate(zip(plan, sizes))},
    }
    truth = Path(source) / "truth.json"
    if Path(source).is_dir() and truth.is_file():
        run.update(expected_from_truth(json.loads(truth.read_text()), run))
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--mb", type=float, default=20.0, help="size of each rank's JSON, MB")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="a run's folder (with truth.json or *.json[.gz]) or one trace")
    parser.add_argument("--out", type=Path, help="folder to write (default: a new temp folder)")
    parser.add_argument("--gzip", action="store_true", help="write .json.gz (level 1)")
    parser.add_argument("--jobs", type=int, default=1, help="processes writing ranks at once")
    args = parser.parse_args()
    if not 1 <= args.ranks <= MAX_RANKS or not 0 < args.mb <= MAX_MB or not 1 <= args.jobs <= 64:
        parser.error(f"--ranks 1..{MAX_RANKS}, --mb in (0, {MAX_MB}], --jobs 1..64")
    out = args.out or Path(tempfile.mkdtemp(prefix="tracecli-multirank-"))
    t = time.perf_counter()
    run = make_run(out, args.ranks, args.mb, args.source, args.gzip, args.jobs)
    seconds = time.perf_counter() - t
    total = sum(r["json_bytes"] for r in run["ranks"].values())
    files = sum(r["bytes"] for r in run["ranks"].values())
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    print(f"{out}: {args.ranks} ranks, {total / 1e6 / args.ranks:.1f} MB each "
          f"({total / 1e6:.0f} MB of JSON, {files / 1e6:.0f} MB of files), "
          f"{len(run['steps'])} steps a rank, {seconds:.1f} s, "
          f"peak RSS {peak:.0f} MB", file=sys.stdout)


if __name__ == "__main__":
    main()
