# Two set-up commands work on a fresh machine with only Python 3.10+:
#   make demo   installs into .venv and runs the main job on the sample traces
#   make test   installs into .venv and runs the whole test suite
#   (make test-fast: the suite without the tests marked slow, for a quick loop)
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# A bare `torch` requirement pulls the CUDA build: install the pinned torch first (from
# TORCH_INDEX when given, e.g. PyTorch's CPU wheel index), then the extra, which keeps it.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
# The frameworks whose bucketing the tests run side by side with tracecli's (CPU-only;
# DeepSpeed is a source package: built against the torch above, without its CUDA ops).
FRAMEWORKS ?= megatron-core==0.16.1 deepspeed==0.19.8

.PHONY: demo test test-fast bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH)
	$(BIN)/python -m pip install -q -e '.[replay,test]'
	DS_BUILD_OPS=0 $(BIN)/python -m pip install -q --no-build-isolation $(FRAMEWORKS)
	touch $@

demo: $(BIN)/.installed
	$(BIN)/tracecli inspect sample_traces/vgg19_chainer.txt
	$(BIN)/tracecli inspect sample_traces/resnet50_horovod_tf.txt --top 12
	$(BIN)/tracecli plan-buckets sample_traces/vgg19_chainer.txt --max-bytes 32k --top 12
	$(BIN)/tracecli plan-buckets sample_traces/resnet50_horovod_tf.txt --backward-ms 120 --gpus 64 --network 25gbe --compare
	$(BIN)/tracecli inspect sample_traces/resnet50_ddp_nccl_2xa100.json.gz --top 8
	$(BIN)/tracecli plan-buckets sample_traces/resnet50_ddp_nccl_2xa100.json.gz --strategy observed
	$(BIN)/tracecli replay sample_traces/vgg19_chainer.txt --gpus 2 --iters 5 --warmup 1

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

# the fast loop: everything but fuzzing, long hypothesis runs and real multi-process replays
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/parse_scale.py
	$(BIN)/python benchmarks/plan_scale.py
	$(BIN)/python benchmarks/replay_accuracy.py
	$(BIN)/python benchmarks/replay_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
