#!/usr/bin/env python3
"""Build calibration/data/measured/llamacpp-cpu.jsonl from the start-up logs
of llamacpp_cpu_logs.sh (kept in calibration/data/measured/llamacpp-cpu-logs/).

Every figure is read from its log line verbatim (MiB as llama.cpp printed
it); nothing is edited. Run from the repository root:
  python3 calibration/harness/llamacpp_cpu_cases.py > calibration/data/measured/llamacpp-cpu.jsonl
"""
import json
import os
import re
import sys

D = "calibration/data/measured"
LOGS = f"{D}/llamacpp-cpu-logs"
HEADERS = f"{D}/llamacpp-cpu-headers"
SOURCE = "https://github.com/ggml-org/llama.cpp/tree/0c1e57098bba43ac29e6e3b677cdceebdd22334f"
ENV = ("this project's CPU-only build of ggml-org/llama.cpp@0c1e57098 (b11312; vendored by "
       "llama-cpp-python 0.3.36), GCC 12.2, -DGGML_NATIVE=ON, Release; AMD EPYC (AVX-512), 2 threads, "
       "24 GiB; 2026-12-04")
# file lengths written by gguf_random.py (the header files hold the first bytes only)
FILE_LEN = {
    "qwen3-0.6b": 1192249792,
    "qwen3-0.6b-q4_0": 335522240,
    "gemma-3-1b": 2000061312,
    "qwen3-30b-a3b-q4_0": 17218335008,
    "qwen3.5-27b-q4_0": 15138472896,
    "gpt-oss-20b-mxfp4": 13779659072,
    "qwen3-30b-a3b-8l-q4_0": 3161447168,
    "gemma-4-e2b-q8_0": 4938812640,
    "gemma-4-26b-a4b-q4_0": 14233264832,
}
MODEL = {
    "qwen3-0.6b": ("Qwen/Qwen3-0.6B", "F16", "qwen3"),
    "qwen3-0.6b-q4_0": ("Qwen/Qwen3-0.6B", "Q4_0 (every matrix, as --pure)", "qwen3"),
    "gemma-3-1b": ("google/gemma-3-1b-it", "F16", "gemma3"),
    "qwen3-30b-a3b-q4_0": ("Qwen/Qwen3-30B-A3B", "Q4_0 (router f32)", "qwen3moe"),
    "qwen3.5-27b-q4_0": ("Qwen/Qwen3.5-27B (trunk, no MTP layer)", "Q4_0", "qwen35"),
    "gpt-oss-20b-mxfp4": ("openai/gpt-oss-20b", "MXFP4 experts, f16 attention", "gpt-oss"),
    "qwen3-30b-a3b-8l-q4_0": ("Qwen/Qwen3-30B-A3B, layers cut to 8 of 48 (each layer at its real shape)",
                              "Q4_0 (router f32)", "qwen3moe"),
    "gemma-4-e2b-q8_0": ("google/gemma-4-E2B-it (text)", "Q8_0 (as convert_hf_to_gguf --outtype q8_0)", "gemma4"),
    "gemma-4-26b-a4b-q4_0": ("google/gemma-4-26B-A4B-it (text)", "Q4_0 (every matrix, as --pure; router f32)",
                             "gemma4"),
}
# id: (model, flags as passed)
RUNS = [
    ("qwen3-0.6b-np1", "qwen3-0.6b", "-c 4096 -np 1"),
    ("qwen3-0.6b-np4", "qwen3-0.6b", "-c 4096 -np 4"),
    ("qwen3-0.6b-np4-fa0", "qwen3-0.6b", "-c 4096 -np 4 -fa off"),
    ("qwen3-0.6b-c32k-np4", "qwen3-0.6b", "-c 32768 -np 4"),
    ("qwen3-0.6b-auto", "qwen3-0.6b", "-c 4096"),
    ("qwen3-0.6b-q4_0-np4", "qwen3-0.6b-q4_0", "-c 4096 -np 4"),
    ("gemma-3-1b-auto", "gemma-3-1b", "-c 8192"),
    ("gemma-3-1b-np1", "gemma-3-1b", "-c 8192 -np 1"),
    ("gemma-3-1b-np4", "gemma-3-1b", "-c 8192 -np 4"),
    ("qwen3-30b-a3b-q4_0-np4", "qwen3-30b-a3b-q4_0", "-c 4096 -np 4 -nr --numa distribute"),
    ("qwen3.5-27b-q4_0-np1", "qwen3.5-27b-q4_0", "-c 4096 -np 1 -nr --numa distribute"),
    ("qwen3.5-27b-q4_0-np4", "qwen3.5-27b-q4_0", "-c 4096 -np 4 -nr --numa distribute"),
    ("gpt-oss-20b-mxfp4-np1", "gpt-oss-20b-mxfp4", "-c 8192 -np 1 -nr --numa distribute"),
    ("gpt-oss-20b-mxfp4-np4", "gpt-oss-20b-mxfp4", "-c 8192 -np 4 -nr --numa distribute"),
    ("gemma-4-e2b-q8_0-c32k-np1", "gemma-4-e2b-q8_0", "-c 32768 -np 1 --numa distribute"),
    ("gemma-4-e2b-q8_0-c32k-np4", "gemma-4-e2b-q8_0", "-c 32768 -np 4 --numa distribute"),
    ("gemma-4-e2b-q8_0-c32k-np1-fa0", "gemma-4-e2b-q8_0", "-c 32768 -np 1 -fa off --numa distribute"),
    ("gemma-4-26b-a4b-q4_0-c32k-np1", "gemma-4-26b-a4b-q4_0", "-c 32768 -np 1 -nr --numa distribute"),
    ("gemma-4-26b-a4b-q4_0-c32k-np4", "gemma-4-26b-a4b-q4_0", "-c 32768 -np 4 -nr --numa distribute"),
    ("qwen3-30b-a3b-8l-q4_0-np4", "qwen3-30b-a3b-8l-q4_0", "-c 4096 -np 4"),
]
KEEP = re.compile(r"model buffer size|KV buffer size|RS buffer size|compute buffer size|output buffer size|"
                  r"llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|flash_attn|n_outputs_max) |"
                  r"Flash Attention|llama_kv_cache: size|llama_memory_recurrent: size|SWA KV cache|graph: nodes")


