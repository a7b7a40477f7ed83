# lab's commands. `make test` is what CI runs (no GPU needed); `make gpu-check`, `make gpu-bench` and
# `make gpu-sanitize` are what the GPU machine runs: build, every test with the GPU ones and the
# lessons; the benchmark tables; compute-sanitizer.
SHELL := /bin/bash
PYTHON ?= python3
# nvcc objects by content, shared by every build this Makefile starts (setup.py: LAB_NVCC_CACHE)
export LAB_NVCC_CACHE ?= $(CURDIR)/build/nvcc-cache
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
OUT ?= /tmp/lab-out
XDIST := $(shell $(PYTHON) -c "import xdist" 2>/dev/null && echo "-n 8")

.PHONY: build first-hour test lessons package-check format format-check demo gpu-check gpu-attention gpu-jax gpu-float8 gpu-bench gpu-sanitize sanitize-linear-ce peers-site bench-linear-ce bench-rope bench-swiglu nn-host-cost bench-llama bench-packed gpu-llama gpu-profile-llama device-build device-unpack device-ab device-build-base leak-check sweep sweep-random sweep-norms sweep-norm-backward profile profile-attention profile-rowwise profile-cross-entropy profile-rope-glu profile-jax profile-rowwise-sass sass-order sanitize bench fuzz clean

# Every C, CUDA and header file clang-format owns (the .def tables keep their hand-aligned columns).
C_SOURCES = $(wildcard src/*/*.c src/*/*.h src/*/*.cu src/*/*.cuh)

build:
	$(PYTHON) setup.py build_ext --inplace

# Fresh machine to test result: a virtual environment with lab's test dependencies, the format
# check, the extension built with nvcc, the type stubs checked against it, then pytest. pytest's exit code 5 (no tests collected) is an
# error here.
test: $(VENV_PY)
	$(MAKE) --no-print-directory format-check CLANG_FORMAT=$(VENV)/bin/clang-format
	$(VENV_PY) setup.py build_ext --inplace
	$(VENV_PY) -m mypy.stubtest lab.lab  # the type stubs (lab/lab.pyi) match the built module
	$(VENV_PY) -m pytest -q -n auto tests; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - that is a failure"; exit 1; fi; exit $$rc
	$(MAKE) --no-print-directory lessons PYTHON=$(VENV_PY)

# A learner's first hour, on a machine with nvcc and no GPU, before lab itself is built (CI runs it
# first, on the clean checkout): the minimal extension built and tried (its refusals on plain
# objects, no lab), its checks; the lessons built and checked; example 7. Each runs its GPU half
# where there is a GPU. A few seconds a step once the test environment exists.
# FIRST_HOUR_PYTHON: the test environment by default; make gpu-check runs the same steps on the GPU
# machine's python3 (no network there to make a venv), where each step's GPU half runs too.
FIRST_HOUR_PYTHON ?= $(VENV_PY)
first-hour: $(if $(filter $(VENV_PY),$(FIRST_HOUR_PYTHON)),$(VENV_PY))
	@start=$$(date +%s%N); \
	  LAB_CUDA_ARCH=$${LAB_CUDA_ARCH:-90} $(FIRST_HOUR_PYTHON) examples/minimal_extension/setup.py -q build_ext --inplace > /dev/null \
	  && $(FIRST_HOUR_PYTHON) examples/minimal_extension/try_minimal.py \
	  && $(FIRST_HOUR_PYTHON) -m pytest -q -p no:cacheprovider examples/minimal_extension \
	  && echo "first-hour: the minimal extension built, tried and checked in $$(( ($$(date +%s%N) - start) / 1000000 )) ms"
	@start=$$(date +%s%N); $(MAKE) --no-print-directory lessons PYTHON=$(FIRST_HOUR_PYTHON) \
	  && echo "first-hour: the lessons built and checked in $$(( ($$(date +%s%N) - start) / 1000000 )) ms"
	@start=$$(date +%s%N); $(FIRST_HOUR_PYTHON) examples/07_minimal_extension.py \
	  && echo "first-hour: example 7 ran in $$(( ($$(date +%s%N) - start) / 1000000 )) ms"

# The lessons between examples/minimal_extension and src/: each a small extension built with nvcc
# (one architecture unless LAB_CUDA_ARCH says more: a few seconds), its checks run on any machine and
# its GPU half where there is one.
lessons:
	LAB_CUDA_ARCH=$${LAB_CUDA_ARCH:-90} $(PYTHON) examples/lessons/setup.py -q build_ext --inplace > /dev/null
	$(PYTHON) -m pytest -q -p no:cacheprovider examples/lessons; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "make lessons: pytest collected no tests - that is a failure"; exit 1; fi; exit $$rc

# A new user's install, checked: the sdist, a wheel built from it alone (build isolation fetches
# setuptools), installed into a fresh environment and imported from outside the checkout. The wheel
# is built for LAB_CUDA_ARCH's list (the default architectures, as a user's is, unless it is set:
# .ci/run sets 90); its nvcc objects come from the cache `make test` filled (LAB_NVCC_CACHE,
# setup.py): the same sources and flags are not compiled twice.
PACKAGE_DIR = build/package-check
package-check: $(VENV_PY)
	rm -rf dist $(PACKAGE_DIR) && mkdir -p $(PACKAGE_DIR)
	$(VENV_PY) setup.py -q sdist > $(PACKAGE_DIR)/sdist.log 2>&1 || (cat $(PACKAGE_DIR)/sdist.log; exit 1)
	$(VENV_PY) -m pip wheel -v --no-deps -w $(PACKAGE_DIR) dist/lab-*.tar.gz > $(PACKAGE_DIR)/wheel.log 2>&1 \
	  || (tail -50 $(PACKAGE_DIR)/wheel.log; exit 1)
	@echo "package-check: $$(grep -c 'from LAB_NVCC_CACHE' $(PACKAGE_DIR)/wheel.log) kernel units from the cache," \
	  "$$(grep -c ' took ' $(PACKAGE_DIR)/wheel.log) compiled"
	$(PYTHON) -m venv $(PACKAGE_DIR)/venv
	$(PACKAGE_DIR)/venv/bin/pip install -q $(PACKAGE_DIR)/lab-*.whl
	cd /tmp && LAB_NVRTC="$$(ls $(CURDIR)/$(VENV)/lib/python*/site-packages/nvidia/cu*/lib/libnvrtc.so.* | head -1)" \
	  $(CURDIR)/$(PACKAGE_DIR)/venv/bin/python -c "import lab, importlib.util; \
	  assert not lab.__file__.startswith('$(CURDIR)/lab'), lab.__file__; \
	  assert importlib.util.find_spec('lab.nn') is not None, 'lab.nn is missing from the wheel'; \
	  program = lab.compile('#include \"functors.cuh\"\n__global__ void k(float *x) { x[0] = lab::ReluOp()(x[0], 0.f, 0.f, lab::OpParams<float>{1.f, 1.f}); }', arch='sm_90', cache=False); \
	  print('package-check: wheel from the sdist imports:', lab.__version__, lab.compiled_architectures(), \
	        '- its kernel headers compile with NVRTC:', program)"

