#!/usr/bin/env python3
"""Checks calibration/data/published/{memory,throughput}.jsonl against the format in
calibration/data/published/README.md. Standard library only; no network.

    python3 calibration/harness/check_published.py            # both files, repo-relative
    python3 calibration/harness/check_published.py --dir DIR  # another copy

Exit status 0 when every line parses and carries every required field with the right
type/enum, byte figures agree with value x unit, ids are unique and the minimum counts
per group hold; 1 otherwise, with one line per problem (file:line: field: what was expected).
"""
import argparse
import json
import math
import os
import sys
from collections import Counter

MEM_GROUPS = {"qlora", "lora", "full", "serving", "multi_gpu", "runtime"}
TPUT_GROUPS = {"full", "lora", "qlora", "offload", "serving", "inference"}
CONFIDENCE = {"high", "medium", "low"}
SCOPES = {"per_gpu", "rank0", "max_over_gpus", "total"}
MEM_WHAT = {
    "allocated_peak", "active_peak", "reserved_peak", "reserved_peak_model_init", "allocated_after_train",
    "nvidia_smi", "nvidia_smi_peak_minus_initial", "nvidia_smi_after_weights_load",
    "reported_vram_unspecified", "reported_memory_unspecified",
    "engine_weights", "engine_kv_pool", "engine_activation_peak", "engine_non_torch", "engine_cuda_graph",
    "delta_device_memory_per_communicator", "delta_non_pytorch_memory", "delta_reported_memory",
}
BYTE_UNITS = {"B": 1, "MB": 10**6, "GB": 10**9, "MiB": 2**20, "GiB": 2**30}
COUNT_UNITS = {"tokens", "blocks"}
TPUT_UNITS = {"tokens/s", "tokens/s/GPU", "TFLOPS/GPU", "hardware TFLOPS/GPU", "percent", "s"}
TPUT_PER = {"per_gpu", "total"}
MIN_MEM = {"qlora": 10, "lora": 10, "full": 10, "serving": 10, "multi_gpu": 10}
MIN_MEM_TOTAL = 60
MIN_TPUT_TOTAL = 25


