"""Sparse and update-only gradients in op lists: placed, never dropped, planned as the
frameworks do (Horovod all-gathers IndexedSlices unless sparse_as_dense; DDP gives an
nn.Embedding(sparse=True) gradient a bucket of its own)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, run

SPARSE = FIXTURES / "sparse"
PLAIN, HOROVOD = SPARSE / "embed_tf.txt", SPARSE / "embed_horovod.txt"


def inspect(path, *args):
    result = run("inspect", path, "--json", "--backward-ms", "20", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_name(doc):
    return {g["name"]: g for g in doc["gradients"]}


def test_embedding_of_a_plain_list_is_placed_from_its_update():
    doc = inspect(PLAIN)
    assert doc["parameters"]["without_gradient"] == []
    embedding = by_name(doc)["embedding/embeddings:0"]
    assert embedding["ready_source"] == "update" and embedding["sparse"] is True
    assert embedding["bytes"] == 30000 * 128 * 4
    # its incoming gradient exists once backward has reached the layer after it: the end here
    assert embedding["backward_position"] == doc["readiness"]["backward_ops"]
    assert doc["gradients"][-1]["name"] == "embedding/embeddings:0"
    assert not any(g["sparse"] for g in doc["gradients"] if g["name"] != "embedding/embeddings:0")


def test_updated_variable_without_a_producer_is_not_dropped(tmp_path):
    trace = tmp_path / "t.txt"
    trace.write_text(PLAIN.read_text() + "SGD/SGD/update_7/ResourceApplyKerasMomentum\n")
    sizes = json.loads((SPARSE / "embed_tf.sizes.json").read_text())
    sizes.append({"name": "shared_projection/kernel:0", "shape": [64, 64], "dtype": "float32"})
    (tmp_path / "t.sizes.json").write_text(json.dumps(sizes))
    doc = inspect(trace)
    shared = by_name(doc)["shared_projection/kernel:0"]
    assert shared["ready_source"] == "update" and shared["sparse"] is False
    assert doc["parameters"]["without_gradient"] == []


def test_horovod_allgather_marks_the_gradient_sparse():
    doc = inspect(HOROVOD)
    embedding = by_name(doc)["embedding/embeddings:0"]
    assert embedding["ready_source"] == "horovod" and embedding["sparse"] is True


def plan(path, *args):
    result = run("plan-buckets", path, "--json", "--backward-ms", "20", "--gpus", "8",
                 "--network", "25gbe", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def bucket_of(doc, name):
    return next(b for b in doc["buckets"] if name in b["tensors"])


@pytest.mark.parametrize("strategy", ["horovod", "ddp", "optimal", "per-tensor"])
def test_sparse_gradients_are_allgathered_alone(strategy):
    doc = plan(HOROVOD, "--strategy", strategy)
    bucket = bucket_of(doc, "embedding/embeddings:0")
    assert bucket["tensors"] == ["embedding/embeddings:0"] and bucket["collective"] == "allgather"
    assert any("all-gathered" in note for note in doc["notes"])
    assert all(b["collective"] == "allreduce" for b in doc["buckets"] if b is not bucket)


def test_sparse_as_dense_fuses_them():
    doc = plan(HOROVOD, "--strategy", "horovod", "--sparse-as-dense", "--cycle-ms", "100")
    assert len(doc["buckets"]) == 1 and doc["buckets"][0]["collective"] == "allreduce"
    assert "sparse_as_dense=True" in doc["settings"]["text"]
    assert "notes" not in doc


def test_replay_runs_the_allgather(tmp_path):
    pytest.importorskip("torch")
    saved = tmp_path / "plan.json"
    assert run("plan-buckets", HOROVOD, "--backward-ms", "20", "--strategy", "horovod", "--gpus", "2",
               "--out", saved).exit_code == 0
    result = run("replay", "--plan", saved, "--gpus", "2", "--iters", "2", "--warmup", "1",
                 "--network", "10gbe", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["replay"]["verified"] is True
    gathered = [b for b in doc["replay"]["buffers"] if b["collective"] == "allgather"]
    assert len(gathered) == 1 and gathered[0]["elements"] == 30000 * 128


ALBERT = SPARSE / "albert_tf.txt"


def test_early_index_preparation_does_not_place_the_embedding_first():
    """An ALBERT-style list (hand-written after TF2 Keras' ALBERT encoder under SGD with
    momentum): the word embeddings' update scope prepares its indices (``update/Unique``,
    ``Shape``, ``strided_slice`` of the token ids) at the very start of the step, while the
    gradient is consumed by ``UnsortedSegmentSum``/``ResourceSparseApplyKerasMomentum`` after
    the whole backward pass. The token embedding is ready last, as TensorFlow made it."""
    doc = inspect(ALBERT)
    names = [g["name"] for g in doc["gradients"]]
    assert names[-1] == "word_embeddings/embeddings:0"
    embedding = by_name(doc)["word_embeddings/embeddings:0"]
    assert embedding["ready_source"] == "update" and embedding["sparse"] is True
    assert embedding["backward_position"] == doc["readiness"]["backward_ops"]
    assert names[0] == "classifier/bias:0"


def test_update_is_linked_to_the_op_consuming_the_gradient():
    from tracecli.model import EdgeKind
    from tracecli.parsers import load

    trace = load(str(ALBERT))
    update = trace.links_of_kind(EdgeKind.UPDATE)["v0"]
    assert trace.op(update[0]).name == "SGD/SGD/update/UnsortedSegmentSum"