# clang-format comes from the test requirements (PyPI's clang-format), so every machine checks with
# the same version; .clang-format holds the style.
CLANG_FORMAT ?= clang-format
format-check:
	$(CLANG_FORMAT) --dry-run --Werror $(C_SOURCES) && echo "format-check: $(words $(C_SOURCES)) files follow .clang-format"

format:
	$(CLANG_FORMAT) -i $(C_SOURCES)

$(VENV_PY): requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q -r requirements-test.txt
	touch $(VENV_PY)

# The demo runs on the Python that has the producers (torch, CuPy); where that Python lacks numpy or
# a setuptools that builds lab (77 or newer), on the test environment instead. Exit 0: the demo ran,
# or there is no GPU (it says so).
DEMO_PYTHON = $(shell $(PYTHON) -c "import numpy, setuptools; assert int(setuptools.__version__.split('.')[0]) >= 77" \
  2>/dev/null && echo $(PYTHON) || echo $(VENV_PY))
# The architectures of the module already built (make gpu-check builds sm_90 alone), so that the demo
# reuses that build instead of compiling every unit again for the default list; LAB_CUDA_ARCH, where
# set, wins, and with no module built the build's default applies.
BUILT_ARCH = $(shell $(DEMO_PYTHON) -c "import lab; print(';'.join(sorted(a[3:] for a in lab.compiled_architectures().split() if a.startswith('sm_'))))" 2>/dev/null)
demo:
	$(if $(filter $(VENV_PY),$(DEMO_PYTHON)),$(MAKE) --no-print-directory $(VENV_PY))
	@arch=$${LAB_CUDA_ARCH:-$(BUILT_ARCH)}; echo "demo: building for $${arch:-the default architectures (80;90)}$(if $(BUILT_ARCH),, - no module was built yet)"; \
	  env $${arch:+LAB_CUDA_ARCH=$$arch} $(DEMO_PYTHON) setup.py -q build_ext --inplace
	$(DEMO_PYTHON) -m lab demo

# On the GPU machine: its python3 has torch, CuPy, Numba and JAX; no network. Three `run` calls, sent
# back to back: `make gpu-check` (build, every test, the demo), `make gpu-bench` (the benchmark
# tables) and `make gpu-sanitize` (compute-sanitizer) - an unchanged build is reused by the later
# two. Together they take longer than one call may (gpu-check with the benchmarks took 495 s of
# the 600 on 2026-12-02).
# Logs go to $(OUT)/logs, packed at the end into $(OUT)/logs.tgz (the device tool returns at most 8
# files), the benchmarks' JSON and PNG files into $(OUT)/bench.tgz. EXTRA names more targets to run
# before the packing, e.g. `make gpu-check EXTRA="leak-check sweep profile"`.
LOGS = $(OUT)/logs
# Every GPU target's first step: lab built for sm_90 in place, its log in $(1). With PREBUILT=1 the
# extension comes instead from build/device, which `make device-build` made here and the call
# carried (`carry: ["build/device"]`): no nvcc runs on the GPU machine, a call's first ~105 s saved.
gpu_build = $(if $(PREBUILT),$(MAKE) --no-print-directory device-unpack > $(1) 2>&1 || (cat $(1); exit 1),LAB_CUDA_ARCH=90 $(PYTHON) setup.py build_ext --inplace > $(1) 2>&1 || (tail -50 $(1); exit 1))
gpu-check:
	mkdir -p $(LOGS)
	$(call gpu_build,$(LOGS)/build.log)
	$(PYTHON) -m lab | tee $(LOGS)/config.txt
	$(PYTHON) -m pytest -q -p no:cacheprovider -rfEs $(XDIST) tests 2>&1 | tee $(LOGS)/tests.txt | grep -v "^[.sx]*  *\[" | grep -v "^SKIPPED" | tail -30; \
	  rc=$${PIPESTATUS[0]}; echo "pytest exit code: $$rc" | tee -a $(LOGS)/tests.txt
	$(MAKE) --no-print-directory first-hour FIRST_HOUR_PYTHON=$(PYTHON) 2>&1 | grep -E "first-hour|passed|failed|minimal.add on|Error" | tail -8
	$(PYTHON) -m lab demo 2>&1 | tail -5
	$(if $(EXTRA),$(MAKE) --no-print-directory $(EXTRA))
	@grep -E "passed|failed" $(LOGS)/tests.txt | tail -1
	find $(LOGS) -type f -size +4M -printf "left out of logs.tgz (over 4 MiB): %p\n" -delete
	tar czf $(OUT)/logs.tgz -C $(OUT) logs && rm -rf $(LOGS)

