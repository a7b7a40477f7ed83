# lab's commands. `make test` is what CI runs (no GPU needed); `make gpu-check` is what the GPU
# machine runs: build, every test with the GPU ones, a sanitizer pass, then the benchmark table.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
OUT ?= /tmp/lab-out
XDIST := $(shell $(PYTHON) -c "import xdist" 2>/dev/null && echo "-n 8")

.PHONY: build test demo gpu-check sanitize bench fuzz clean

build:
	$(PYTHON) setup.py build_ext --inplace

# Fresh machine to test result: a virtual environment with lab's test dependencies, the extension
# built with nvcc, then pytest. pytest's exit code 5 (no tests collected) is an error here.
test: $(VENV_PY)
	$(VENV_PY) setup.py build_ext --inplace
	$(VENV_PY) -m pytest -q tests; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - that is a failure"; exit 1; fi; exit $$rc

$(VENV_PY): requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q -r requirements-test.txt
	touch $(VENV_PY)

demo: build
	$(PYTHON) -m lab demo

# On the GPU machine (one `run` call): its python3 has torch, CuPy, Numba and JAX; no network.
gpu-check:
	mkdir -p $(OUT)
	LAB_CUDA_ARCH=90 $(PYTHON) setup.py build_ext --inplace > $(OUT)/build.log 2>&1 || (tail -50 $(OUT)/build.log; exit 1)
	$(PYTHON) -m lab | tee $(OUT)/config.txt
	$(PYTHON) -m pytest -q -p no:cacheprovider $(XDIST) tests 2>&1 | tee $(OUT)/tests.txt | grep -v "^[.sx]*  *\[" | tail -30; \
	  rc=$${PIPESTATUS[0]}; echo "pytest exit code: $$rc" | tee -a $(OUT)/tests.txt
	$(MAKE) --no-print-directory sanitize 2>&1 | tail -14
	$(PYTHON) -m lab demo 2>&1 | tail -5
	$(PYTHON) bench/bench_elementwise.py --out-dir $(OUT)/bench
	@grep -E "passed|failed" $(OUT)/tests.txt | tail -1

# compute-sanitizer over a cut of the GPU tests. Torch's caching allocator is switched off so each
# array is its own allocation and memcheck sees any access past its end. API-error reports are off:
# numba-cuda's cuda-python probes cuGetProcAddress for driver entry points that do not exist, and
# memcheck counted those 34 failed probes as errors (2026-11-29); lab's own CUDA errors are raised
# as lab.CudaError and tested, so memcheck here counts memory-access errors only.
sanitize:
	mkdir -p $(OUT)
	PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 compute-sanitizer --tool memcheck --report-api-errors no \
	  --error-exitcode 9 \
	  --log-file $(OUT)/memcheck.log $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_elementwise_gpu.py \
	  tests/test_layouts_gpu.py tests/test_streams_gpu.py tests/test_foreach_gpu.py \
	  -k "not cupy and not jax and not 16777221 and not two_to_the_31 and not memory_is_given_back and not 300 \
	  and not matches_torch and not training" \
	  > $(OUT)/memcheck-pytest.txt 2>&1; \
	  echo "memcheck exit code: $$?"; tail -1 $(OUT)/memcheck-pytest.txt
	@grep -E "^========= (Invalid|Program hit|ERROR SUMMARY)" $(OUT)/memcheck.log | sort | uniq -c | sort -rn | head -8
	timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 --log-file $(OUT)/racecheck.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_elementwise_gpu.py tests/test_layouts_gpu.py \
	  tests/test_foreach_gpu.py -k "(torch and 1000003 and float32) or transposed_inputs or foreach_norm" \
	  > /dev/null 2>&1; echo "racecheck exit code: $$?"
	@grep -E "SUMMARY" $(OUT)/racecheck.log

# The protocol fuzzer at full strength (CI runs 300 examples per test).
fuzz: $(VENV_PY)
	$(VENV_PY) setup.py build_ext --inplace
	LAB_FUZZ_EXAMPLES=100000 $(VENV_PY) -m pytest -q tests/test_fuzz.py

bench: build
	$(PYTHON) bench/bench_elementwise.py --out-dir bench/results/latest

clean:
	rm -rf build lab/*.so $(VENV) .pytest_cache
