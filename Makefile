# The two commands a newcomer needs: `make dashboard` and `make test`.
# Both create .venv if missing and install the exact pins of requirements.lock.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8866

.PHONY: dashboard test bench data lock browser clean-venv

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Headless Chromium for the browser test comes from Debian, never a browser download.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing: sudo apt-get install chromium (the browser test will skip)"; fi; }

# JUPYTER_PATH adds our Voila template (lab without its CDN stylesheet links).
dashboard: $(STAMP)
	JUPYTER_PATH=$(CURDIR)/share/jupyter $(VENV)/bin/voila notebooks/dashboards --no-browser --port=$(PORT) \
	  --template=workbench \
	  --Voila.ip=127.0.0.1 --Voila.tornado_settings="{'allow_origin': ''}" \
	  --VoilaConfiguration.file_allowlist="['.*\.(png|jpg|gif|svg|json|gz)']"

test: $(STAMP) browser
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

data: $(STAMP)
	$(PY) scripts/make_data.py

lock:
	rm -rf /tmp/wb-lock && $(PYTHON) -m venv /tmp/wb-lock && /tmp/wb-lock/bin/pip install -q -r requirements.in \
	  && /tmp/wb-lock/bin/pip freeze | grep -v '^torch==' | sort -f > requirements.lock.new && echo torch==2.13.0 >> requirements.lock.new

clean-venv:
	rm -rf $(VENV)