# The JAX face alone, for a change that touches only it (one short call): build, lab.jax's tests and
# the XLA FFI frames, the reductions it runs, the JAX example, then bench_jax and bench_jax_train.
gpu-jax:
	mkdir -p $(LOGS) $(OUT)/bench
	$(call gpu_build,$(LOGS)/build.log)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rfE $(XDIST) tests/test_jax.py tests/test_jax_gpu.py \
	  tests/test_jax_ops.py tests/test_jax_ops_gpu.py tests/test_jax_kernels.py tests/test_jax_kernels_gpu.py \
	  tests/test_xla_ffi.py tests/test_reductions_gpu.py tests/test_source_layout.py \
	  "tests/test_examples.py::test_example_runs[15_jax_inside_jit.py]" 2>&1 | tee $(LOGS)/tests.txt | tail -15; \
	  rc=$${PIPESTATUS[0]}; echo "pytest exit code: $$rc" | tee -a $(LOGS)/tests.txt
	$(PYTHON) bench/bench_jax.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_jax_train.py --out-dir $(OUT)/bench
	tar czf $(OUT)/bench.tgz -C $(OUT) bench && rm -rf $(OUT)/bench
	tar czf $(OUT)/logs.tgz -C $(OUT) logs && rm -rf $(LOGS)

# The benchmark tables, side by side with torch, CuPy and the loss heads' peers (an unchanged build
# is reused; a fresh machine builds first). The last table printed is the fused linear
# cross-entropy's goals.
# Attention alone (one short call, for a change to its kernels): build, its tests, memcheck and
# racecheck on a slice of them, then bench_attention's table against SDPA's flash and cuDNN backends.
ATTENTION_SANITIZE_K = "(full or causal_transposed or one or softcap or window) and (float16 and 64 or bfloat16 and 128) or packed"
gpu-attention:
	mkdir -p $(LOGS) $(OUT)/bench
	$(call gpu_build,$(LOGS)/build.log)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rfEs tests/test_attention_gpu.py tests/test_attention.py 2>&1 \
	  | tee $(LOGS)/tests.txt | grep -v "^[.sx]*  *\[" | tail -25; echo "pytest exit code: $${PIPESTATUS[0]}"
	$(SANITIZE_ENV) timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 --log-file $(LOGS)/memcheck-attention.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_attention_gpu.py -k $(ATTENTION_SANITIZE_K) 2>&1 | tail -1; \
	  echo "memcheck exit code: $${PIPESTATUS[0]}"; grep -c "^========= Invalid" $(LOGS)/memcheck-attention.log || true
	$(SANITIZE_ENV) timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 --log-file $(LOGS)/racecheck-attention.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_attention_gpu.py -k $(ATTENTION_SANITIZE_K) 2>&1 | tail -1; \
	  echo "racecheck exit code: $${PIPESTATUS[0]}"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $(LOGS)/racecheck-attention.log | tail -2
	$(PYTHON) bench/bench_attention.py $(BENCH_FLAGS) --out-dir $(OUT)/bench
	tar czf $(OUT)/bench.tgz -C $(OUT) bench && rm -rf $(OUT)/bench
	find $(LOGS) -type f -size +4M -printf "left out of logs.tgz (over 4 MiB): %p\n" -delete
	tar czf $(OUT)/logs.tgz -C $(OUT) logs && rm -rf $(LOGS)

# The runtime pieces alone (graphs, random numbers, lab.nn's dropout): build, their tests, memcheck on
# the graph and random tests (but the one whose cudaFreeAsync CUDA refuses by design, which memcheck
# reports as an API error: memory of a captured graph that never ran), bench_runtime's table, and one Nsight Compute look at the fill kernel.
gpu-runtime:
	mkdir -p $(LOGS) $(OUT)/bench
	$(call gpu_build,$(LOGS)/build.log)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rfEs tests/test_graph_gpu.py tests/test_graph.py tests/test_random_gpu.py \
	  tests/test_random.py tests/test_face_arguments.py "tests/test_examples.py::test_example_runs[19_lab_graph.py]" 2>&1 \
	  | tee $(LOGS)/tests.txt | grep -v "^[.sx]*  *\[" | tail -20; echo "pytest exit code: $${PIPESTATUS[0]}"
	$(SANITIZE_ENV) timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 --log-file $(LOGS)/memcheck-runtime.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_graph_gpu.py tests/test_random_gpu.py \
	  -k "not torch and not cupy and not freed_quietly" 2>&1 \
	  | tail -1; echo "memcheck exit code: $${PIPESTATUS[0]}"; grep -E "ERROR SUMMARY" $(LOGS)/memcheck-runtime.log | tail -1
	$(PYTHON) -m lab demo 2>&1 | grep -E "lab.Graph|demo:"
	$(PYTHON) bench/bench_runtime.py --out-dir $(OUT)/bench
	timeout 60 ncu --kernel-name regex:random_kernel --launch-count 2 --section SpeedOfLight --section ComputeWorkloadAnalysis \
	  $(PYTHON) -c "import lab; out = lab.empty(1 << 28); lab.uniform(out); lab.normal(out); lab.synchronize()" 2>&1 \
	  | grep -E "random_kernel|Throughput|Pipe|Issue|Executed Ipc" | head -24
	tar czf $(OUT)/bench.tgz -C $(OUT) bench && rm -rf $(OUT)/bench
	tar czf $(OUT)/logs.tgz -C $(OUT) logs && rm -rf $(LOGS)

# The float8 pieces alone: build, the casts', float8 linear layers' and every matmul test, memcheck
# on the cast tests (memory errors only: on the H100, 2026-12-07, it reported 34 API errors and no
# invalid access, the first a cuGetProcAddress probe by the cuda-bindings package), bench_float8's casts
# against the copy and torch and its linear layers against bf16 and torchao (a wheel in .whl/, see
# peers-site), bench_gemm's float8 and host-time rows.
gpu-float8: peers-site
	mkdir -p $(LOGS) $(OUT)/bench
	$(call gpu_build,$(LOGS)/build.log)
	$(PYTHON) -m pytest -q -p no:cacheprovider -rfEs $(XDIST) tests/test_float8_cast_gpu.py tests/test_float8_cast.py \
	  tests/test_nn_float8_gpu.py tests/test_nn_float8.py \
	  tests/test_matmul_float8_gpu.py tests/test_matmul_float8.py tests/test_matmul_gpu.py tests/test_matmul.py 2>&1 \
	  | tee $(LOGS)/tests.txt | tail -15; rc=$${PIPESTATUS[0]}; echo "pytest exit code: $$rc" | tee -a $(LOGS)/tests.txt
	$(SANITIZE_ENV) timeout 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
	  --log-file $(LOGS)/memcheck-float8.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_float8_cast_gpu.py -k "not 1024x4096" 2>&1 | tail -1; \
	  echo "memcheck exit code: $${PIPESTATUS[0]}"; grep -E "ERROR SUMMARY" $(LOGS)/memcheck-float8.log | tail -1
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_float8.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_gemm.py --only float8 host --out-dir $(OUT)/bench
	tar czf $(OUT)/bench.tgz -C $(OUT) bench && rm -rf $(OUT)/bench
	tar czf $(OUT)/logs.tgz -C $(OUT) logs && rm -rf $(LOGS)

