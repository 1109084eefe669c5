#!/usr/bin/env bash
# bench/gpu/fetch_deps.sh — run HERE (a Debian 12 build machine with network), before the device
# tool's call: downloads the .deb files of the C++ libraries qkv builds against (scripts/bootstrap's
# list, less what the GPU machine has or the run does not need) into .gpu-deps/ at the repository's
# root, ignored by git, which the call then carries (`carry: [".gpu-deps"]`). The GPU machine's
# image has nvcc, CMake, ninja, g++ and PyTorch but no package registry and, as far as its notes
# say, none of these libraries; bench/gpu/run_issue32.sh unpacks them under /tmp/qkv-deps (never
# over its /usr) only where its own configure fails without them. About 20 MiB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$exclude"
mkdir -p .gpu-deps
cd .gpu-deps
# Headers and CMake packages, the libraries they link, and OpenBLAS's Fortran runtime (Ubuntu's
# image need not have libgfortran5). No MPI (QKV_MPI finds none and turns itself off), no Google
# Benchmark (the run configures with QKV_BUILD_BENCH=OFF).
packages=(nlohmann-json3-dev libcli11-dev libhwy-dev libhwy1 libopenblas-dev libopenblas0
          libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
          libgtest-dev libgmock-dev googletest zlib1g-dev)
apt-get download "${packages[@]}" >/dev/null
ls -1 ./*.deb | wc -l | xargs echo "fetch_deps: .deb files in $root/.gpu-deps:"
du -sh . | cut -f1 | xargs echo "fetch_deps: size"
