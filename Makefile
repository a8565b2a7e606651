# 《Transformer 的数学》 — build and test.
#   make book          build the website into _build/html from the notebooks' saved outputs
#                      (warnings are errors; `make test` proves those outputs current)
#   make notebooks     re-execute every notebook in place (after a change to lib/ or a chapter)
#   make test          library tests, nbval over every notebook, lint, strict build, browser checks
#   make book-student  the student edition (no solutions) into _build/student/_build/html
#   make student-kit   the course kit: student notebooks, tmath without answer keys, README (_build/student-kit);
#                      with ROSTER=roster.csv COURSE_SECRET_FILE=F, one kit per student with their own
#                      numbers (_build/student-kit/<student>/, tmath.variants)
#   make grading-env   the kit installed into _build/grading-env, where `tmath grade` runs submissions
#                      (TORCH=1: with PyTorch's CPU build, for grading the PyTorch chapters' cells)
#   make pdf           a PDF of the book, printed by headless Chromium, into _build/pdf/book.pdf
#   make lab           open the notebooks in JupyterLab, converted into _build/lab so that they read as the
#                      website does (scripts/lab_notebooks.py; JupyterLab installed on first use)
#   make setup-cells   after editing repository.url in _config.yml: rewrite and re-run each notebook's setup cell
#   make answer-hashes after changing an exercise's key: re-hash it in lib/tmath/answer_keys/hashes.json
#   make clean         remove build outputs (keeps .venv)

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements.stamp
TEST_STAMP := $(VENV)/.requirements-crosscheck.stamp
LAB_STAMP := $(VENV)/.requirements-lab.stamp
# The website's in-browser runtime (book/_ext/pyodide_site.py): Pyodide from npm, pinned by
# package-lock.json, and the SymPy and mpmath wheels of requirements-pyodide.txt, by hash.
NPM_STAMP := node_modules/.package-lock.json
WHEELS_DIR := $(VENV)/pyodide-wheels
WHEELS_STAMP := $(WHEELS_DIR)/.stamp
SITE_RUNTIME := $(NPM_STAMP) $(WHEELS_STAMP)
JB_FLAGS := -W -n --keep-going
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Python caches each module it compiles (__pycache__, in .venv and the repository, both ignored
# by git) unless PYTHONDONTWRITEBYTECODE is set, as it is on some machines. Set, every one of
# the suite's hundreds of interpreters (kernels, builds, gloo ranks, CLI runs) compiles SymPy,
# torch and transformers from source again: importing SymPy takes 2.2 s instead of 0.3 s.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: book book-student notebooks student-kit grading-env pdf test lab clean browser sandbox system-packages setup-cells answer-hashes

# The venv, with pip 26.3: put in by the system's pip where it has one (pip --python, 22.3+),
# 4 s less than ensurepip's bundled pip and setuptools followed by an upgrade; else that way.
$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required; set PYTHON=python3.11"'
	{ $(PYTHON) -m venv --without-pip $(VENV) && \
	  $(PYTHON) -m pip --python $(BIN)/python install --quiet --no-compile "pip==26.3"; } || \
	{ rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) && \
	  $(BIN)/python -m pip install --quiet --upgrade "pip==26.3"; }

# uv (a wheel on PyPI, pinned here) installs the requirements: on a new machine the three files
# took pip 40 s and take uv 11 to 16 s (it downloads in parallel), the same 190 packages at the
# same versions. uv reads no pip configuration: scripts/uv_sources.py gives it the sources this
# machine's pip is told to use (an index mirror, a folder of wheels such as PyTorch's CPU build),
# and it weighs every source as pip does (unsafe-best-match: the pinned version wherever it is).
# If uv fails, pip installs the same files.
UV_VERSION := 0.13.8
UV := $(BIN)/uv
$(UV): | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile "uv==$(UV_VERSION)"

# The requirements files pin every package the venv holds, dependencies included, so they are
# installed as listed (--no-deps: no resolver run) and `pip check` proves the list complete.
# Nothing is byte-compiled at install: Python compiles what it imports on first use and caches
# it (see above); compiling every installed file (torch alone has thousands) up front doubles
# the install time. `make test` installs the three files (the book's, the cross-checks',
# JupyterLab's) in one call. $(call install,PYTHON,FILES AND FLAGS).
install = $(UV) pip install --quiet --no-deps --python $(1) --index-strategy unsafe-best-match \
	  $$($(PYTHON) scripts/uv_sources.py $(BIN)/python) $(2) || \
	{ echo "uv failed: installing with pip"; $(BIN)/python -m pip --python $(1) install --quiet --no-compile --no-deps $(2); }
$(STAMP): requirements.txt lib/pyproject.toml | $(BIN)/python $(UV)
	$(call install,$(BIN)/python,-r requirements.txt)
	$(BIN)/python -m pip check
	@touch $@

