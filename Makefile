# sarek_py — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEB_PACKAGES := pocl-opencl-icd oclgrind ocl-icd-libopencl1
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck pytest fuzz bench clean system-packages

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory system-packages
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# Debian packages for OpenCL on the CPU (PoCL) and the oclgrind simulator.
system-packages:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
	  echo "note: OpenCL tests need the Debian packages:$$missing (run: sudo apt-get install$$missing); they are skipped without them"; \
	fi

# two kernels fused on the default backend: the report, the fused source, the bitwise
# check and the measured speed-up (examples/demo.py; a few seconds)
demo: install
	@$(PY) examples/demo.py

lint: install
	$(VENV)/bin/ruff check sarek_py tests benchmarks

typecheck: install
	$(VENV)/bin/mypy --strict sarek_py

# every module of sarek_py but the reference interpreter's evaluation (ir/interp*), the
# affine solver (analysis/affine) and the IR walkers (ir/visit, ir/memo): their hot loops
# made a third of the typeguard pass; mypy --strict checks them, the differential tests
# their results (docs/testing.md). Written out by `python3 tests/typeguard_packages.py`.
TYPEGUARD_PACKAGES := $(shell $(PYTHON) tests/typeguard_packages.py)

# hand-written tests under typeguard, then the generators' samples without it (their
# cases check meaning; typeguard makes them 5-30x slower): docs/testing.md
pytest: install
	$(VENV)/bin/pytest -q -n 2 --durations=40 --typeguard-packages=$(TYPEGUARD_PACKAGES) -m "not slow and not generated"
	$(VENV)/bin/pytest -q -n 2 --durations=25 -m "generated and not slow"

test: lint typecheck pytest

fuzz: install
	# long property runs, and the generators' samples at their fuzz sizes; typeguard is left
	# to `make test` (it slows these runs 5-30x); -v names each result as it comes (a run
	# of 1.5-2 hours stopped early still shows which tests failed)
	SAREK_FUZZ=1 $(VENV)/bin/pytest -v -rf -n 2 -m "slow or generated"

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