class Checker:
    def __init__(self):
        self.problems = []

    def bad(self, where, field, expected):
        self.problems.append(f"{where}: {field}: {expected}")

    def need(self, obj, key, typ, where, prefix=""):
        if not isinstance(obj, dict) or key not in obj:
            self.bad(where, prefix + key, "missing")
            return None
        v = obj[key]
        if typ is not None and not isinstance(v, typ):
            self.bad(where, prefix + key, f"expected {typ}, got {type(v).__name__}")
            return None
        return v

    def common(self, r, where, groups):
        self.need(r, "id", str, where)
        g = self.need(r, "group", str, where)
        if g is not None and g not in groups:
            self.bad(where, "group", f"one of {sorted(groups)}, got {g!r}")
        u = self.need(r, "url", str, where)
        if u is not None and not u.startswith("https://"):
            self.bad(where, "url", "an https:// address")
        self.need(r, "source", dict, where)
        q = self.need(r, "quote", str, where)
        if q is not None and not q.strip():
            self.bad(where, "quote", "the exact line(s) from the source, non-empty")
        hw = self.need(r, "hardware", dict, where)
        if hw is not None:
            self.need(hw, "gpu", str, where, "hardware.")
            self.need(hw, "count", (int, str), where, "hardware.")
            if "interconnect" not in hw:
                self.bad(where, "hardware.interconnect", "missing (null when one GPU)")
        fw = self.need(r, "framework", dict, where)
        if fw is not None:
            self.need(fw, "name", str, where, "framework.")
            self.need(fw, "version", str, where, "framework.")
        if "model" not in r:
            self.bad(where, "model", "missing (null for runtime cases without a model)")
        elif r["model"] is not None:
            m = r["model"]
            for k in ("family", "hidden_size", "num_layers", "num_attention_heads", "num_key_value_heads",
                      "intermediate_size", "vocab_size", "tie_word_embeddings", "arch_source"):
                if k not in m:
                    self.bad(where, "model." + k, "missing (null if the source does not give it)")
        wl = self.need(r, "workload", dict, where)
        if wl is not None:
            self.need(wl, "task", str, where, "workload.")
            self.need(wl, "parallelism", dict, where, "workload.")
        a = self.need(r, "assumptions", list, where)
        if a is not None and not all(isinstance(x, str) for x in a):
            self.bad(where, "assumptions", "list of strings")
        c = self.need(r, "confidence", str, where)
        if c is not None and c not in CONFIDENCE:
            self.bad(where, "confidence", f"one of {sorted(CONFIDENCE)}")

    def measurement(self, m, where, prefix):
        if not isinstance(m, dict):
            self.bad(where, prefix, "object")
            return
        for k, t in (("value", (int, float)), ("value_as_printed", str), ("unit", str), ("unit_definition", str),
                     ("bytes", int), ("resolution_bytes", int), ("what", str), ("scope", str), ("how", str)):
            self.need(m, k, t, where, prefix + ".")
        what, unit, scope = m.get("what"), m.get("unit"), m.get("scope")
        if what is not None and what not in MEM_WHAT:
            self.bad(where, prefix + ".what", f"one of {sorted(MEM_WHAT)}, got {what!r}")
        if scope is not None and scope not in SCOPES:
            self.bad(where, prefix + ".scope", f"one of {sorted(SCOPES)}, got {scope!r}")
        if unit is not None and unit not in BYTE_UNITS and unit not in COUNT_UNITS:
            self.bad(where, prefix + ".unit", f"one of {sorted(BYTE_UNITS) + sorted(COUNT_UNITS)}")
        b, v = m.get("bytes"), m.get("value")
        if isinstance(b, int) and b <= 0:
            self.bad(where, prefix + ".bytes", "positive integer")
        if unit in BYTE_UNITS and isinstance(v, (int, float)) and isinstance(b, int):
            want = round(v * BYTE_UNITS[unit])
            if abs(want - b) > 1:
                self.bad(where, prefix + ".bytes", f"value x unit = {want}, got {b}")

    def memory_line(self, r, where):
        self.common(r, where, MEM_GROUPS)
        self.measurement(r.get("measured"), where, "measured")
        for i, o in enumerate(r.get("other_measurements", []) or []):
            self.measurement(o, where, f"other_measurements[{i}]")

    def throughput_line(self, r, where):
        self.common(r, where, TPUT_GROUPS)
        f = self.need(r, "figure", dict, where)
        for i, x in enumerate(([f] if f else []) + list(r.get("other_figures", []) or [])):
            p = "figure" if i == 0 else f"other_figures[{i - 1}]"
            v = self.need(x, "value", (int, float), where, p + ".")
            self.need(x, "value_as_printed", str, where, p + ".")
            self.need(x, "what", str, where, p + ".")
            u = self.need(x, "unit", str, where, p + ".")
            per = self.need(x, "per", str, where, p + ".")
            if u is not None and u not in TPUT_UNITS:
                self.bad(where, p + ".unit", f"one of {sorted(TPUT_UNITS)}")
            if per is not None and per not in TPUT_PER:
                self.bad(where, p + ".per", f"one of {sorted(TPUT_PER)}")
            if isinstance(v, (int, float)) and not (v > 0 and math.isfinite(v)):
                self.bad(where, p + ".value", "positive finite number")

    def file(self, path, kind):
        rows = []
        try:
            fh = open(path, encoding="utf-8")
        except OSError as e:
            self.bad(path, "file", f"readable ({e.strerror})")
            return rows
        with fh:
            for n, text in enumerate(fh, 1):
                where = f"{os.path.basename(path)}:{n}"
                if not text.strip():
                    self.bad(where, "line", "one JSON object (blank line found)")
                    continue
                try:
                    r = json.loads(text)
                except json.JSONDecodeError as e:
                    self.bad(where, "line", f"valid JSON ({e.msg} at column {e.colno})")
                    continue
                if not isinstance(r, dict):
                    self.bad(where, "line", "a JSON object")
                    continue
                (self.memory_line if kind == "memory" else self.throughput_line)(r, where)
                rows.append(r)
        ids = Counter(r.get("id") for r in rows)
        for i, c in ids.items():
            if c > 1:
                self.bad(os.path.basename(path), "id", f"unique, {i!r} appears {c} times")
        return rows


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(here, "..", "data", "published"))
    args = ap.parse_args(argv)
    ck = Checker()
    mem = ck.file(os.path.join(args.dir, "memory.jsonl"), "memory")
    tput = ck.file(os.path.join(args.dir, "throughput.jsonl"), "throughput")
    groups = Counter(r.get("group") for r in mem)
    if len(mem) < MIN_MEM_TOTAL:
        ck.bad("memory.jsonl", "cases", f"at least {MIN_MEM_TOTAL}, got {len(mem)}")
    for g, n in MIN_MEM.items():
        if groups.get(g, 0) < n:
            ck.bad("memory.jsonl", f"group {g}", f"at least {n} cases, got {groups.get(g, 0)}")
    if len(tput) < MIN_TPUT_TOTAL:
        ck.bad("throughput.jsonl", "cases", f"at least {MIN_TPUT_TOTAL}, got {len(tput)}")
    for p in ck.problems:
        print(p)
    tg = Counter(r.get("group") for r in tput)
    print(f"memory.jsonl: {len(mem)} cases {dict(sorted(groups.items()))}; "
          f"throughput.jsonl: {len(tput)} cases {dict(sorted(tg.items()))}; problems: {len(ck.problems)}")
    return 1 if ck.problems else 0


if __name__ == "__main__":
    sys.exit(main())