$(TEST_STAMP): requirements.txt requirements-crosscheck.txt requirements-lab.txt lib/pyproject.toml | $(BIN)/python $(UV)
	$(call install,$(BIN)/python,-r requirements.txt -r requirements-crosscheck.txt -r requirements-lab.txt)
	$(BIN)/python -m pip check
	@touch $(STAMP) $(LAB_STAMP) $@

# JupyterLab and nbconvert (requirements-lab.txt), on top of the book's venv: `make lab`,
# `make notebooks`, `make setup-cells` and `make test` (tests/test_lab_notebooks.py opens converted
# notebooks in a real JupyterLab) need them, not the build.
$(LAB_STAMP): requirements-lab.txt $(STAMP)
	$(call install,$(BIN)/python,-r requirements-lab.txt)
	$(BIN)/python -m pip check
	@touch $@

# npm ci installs exactly what package-lock.json records (Node.js and npm come with the machine).
$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 18+ with npm (Debian: apt-get install nodejs npm)"; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

# ... then Pyodide, under Node.js, byte-compiles them for itself (scripts/pyodide_pyc.mjs): the
# site serves $(WHEELS_DIR)/pyc, and a reader's first `import sympy` takes 0.4 s, not 3.
$(WHEELS_STAMP): requirements-pyodide.txt scripts/pyodide_pyc.mjs $(NPM_STAMP) | $(BIN)/python
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
	  -r requirements-pyodide.txt -d $(WHEELS_DIR)
	rm -rf $(WHEELS_DIR)/pyc
	node scripts/pyodide_pyc.mjs node_modules/pyodide $(WHEELS_DIR)/pyc $(WHEELS_DIR)/*.whl
	@touch $@

# The build renders the outputs saved in the notebooks and executes nothing (_config.yml).
book: $(STAMP) $(SITE_RUNTIME)
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "Open _build/html/index.html in a browser."

# Re-save every notebook executed (two at a time), on the same BLAS settings as `make test`,
# so the saved outputs are what nbval will compare against. NB=book/x/y.ipynb for one.
# The kernel listens on Unix sockets in a folder of its own, not on TCP ports (lib/tmath/grade.py
# says why: a port taken by another process between the pick and the bind hangs ipykernel).
NB ?= $(shell find book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | sort)
IPC_KERNEL := --KernelManager.transport=ipc --KernelManager.ip
notebooks: $(TEST_STAMP) $(LAB_STAMP)
	@printf '%s\n' $(NB) | $(TEST_BLAS) xargs -P 2 -I{} sh -c 'echo "executing {}"; k=$$(mktemp -d); \
	  log=$$($(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.record_timing=False $(IPC_KERNEL)=$$k/kernel {} 2>&1); status=$$?; rm -rf "$$k"; \
	  [ $$status = 0 ] || \
	  { echo "FAILED: {}"; echo "$$log" | sed "s/\x1b\[[0-9;]*m//g" | tail -n 25; exit 255; }'

book-student: $(STAMP) $(SITE_RUNTIME)
	BOOK_EDITION=student $(BIN)/jupyter-book build . --path-output _build/student $(JB_FLAGS)
	@echo "Student edition: _build/student/_build/html/index.html"

# The course kit a teacher hands out: the student notebooks, a tmath wheel whose answer keys are
# replaced by salted hashes, the pinned requirements and a Chinese README (scripts/student_kit.py).
student-kit: $(STAMP)
	$(BIN)/python scripts/student_kit.py _build/student-kit \
	  $(if $(ROSTER),--roster "$(ROSTER)") $(if $(COURSE_SECRET_FILE),--secret-file "$(COURSE_SECRET_FILE)")

# The environment `tmath grade` runs the students' notebooks in: the course kit installed into a
# venv of its own (no answer keys in it), as a student installs it (--kit-env _build/grading-env).
# TORCH=1 adds PyTorch's CPU build and transformers (requirements-crosscheck.txt's pins, their own
# dependencies at requirements.txt's), downloaded now, so that the PyTorch chapters' cells run when
# graded; without it they fail there (ModuleNotFoundError). Grading installs nothing either way: in
# the sandbox pip asks no index (tmath._grade_worker.OFFLINE_PIP), and there is no network.
GRADING_ENV := _build/grading-env
TORCH_INDEX := https://download.pytorch.org/whl/cpu
GRADING_PIP := $(BIN)/python -m pip --python $(GRADING_ENV)/bin/python install --quiet --no-compile
grading-env: student-kit sandbox
	rm -rf $(GRADING_ENV)
	$(PYTHON) -m venv --without-pip $(GRADING_ENV)
	$(call install,$(GRADING_ENV)/bin/python,-r _build/student-kit/transformer-math-kit/requirements.txt \
	  _build/student-kit/transformer-math-kit/tmath-*.whl)
ifeq ($(TORCH),1)
	grep -h '==' requirements.txt requirements-crosscheck.txt > $(GRADING_ENV)/torch-constraints.txt
	$(GRADING_PIP) --no-deps --index-url $(TORCH_INDEX) "$$(grep '^torch==' requirements-crosscheck.txt)"
	$(GRADING_PIP) --constraint $(GRADING_ENV)/torch-constraints.txt torch transformers
	$(BIN)/python -m pip --python $(GRADING_ENV)/bin/python check
endif
	@# The sandbox mounts the venv read-only, where Python cannot cache what it compiles: compiled
	@# now, or every graded notebook's kernel compiles NumPy, SymPy and matplotlib again (a class
	@# of 6 took 27.1 s to grade uncompiled, 12.2 s compiled: benchmarks/bench_grade.py).
	$(GRADING_ENV)/bin/python -m compileall -q -j 0 $(GRADING_ENV)/lib >/dev/null
	@echo "Grade with: $(BIN)/python -m tmath grade submitted --release release/ASSIGNMENT --kit-env $(GRADING_ENV) --out grades/grades.csv"

pdf: book browser
	$(BIN)/python scripts/book_pdf.py _build/html _build/pdf/book.pdf

# Debian packages, installed only where missing (needs root or sudo): $(call apt_get,PACKAGES).
apt_get = SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(1) >/dev/null

# Debian's Chromium for the browser tests.
browser:
	@command -v chromium >/dev/null 2>&1 || { $(call apt_get,chromium fonts-noto-cjk); }

# Two workers (pytest-xdist): every test that needs a built site is in tests/test_site.py, and
# --dist loadfile keeps a file on one worker, so each site is built once and each notebook's
# cells run in order in one kernel; --no-loadscope-reorder hands out the files longest first
# (conftest.py's LONGEST_FIRST), not by their number of tests. One BLAS thread per worker, and nbval re-runs the notebooks
# on OpenBLAS's generic Prescott kernel, not the one they were saved with: a saved output that
# depends on float rounding fails on any machine. Where the machine already pins
# OPENBLAS_CORETYPE (some CPUs need it), only the thread count changes.
TEST_BLAS := OPENBLAS_NUM_THREADS=1 $(if $(OPENBLAS_CORETYPE),,OPENBLAS_CORETYPE=Prescott)

# bubblewrap: `tmath grade` runs each submission in its sandbox (lib/tmath/sandbox.py); installed
# only where missing, like Chromium.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { $(call apt_get,bubblewrap); }

# `browser` and `sandbox` in one apt-get run: one update of the package lists, not two.
system-packages:
	@pkgs=; command -v chromium >/dev/null 2>&1 || pkgs="chromium fonts-noto-cjk"; \
	command -v bwrap >/dev/null 2>&1 || pkgs="$$pkgs bubblewrap"; \
	[ -z "$$pkgs" ] || { $(call apt_get,$$pkgs); }

# On a new machine the installs take a minute and wait on different things (apt-get on Debian's
# mirror and dpkg, pip on the index and the disk, npm on its registry): they run side by side
# (a make of their own, -j), then the tests.
test:
	@$(MAKE) --no-print-directory -j 4 $(TEST_STAMP) $(SITE_RUNTIME) system-packages
	$(TEST_BLAS) $(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The notebooks as JupyterLab renders them: glue resolved into numbers, references and citations
# as links and text, hidden cells collapsed (scripts/lab_notebooks.py), written into _build/lab; a
# notebook changed there by the reader is kept. The book's sources stay in book/.
lab: $(LAB_STAMP)
	$(BIN)/python scripts/lab_notebooks.py _build/lab
	$(BIN)/jupyter lab _build/lab

# Each notebook's first code cell (hidden on the site) installs tmath from repository.url on Colab.
setup-cells: $(TEST_STAMP) $(LAB_STAMP)
	@set -o pipefail; $(BIN)/python scripts/setup_cells.py | while read -r nb; do \
	  echo "re-executing $$nb"; k=$$(mktemp -d); \
	  $(BIN)/jupyter nbconvert --to notebook --execute --inplace $(IPC_KERNEL)=$$k/kernel "$$nb" 2>/dev/null \
	    || exit 1; rm -rf "$$k"; \
	done

# The practice keys' slow hashes (tmath.exercises.KDF_ITERATIONS, about 1.3 s each) are stored
# in the repository, so that a build does not spend minutes of CPU on them; this re-hashes the
# keys that changed (tests/test_exercises.py fails until it has run).
answer-hashes: $(STAMP)
	env -u TMATH_KDF_ITERATIONS $(BIN)/python -m tmath.exercises

clean:
	rm -rf _build
