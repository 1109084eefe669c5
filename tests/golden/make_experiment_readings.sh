#!/usr/bin/env bash
# The full runs of every `qkv experiment`, committed as tests/golden/experiments/NAME.json, so
# that a test can check the --quick runs read the same direction without spending ctest's time
# on full runs (tests/cli/experiment_readings_test.cpp). Each run is deterministic for a given
# seed and thread count; the tables here were made on one thread (QKV_NUM_THREADS=1, the default
# below) on this 2-core AMD EPYC (Zen 3, AVX2): scores took 14 minutes on an idle machine; heads
# 22, scale 11 and no-wv 8 with other work beside them; tie-qk 6 minutes idle, and 10 (223 s of
# CPU) when it was last remade, at a load average of 6 to 10.
#
#   tests/golden/make_experiment_readings.sh [build/qkv] [NAME ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
qkv=${1:-build/qkv}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then names=(tie-qk no-wv scale heads scores); fi
export QKV_NUM_THREADS=${QKV_NUM_THREADS:-1}
mkdir -p tests/golden/experiments
for name in "${names[@]}"; do
  out=tests/golden/experiments/$name.json
  "$qkv" experiment "$name" --json > "$out.tmp"
  python3 -m json.tool --indent 1 --no-ensure-ascii "$out.tmp" > "$out"
  rm "$out.tmp"
  echo "wrote $out" >&2
done
