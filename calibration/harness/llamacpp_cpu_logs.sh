#!/usr/bin/env bash
# Start-up logs of a CPU-only llama.cpp build on the GGUFs written by
# gguf_random.py (calibration/data/measured/README-llamacpp-cpu.md).
# usage: llamacpp_cpu_logs.sh BUILD_DIR GGUF_DIR LOG_DIR [ONLY]
# ONLY: a regular expression; only the runs whose id matches it are started
# Each run starts llama-server with the flags below, waits until the
# context's buffers are logged (or 120 s), then stops it: only the
# start-up lines are wanted. -lv 4: llama.cpp of this build logs the
# buffer lines at verbosity 3+ only (the default shows none of them). --no-warmup skips the warm-up decode (it runs
# after the buffers are reserved and does not change them).
set -u
BUILD=$1; GG=$2; LOGS=$3; ONLY=${4:-}
mkdir -p "$LOGS"
run() { # id model args...
  local id=$1 m=$2; shift 2
  [[ -n "$ONLY" && ! $id =~ $ONLY ]] && return
  local log="$LOGS/$id.log"
  "$BUILD/bin/llama-server" -m "$GG/$m.gguf" --host 127.0.0.1 --port 18091 -t 2 --no-warmup -lv 4 "$@" >"$log" 2>&1 &
  local pid=$!
  # draft-mtp: the MTP context logs a second compute buffer after the target's
  local want=1
  case " $* " in *" draft-mtp "*) want=2 ;; esac
  for _ in $(seq 1 120); do
    [ "$(grep -c "compute buffer size" "$log")" -ge "$want" ] && sleep 2 && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  echo "== $id: llama-server -m $m.gguf $*"
  grep -E "common_params_print_info: build|n_ctx|n_outputs_max|n_ubatch|n_batch|flash_attn|Flash Attention|n_seq_max|buffer size|llama_kv_cache: size|llama_memory_recurrent: size|cells|graph: nodes|fit" "$log"
}
run qwen3-0.6b-np1     qwen3-0.6b -c 4096 -np 1
run qwen3-0.6b-np4     qwen3-0.6b -c 4096 -np 4
run qwen3-0.6b-np4-fa0 qwen3-0.6b -c 4096 -np 4 -fa off
run qwen3-0.6b-c32k-np4 qwen3-0.6b -c 32768 -np 4
# Q4_0 matrices: repacked by the CPU backend (CPU_REPACK)
run qwen3-0.6b-q4_0-np4 qwen3-0.6b-q4_0 -c 4096 -np 4
# no -np: llama-server picks 4 slots and a unified cache (tools/server/server.cpp)
run qwen3-0.6b-auto     qwen3-0.6b -c 4096
run gemma-3-1b-auto     gemma-3-1b -c 8192
run gemma-3-1b-np1     gemma-3-1b -c 8192 -np 1
run gemma-3-1b-np4     gemma-3-1b -c 8192 -np 4
# the experts in Q4_0 would be repacked into an anonymous CPU_REPACK copy
# (17 GB): -nr keeps them mapped; --numa distribute turns off the mmap
# prefetch (MAP_POPULATE, src/llama-mmap.cpp) so the sparse file is not read
run qwen3-30b-a3b-q4_0-np4 qwen3-30b-a3b-q4_0 -c 4096 -np 4 -nr --numa distribute
run qwen3.5-27b-q4_0-np1 qwen3.5-27b-q4_0 -c 4096 -np 1 -nr --numa distribute
run qwen3.5-27b-q4_0-np4 qwen3.5-27b-q4_0 -c 4096 -np 4 -nr --numa distribute
run gpt-oss-20b-mxfp4-np1 gpt-oss-20b-mxfp4 -c 8192 -np 1 -nr --numa distribute
run gpt-oss-20b-mxfp4-np4 gpt-oss-20b-mxfp4 -c 8192 -np 4 -nr --numa distribute
# Gemma 4 (gemma4): E2B dense (per-layer embeddings, 20 KV-shared layers, double-wide MLP)
# at Q8_0 (not repacked on x86: ggml-cpu repack.cpp repacks Q8_0 on ARM only), 32K context
run gemma-4-e2b-q8_0-c32k-np1 gemma-4-e2b-q8_0 -c 32768 -np 1 --numa distribute
run gemma-4-e2b-q8_0-c32k-np4 gemma-4-e2b-q8_0 -c 32768 -np 4 --numa distribute
run gemma-4-e2b-q8_0-c32k-np1-fa0 gemma-4-e2b-q8_0 -c 32768 -np 1 -fa off --numa distribute
# 26B-A4B MoE at Q4_0: its repacked experts (12.8 GB) would not fit beside the rest: -nr
run gemma-4-26b-a4b-q4_0-c32k-np1 gemma-4-26b-a4b-q4_0 -c 32768 -np 1 -nr --numa distribute
run gemma-4-26b-a4b-q4_0-c32k-np4 gemma-4-26b-a4b-q4_0 -c 32768 -np 4 -nr --numa distribute
# the Qwen3-30B-A3B geometry cut to 8 layers: Q4_0 experts repacked (CPU_REPACK, the default)
run qwen3-30b-a3b-8l-q4_0-np4 qwen3-30b-a3b-8l-q4_0 -c 4096 -np 4
# --- mtp: the Qwen3.5-27B file with its MTP layer, with and without --spec-type draft-mtp ---
run qwen3.5-27b-mtp-q4_0-np1 qwen3.5-27b-mtp-q4_0 -c 4096 -np 1 -nr --numa distribute
run qwen3.5-27b-mtp-q4_0-np1-draft-mtp qwen3.5-27b-mtp-q4_0 -c 4096 -np 1 -nr --numa distribute --spec-type draft-mtp
run qwen3.5-27b-mtp-q4_0-np4 qwen3.5-27b-mtp-q4_0 -c 4096 -np 4 -nr --numa distribute
run qwen3.5-27b-mtp-q4_0-np4-draft-mtp qwen3.5-27b-mtp-q4_0 -c 4096 -np 4 -nr --numa distribute --spec-type draft-mtp
# Qwen3.5-35B-A3B with its MTP layer (the MoE head)
run qwen3.5-35b-a3b-mtp-q4_0-np1 qwen3.5-35b-a3b-mtp-q4_0 -c 4096 -np 1 -nr --numa distribute
run qwen3.5-35b-a3b-mtp-q4_0-np1-draft-mtp qwen3.5-35b-a3b-mtp-q4_0 -c 4096 -np 1 -nr --numa distribute --spec-type draft-mtp
run qwen3.5-35b-a3b-mtp-q4_0-np4-draft-mtp qwen3.5-35b-a3b-mtp-q4_0 -c 4096 -np 4 -nr --numa distribute --spec-type draft-mtp