gpu-bench:
	mkdir -p $(OUT)/bench
	$(call gpu_build,$(OUT)/build.log)
	$(PYTHON) bench/bench_elementwise.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_reductions.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_jit.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_rowwise.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_bandwidth.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_losses.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_gemm.py --out-dir $(OUT)/bench
	$(MAKE) --no-print-directory bench-rope BENCH_OUT=$(OUT)/bench
	$(MAKE) --no-print-directory bench-swiglu BENCH_OUT=$(OUT)/bench
	$(PYTHON) bench/bench_attention.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_jax.py --out-dir $(OUT)/bench
	$(PYTHON) bench/bench_jax_train.py --out-dir $(OUT)/bench
	$(MAKE) --no-print-directory bench-linear-ce BENCH_OUT=$(OUT)/bench
	$(MAKE) --no-print-directory nn-host-cost BENCH_OUT=$(OUT)/bench
	tar czf $(OUT)/bench.tgz -C $(OUT) bench && rm -rf $(OUT)/bench

# The leak figure: refcount/tracemalloc tests at 10^6 calls each (GPU machine): succeeding calls
# (no launch, real launches on torch, lab.Array and CAI) and failing ones (validation, refused memory).
leak-check:
	mkdir -p $(LOGS)
	LAB_LEAK_CALLS=1000000 $(PYTHON) -m pytest -q -s -p no:cacheprovider tests/test_refcounts.py \
	  -k "succeeding_calls or real_launches or refused or (failing_calls and (shape_mismatch or bad_stream))" 2>&1 \
	  | tee $(LOGS)/leak-check.txt | grep -E "calls:|passed|failed"

# How the vectorized kernel's tuning was chosen: the library's kernel over a grid of tunings.
sweep:
	mkdir -p $(LOGS)
	nvcc -std=c++17 -O3 -arch=sm_90 -Isrc/kernels bench/sweep_vectorized.cu -o $(LOGS)/sweep
	$(LOGS)/sweep > $(LOGS)/sweep.txt; rm -f $(LOGS)/sweep; cp $(LOGS)/sweep.txt $(OUT)/; head -2 $(LOGS)/sweep.txt

# How the fills' geometry was chosen: random_fill.cuh's kernel over a grid of tunings, each checked to
# give the first one's bytes, timed against a copy.
sweep-random:
	mkdir -p $(LOGS)
	nvcc -std=c++17 -O3 -arch=sm_90 -Isrc/kernels bench/sweep_random.cu -o $(LOGS)/sweep_random
	$(LOGS)/sweep_random | tee $(OUT)/sweep_random.txt; rm -f $(LOGS)/sweep_random

# How the row-wise ops' staged layout was chosen: standalone rms_norm, layer_norm and softmax kernels
# in register-light layouts (rows staged in shared memory with cp.async, pipelined, or read twice) and
# a plain copy, checked and timed on bench_rowwise.py's headline input.
sweep-norms:
	mkdir -p $(LOGS)
	nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/sweep_norms.cu -o $(LOGS)/sweep_norms 2> $(LOGS)/sweep_norms_ptxas.txt
	grep -E "registers|spill" $(LOGS)/sweep_norms_ptxas.txt | sort | uniq -c
	$(LOGS)/sweep_norms | tee $(LOGS)/sweep_norms.txt; rm -f $(LOGS)/sweep_norms

# Layouts for rms_norm's backward (registers or cp.async-staged, column sums in registers), checked
# against float64 and timed beside the bound of a two-read, one-write copy.
sweep-norm-backward:
	mkdir -p $(LOGS)
	nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/sweep_norm_backward.cu -o $(LOGS)/sweep_nb 2> $(LOGS)/sweep_nb_ptxas.txt
	grep -E "registers|spill" $(LOGS)/sweep_nb_ptxas.txt | sort | uniq -c
	$(LOGS)/sweep_nb | tee $(LOGS)/sweep_norm_backward.txt; rm -f $(LOGS)/sweep_nb

# Nsight Compute counters for lab's and torch's add/relu/gelu (ncu.csv), and the SASS of lab's
# add kernels for each float dtype (sass.txt). Both also land beside logs.tgz.
NCU_METRICS = gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size
profile:
	mkdir -p $(LOGS)
	timeout 240 ncu --clock-control none --kernel-name regex:'elementwise|vectorized|gelu|relu|clamp|threshold' \
	  --csv --metrics $(NCU_METRICS) $(PYTHON) bench/profile_ops.py > $(LOGS)/ncu.csv 2> $(LOGS)/ncu.err; \
	  echo "ncu exit code: $$?"; wc -l $(LOGS)/ncu.csv; tail -3 $(LOGS)/ncu.err; cp $(LOGS)/ncu.csv $(OUT)/
	cuobjdump -sass lab/lab*.so | $(PYTHON) bench/sass_summary.py elementwise_vectorized AddOp > $(LOGS)/sass.txt; \
	  grep "^==" -A1 $(LOGS)/sass.txt | cut -c1-400

