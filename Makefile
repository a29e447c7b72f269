# The two commands a new user needs: `make run` (main job on embedded defaults) and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# Airflow lives in its own venv: its Spark provider's pyspark-client would overwrite full pyspark.
AIRFLOW_VENV  := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

.PHONY: run test lint bench dist clean chromium maven libdeflate

# Headless Chromium renders the HTML report in the tests (Debian's package).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Maven builds RocketMQ 4.9.8's own store for the interop tests and benchmarks, and real 4.9.7 /
# 5.3.3 brokers for tests/test_real_broker.py (Debian's package).
maven:
	@command -v mvn >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }

# libdeflate's CRC-32 (PCLMUL) checks the records' CRCs (store/kernels/crc.py; Debian's package).
# Without it the kernels use their own table CRC, 3-10x slower: a failed install only says so.
libdeflate:
	@ldconfig -p 2>/dev/null | grep -q 'libdeflate\.so\.0' || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libdeflate0 >/dev/null; } \
		|| echo "libdeflate0 not installed: the kernels check CRCs with their own slower table CRC"

# Compile every kernel the commands call into store/kernels/compiled/ (the package's kernel cache,
# shipped in the wheel), so that no first command and no executor task compiles one.
WARM := env -u NUMBA_CACHE_DIR $(BIN)/python -m rocketlake.jobs.cli.warm_kernels --spark >/dev/null 2>&1 \
	|| { echo "warming the kernel cache failed: python -m rocketlake.jobs.cli.warm_kernels --spark"; exit 1; }

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[spark,test,rocksdb]'
	$(WARM)
	touch $(STAMP)

# The DAGs import rocketlake's light modules (table names, store settings): the package goes in
# without its dependencies (numba, pyspark, ... stay out of Airflow's environment), editable so the
# DAG tests see this tree; a deployment installs the built wheel the same way (docs/spark-guide.md).
$(AIRFLOW_STAMP): conf/airflow-requirements.txt pyproject.toml
	$(PY) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install --quiet -r conf/airflow-requirements.txt
	$(AIRFLOW_VENV)/bin/pip install --quiet --no-deps -e .
	touch $(AIRFLOW_STAMP)

venv: libdeflate $(STAMP)

run: libdeflate $(STAMP)
	$(BIN)/rocketlake pipeline

# mypy follows `rocketlake.*` imports through this folder of links (it cannot follow the
# editable install's import hook); it mirrors the package-dir mapping in pyproject.toml.
MYPY_SHIM := $(VENV)/mypy

lint: $(STAMP)
	mkdir -p $(MYPY_SHIM)/rocketlake
	ln -sfn $(CURDIR)/conf/__init__.py $(MYPY_SHIM)/rocketlake/__init__.py
	for d in store transforms jobs; do ln -sfn $(CURDIR)/$$d $(MYPY_SHIM)/rocketlake/$$d; done
	$(BIN)/ruff check .
	MYPYPATH=$(MYPY_SHIM) $(BIN)/mypy -p rocketlake

test: libdeflate $(STAMP) chromium maven $(AIRFLOW_STAMP) lint
	$(BIN)/python -m pytest -q
	$(AIRFLOW_VENV)/bin/python -m pytest -q tests/airflow

# The wheel: one top-level package, `rocketlake` (store, transforms, jobs, shipped defaults), and
# the kernels warm_kernels compiles into an emptied cache (only those: tests/test_kernel_cache.py
# then shows a kernel it misses).
dist: $(STAMP)
	rm -rf build dist/rocketlake-*.whl store/kernels/compiled
	$(WARM)
	$(BIN)/pip wheel --quiet --no-deps -w dist .
	rm -rf build

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) var build dist store/kernels/compiled
