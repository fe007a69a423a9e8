# The two commands a newcomer needs: `make dashboard` and `make test`.
# Both create .venv if missing: `make dashboard` installs the runtime's exact pins (requirements.lock),
# `make test` those of requirements-dev.lock too (the same pins plus the test, browser and benchmark tools).
PYTHON    ?= python3
VENV      := .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
PIP       := $(PY) -m pip install -q --disable-pip-version-check
PORT      ?= 8866

.PHONY: dashboard room lab handouts test test-fast lint bench data lock browser redis clean-venv

# The runtime: dashboards, room, lab, handouts and the notebooks.
$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.lock
	$(PIP) --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The dev tools on top (its own stamp: `make test` after `make dashboard` adds them, `make dashboard`
# after `make test` installs nothing).
$(DEV_STAMP): requirements-dev.lock $(STAMP)
	$(PIP) -r requirements-dev.lock
	touch $(DEV_STAMP)

# Headless Chromium for the browser test comes from Debian, never a browser download.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing: sudo apt-get install chromium (the browser test will skip)"; fi; }

# Debian's redis-server for the Redis feature store and cache tests (tests start their own on a free port).
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "redis-server missing: sudo apt-get install redis-server (the Redis tests will skip)"; fi; }

# Our Voila launcher (workbench_room): our template (lab without its CDN links), a Host allow-list,
# kernels of closed or never-connected pages shut down or culled within 30-40 s, a token off loopback (docs/room.md).
# One preheated kernel per dashboard (175-190 MB resident each); make dashboard DASHBOARD_ARGS="--pool 0" starts none.
DASHBOARD_ARGS ?=
dashboard: $(STAMP)
	$(PY) -m workbench_room notebooks/dashboards --host 127.0.0.1 --port $(PORT) $(DASHBOARD_ARGS)

# A workshop room: dashboards and notebooks on HOST:PORT, preheated kernels, at most 40,
# live profiling one at a time; prints the URL (with its token) to hand out. Size the pool to the class:
# make room ROOM_ARGS="--pool latency_explorer=30 --max-kernels 70" (docs/room.md).
HOST ?= 127.0.0.1
ROOM_ARGS ?=
room: $(STAMP)
	$(PY) -m workbench_room notebooks --room --host $(HOST) --port $(PORT) $(ROOM_ARGS)

# JupyterLab on the notebooks, no browser; it prints the URL with its token.
LAB_PORT ?= 8888
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --no-browser --ServerApp.root_dir=$(CURDIR)/notebooks --ServerApp.ip=127.0.0.1 \
	  --ServerApp.port=$(LAB_PORT) $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Every teaching notebook executed and exported to HTML that draws offline (plotly inline, widgets as snapshots).
HANDOUTS ?= build/handouts
handouts: $(STAMP)
	$(PY) scripts/handouts.py --out $(HANDOUTS)

# ruff first (seconds), then the suite.
test: $(DEV_STAMP) browser redis lint
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 tests

# The suite without the browser tests and the slow ones (minutes less): the same venv and Redis set-up.
test-fast: $(DEV_STAMP) redis
	$(PY) -m pytest -q -p no:cacheprovider -m "not browser and not slow" tests

# ruff (pinned in requirements-dev.lock; rules and line length in pyproject.toml [tool.ruff]).
LINT_PATHS := workbench workbench_serve workbench_room workbench_redis tests benchmarks scripts research
lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

bench: $(DEV_STAMP)
	$(PY) benchmarks/run_all.py

data: $(STAMP)
	$(PY) scripts/make_data.py

# Both locks, each from a fresh venv's pip freeze, as requirements-dev.lock.new and requirements.lock.new to diff
# and move over the locks; the runtime is resolved within the dev pins, so its pins are the dev lock's.
# torch's local CPU wheel freezes as 2.13.0+cpu and is pinned as torch==2.13.0.
LOCK_VENV := /tmp/wb-lock
define freeze_lock
rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q -r $(1) $(3) \
  && { grep '^#' $(2); $(LOCK_VENV)/bin/pip freeze | sed 's/^torch==.*/torch==2.13.0/' | sort -f; } > $(2).new
endef
lock:
	$(call freeze_lock,requirements-dev.in,requirements-dev.lock)
	$(call freeze_lock,requirements.in,requirements.lock,-c requirements-dev.lock.new)

clean-venv:
	rm -rf $(VENV)