# Nsight Compute counters for the reduction kernels of lab, torch and CuPy on bench_reductions.py's
# arrays (reductions-ncu.csv, in launch order; ncu-cases.txt says which case each call belongs to).
REDUCE_METRICS = gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,lts__t_sector_hit_rate.pct
profile-reductions:
	mkdir -p $(LOGS)
	timeout 300 ncu --clock-control none --kernel-name regex:'reduce|Reduce|combine|dot|gemv|columns|slices|group' \
	  --csv --metrics $(REDUCE_METRICS) $(PYTHON) bench/profile_reductions.py $(CASES) > $(LOGS)/reductions-ncu.csv \
	  2> $(LOGS)/ncu-cases.txt; echo "ncu exit code: $$?"; cp $(LOGS)/reductions-ncu.csv $(LOGS)/ncu-cases.txt $(OUT)/
	$(PYTHON) bench/ncu_summary.py $(LOGS)/reductions-ncu.csv

# Nsight Compute counters for the row-wise kernels (and torch's softmax and rms_norm) on
# bench_rowwise.py's headline input: time, DRAM throughput, registers, occupancy, issue, what warps wait on.
ROW_METRICS = gpu__time_duration.sum,sm__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,launch__occupancy_limit_registers,lts__t_sector_hit_rate.pct
# ROW_CASES, ROW_KERNELS and ROW_PROFILE (the files' name) pick other cases: profile-cross-entropy.
ROW_CASES =
ROW_KERNELS = rows_|softmax|norm|Gamma|gamma|partial|nll|count_targets|sum_row_losses
ROW_PROFILE = rowwise
profile-rowwise:
	mkdir -p $(LOGS)
	timeout 200 ncu --clock-control none --kernel-name regex:'$(ROW_KERNELS)' --csv --metrics $(ROW_METRICS) \
	  $(PYTHON) bench/profile_rowwise.py $(ROW_CASES) > $(LOGS)/$(ROW_PROFILE)-ncu.csv \
	  2> $(LOGS)/$(ROW_PROFILE)-ncu-cases.txt; echo "ncu exit code: $$?"
	$(if $(filter $(LOGS),$(OUT)),,cp $(LOGS)/$(ROW_PROFILE)-ncu.csv $(OUT)/)
	$(PYTHON) bench/ncu_summary.py $(LOGS)/$(ROW_PROFILE)-ncu.csv

# The same counters for cross-entropy's window rows against its streamed rows
# (bench/profile_rowwise.py --cross-entropy-walks).
profile-cross-entropy:
	$(MAKE) --no-print-directory profile-rowwise ROW_CASES=--cross-entropy-walks ROW_KERNELS=rows_ \
	  ROW_PROFILE=cross-entropy

# Nsight Compute counters for the rotary embedding's kernels and SwiGLU's (called directly, and through
# lab.nn.swiglu) on their benchmarks' inputs: time, DRAM throughput, registers, occupancy, stalls.
profile-rope-glu:
	mkdir -p $(LOGS)
	timeout 200 ncu --clock-control none --kernel-name regex:'rope|glu|Glu|vectorized|rows_' --csv --metrics $(ROW_METRICS) \
	  $(PYTHON) bench/profile_rope_glu.py > $(LOGS)/rope-glu-ncu.csv 2> $(LOGS)/rope-glu-ncu-cases.txt; echo "ncu exit code: $$?"
	cp $(LOGS)/rope-glu-ncu.csv $(LOGS)/rope-glu-ncu-cases.txt $(OUT)/
	$(PYTHON) bench/ncu_summary.py $(LOGS)/rope-glu-ncu.csv

# Nsight Compute counters for lab's attention kernels beside SDPA's flash kernels on bench_attention.py's
# cases: time, instructions, issue, tensor-pipe use, occupancy, shared-memory bank conflicts, and what warps wait on.
ATTENTION_METRICS = gpu__time_duration.sum,sm__inst_executed.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio
profile-attention:
	mkdir -p $(LOGS)
	timeout 240 ncu --clock-control none --kernel-name regex:'attention|flash' --csv --metrics $(ATTENTION_METRICS) \
	  $(PYTHON) bench/profile_attention.py > $(LOGS)/attention-ncu.csv 2> $(LOGS)/attention-ncu-cases.txt; echo "ncu exit code: $$?"
	$(if $(filter $(LOGS),$(OUT)),,cp $(LOGS)/attention-ncu.csv $(LOGS)/attention-ncu-cases.txt $(OUT)/)
	$(PYTHON) bench/ncu_summary.py $(LOGS)/attention-ncu.csv

# lab.jax's rms_norm, softmax and swiglu inside jax.jit against XLA's formulas: every kernel each chain
# launches (copies XLA adds around the custom calls would show here) and its time.
profile-jax:
	mkdir -p $(LOGS)
	timeout 300 ncu --profile-from-start off --clock-control none --csv --metrics $(ROW_METRICS) \
	  $(PYTHON) bench/profile_jax_chain.py > $(LOGS)/jax-ncu.csv 2> $(LOGS)/jax-ncu-cases.txt; echo "ncu exit code: $$?"
	cp $(LOGS)/jax-ncu.csv $(LOGS)/jax-ncu-cases.txt $(OUT)/
	$(PYTHON) bench/ncu_summary.py $(LOGS)/jax-ncu.csv

# Where the staged forwards' instructions go (softmax, layer_norm, rms_norm on the headline input):
# Nsight Compute's per-SASS-instruction counters, grouped by how often each instruction ran - per row
# (the prologue, the reductions) or per step along it (bench/ncu_source_summary.py). The export lands
# beside logs.tgz as staged-sass.csv.
# SASS_KERNELS picks other kernels of the same run: 'rows_in_registers' for rms_norm's in-register forward;
# SASS_CASES other calls: '--cross-entropy' (with SASS_KERNELS=rows_streamed) for cross-entropy's long rows.
SASS_KERNELS ?= rows_staged
SASS_CASES ?= --forwards
profile-rowwise-sass:
	mkdir -p $(LOGS)
	timeout 200 ncu --clock-control none --kernel-name regex:'$(SASS_KERNELS)' --section SourceCounters \
	  --section SpeedOfLight --section WarpStateStats -f \
	  -o $(LOGS)/staged $(PYTHON) bench/profile_rowwise.py $(SASS_CASES) > $(LOGS)/staged-ncu.txt 2>&1; \
	  echo "ncu exit code: $$?"
	ncu --import $(LOGS)/staged.ncu-rep --page source --csv --print-source sass > $(OUT)/staged-sass.csv
	ncu --import $(LOGS)/staged.ncu-rep --page details > $(LOGS)/staged-details.txt
	grep -E "^  [a-z_]+<|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy" $(LOGS)/staged-details.txt
	rm -f $(LOGS)/staged.ncu-rep
	$(PYTHON) bench/ncu_source_summary.py $(OUT)/staged-sass.csv

