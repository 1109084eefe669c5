#!/usr/bin/env bash
# A venv with PyTorch, sentence-transformers and ONNX Runtime for bench/compare_torch.py (and
# tests/golden/), outside the repo (docs/CONVENTIONS.md §6). Idempotent: when the venv already works
# it prints its path and nothing else; a venv with a working torch but not the rest gets the rest.
#
#   VENV=$(bench/setup_torch_venv.sh) && "$VENV/bin/python" bench/compare_torch.py
#
# Where:   ${QKV_TORCH_VENV:-$HOME/.cache/qkv/torch-venv}
# Which:   torch ${QKV_TORCH_VERSION:-2.15.0} from PyPI, on Debian's /usr/bin/python3.
# Why so:  Debian's python3-torch is 1.13, before scaled_dot_product_attention (torch 2.0).
#          Every PyPI torch ≥ 2.0 wheel for Linux x86_64 links the CUDA libraries (cuBLAS,
#          cuDNN, NCCL, ...) dynamically, so `import torch` fails without the nvidia-* wheels
#          even on a CPU-only machine, and the CPU-only wheels live on an index we cannot reach.
#          We install torch with --no-deps, then every dependency it declares except triton (a
#          GPU compiler, ~1 GB, never loaded on CPU): ~4.4 GB and under a minute.
# Then:    sentence-transformers (with transformers), onnxruntime, and onnx + onnxscript (what
#          torch.onnx.export needs), the newest PyPI has. Asked for plainly, pip would pull triton
#          back in through torch's requirements, so we ask pip what it would install
#          (--dry-run --report) and install exactly that, less triton, with --no-deps.
# Then:    llama-cpp-python ${QKV_LLAMA_CPP_VERSION:-0.3.36} (llama.cpp itself, the peer of
#          bench/compare_llm.py), which PyPI has as a source package only: pip builds llama.cpp
#          with CMake, taking ggml's switches from $CMAKE_ARGS (llama-cpp-python's documented way).
#          ggml's own default, GGML_NATIVE=ON (-march=native), crashed with a general protection
#          fault in libggml-cpu on the first decode on one of our Intel machines (issue 30), so we
#          build with GGML_NATIVE=OFF and name each ISA switch from /proc/cpuinfo: AVX, AVX2, FMA,
#          F16C, BMI2 (x86-64-v3), AVX-512 F/CD/VL/DQ/BW with VBMI, VNNI, BF16 where the flags
#          show them, AMX off. The version and the switches go to $VENV/llama-cpp-build.txt, which
#          compare_llm.py prints. ~10 min on 2 cores (CMAKE_BUILD_PARALLEL_LEVEL, default 2).
# Stdout is the venv path only; progress goes to stderr; pip's log to $VENV/setup.log.
set -euo pipefail

VENV="${QKV_TORCH_VENV:-$HOME/.cache/qkv/torch-venv}"
TORCH_VERSION="${QKV_TORCH_VERSION:-2.15.0}"
PY=/usr/bin/python3
# gguf and accelerate: transformers reading GGUF files (the SmolLM2 goldens of tests/golden).
EXTRAS=(sentence-transformers transformers onnxruntime onnx onnxscript gguf accelerate)

check_torch() {
  "$VENV/bin/python" - "$TORCH_VERSION" >/dev/null 2>&1 <<'EOF'
import sys, torch, torch.nn.functional as F
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
q = torch.randn(1, 2, 8, 4, requires_grad=True)
F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
EOF
}

# The extras import, and ONNX Runtime's CPU provider runs a one-node graph.
check_extras() {
  "$VENV/bin/python" - >/dev/null 2>&1 <<'EOF'
import numpy as np, onnx, onnxscript, onnxruntime as ort, sentence_transformers, transformers
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
assert s.run(None, {"x": np.array([-1, 2], np.float32)})[0].tolist() == [0, 2]
EOF
}

LLAMA_CPP_VERSION="${QKV_LLAMA_CPP_VERSION:-0.3.36}"
# Importing llama_cpp loads libllama and libggml-cpu: a build that cannot load fails here.
check_llama() {
  "$VENV/bin/python" - "$LLAMA_CPP_VERSION" >/dev/null 2>&1 <<'EOF'
import sys, llama_cpp
assert llama_cpp.__version__ == sys.argv[1], llama_cpp.__version__
EOF
}

