"""Matching the same collective on every rank: by sequence number, by group name and order,
by launch order; what cannot be lined up is said (issue 16 item 2). And corrupt values in
one rank's trace are one line naming that file.

Runs are made from the real single-rank fixture as in ``test_run_hostile``; the process
group names and sequence numbers written into its launches are the test's own.
"""

from __future__ import annotations

import json

import pytest
from conftest import assert_error, run
from test_run_hostile import rank_doc, write

from tracecli.run import analyze_run


def _launches(doc):
    return [e for e in doc["traceEvents"] if e.get("name") == "c10d::allreduce_"]


def _label(doc, group="0", seq=True):
    for k, e in enumerate(sorted(_launches(doc), key=lambda e: e["ts"])):
        e["args"]["Process Group Name"] = group
        if seq:
            e["args"]["Seq"] = k
    return doc


def test_sequence_numbers_match_and_a_missing_one_is_said(tmp_path):
    write(tmp_path / "rank0.json.gz", _label(rank_doc(0)))
    write(tmp_path / "rank1.json.gz", _label(rank_doc(1, 250.0, 300.0)))
    report = analyze_run([str(tmp_path)], processes=1)
    assert report.matching.key == "sequence"
    n = len(report.collectives)
    assert n == len(_launches(rank_doc(0))) and not report.matching.unmatched
    d = _label(rank_doc(1, 250.0, 300.0))
    last = max(_launches(d), key=lambda e: e["ts"])
    last["args"]["Seq"] = 99
    write(tmp_path / "rank1.json.gz", d)
    report = analyze_run([str(tmp_path)], processes=1)
    assert len(report.collectives) == n - 1
    assert any("sequence number" in u.reason for u in report.matching.unmatched)


def test_group_names_without_sequence_numbers_match_by_order(tmp_path):
    write(tmp_path / "rank0.json.gz", _label(rank_doc(0), seq=False))
    write(tmp_path / "rank1.json.gz", _label(rank_doc(1), seq=False))
    report = analyze_run([str(tmp_path)], processes=1)
    assert report.matching.key == "group order"
    assert {t.matched.group for t in report.collectives} == {"0"}


def test_collectives_that_disagree_in_size_are_not_matched(tmp_path):
    write(tmp_path / "rank0.json.gz", rank_doc(0))
    d = rank_doc(1)
    for e in d["traceEvents"]:  # rank 1 all-reduced other tensors: the traces disagree
        if e.get("name") == "c10d::allreduce_":
            e["args"]["Input Dims"][0] = [[7]]
        if e.get("name") == "gloo:all_reduce":
            e["args"]["Input Dims"] = [[7]]
    write(tmp_path / "rank1.json.gz", d)
    report = analyze_run([str(tmp_path)], processes=1)
    assert not report.collectives
    assert report.matching.unmatched
    assert all("elements" in u.reason for u in report.matching.unmatched)
    doc = json.loads(run("inspect", tmp_path, "--json").stdout)
    assert doc["collectives"] == [] and doc["unmatched"]


@pytest.mark.parametrize("change, words", [
    (lambda d: d["distributedInfo"].update(rank="one"), "distributedInfo.rank"),
    (lambda d: d["distributedInfo"].update(world_size=-2), "distributedInfo.world_size"),
    (lambda d: d.update(baseTimeNanoseconds="soon"), "baseTimeNanoseconds"),
    (lambda d: next(e for e in d["traceEvents"] if e.get("name") == "gloo:all_reduce")
     .update(dur=-5), "dur"),
    (lambda d: next(e for e in d["traceEvents"] if e.get("name") == "c10d::allreduce_")
     ["args"].update(Seq="seven"), "Seq"),
])
def test_a_corrupt_value_in_one_rank_is_one_line_naming_it(tmp_path, change, words):
    write(tmp_path / "rank0.json.gz", rank_doc(0))
    d = rank_doc(1)
    change(d)
    bad = write(tmp_path / "rank1.json.gz", d)
    assert_error(run("inspect", tmp_path), bad, words)


