#!/bin/sh
# vramfit fleet collection script (printed by `vramfit check --collect-script`).
#
# Run it on every node of a rented cluster; it writes what the node's GPU and
# fabric tools print into a folder named after the host, ready for
# `vramfit check --fleet DIR` (copy each node's folder under one DIR).
#
#   sh collect.sh [-o OUTDIR] [-t SECONDS] [--no-bench]
#   sh collect.sh --print-multinode HOST1 HOST2 ...
#
#   -o OUTDIR     where the host's folder is made (default: the current directory)
#   -t SECONDS    time limit of each command (default 900; GPU tests take minutes)
#   --no-bench    only the read-only queries (no bandwidthTest, p2p test, nccl-tests)
#   --print-multinode HOST...
#                 print (do not run) the multi-node nccl-tests and perftest commands
#                 for these hosts; run them yourself when the nodes are otherwise idle
#
# Every tool is optional: one that is absent is noted in the manifest
# (vramfit-collect.txt) and skipped. The read-only queries (nvidia-smi, ibstat,
# ibv_devinfo) need no root. Tools are found on PATH; CUDA samples and
# nccl-tests binaries also in $CUDA_SAMPLES_BIN and $NCCL_TESTS_BIN.
set -u

out_root=.
limit=900
bench=1

usage() {
  sed -n '2,22p' "$0" 2>/dev/null || echo "usage: sh collect.sh [-o OUTDIR] [-t SECONDS] [--no-bench] | --print-multinode HOST..."
}

print_multinode() {
  if [ "$#" -lt 2 ]; then
    echo "collect.sh: --print-multinode needs at least two hosts" >&2
    exit 2
  fi
  n=$#
  first=$1
  echo "# Multi-node tests for $n nodes: run from $first when the nodes are idle."
  echo "# nccl-tests (built with MPI=1); GPUS = GPUs per node; the output goes to the fleet folder's top level:"
  hostlist=""
  for h in "$@"; do
    if [ -z "$hostlist" ]; then hostlist="$h:GPUS"; else hostlist="$hostlist,$h:GPUS"; fi
  done
  for t in all_reduce_perf all_gather_perf alltoall_perf; do
    echo "mpirun -np \$(($n * GPUS)) -H $hostlist $t -b 8 -e 8G -f 2 -g 1 > ${t%_perf}-${n}nodes.txt"
  done
  echo "# On 2 nodes, NCCL_ALGO=RING isolates the network (add -x NCCL_ALGO=RING to mpirun)."
  echo "# perftest between neighbours, one HCA at a time (HCA = each mlx5_N of ibstat):"
  prev=""
  for h in "$@"; do
    if [ -n "$prev" ]; then
      echo "ssh $prev 'ib_write_bw -d HCA --report_gbits -F -D 10' &  sleep 2;  ssh $h 'ib_write_bw -d HCA --report_gbits -F -D 10 $prev' > $h/ib_write_bw-HCA-from-$prev.txt"
      echo "ssh $prev 'ib_read_bw -d HCA --report_gbits -F -D 10' &  sleep 2;  ssh $h 'ib_read_bw -d HCA --report_gbits -F -D 10 $prev' > $h/ib_read_bw-HCA-from-$prev.txt"
      echo "ssh $prev 'ib_send_lat -d HCA -F' &  sleep 2;  ssh $h 'ib_send_lat -d HCA -F $prev' > $h/ib_send_lat-HCA-from-$prev.txt"
    fi
    prev=$h
  done
  exit 0
}

while [ "$#" -gt 0 ]; do
  case "$1" in
    -o) out_root=${2:?-o needs a directory}; shift 2 ;;
    -t) limit=${2:?-t needs seconds}; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --print-multinode) shift; print_multinode "$@" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "collect.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

case "$limit" in
  ''|*[!0-9]*) echo "collect.sh: -t needs a whole number of seconds" >&2; exit 2 ;;
esac

host=$(hostname 2>/dev/null || uname -n 2>/dev/null || echo node)
host=$(printf '%s' "$host" | tr -c 'A-Za-z0-9._-' '_')
dir="$out_root/$host"
mkdir -p "$dir" || { echo "collect.sh: cannot create $dir" >&2; exit 1; }
manifest="$dir/vramfit-collect.txt"
{
  echo "# vramfit collect 1"
  echo "host: $host"
  echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ' 2>/dev/null || echo unknown)"
} > "$manifest"

have_timeout=0
if command -v timeout >/dev/null 2>&1; then have_timeout=1; fi

# find TOOL: its path on PATH or in the CUDA samples / nccl-tests folders, else empty
find_tool() {
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return 0; fi
  for d in "${CUDA_SAMPLES_BIN:-}" "${NCCL_TESTS_BIN:-}"; do
    if [ -n "$d" ] && [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}

# run FILE TOOL ARGS...: TOOL's output into $dir/FILE, within the time limit
run() {
  file=$1; tool=$2; shift 2
  if ! path=$(find_tool "$tool"); then
    if ! grep -qx "absent: $tool" "$manifest"; then echo "absent: $tool" >> "$manifest"; fi
    return 1
  fi
  if [ "$have_timeout" = 1 ]; then
    timeout "$limit" "$path" "$@" > "$dir/$file" 2> "$dir/$file.stderr"
  else
    "$path" "$@" > "$dir/$file" 2> "$dir/$file.stderr"
  fi
  status=$?
  if [ ! -s "$dir/$file.stderr" ]; then rm -f "$dir/$file.stderr"; fi
  if [ "$status" -eq 0 ]; then
    echo "ran: $tool $* > $file" >> "$manifest"
  else
    if [ "$status" -eq 124 ]; then why="timed out after ${limit}s"; else why="exit $status"; fi
    echo "failed: $tool $* ($why)" >> "$manifest"
    if [ ! -s "$dir/$file" ]; then rm -f "$dir/$file"; fi
  fi
  return "$status"
}

# read-only queries
run nvidia-smi-q.xml nvidia-smi -q -x
run nvidia-smi-q.txt nvidia-smi -q
run nvidia-smi-L.txt nvidia-smi -L
run nvidia-smi-topo.txt nvidia-smi topo -m
run nvidia-smi-version.txt nvidia-smi --version
if grep -q '<current_mig>Enabled</current_mig>' "$dir/nvidia-smi-q.xml" 2>/dev/null; then
  run nvidia-smi-mig-lgi.txt nvidia-smi mig -lgi
  run nvidia-smi-mig-lgip.txt nvidia-smi mig -lgip
fi
run ibstat.txt ibstat
run ibv_devinfo.txt ibv_devinfo -v

# benchmarks: a few minutes with the GPUs otherwise idle
if [ "$bench" = 1 ]; then
  gpus=0
  if [ -s "$dir/nvidia-smi-L.txt" ]; then gpus=$(grep -c '^GPU ' "$dir/nvidia-smi-L.txt"); fi
  run bandwidthTest.txt bandwidthTest --device=all
  if [ "$gpus" -gt 1 ]; then
    run p2pBandwidthLatencyTest.txt p2pBandwidthLatencyTest
    run all_reduce_perf.txt all_reduce_perf -b 8 -e 8G -f 2 -g "$gpus"
    run all_gather_perf.txt all_gather_perf -b 8 -e 8G -f 2 -g "$gpus"
  fi
fi

echo "vramfit: wrote $dir (see $manifest); copy every node's folder under one directory for vramfit check --fleet"
exit 0