def mib(line):
    return float(re.search(r"=\s*([0-9.]+) MiB", line).group(1))


def case(rid, m, flags):
    lines = open(f"{LOGS}/{rid}.log").read().splitlines()
    quoted = [re.sub(r"^[0-9.]+ [IWE] ", "", l) for l in lines if KEEP.search(l)]
    get = lambda pat: [l for l in quoted if re.search(pat, l)]
    n = lambda key: int(re.search(r"=\s*(\d+)", get(rf"llama_context: {key}\s+=")[0]).group(1))
    fa = bool(get("Flash Attention enabled"))
    expect = {
        "model CPU_Mapped": mib(get("CPU_Mapped model buffer size")[0]),
        # the iSWA cache logs a KV buffer for its full and its sliding-window part: summed
        "kv CPU": round(sum(mib(l) for l in get("CPU KV buffer size")), 2),
        "compute host": mib(get("CPU compute buffer size")[0]),
        "output host": mib(get("CPU  output buffer size")[0]),
    }
    if get("CPU_REPACK model buffer size"):
        expect["model CPU_REPACK"] = mib(get("CPU_REPACK model buffer size")[0])
    if get("CPU RS buffer size"):
        expect["rs CPU"] = mib(get("CPU RS buffer size")[0])
    argv = flags.split()
    np_given = "-np" in argv
    name, quant, arch = MODEL[m]
    return {
        "id": f"cpu-{rid}",
        "source": SOURCE,
        "log": f"{LOGS}/{rid}.log",
        "environment": ENV,
        "build": "11312 (0c1e57098)",
        "model_file": f"{m}.gguf (calibration/harness/gguf_random.py {m})",
        "model": name,
        "quant": quant,
        "file_size": f"{FILE_LEN[m]} bytes",
        "command": f"llama-server -m {m}.gguf --host 127.0.0.1 --port 18091 -t 2 --no-warmup -lv 4 {flags}",
        "flags": {"ctx": n("n_ctx"), "ngl": 0, "ub": n("n_ubatch"), "b": n("n_batch"), "fa": fa,
                  "np": n("n_seq_max"), "ctk": "f16", "ctv": "f16",
                  # no -np: llama-server takes 4 slots and a unified cache (tools/server/server.cpp)
                  "kv_unified": not np_given, "gpus": 0, "nr": "-nr" in argv},
        "arch": {"arch": arch, "header": "the GGUF header llama.cpp loaded (field 'header')"},
        "header": f"{HEADERS}/{m}.gguf.header",
        "file_len": FILE_LEN[m],
        "recipe": "header",
        "era": "current",
        "order": "output_first",
        "quoted": quoted,
        "expect": expect,
        "assumptions": ("weights are zeros (a sparse file; memory lines depend on shapes and types only); "
                        "vocabulary 'none' with <arch>.vocab_size dummy tokens; CPU-only build, so -ngl has no "
                        "effect and --n-cpu-moe is meaningless (no GPU to keep experts off); kv CPU sums the "
                        "KV buffer lines of one context (an iSWA cache logs two)"
                        + ("; -nr: experts kept mapped instead of an anonymous CPU_REPACK copy the 24 GiB "
                           "machine could not hold, --numa distribute only turns off the mmap prefetch"
                           if "-nr" in argv else "")
                        + ("; the model's 48 layers cut to 8 (each layer's tensors at their real shapes) so the "
                           "CPU_REPACK copy of its Q4_0 experts fits in the machine's memory"
                           if "-8l-" in m else "")),
    }


