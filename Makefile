# The two commands a newcomer needs:  `make demo`  and  `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## demo: set everything up, then simulate a sample mesh through the add-on in headless Blender
demo: $(STAMP)
	$(PY) scripts/demo.py --out out

## test: install what is missing, then run the whole test suite
test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf out .pytest_cache .ruff_cache
