"""Import time and call latency of the two ways to ship vramfit to Python, measured
in one run on the same machine (docs/python.md, "Why PyO3"):

  in-process: ``import vramfit`` (the PyO3 extension) and ``vramfit.estimate(...)``;
  subprocess: what a package that ships the binary as a script would do on each call:
              ``import subprocess, json``, run ``vramfit estimate … --json``, parse stdout.

    python python/bench.py PATH/TO/release/vramfit [RUNS]

Each import figure is a fresh interpreter; the call figures are the first call in that
interpreter and the median of 20 more. Min and median over RUNS interpreters (default 15).
"""

import statistics
import subprocess
import sys

ARGS = ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"]

IN_PROCESS = r"""
import time; t0 = time.perf_counter(); import vramfit; t1 = time.perf_counter()
r = vramfit.estimate('llama-3.1-8b', gpu='rtx-4090'); t2 = time.perf_counter()
ts = []
for _ in range(20):
    a = time.perf_counter(); vramfit.estimate('llama-3.1-8b', gpu='rtx-4090'); ts.append(time.perf_counter() - a)
assert r['fit']['fits'] is True
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, sorted(ts)[10] * 1e3)
"""

SUBPROCESS = r"""
import sys, time; t0 = time.perf_counter(); import subprocess, json; t1 = time.perf_counter()
def est():
    return json.loads(subprocess.run([sys.argv[1], *sys.argv[2:]], capture_output=True, check=True).stdout)
r = est(); t2 = time.perf_counter()
ts = []
for _ in range(20):
    a = time.perf_counter(); est(); ts.append(time.perf_counter() - a)
assert r['fit']['fits'] is True
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, sorted(ts)[10] * 1e3)
"""


def measure(code, extra, runs):
    cols = [[], [], []]
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code, *extra], capture_output=True, text=True, check=True)
        for c, v in zip(cols, out.stdout.split()):
            c.append(float(v))
    return cols


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    rows = [("in-process (PyO3)", measure(IN_PROCESS, [], runs)), ("subprocess (binary)", measure(SUBPROCESS, [binary, *ARGS], runs))]
    print(f"{'':22s} {'import':>22s} {'first call':>22s} {'later calls':>22s}   (ms: min / median of {runs})")
    for name, cols in rows:
        print(f"{name:22s} " + " ".join(f"{min(c):10.1f} / {statistics.median(c):9.1f}" for c in cols))


if __name__ == "__main__":
    main()