@pytest.mark.parametrize("seed", range(12))
def test_a_mutated_rank_is_read_or_refused_in_one_line(tmp_path, seed):
    """Seeded mutations of one real rank's text (bytes replaced, deleted, the file cut):
    the run is read, or refused with one line naming that file; never a traceback."""
    import gzip
    import random

    from conftest import FIXTURES

    case = FIXTURES / "multirank" / "gloo2_clean"
    rng = random.Random(seed)
    text = bytearray(gzip.decompress((case / "rank1.json.gz").read_bytes()))
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(text))
        how = rng.choice(["replace", "delete", "cut"])
        if how == "replace":
            text[at] = rng.choice(b'{}[],:"0-9e.x\n ')
        elif how == "delete":
            del text[at:at + rng.randint(1, 40)]
        else:
            del text[at:]
    (tmp_path / "rank0.json.gz").write_bytes((case / "rank0.json.gz").read_bytes())
    bad = tmp_path / "rank1.json"
    bad.write_bytes(bytes(text))
    result = run("inspect", tmp_path, "--json")
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert_error(result, str(bad))
    else:
        json.loads(result.stdout)



def test_order_matching_that_pairs_different_collectives_is_said():
    """Hand-made ranks (times in us): rank 1's trace lost its first collective, all are one
    size, so order matching pairs rank 0's k-th with rank 1's (k+1)-th. The collectives come
    in close pairs, so no clock offset lines the wrong pairs up; the report says so."""
    from tracecli.model import Collective, CollectiveKind, Purpose
    from tracecli.run.analyze import analyze
    from tracecli.run.extract import RankData, RankStep
    from tracecli.run.load import Run
    from tracecli.run.match import match

    def rank(r, starts):
        colls = tuple(Collective(f"c{k}", CollectiveKind.ALL_REDUCE, 0, 1000, "float32", 4000,
                                 s / 1000, s / 1000, s / 1000 + 5.0, Purpose.GRADIENTS,
                                 lane="7", line=k + 1)
                      for k, s in enumerate(starts))
        return RankData(f"rank{r}.json", r, "distributedInfo", 2, "gloo", 1, (), 0,
                        (RankStep(0, "ProfilerStep#0", 0.0, 1e6, None, False),), colls, 0)

    times = [0.0, 10_000.0, 200_000.0, 210_000.0, 400_000.0, 410_000.0, 600_000.0]
    run = Run("hand-made", (rank(0, times[:-1]), rank(1, times[1:])), 0, (), ())
    report = analyze(run, match(run))
    assert len(report.collectives) == 6
    assert any("no time all ranks spent" in n for n in report.notes), report.notes
    right = Run("hand-made", (rank(0, times), rank(1, times)), 0, (), ())
    assert not any("no time all ranks spent" in n for n in analyze(right, match(right)).notes)


def test_one_collective_too_many_is_said_and_the_rest_of_the_step_matched(tmp_path):
    """Rank 1 launched one more all-reduce (7 elements) between the step's two: that one is
    said in one sentence naming rank and line, and matching resumes: every other collective
    of the run is matched (issue 25 item 1)."""
    write(tmp_path / "rank0.json.gz", rank_doc(0))
    d = rank_doc(1)
    events = d["traceEvents"]
    first = min((e for e in events if e.get("name") == "c10d::allreduce_"), key=lambda e: e["ts"])
    span = min((e for e in events if e.get("name") == "gloo:all_reduce"), key=lambda e: e["ts"])
    extra_launch = json.loads(json.dumps(first))
    extra_span = json.loads(json.dumps(span))
    extra_launch["ts"] = first["ts"] + 50.0
    extra_launch["args"]["Input Dims"] = [[[7]], [], [], [], [], []]
    extra_span["ts"], extra_span["dur"] = span["ts"] + span["dur"] + 10.0, 5.0
    extra_span["args"]["Input Dims"] = [[7]]
    events += [extra_launch, extra_span]
    write(tmp_path / "rank1.json.gz", d)
    report = analyze_run([str(tmp_path)], processes=1)
    launched = len(_launches(rank_doc(0)))
    assert len(report.collectives) == launched
    (u,) = report.matching.unmatched
    assert u.count == 1 and "rank 1's allreduce of 7 elements" in u.reason
    assert "rank1.json.gz:" in u.reason and "resumes" in u.reason