# Where a kernel's global loads sit against its arithmetic, read from its SASS on any machine with nvcc
# (no GPU): SASS_FILE compiled for sm_90 to a cubin, the functions matching every word of SASS_MATCH
# mapped one letter an instruction (bench/sass_summary.py --order). cuobjdump is the toolkit's, or the
# nvidia-cuda-cuobjdump wheel's (CUOBJDUMP=<its bin/cuobjdump>). The default: layer_norm's bf16
# backward with the bias, on whole tiles and partial ones.
CUOBJDUMP ?= cuobjdump
SASS_FILE ?= src/kernels/rowwise_norms.cu
SASS_MATCH ?= rows_in_registers NormBackwardILb1ELb1EEE13__nv_bfloat16Li4
sass-order:
	mkdir -p build
	nvcc -O3 -std=c++17 -Isrc -gencode=arch=compute_90,code=sm_90 -cubin $(SASS_FILE) -o build/sass-order.cubin
	$(CUOBJDUMP) -sass build/sass-order.cubin | $(PYTHON) bench/sass_summary.py --order $(SASS_MATCH)

# compute-sanitizer over a cut of the GPU tests. Torch's caching allocator is switched off so each
# array is its own allocation and memcheck sees any access past its end. API errors count too: a
# CUDA call of lab's that fails, even one lab clears and handles, is an error in a user's own
# sanitizer run. Numba is left out (LAB_TEST_PRODUCERS): numba-cuda's cuda-python probes
# cuGetProcAddress for driver entry points that do not exist, and memcheck counted those 34 failed
# probes as errors (2026-11-29); Numba's arrays reach the same kernels as torch's. Tests that make
# a failing CUDA call on purpose (a block too large, a kernel name not in the code) are left out.
SANITIZE_ENV = PYTORCH_NO_CUDA_MEMORY_CACHING=1 LAB_TEST_PRODUCERS=torch
sanitize:
	mkdir -p $(LOGS)
	$(SANITIZE_ENV) timeout 330 compute-sanitizer --tool memcheck --report-api-errors all \
	  --error-exitcode 9 \
	  --log-file $(LOGS)/memcheck.log $(PYTHON) -m pytest -q -p no:cacheprovider -m "not provokes_cuda_error" \
	  tests/test_elementwise_gpu.py \
	  tests/test_layouts_gpu.py tests/test_streams_gpu.py tests/test_foreach_gpu.py tests/test_reductions_gpu.py \
	  tests/test_jit_gpu.py tests/test_elementwise_kernel_gpu.py tests/test_rowwise_gpu.py tests/test_losses_gpu.py \
	  tests/test_rope_gpu.py -k "not cupy and not jax and not under_compile and not 16777221 and not 4194309 \
	  and not 16777219 and not two_to_the_31 and not memory_is_given_back and not 300 and not matches_torch and not training \
	  and not deterministic and not 600 and not 2x262144 and not 2_31 \
	  and not (many_strides and not (float32 and transposed)) and not (test_losses_gpu and not ((float32 \
	  and (33x1000 or 3x131072 or 4099x32 or 64x4096 or registers or streamed) and not sum and not none) \
	  or layouts or bad_targets or every_row_ignored))" \
	  > $(LOGS)/memcheck-pytest.txt 2>&1; \
	  echo $$? > $(LOGS)/memcheck.rc; echo "memcheck exit code: $$(cat $(LOGS)/memcheck.rc)"; tail -1 $(LOGS)/memcheck-pytest.txt
	@grep -E "^========= (Invalid|Program hit|ERROR SUMMARY)" $(LOGS)/memcheck.log | sort | uniq -c | sort -rn | head -8
	timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 --log-file $(LOGS)/racecheck.log \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_elementwise_gpu.py tests/test_layouts_gpu.py \
	  tests/test_foreach_gpu.py tests/test_reductions_gpu.py tests/test_rowwise_gpu.py tests/test_losses_gpu.py \
	  tests/test_rope_gpu.py -k "(torch and 1000003 and float32) \
	  or (forward_and_backward and many_strides and float32 and transposed) \
	  or transposed_inputs or foreach_norm or (value_reductions_float and float32 and (sum or var or argmax) and (4099 \
	  or 70000 or 300000)) or broadcast_input_and_strided_output or ((softmax_forward or norm_forward or norm_backward) \
	  and float32 and (33x1000 or 64x4096 or 2x131072 or 4099x32)) or (norm_backward and float32 and 3x50257) \
	  or (test_cross_entropy and float32 and mean and 0.1 \
	  and (33x1000 or 3x131072 or 4099x32))" \
	  > /dev/null 2>&1; echo $$? > $(LOGS)/racecheck.rc; echo "racecheck exit code: $$(cat $(LOGS)/racecheck.rc)"
	@grep -E "SUMMARY" $(LOGS)/racecheck.log
	@test "$$(cat $(LOGS)/memcheck.rc)$$(cat $(LOGS)/racecheck.rc)" = 00 || (echo "make sanitize: the sanitizer reported errors (logs in $(LOGS))"; exit 1)

