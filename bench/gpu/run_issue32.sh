#!/usr/bin/env bash
# bench/gpu/run_issue32.sh — issue 32's one run on a GPU machine (an H100 or H200 lent by the
# device tool; ../.library/device/README.md, METHOD.md): build qkv with CUDA there, run the GPU
# tests, then the comparison with torch's SDPA, and leave everything under $OUT.
#
#   bench/gpu/run_issue32.sh            the run (about 5 to 8 minutes; every step has its timeout
#                                       and the whole stays under 8.5 minutes)
#   bench/gpu/run_issue32.sh --dry-run  checks the tools, prints each step's command, and stops
#                                       before the first step that needs the GPU; runs anywhere
#
# From the device tool, in the repository's root, with the C++ libraries carried (run
# bench/gpu/fetch_deps.sh here first, in the checkout the tool sends):
#   run(command="bash bench/gpu/run_issue32.sh", carry=[".gpu-deps"], timeout_s=570)
#
# $OUT (the tool's folder; ./out/issue32 elsewhere) receives at most 8 files, none deeper:
#   summary.txt   the machine, each step's status and time, the tests' counts, the table
#   build.log     configure and build;  ptxas.txt  the kernels' registers, spills, shared memory
#   gtest.log     qkv_tests --gtest_filter='Cuda*';  pytest.log  python/tests/test_cuda.py
#   compare.txt   compare_torch.py --device cuda's table;  compare.jsonl  its rows
# Steps go on after a failure where they can (the tests do not stop the table); the exit status is
# the first failing step's.
set -u -o pipefail

dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
OUT=${OUT:-$root/out/issue32}
mkdir -p "$OUT"
summary=$OUT/summary.txt
build=${QKV_GPU_BUILD_DIR:-build-gpu}
python=${PYTHON:-python3}
jobs=$(nproc 2>/dev/null || echo 4)
started=$(date +%s)
deadline=$((started + 510)) # 8.5 minutes: the tool's 10-minute call leaves room to copy back
status=0

: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

# step NAME LIMIT LOG COMMAND...: runs COMMAND under `timeout` (its LIMIT, or what is left before
# the deadline), appending its output to LOG; notes the status and time in the summary.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local now left t0 rc
  now=$(date +%s)
  left=$((deadline - now))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    note "$name: skipped (the run's 8.5 minutes are spent)"
    [ "$status" -eq 0 ] && status=124
    return 124
  fi
  echo "\$ $*" >>"$log"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0))
  if [ "$rc" -eq 0 ]; then
    note "$name: ok (${took} s)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "$name: TIMED OUT after ${limit} s ($log)"
  else
    note "$name: FAILED, exit $rc (${took} s; $log)"
  fi
  [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
  return "$rc"
}

# ---- the machine ----
note "issue 32 GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for tool in cmake nvcc "$python" g++; do
  command -v "$tool" >/dev/null || { note "missing: $tool (needed to build qkv)"; status=2; }
done
have_ninja=0
command -v ninja >/dev/null && have_ninja=1
note "nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo none); cmake: $(cmake --version 2>/dev/null | head -1); $jobs cores"
note "python: $($python -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1 | tail -1)"
note "torch: $($python -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
if [ "$status" -ne 0 ]; then
  note "stopping: the tools above are missing"
  exit "$status"
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)
gpu_rc=$?
python_flag=OFF
$python -m nanobind --cmake_dir >/dev/null 2>&1 && python_flag=ON
configure=(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DQKV_CUDA=ON -DQKV_BUILD_BENCH=OFF
  "-DQKV_PYTHON=$python_flag" -DPython_EXECUTABLE="$(command -v "$python")")
[ "$have_ninja" -eq 1 ] && configure+=(-G Ninja)
targets=(qkv_cli qkv_tests)
[ "$python_flag" = ON ] && targets+=(_qkv)

if [ "$dry" -eq 1 ]; then
  note "dry run: the steps, in order:"
  note "  configure: ${configure[*]}  (again with the carried .gpu-deps under /tmp/qkv-deps if it fails)"
  note "  build:     cmake --build $build -j$jobs --target ${targets[*]}  (ptxas lines → ptxas.txt)"
  note "  gtest:     $build/tests/qkv_tests --gtest_filter='Cuda*'   [needs the GPU]"
  note "  pytest:    PYTHONPATH=$build/python $python -m pytest -rs python/tests/test_cuda.py   [needs the GPU]"
  note "  compare:   $python bench/compare_torch.py --device cuda --qkv $build/qkv --json-out $OUT/compare.jsonl   [needs the GPU]"
  [ -d .gpu-deps ] && note "  .gpu-deps: $(ls .gpu-deps/*.deb 2>/dev/null | wc -l) .deb files carried"
  [ -d .gpu-deps ] || note "  .gpu-deps: absent (run bench/gpu/fetch_deps.sh where the tool is called)"
