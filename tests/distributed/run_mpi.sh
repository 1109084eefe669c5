#!/usr/bin/env bash
# run_mpi.sh MPIRUN P PROGRAM [ARGS...] — PROGRAM as P MPI processes on this machine. Exits 77
# (ctest: Skipped) with the reason where MPI cannot start processes here, else PROGRAM's status.
set -u
mpirun=$1 np=$2
shift 2
if [ ! -x "$mpirun" ]; then
  echo "skipped: no mpirun at '$mpirun' (scripts/bootstrap installs openmpi-bin)"
  exit 77
fi
# Under the asan preset: OpenMPI's own allocations still held at exit are not this program's leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# More ranks than cores is fine for a test; root needs OpenMPI's consent.
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
if ! probe=$(timeout 60 "$mpirun" "${flags[@]}" -np "$np" true 2>&1); then
  echo "skipped: MPI cannot start $np processes here: $mpirun said:"
  echo "$probe" | head -20
  exit 77
fi
exec timeout 110 "$mpirun" "${flags[@]}" -np "$np" "$@"