# The second GPU call: compute-sanitizer over the GPU tests, logs packed into $(OUT)/sanitize-logs.tgz.
# memcheck over the fused linear cross-entropy's GPU tests (cuBLASLt under the sanitizer is slow:
# the small shapes only). Its own call on the GPU machine: `make sanitize-linear-ce OUT=$$OUT`.
sanitize-linear-ce:
	mkdir -p $(LOGS)
	$(call gpu_build,$(LOGS)/build.log)
	$(SANITIZE_ENV) timeout 400 compute-sanitizer --tool memcheck --report-api-errors all \
	  --error-exitcode 9 --log-file $(LOGS)/memcheck-linear-ce.log $(PYTHON) -m pytest -q -p no:cacheprovider \
	  -m "not provokes_cuda_error" \
	  tests/test_linear_ce_gpu.py -k "not 128256 and not 32000 and not memory and not same_bits and not training \
	  and not compile and not grad_into_logits_needs" > $(LOGS)/memcheck-linear-ce-pytest.txt 2>&1; \
	  rc=$$?; echo "memcheck exit code: $$rc"; tail -1 $(LOGS)/memcheck-linear-ce-pytest.txt; \
	  grep -E "^========= (Invalid|Program hit|ERROR SUMMARY)" $(LOGS)/memcheck-linear-ce.log | sort | uniq -c | head -8; \
	  exit $$rc

gpu-sanitize:
	mkdir -p $(LOGS)
	$(call gpu_build,$(LOGS)/build.log)
	$(MAKE) --no-print-directory sanitize > $(OUT)/sanitize.txt 2>&1; rc=$$?; tail -14 $(OUT)/sanitize.txt; \
	  find $(LOGS) -type f -size +4M -printf "left out of sanitize-logs.tgz (over 4 MiB): %p\n" -delete; \
	  tar czf $(OUT)/sanitize-logs.tgz -C $(OUT) logs && rm -rf $(LOGS); exit $$rc

# The fuzzers at full strength (CI runs a seeded slice of each): the protocol fuzzer; the generated
# fuzz of every public entry point (tests/fuzz_calls.py: FUZZ_CALLS calls in child processes, the
# allocator in debug mode so that freed memory is poisoned) and of the Python faces' functions
# (tests/fuzz_faces.py: FUZZ_NN_CALLS of lab.nn's, FUZZ_JAX_CALLS of lab.jax's, each traced and compiled;
# on the GPU where there is one); then the re-entrancy fuzzer
# (tests/hostile.py) in FUZZ_JOBS child processes of FUZZ_EXAMPLES calls each.
FUZZ_CALLS ?= 1000000
FUZZ_NN_CALLS ?= 200000
FUZZ_JAX_CALLS ?= 20000
FUZZ_SEED ?= 2
FUZZ_EXAMPLES ?= 50000
FUZZ_JOBS ?= 2
fuzz: $(VENV_PY)
	$(VENV_PY) setup.py build_ext --inplace
	LAB_FUZZ_EXAMPLES=100000 $(VENV_PY) -m pytest -q tests/test_fuzz.py
	PYTHONMALLOC=debug $(VENV_PY) tests/fuzz_calls.py --calls $(FUZZ_CALLS) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)
	PYTHONMALLOC=debug $(VENV_PY) tests/fuzz_faces.py --face nn --calls $(FUZZ_NN_CALLS) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)
	$(VENV_PY) tests/fuzz_faces.py --face jax --calls $(FUZZ_JAX_CALLS) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)
	cd tests && seq 1 $(FUZZ_JOBS) | PYTHONMALLOC=debug PYTHONFAULTHANDLER=1 PYTHONPATH=$(CURDIR):$(CURDIR)/tests \
	  xargs -P $(FUZZ_JOBS) -I{} $(CURDIR)/$(VENV_PY) hostile.py $(FUZZ_EXAMPLES) {}

bench: build
	$(PYTHON) bench/bench_elementwise.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_reductions.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_jit.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_rowwise.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_bandwidth.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_losses.py --out-dir bench/results/latest
	$(PYTHON) bench/bench_gemm.py --out-dir bench/results/latest
	$(MAKE) --no-print-directory bench-rope
	$(PYTHON) bench/bench_jax.py --out-dir bench/results/latest
	$(MAKE) --no-print-directory bench-linear-ce