fi
if [ "$gpu_rc" -ne 0 ] || [ -z "$gpu" ]; then
  note "stopping before the first step that needs a GPU: nvidia-smi finds none ($(echo "$gpu" | head -1))"
  exit 3
fi
note "gpu: $gpu"
[ "$dry" -eq 1 ] && { note "dry run: a GPU is present; stopping before the build"; exit 0; }

# ---- configure and build ----
log=$OUT/build.log
: >"$log"
if ! step configure 90 "$log" "${configure[@]}"; then
  if [ -d .gpu-deps ] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
    # The C++ libraries from the carried Debian packages, unpacked beside the system's (never over
    # it). OpenBLAS's Debian config names absolute /usr paths: a copy points under the prefix.
    deps=/tmp/qkv-deps
    mkdir -p "$deps"
    for f in .gpu-deps/*.deb; do dpkg -x "$f" "$deps"; done
    multiarch=$deps/usr/lib/x86_64-linux-gnu
    blas_cmake=$multiarch/openblas-pthread/cmake/openblas
    for f in "$blas_cmake"/*.cmake; do
      [ -f "$f" ] && sed -i "s|/usr/|$deps/usr/|g" "$f"
    done
    # Debian's alternatives links (libopenblas.so.0, libblas.so.3) are not in the packages.
    [ -e "$multiarch/libopenblas.so.0" ] || ln -sf openblas-pthread/libopenblas.so.0 "$multiarch/libopenblas.so.0"
    export CMAKE_PREFIX_PATH=$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    export CPATH=$deps/usr/include${CPATH:+:$CPATH}
    export LIBRARY_PATH=$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$multiarch:$multiarch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    note "configure: again with the carried .gpu-deps ($(ls .gpu-deps/*.deb | wc -l) packages under $deps)"
    rm -rf "$build"
    status=0
    step configure-with-deps 90 "$log" "${configure[@]}" -DOpenBLAS_DIR="$blas_cmake" || {
      note "stopping: qkv does not configure here ($log)"
      exit "$status"
    }
  else
    note "stopping: qkv does not configure here, and no .gpu-deps were carried (bench/gpu/fetch_deps.sh)"
    exit "$status"
  fi
fi
if ! grep -q "qkv: CUDA .* found" "$log"; then
  note "stopping: the configure did not turn the CUDA kernels on ($(grep 'qkv: the GPU kernels' "$log" | head -1))"
  exit 4
fi
step build 300 "$log" cmake --build "$build" -j"$jobs" --target "${targets[@]}"
built=$?
grep -E "ptxas (info|warning)|bytes stack frame|Compiling entry function" "$log" >"$OUT/ptxas.txt" || true
note "ptxas: $(grep -c 'Used [0-9]* registers' "$OUT/ptxas.txt") kernels; spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/ptxas.txt") with any"
grep -E "Used [0-9]+ registers" "$OUT/ptxas.txt" | sed 's/^.*ptxas info *: /  /' | head -20 >>"$summary"
[ "$built" -ne 0 ] && { note "stopping: the build failed ($log)"; exit "$status"; }

# ---- the GPU tests ----
export QKV_SOURCE_DIR=$root
step gtest 120 "$OUT/gtest.log" "$build/tests/qkv_tests" --gtest_filter='Cuda*' --gtest_brief=0
note "gtest: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gtest.log" | tr '\n' ';' || echo 'no summary')"
if [ "$python_flag" = ON ]; then
  step pytest 120 "$OUT/pytest.log" env PYTHONPATH="$build/python" "$python" -m pytest -q -rs \
    -p no:cacheprovider python/tests/test_cuda.py
  note "pytest: $(tail -1 "$OUT/pytest.log")"
else
  note "pytest: skipped ($python has no nanobind: the Python module was not built)"
fi

# ---- the comparison with torch ----
compare=("$python" bench/compare_torch.py --device cuda --qkv "$build/qkv" --json-out "$OUT/compare.jsonl")
[ "$python_flag" = ON ] && compare+=(--qkv-python)
step compare 240 "$OUT/compare.txt" env PYTHONPATH="$build/python" "${compare[@]}"
{
  echo
  sed -n '/^qkv --device cuda against torch/,$p' "$OUT/compare.txt"
} >>"$summary"
note "total: $(($(date +%s) - started)) s; exit $status"
exit "$status"
