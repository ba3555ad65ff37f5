# The README's two commands are `make demo` and `make test`; everything they need is installed from here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed
BYTECODE := $(VENV)/.bytecode

.PHONY: demo demo-replicated demo-cluster demo-hosts test test-cluster test-fast docs docs-build install system-deps test-system-deps spark-archive jars up down status lint typecheck lock clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)
	$(BIN)/uv pip sync -q --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	touch $@

# Every dependency compiled to bytecode once. Python otherwise compiles each module it imports from source, and
# with PYTHONDONTWRITEBYTECODE set (as in the shells these tests run in) never keeps the result: `import airflow`
# then costs ~6 s of CPU instead of ~2.4 s, in every Airflow component, task process and `venice` command.
$(BYTECODE): $(STAMP)
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	touch $@

# The project's own modules compiled too (as they are now; Python recompiles one that changed since): a `venice`
# command otherwise compiles the CLI's imports from source each time (`venice --help` 0.85 -> 0.77 s).
install: $(STAMP) $(BYTECODE) system-deps spark-archive jars
	$(BIN)/python -m compileall -qq venice_core dags plugins

# The Spark driver's classes in a class-data-sharing archive (a no-op once built for this Java and pyspark): every
# spark-submit of the platform starts on about half the CPU (venice_core/spark/submit/class_archive*.py).
# And the Python workers' pyspark compiled (venice_core/spark/submit/worker_bytecode.py): Spark puts pyspark's zip
# first on their path, and Python keeps no bytecode for a zip.
spark-archive: $(STAMP)
	$(BIN)/python -m venice_core.spark.submit.class_archive_build
	$(BIN)/python -m venice_core.spark.submit.worker_bytecode

# The embedded broker's jars, and Spark's Avro module, from Maven Central into $$VENICE_CACHE_DIR, once, before anything runs in parallel (a
# fetch is safe in parallel too: the processes take turns, venice_core/host/cache.py).
jars: $(STAMP) system-deps
	$(BIN)/python -m venice_core.embedded.kafka
	$(BIN)/python -m venice_core.spark.submit.extra_jars

system-deps:
	scripts/install-system-packages.sh

# And what the tests need besides (PostgreSQL, Redis, chromium), before the Spark archive and the jars: a make without
# -j takes a target's prerequisites in their order.
test-system-deps:
	scripts/install-system-packages.sh --with-test-deps

demo: install
	scripts/demo.sh

# The same push on replicated regions: three region-server instances per region, every partition on two of them
# (deploy/replicated.properties: its own data dir and ports, beside the default platform).
demo-replicated: install
	DEMO_PROFILE=replicated scripts/demo.sh

# The same push on the cluster profile (deploy/cluster.properties): three Kafka brokers, Spark standalone (a master
# and two workers), Airflow on Celery workers with Redis, PostgreSQL, three region-server instances per region.
demo-cluster: install
	scripts/install-system-packages.sh --with-cluster-deps
	DEMO_PROFILE=cluster scripts/demo.sh

# The cluster profile with every process on a host of its own (deploy/hosts.properties: a network namespace each on
# the bridge venice0, 10.213.0.0/16), as root.
demo-hosts: install
	scripts/install-system-packages.sh --with-cluster-deps
	DEMO_PROFILE=hosts scripts/demo.sh

# Three workers, a test file each at a time, in file order: the Airflow files (mostly waiting on sensors and
# restarts, the longest) start first, the rest fill in behind them. Each worker starts its own platform, Airflow and
# SparkSession once. The suite is CPU-bound on two cores (3% idle over a whole run, measured): pytest took 25 and 33
# minutes in the last two clean clones (37-43 before 88cf9fa; the machine's own load swings it by a third), and more
# workers only add contention (four were tried: no gain).
test: $(STAMP) $(BYTECODE) test-system-deps spark-archive jars
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=plugins $(BIN)/lint-imports  # the layers (pyproject.toml's importlinter contracts)
	$(BIN)/mypy  # the types (pyproject.toml's [tool.mypy])
	$(BIN)/python -m compileall -qq venice_core dags plugins tests  # the project's own, as it is now
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet  # the site (mkdocs.yml): a broken link or a page outside the nav fails it
	$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder -m "not faults and not cluster"

# make demo-replicated's and make demo-cluster's jobs (marker `cluster`), and the cluster profile's four faults (marker
# `faults`: each a 200k-record push through Airflow with a broker, a Spark worker or a Celery worker SIGKILLed, or
# PostgreSQL restarted), one cluster started once for them all. Not in `make test` (its time budget: the cluster's
# ~25 processes beside the Airflow files doubled their tests' time).
test-cluster: $(STAMP) $(BYTECODE) test-system-deps spark-archive jars
	$(BIN)/pytest -m "cluster or faults"

# Bytecode kept (PYTHONDONTWRITEBYTECODE emptied): pytest's assertion rewriting of every test module, 4.3 of a
# worker's 11 s of collection (py-spy), and the project's modules compiled from source are then paid once, not at
# each run in each worker. Three workers on two cores: the tier is CPU-bound but for ~39 s of timed waits (timeouts,
# slow replicas, hook rounds), which a third worker overlaps: 62-72 s against 68-81 s with two (measured).
test-fast: $(STAMP) $(BYTECODE)
	$(BIN)/python -m venice_core.spark.submit.extra_jars
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 3 -m "not kafka and not spark and not airflow and not postgres and not redis and not browser"

# The documentation site (mkdocs.yml, docs/) on http://127.0.0.1:$(DOCS_PORT), rebuilt as its pages change.
DOCS_PORT ?= 8000
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

up: install
	$(BIN)/venice up

down:
	$(BIN)/venice down

status:
	$(BIN)/venice status

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=plugins $(BIN)/lint-imports
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

lock: $(STAMP)
	$(BIN)/uv pip compile -q --python $(BIN)/python requirements.txt -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