# The peers that are pure Python over Triton (Liger-Kernel, Cut Cross-Entropy): where they are not
# installed they travel as wheels in .whl/ (pip download, see docs/linear-cross-entropy.md), installed
# into a folder of their own that only the benchmarks comparing with them put on their path.
PEERS_SITE ?= /tmp/lab-peers
BENCH_OUT ?= bench/results/latest
peers-site:
	@if ls .whl/*.whl >/dev/null 2>&1; then $(PYTHON) -m pip install -q --no-index --no-deps --no-compile \
	  --no-cache-dir --upgrade --target $(PEERS_SITE) .whl/*.whl; fi

# The fused linear cross-entropy against Liger-Kernel and Cut Cross-Entropy.
bench-linear-ce: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_linear_ce.py --out-dir $(BENCH_OUT)

# The rotary embedding against transformers' formula (eager, compiled) and Liger-Kernel's.
bench-rope: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_rope.py --out-dir $(BENCH_OUT)

# Every lab.nn function's host time a call against torch eager's for the same result (small inputs).
nn-host-cost:
	$(PYTHON) bench/nn_host_cost.py --out-dir $(BENCH_OUT)

# SwiGLU forward + backward through autograd against torch eager, torch.compile and Liger-Kernel's.
bench-swiglu: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_swiglu.py --out-dir $(BENCH_OUT)

# A Llama training step end to end (torch eager, torch.compile per layer, Liger-Kernel, lab.nn.patch),
# each in a process of its own. Too long to share a GPU call with the other benchmarks: on the GPU
# machine it is `make gpu-llama OUT=$$OUT`, its own call. LLAMA_ARGS="--case 4x2048": one case only.
bench-llama: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_llama.py --out-dir $(BENCH_OUT) $(LLAMA_ARGS)

# The 8 B-shaped step at 8192 tokens: lab.nn.patch with float8="tensorwise" against its bfloat16 self,
# torch.compile and torchao's float8 training (a wheel in .whl/, see peers-site).
bench-llama-float8: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_llama.py --model 8b --out-dir $(BENCH_OUT) $(LLAMA_ARGS)

# Fine-tuning on lognormal-length samples: padded, length-grouped (torch eager, torch.compile,
# Liger-Kernel, lab.nn.patch) and padding-free (lab.nn.patch), real tokens/s and memory.
bench-packed: peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/bench_packed.py --out-dir $(BENCH_OUT) $(PACKED_ARGS)

gpu-llama:
	mkdir -p $(OUT)/bench
	$(call gpu_build,$(OUT)/build.log)
	$(MAKE) --no-print-directory bench-llama BENCH_OUT=$(OUT)/bench

gpu-llama-float8:
	mkdir -p $(OUT)/bench
	$(call gpu_build,$(OUT)/build.log)
	$(MAKE) --no-print-directory bench-llama-float8 BENCH_OUT=$(OUT)/bench

# float8 against bfloat16 over 300 optimizer steps on a structured corpus (CONVERGENCE_MODEL=1b or 8b).
CONVERGENCE_MODEL ?= 1b
gpu-convergence-float8:
	mkdir -p $(OUT)/bench
	$(call gpu_build,$(OUT)/build.log)
	$(PYTHON) bench/convergence_float8.py --model $(CONVERGENCE_MODEL) --out-dir $(OUT)/bench

# One Llama training step under torch.profiler, lab.nn.patch beside Liger-Kernel's patch: the GPU
# time by kernel class (matrix products, attention, lab, Triton, the rest). Its own GPU call.
gpu-profile-llama:
	$(call gpu_build,/tmp/lab-build.log)
	$(MAKE) --no-print-directory peers-site
	PYTHONPATH=$(PEERS_SITE) $(PYTHON) bench/profile_llama.py

# lab built here for the GPU machine's Python, so that a GPU call spends no device time in nvcc:
# `make device-build` (DEVICE_PYTHON names that Python here; a venv of it gets setuptools and numpy)
# leaves build/device/lab.<its ABI>.so.xz - xz keeps the sm_90 build (61 MB) within what a call may
# carry - and on the GPU machine `make device-unpack` puts the extension into lab/. A call that then
# ran nn_host_cost and an Nsight Compute profile took 37 s where a build alone takes about 105.
DEVICE_PYTHON ?= python3.12
DEVICE_BUILD = build/device
device-build:
	rm -rf $(DEVICE_BUILD) && mkdir -p $(DEVICE_BUILD)
	$(DEVICE_PYTHON) -m venv $(DEVICE_BUILD)/venv && $(DEVICE_BUILD)/venv/bin/pip install -q setuptools numpy
	LAB_CUDA_ARCH=90 $(DEVICE_BUILD)/venv/bin/python setup.py build_ext --build-lib $(DEVICE_BUILD)/lib \
	  > $(DEVICE_BUILD)/build.log 2>&1 || (tail -30 $(DEVICE_BUILD)/build.log; exit 1)
	name=lab$$($(DEVICE_BUILD)/venv/bin/python -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"); \
	  strip --strip-debug $(DEVICE_BUILD)/lib/lab/$$name -o $(DEVICE_BUILD)/$$name && xz -T0 -6 $(DEVICE_BUILD)/$$name
	rm -rf $(DEVICE_BUILD)/venv $(DEVICE_BUILD)/lib && ls -l $(DEVICE_BUILD)/*.so.xz
device-unpack:
	$(PYTHON) -c "import glob, lzma, os, shutil; [shutil.copyfileobj(lzma.open(f), open(os.path.join('lab', \
	  os.path.basename(f)[:-3]), 'wb')) for f in glob.glob('$(DEVICE_BUILD)/*.so.xz')]"
	$(PYTHON) -c "import lab; print('device-unpack:', lab.__file__, lab.compiled_architectures())"

# A change against its base in one GPU call, on one machine (runs on two machine starts have differed
# by 1% in bench_bandwidth's cross-entropy rows, 3-5% in bench_llama's steps): here `make device-build`
# and `make device-build-base BASE=<rev>`, then on the GPU machine, carrying both builds,
# `make device-ab PYTHON=python3 [AB_COMMAND="..."]` runs AB_COMMAND on the change's build, the base's,
# the change's, the base's - and leaves the change's in place. The base runs in its own tree (the
# base's sources, carried as tree.tar.xz beside its build): the change's Python files would ask the
# base's module for functions it may not have.
AB_COMMAND ?= $(PYTHON) bench/bench_bandwidth.py
DEVICE_BASE = build/device-base
AB_BASE_TREE = /tmp/lab-ab-base
device-ab:
	rm -rf $(AB_BASE_TREE) && mkdir -p $(AB_BASE_TREE) && tar xJf $(DEVICE_BASE)/tree.tar.xz -C $(AB_BASE_TREE)
	mkdir -p $(AB_BASE_TREE)/$(DEVICE_BUILD) && cp $(DEVICE_BASE)/*.so.xz $(AB_BASE_TREE)/$(DEVICE_BUILD)/
	$(MAKE) --no-print-directory device-unpack > /dev/null
	$(MAKE) -C $(AB_BASE_TREE) --no-print-directory device-unpack > /dev/null
	@for tree in $(CURDIR) $(AB_BASE_TREE) $(CURDIR) $(AB_BASE_TREE); do \
	  echo "== $$tree" && (cd $$tree && $(AB_COMMAND)) || exit 1; done
device-build-base:
	@test -n "$(BASE)" || (echo "device-build-base: say which revision, BASE=<rev>"; exit 1)
	-git worktree remove --force /tmp/lab-device-base 2> /dev/null; rm -rf /tmp/lab-device-base
	git worktree add --detach /tmp/lab-device-base $(BASE)
	$(MAKE) -C /tmp/lab-device-base --no-print-directory device-build DEVICE_PYTHON=$(DEVICE_PYTHON)
	rm -rf $(DEVICE_BASE) && mkdir -p $(dir $(DEVICE_BASE)) && cp -r /tmp/lab-device-base/$(DEVICE_BUILD) $(DEVICE_BASE)
	git archive --format=tar $(BASE) | xz -T0 > $(DEVICE_BASE)/tree.tar.xz
	git worktree remove --force /tmp/lab-device-base

clean:
	rm -rf build lab/*.so $(VENV) .pytest_cache
