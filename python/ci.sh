#!/usr/bin/env bash
# The Python package in CI (.ci/run; docs/python.md): build the release wheel
# as it ships (maturin + zig, manylinux_2_28), check that its extension needs
# no glibc symbol newer than 2.28 and that the wheel is under 20 MB, install it
# into a fresh virtual environment and run the API tests against it (they
# compare `python -m vramfit` byte for byte with target/debug/vramfit when
# `cargo test --workspace` has built it). Then rustfmt on the binding crate,
# a workspace of its own. Prints its duration.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || { echo "python/ci.sh: $PY is missing: install CPython 3.9 or later with venv and pip"; exit 1; }
command -v objdump >/dev/null 2>&1 || { echo "python/ci.sh: objdump is missing (Debian: binutils)"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$PY" -m venv "$work/build"
"$work/build/bin/pip" install -q --disable-pip-version-check "maturin==1.16.*" "ziglang==0.17.*"
PATH="$work/build/bin:$PATH" maturin build --release --locked --zig --compatibility manylinux_2_28 -o "$work/dist"
wheel="$(ls "$work"/dist/vramfit-*.whl)"
size=$(stat -c %s "$wheel")
echo "wheel: $(basename "$wheel"), $size bytes"
[ -z "${VRAMFIT_WHEEL_DIR:-}" ] || cp "$wheel" "$VRAMFIT_WHEEL_DIR/"
[ "$size" -lt 20000000 ] || { echo "python/ci.sh: the wheel is $size bytes, over 20 MB"; exit 1; }

mkdir "$work/unpacked" && (cd "$work/unpacked" && "$PY" -m zipfile -e "$wheel" .)
so="$(ls "$work"/unpacked/vramfit/_native*.so)"
newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "newest glibc symbol version needed: $newest"
case "$newest" in
  GLIBC_2.[0-9] | GLIBC_2.1[0-9] | GLIBC_2.2[0-8]) ;;
  *) echo "python/ci.sh: $so needs $newest, newer than GLIBC_2.28"; exit 1 ;;
esac

"$PY" -m venv "$work/test"
"$work/test/bin/pip" install -q --disable-pip-version-check "$wheel" pytest
"$work/test/bin/python" -m pytest -q python/tests/test_api.py

# rustfmt only: clippy of the binding crate needs a check build of every
# dependency again (~2.5 CPU-minutes); run it by hand after changing
# python/src (docs/python.md, "Build, glibc, size")
cargo fmt --manifest-path python/Cargo.toml -- --check
echo "python/ci.sh: $((SECONDS - start)) s"
