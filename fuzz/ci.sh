#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (docs/fuzzing.md), two at a time:
# coverage-guided with nightly cargo-fuzz where it is installed, else the
# stable driver (fuzz/examples/fuzz_stable.rs: the committed corpus, then
# mutated and random inputs; same target bodies). Any crash, or one input
# running past 10 s, fails the run and leaves the input in fuzz/artifacts/.
#
#   VRAMFIT_FUZZ_SECONDS   seconds per target (default 20)
#   VRAMFIT_FUZZ           auto (default) | nightly | stable
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${VRAMFIT_FUZZ_SECONDS:-20}"
mode="${VRAMFIT_FUZZ:-auto}"
if [ "$mode" = auto ]; then
  if cargo +nightly fuzz --version >/dev/null 2>&1; then mode=nightly; else mode=stable; fi
fi
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
targets=$(ls fuzz/fuzz_targets | sed -n 's/\.rs$//p')
logs=$(mktemp -d)
mkdir -p fuzz/artifacts

case "$mode" in
  nightly)
    echo "fuzz: nightly cargo-fuzz (coverage-guided, no sanitizer), ${secs} s per target"
    cargo +nightly fuzz build -s none --fuzz-dir fuzz
    bin="fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
    run() {
      mkdir -p "fuzz/corpus/$1"
      "$bin/$1" "fuzz/corpus/$1" "fuzz/seeds/$1" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/$1-" -print_final_stats=1 >"$logs/$1" 2>&1
    }
    ;;
  stable)
    echo "fuzz: stable driver (corpus replay + mutated inputs, no coverage guidance), ${secs} s per target"
    # shares target/ with the workspace build, so the parser crates' dependencies are built once
    CARGO_TARGET_DIR=target cargo build --manifest-path fuzz/Cargo.toml --example fuzz_stable
    run() {
      ( ulimit -v 4194304; target/debug/examples/fuzz_stable "$1" --seconds "$secs" --timeout 10 \
        --corpus "fuzz/seeds/$1" --artifacts fuzz/artifacts ) >"$logs/$1" 2>&1
    }
    ;;
  *) echo "VRAMFIT_FUZZ must be auto, nightly or stable (got '$mode')"; exit 1 ;;
esac

# every target needs a committed corpus
for t in $targets; do
  [ -n "$(ls -A "fuzz/seeds/$t" 2>/dev/null)" ] || { echo "fuzz: no committed corpus in fuzz/seeds/$t"; exit 1; }
done

export -f run; export secs logs bin 2>/dev/null || true
failed=0
# two at a time (CI has 2 cores)
if ! printf '%s\n' $targets | xargs -P 2 -I{} bash -c 'run {} && echo "  ok {}" || { echo "  FAILED {}"; exit 1; }'; then
  failed=1
fi
for t in $targets; do
  if [ "$mode" = nightly ]; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t")
    echo "  $t: ${runs:-?} executions"
  else
    tail -n 1 "$logs/$t" | sed 's/^/  /'
  fi
done
if [ "$failed" = 1 ]; then
  for t in $targets; do
    if grep -qE "ERROR|panicked|fuzz_stable .*(panic|longer than)|deadly signal|Killed" "$logs/$t"; then
      echo "== fuzz target $t failed:"; tail -n 40 "$logs/$t"
    fi
  done
  exit 1
fi
rm -rf "$logs"