# --- MTP (llama-server --spec-type draft-mtp) ---
# A file with its MTP block (gguf_random.py qwen3.5-27b-mtp-q4_0), with and
# without draft-mtp. With it the log holds two contexts: the target's, then,
# after "creating MTP draft context against the target model", the MTP
# context's (its KV cache over the NextN layer, its compute and output
# buffers), whose figures are the "mtp …" keys. The MTP context reserves its
# graph twice (again after "adding speculative implementation"): the same
# size both times in these logs; the first is quoted.
FILE_LEN["qwen3.5-27b-mtp-q4_0"] = 15377128480
MODEL["qwen3.5-27b-mtp-q4_0"] = ("Qwen/Qwen3.5-27B (with its MTP layer, text_config.mtp_num_hidden_layers = 1)",
                                 "Q4_0", "qwen35")
MTP_RUNS = [
    ("qwen3.5-27b-mtp-q4_0-np1", "qwen3.5-27b-mtp-q4_0", "-c 4096 -np 1 -nr --numa distribute"),
    ("qwen3.5-27b-mtp-q4_0-np1-draft-mtp", "qwen3.5-27b-mtp-q4_0",
     "-c 4096 -np 1 -nr --numa distribute --spec-type draft-mtp"),
    ("qwen3.5-27b-mtp-q4_0-np4", "qwen3.5-27b-mtp-q4_0", "-c 4096 -np 4 -nr --numa distribute"),
    ("qwen3.5-27b-mtp-q4_0-np4-draft-mtp", "qwen3.5-27b-mtp-q4_0",
     "-c 4096 -np 4 -nr --numa distribute --spec-type draft-mtp"),
]
# Qwen3.5-35B-A3B with its MTP layer (gguf_random.py qwen3.5-35b-a3b-mtp-q4_0): the MoE head
FILE_LEN["qwen3.5-35b-a3b-mtp-q4_0"] = 20049957056
MODEL["qwen3.5-35b-a3b-mtp-q4_0"] = ("Qwen/Qwen3.5-35B-A3B (with its MTP layer, text_config.mtp_num_hidden_layers = 1)",
                                     "Q4_0 (routers f32)", "qwen35moe")
MTP_RUNS += [
    ("qwen3.5-35b-a3b-mtp-q4_0-np1", "qwen3.5-35b-a3b-mtp-q4_0", "-c 4096 -np 1 -nr --numa distribute"),
    ("qwen3.5-35b-a3b-mtp-q4_0-np1-draft-mtp", "qwen3.5-35b-a3b-mtp-q4_0",
     "-c 4096 -np 1 -nr --numa distribute --spec-type draft-mtp"),
    ("qwen3.5-35b-a3b-mtp-q4_0-np4-draft-mtp", "qwen3.5-35b-a3b-mtp-q4_0",
     "-c 4096 -np 4 -nr --numa distribute --spec-type draft-mtp"),
]
MTP_KEEP = re.compile(r"creating MTP draft context|n_rs_seq|adding speculative implementation|unused tensor blk")


def case_mtp(rid, m, flags):
    c = case(rid, m, flags)
    lines = open(f"{LOGS}/{rid}.log").read().splitlines()
    quoted = [re.sub(r"^[0-9.]+ [IWE] ", "", l) for l in lines if KEEP.search(l) or MTP_KEEP.search(l)]
    at = next((i for i, l in enumerate(quoted) if "creating MTP draft context" in l), len(quoted))
    tgt, mtp = quoted[:at], quoted[at:]
    first = lambda part, pat: [l for l in part if re.search(pat, l)]
    c["quoted"] = quoted
    c["expect"]["kv CPU"] = round(sum(mib(l) for l in first(tgt, "CPU KV buffer size")), 2)
    c["expect"]["compute host"] = mib(first(tgt, "CPU compute buffer size")[0])
    c["expect"]["output host"] = mib(first(tgt, "CPU  output buffer size")[0])
    if mtp:
        c["expect"]["mtp kv CPU"] = mib(first(mtp, "CPU KV buffer size")[0])
        c["expect"]["mtp compute host"] = mib(first(mtp, "CPU compute buffer size")[0])
        c["expect"]["mtp output host"] = mib(first(mtp, "CPU  output buffer size")[0])
        c["flags"]["spec_type"] = "draft-mtp"
        c["assumptions"] += ("; --spec-type draft-mtp: the 'mtp …' figures are the MTP context's (the lines after "
                             "'creating MTP draft context'), the others the target's")
    return c


if __name__ == "__main__":
    for rid, m, flags in RUNS:
        assert os.path.exists(f"{LOGS}/{rid}.log"), rid
        print(json.dumps(case(rid, m, flags), ensure_ascii=False))
    for rid, m, flags in MTP_RUNS:
        assert os.path.exists(f"{LOGS}/{rid}.log"), rid
        print(json.dumps(case_mtp(rid, m, flags), ensure_ascii=False))
    sys.exit(0)