# ggml's ISA switches for this CPU, from /proc/cpuinfo's flags. GGML_NATIVE=OFF: see the header.
llama_cmake_args() {
  local flags args=(-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DGGML_BACKEND_DL=OFF
                    -DGGML_CPU_ALL_VARIANTS=OFF)
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { local f; for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
  onoff() { if has "$@"; then echo ON; else echo OFF; fi; }
  if [[ $(uname -m) == x86_64 ]]; then
    args+=(-DGGML_AVX="$(onoff avx)" -DGGML_AVX2="$(onoff avx2)" -DGGML_FMA="$(onoff fma)"
           -DGGML_F16C="$(onoff f16c)" -DGGML_BMI2="$(onoff bmi2)"
           -DGGML_AVX_VNNI="$(onoff avx_vnni)")
    # ggml's GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
    if has avx512f avx512cd avx512vl avx512dq avx512bw; then
      args+=(-DGGML_AVX512=ON -DGGML_AVX512_VBMI="$(onoff avx512vbmi)"
             -DGGML_AVX512_VNNI="$(onoff avx512_vnni)" -DGGML_AVX512_BF16="$(onoff avx512_bf16)")
    else
      args+=(-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
             -DGGML_AVX512_BF16=OFF)
    fi
    # AMX stays off even where amx_tile shows: the crash of issue 30 was on such a machine.
    args+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  fi
  echo "${args[*]}"
}

check() { check_torch && check_extras && check_llama; }

if [[ -x "$VENV/bin/python" ]] && check; then
  echo "$VENV"
  exit 0
fi

say() { echo "setup_torch_venv: $*" >&2; }

if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]]; then
    say "installing python3-venv (apt)"
    apt-get update -qq >/dev/null && apt-get install -y -qq python3-venv >/dev/null
  else
    say "python3-venv is missing: sudo apt-get install python3-venv"
    exit 1
  fi
fi

start=$SECONDS
mkdir -p "$(dirname "$VENV")"
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
fi
LOG="$VENV/setup.log"
: >"$LOG"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" >>"$LOG" 2>&1; }
fail() {
  say "failed; the end of $LOG:"
  tail -n 20 "$LOG" >&2
  exit 1
}

if ! check_torch; then
  say "installing torch==$TORCH_VERSION (no triton) from PyPI, about 4.4 GB; log in $LOG"
  pip install --no-deps "torch==$TORCH_VERSION" || fail
  # torch's own requirements for this platform, less triton.
  mapfile -t reqs < <("$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement
for line in md.requires("torch") or []:
    r = Requirement(line)
    if r.marker and not r.marker.evaluate({"extra": ""}):
        continue
    if r.name.lower() == "triton":
        continue
    r.marker = None
    print(r)
EOF
  )
  # pip complains that triton is missing: expected, hence the log.
  pip install "${reqs[@]}" numpy || fail
  if ! check_torch; then
    say "torch installed but scaled_dot_product_attention does not run:"
    "$VENV/bin/python" -c 'import torch' >&2 || true
    exit 1
  fi
fi

if ! check_extras; then
  say "installing ${EXTRAS[*]} (no triton) from PyPI, about 0.5 GB; log in $LOG"
  report="$VENV/setup-report.json"
  pip install --dry-run --quiet --report "$report" "${EXTRAS[@]}" || fail
  # What pip would install for them, pinned, less triton.
  mapfile -t extras < <("$VENV/bin/python" - "$report" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if name.lower() != "triton":
        print(f"{name}=={version}")
EOF
  )
  rm -f "$report"
  if ((${#extras[@]})); then pip install --no-deps "${extras[@]}" || fail; fi
  if ! check_extras; then
    say "${EXTRAS[*]} installed but do not import, or ONNX Runtime does not run:"
    "$VENV/bin/python" -c 'import sentence_transformers, onnxruntime, onnxscript' >&2 || true
    exit 1
  fi
fi

if ! check_llama; then
  export CMAKE_ARGS
  CMAKE_ARGS=$(llama_cmake_args)
  # Two jobs: the machines these benches run on have 2 cores, shared.
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  say "building llama-cpp-python==$LLAMA_CPP_VERSION (llama.cpp, CPU) from source, ~10 min on"
  say "  2 cores; CMAKE_ARGS=$CMAKE_ARGS; log in $LOG"
  llama_start=$SECONDS
  # --no-cache-dir: a wheel cached from other CMAKE_ARGS would be reused without them.
  pip install --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_VERSION" \
    || fail
  if ! check_llama; then
    say "llama-cpp-python installed but does not import:"
    "$VENV/bin/python" -c 'import llama_cpp' >&2 || true
    exit 1
  fi
  printf 'llama-cpp-python %s, built in %d s with CMAKE_ARGS=%s\n' "$LLAMA_CPP_VERSION" \
    $((SECONDS - llama_start)) "$CMAKE_ARGS" >"$VENV/llama-cpp-build.txt"
fi

versions=$("$VENV/bin/python" -c 'import torch, sentence_transformers as st, onnxruntime as ort, llama_cpp
print(f"torch {torch.__version__}, sentence-transformers {st.__version__}, onnxruntime {ort.__version__}, llama-cpp-python {llama_cpp.__version__}")')
say "done in $((SECONDS - start)) s, $(du -sh "$VENV" | cut -f1): $versions"
echo "$VENV"
