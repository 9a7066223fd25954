# Two commands from a fresh clone: `make run` (install, then the quick spec) and `make test`.
# Everything goes into a virtual environment in .venv; nothing is installed system-wide.
#
#   make run                      install if needed, then `dpkit run specs/quick.yaml`
#   make run SPEC=specs/snd.yaml  another spec
#   make test-smoke               the quick tier (≤ 2 min): contracts on toy components, spec
#                                 validation, ledger properties with few hypothesis examples
#   make test-fast                the suite without tests marked slow (day-to-day work)
#   make test                     the whole test suite (what CI runs)
#   make test-fast ARGS="-x --lf" any pytest options: stop at the first failure, rerun failures
#   make install                  only the install
#
# torch is installed first, pinned: on a machine without an NVIDIA GPU (no nvidia-smi) from
# PyTorch's CPU index, since PyPI's default Linux wheel pulls several GB of CUDA libraries.
# Only torch comes from there (--no-deps); its dependencies, like everything else, from PyPI.
# Override with `make install TORCH_INDEX=` (PyPI's default) or another index URL.

PYTHON ?= python3
VENV ?= .venv
SPEC ?= specs/quick.yaml
TORCH ?= torch==2.13.0
TORCH_INDEX ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,https://download.pytorch.org/whl/cpu)
PYTEST = $(VENV)/bin/python -m pytest -q --timeout=900 $(ARGS)

.PHONY: install run test test-fast test-smoke mutation

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml examples/dpkit-example-plugin/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q --no-deps "$(TORCH)" $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	$(VENV)/bin/python -m pip install -q -e ".[dev]"
	$(VENV)/bin/python -m pip install -q -e examples/dpkit-example-plugin
	touch $@

run: install
	$(VENV)/bin/dpkit run $(SPEC)

test: install
	$(PYTEST)

test-fast: install
	$(PYTEST) -m "not slow"

test-smoke: install
	$(PYTEST) --smoke -m "not slow" --hypothesis-profile=smoke

# Mutation testing of the privacy-critical modules (tools/mutation.toml), one module at a time,
# niced; prints each module's score and fails on a survivor not in tools/equivalent_mutants.toml.
#   make mutation                               every module
#   make mutation MODULES=dpkit/text/noise.py   some of them
#   make mutation SINCE=origin/main             only functions changed since a commit (CI)
mutation: install
	$(VENV)/bin/python tools/mutation.py $(MODULES) $(if $(SINCE),--changed-since $(SINCE))
