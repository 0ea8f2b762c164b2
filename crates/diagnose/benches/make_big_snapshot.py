"""Write a large synthetic memory snapshot with the structure
torch.cuda.memory._dump_snapshot() writes, using only the stdlib pickle.

    python3 make_big_snapshot.py OUT.pickle TARGET_MB [PROTOCOL]

Structure and sharing follow torch/csrc/cuda/Module.cpp
(THCPModule_memorySnapshot) and torch/csrc/profiler/python/combined_traceback.cpp
(py_symbolize), as PyTorch 2.x writes them:
- key and action strings are single shared str objects (pickled once, then
  memo references);
- one dict per unique frame ({name, filename, line}), shared by every
  traceback that contains it; filename/name strings are new objects per frame;
- one *new* list per captured traceback (every allocation captures its own,
  so identical code paths still give distinct list objects); alloc,
  free_requested and free_completed of one block share it;
- trace entries are {action, addr (device_free for oom), size, stream,
  time_us, compile_context, frames}; compile_context is a new "N/A" string
  per entry;
- stacks='all': C++ frames of the recorder and the allocator are innermost
  (gather_with_cpp, CapturedTraceback::gather, unwind::unwind,
  DeviceCachingAllocator::malloc), then ATen/autograd, then Python frames of
  torch, a library (transformers) and the user's script.

Synthetic (no GPU needed) but structurally faithful; the bench and tests
never commit the file. Deterministic for a given target size.
"""
import os
import pickle
import random
import sys

MiB = 1 << 20

out_path = sys.argv[1]
target = int(float(sys.argv[2]) * MiB)
protocol = int(sys.argv[3]) if len(sys.argv) > 3 else pickle.DEFAULT_PROTOCOL
rng = random.Random(1234)

# ---- frames and code paths
cpp_recorder = [
    ("torch::unwind::unwind()", "??:0"),
    ("torch::CapturedTraceback::gather(bool, bool, bool)", "/pytorch/torch/csrc/profiler/combined_traceback.cpp"),
    ("torch::cuda::gather_with_cpp()", "/pytorch/torch/csrc/cuda/memory_snapshot.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
     "/pytorch/c10/cuda/CUDACachingAllocator.cpp"),
    ("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
     "/pytorch/c10/cuda/CUDACachingAllocator.cpp"),
    ("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
     "/pytorch/aten/src/ATen/EmptyTensor.cpp"),
]
aten_ops = ["mm", "addmm", "bmm", "softmax", "gelu", "layer_norm", "cat", "add", "mul", "embedding",
            "scaled_dot_product_attention", "_efficient_attention_forward", "clone", "to_copy"]
cpp_mid = [
    ("at::native::{op}_out(at::Tensor const&, at::Tensor const&)", "/pytorch/aten/src/ATen/native/{op}.cpp"),
    ("at::_ops::{op}::call(at::Tensor const&, at::Tensor const&)", "/pytorch/build/aten/src/ATen/Operators_2.cpp"),
    ("c10::impl::wrap_kernel_functor_unboxed_<{op}>::call", "/pytorch/aten/src/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h"),
    ("torch::autograd::VariableType::{op}(c10::DispatchKeySet, at::Tensor const&)", "/pytorch/torch/csrc/autograd/generated/VariableType_2.cpp"),
    ("PyObject_Call", "/usr/local/src/conda/python-3.11.7/Objects/call.c"),
    ("_PyEval_EvalFrameDefault", "/usr/local/src/conda/python-3.11.7/Python/ceval.c"),
]
SP = "/opt/conda/lib/python3.11/site-packages"
torch_py = [
    (f"{SP}/torch/nn/modules/linear.py", 125, "forward"),
    (f"{SP}/torch/nn/modules/module.py", 1750, "_call_impl"),
    (f"{SP}/torch/nn/modules/module.py", 1739, "_wrapped_call_impl"),
    (f"{SP}/torch/nn/functional.py", 2900, "layer_norm"),
    (f"{SP}/torch/nn/modules/sparse.py", 190, "forward"),
    (f"{SP}/torch/optim/adamw.py", 480, "_multi_tensor_adamw"),
    (f"{SP}/torch/optim/adamw.py", 220, "step"),
    (f"{SP}/torch/optim/optimizer.py", 487, "wrapper"),
    (f"{SP}/torch/autograd/graph.py", 823, "_engine_run_backward"),
    (f"{SP}/torch/autograd/__init__.py", 347, "backward"),
    (f"{SP}/torch/_tensor.py", 626, "backward"),
    (f"{SP}/torch/cuda/memory.py", 1030, "_record_memory_history"),
]
lib_py = [
    (f"{SP}/transformers/models/llama/modeling_llama.py", 260, "forward"),
    (f"{SP}/transformers/models/llama/modeling_llama.py", 330, "forward"),
    (f"{SP}/transformers/models/llama/modeling_llama.py", 610, "forward"),
    (f"{SP}/transformers/models/llama/modeling_llama.py", 1190, "forward"),
    (f"{SP}/transformers/modeling_utils.py", 4100, "_load_pretrained_model"),
]
user_py = [
    ("/home/user/proj/train.py", 88, "train_step"),
    ("/home/user/proj/train.py", 91, "train_step"),
    ("/home/user/proj/train.py", 95, "train_step"),
    ("/home/user/proj/train.py", 140, "main"),
    ("/home/user/proj/train.py", 160, "<module>"),
    ("/home/user/proj/data.py", 40, "collate"),
    ("/home/user/proj/model.py", 55, "forward"),
]

frame_objs = {}


def frame(name, filename, line):
    key = (name, filename, line)
    f = frame_objs.get(key)
    if f is None:
        # new str objects per frame, as py::str(std::string) makes them
        f = {"name": "".join(name), "filename": "".join(filename), "line": line}
        frame_objs[key] = f
    return f


def code_path(kind, op, depth_extra):
    fr = [frame(n, fn, 0) for n, fn in cpp_recorder]
    for n, fn in cpp_mid:
        fr.append(frame(n.replace("{op}", op), fn.replace("{op}", op), rng.randrange(100, 2000)))
    if kind == "forward":
        fr += [frame(n, f, l) for f, l, n in (torch_py[0], torch_py[1], torch_py[2])]
        fr += [frame(n, f, l) for f, l, n in lib_py[rng.randrange(0, 4):4]]
        fr += [frame(n, f, l) for f, l, n in (user_py[6], user_py[0])]
    elif kind == "backward":
        fr += [frame(n, f, l) for f, l, n in (torch_py[8], torch_py[9], torch_py[10])]
        fr += [frame(n, f, l) for f, l, n in (user_py[1],)]
    elif kind == "optimizer":
        fr += [frame(n, f, l) for f, l, n in (torch_py[5], torch_py[6], torch_py[7])]
        fr += [frame(n, f, l) for f, l, n in (user_py[2],)]
    elif kind == "load":  # from_pretrained in main()
        fr += [frame(n, f, l) for f, l, n in (lib_py[4],)]
    else:  # data
        fr += [frame(n, f, l) for f, l, n in (user_py[5],)]
    for _ in range(depth_extra):
        n, fn = cpp_mid[5]
        fr.append(frame(n, fn, rng.randrange(100, 5000)))
    fr += [frame(n, f, l) for f, l, n in (user_py[3], user_py[4])]
    return [(f["name"], f["filename"], f["line"]) for f in fr]


paths = []
for kind, count in (("forward", 160), ("backward", 90), ("optimizer", 30), ("data", 10), ("load", 10)):
    for _ in range(count):
        paths.append((kind, code_path(kind, rng.choice(aten_ops), rng.randrange(0, 12))))


path_frames = {}


def traceback_list(path):
    # a new list per captured traceback, holding the shared frame dicts
    key = id(path)
    fr = path_frames.get(key)
    if fr is None:
        fr = path_frames[key] = tuple(frame_objs[k] for k in path)
    return list(fr)


# ---- strings shared as Module.cpp shares them (one py::str each)
action_s = {a: "".join(a) for a in ("alloc", "free_requested", "free_completed", "segment_alloc",
                                     "segment_free", "oom", "snapshot")}
state_s = {s: "".join(s) for s in ("active_allocated", "active_pending_free", "inactive")}

BASE = 0x7F2A00000000
MiB2 = 2 << 20
trace = []
t = 1_700_000_000_000_000
# the caching allocator, simplified: segments carved by a bump pointer,
# freed blocks cached by size and reused (best fit of an exact size)
segments = []        # [start, total, bump]
free_by_size = {}    # size -> [addr]
block_seg = {}       # addr -> segment index
# about 100 bytes of pickle per trace entry (measured on this generator)
n_entries = max(1000, target // 100)
SIZES = (512, 4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20)

NA_HEAD, NA_TAIL = "N/", "A"
rand = rng.random


def entry(action, addr, size, frames, **kw):
    global t
    t += 1 + int(rand() * 40)
    d = {"action": action_s[action]}
    if action == "oom":
        d["device_free"] = kw["device_free"]
    else:
        d["addr"] = addr
    d["size"] = size
    d["stream"] = 0
    d["time_us"] = t
    d["compile_context"] = NA_HEAD + NA_TAIL  # a new str object each time
    if frames is not None:  # entries without a captured context have no frames key
        d["frames"] = frames
    trace.append(d)


def carve(size, frames):
    cached = free_by_size.get(size)
    if cached:
        return cached.pop()
    if not segments or segments[-1][2] + size > segments[-1][0] + segments[-1][1]:
        # cudaMalloc: 20 MiB for small-ish requests, else rounded to 2 MiB (get_allocation_size)
        total = (20 << 20) if size < (10 << 20) else -(-size // MiB2) * MiB2
        start = BASE if not segments else segments[-1][0] + segments[-1][1] + MiB2
        entry("segment_alloc", start, total, frames)
        segments.append([start, total, start])
    seg = segments[-1]
    addr = seg[2]
    seg[2] += size
    block_seg[addr] = len(segments) - 1
    return addr


by_kind = {}
for kind, path in paths:
    by_kind.setdefault(kind, []).append(path)


def pick(kind):
    ps = by_kind[kind]
    return ps[int(rand() * len(ps))]


def alloc(size, kind):
    frames = traceback_list(pick(kind))
    addr = carve(size, frames)
    entry("alloc", addr, size, frames)
    return (addr, size, frames)


def free(block):
    addr, size, frames = block
    entry("free_requested", addr, size, frames)
    entry("free_completed", addr, size, frames)
    free_by_size.setdefault(size, []).append(addr)


def noise():
    # small tensors (masks, indices, scalars) that come and go
    if rand() < 0.3:
        free(alloc(SIZES[int(rand() * 3)], "forward"))


# a training loop: parameters (loaded once), optimizer state (first
# step), then per step the forward's activations, kept until backward
# frees them layer by layer while gradients accumulate, the optimizer's
# temporaries, and zero_grad(set_to_none) freeing the gradients
LAYERS = 32
params = [alloc((16 << 20) if i % 4 else (64 << 20), "load") for i in range(LAYERS * 4)]
opt_state = []
step = 0
while len(trace) < n_entries:
    step += 1
    acts = [alloc(8 << 20, "data")]  # the batch
    for layer in range(LAYERS):
        for _ in range(3):
            acts.append(alloc((4 << 20) * (1 + int(rand() * 4)), "forward"))
            noise()
    grads = []
    for layer in reversed(range(LAYERS)):
        tmp = alloc(4 << 20, "backward")
        for _ in range(3):
            free(acts.pop())
        grads.extend(alloc(p[1], "backward") for p in params[layer * 4:layer * 4 + 4])
        free(tmp)
        noise()
    if not opt_state:
        opt_state = [alloc(p[1], "optimizer") for p in params for _ in range(2)]
    tmps = [alloc(p[1], "optimizer") for p in params[:16]]
    for t_ in tmps:
        free(t_)
    for g in grads:
        free(g)
    free(acts.pop())  # the batch

live = params + opt_state
# the step that fails: a longer sequence, activations twice as large
acts = []
for layer in range(LAYERS // 2):
    acts.append(alloc(32 << 20, "forward"))
live += acts
reserved = sum(sg[1] for sg in segments)
entry("oom", None, 2 << 30, traceback_list(pick("forward")), device_free=300 << 20)
entry("snapshot", 0, 0, None)

empty_frames = []  # Module.cpp: d[frames_s] = empty_frames (one shared list)

# ---- segments with blocks at the snapshot: every carved block (live or
# cached) in address order, then the uncarved rest of the segment
live_at = {addr: (size, frames) for addr, size, frames in live}
cached_at = {a: sz for sz, addrs in free_by_size.items() for a in addrs}
carved = {}
for a, si in block_seg.items():
    carved.setdefault(si, []).append(a)
segs = []
for si, (start, total, bump) in enumerate(segments):
    blocks = []
    used = 0
    for a in sorted(carved.get(si, [])):
        if a in live_at:
            size, frames = live_at[a]
            blocks.append({"address": a, "size": size, "requested_size": size - (size // 100),
                           "state": state_s["active_allocated"], "frames": frames})
            used += size
        else:
            blocks.append({"address": a, "size": cached_at[a], "requested_size": 0,
                           "state": state_s["inactive"], "frames": empty_frames})
    if bump < start + total:
        blocks.append({"address": bump, "size": start + total - bump, "requested_size": 0,
                       "state": state_s["inactive"], "frames": empty_frames})
    segs.append({"device": 0, "address": start, "total_size": total, "allocated_size": used,
                 "active_size": used, "requested_size": used, "stream": 0,
                 "segment_type": "large" if total > (2 << 20) else "small", "segment_pool_id": (0, 0),
                 "is_expandable": False, "frames": empty_frames, "blocks": blocks})

snapshot = {
    "segments": segs,
    "device_traces": [trace],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1,
                           "expandable_segments": False, "roundup_power2_divisions": {"1": 0}},
    "external_annotations": [],
}
with open(out_path + ".part", "wb") as f:
    pickle.dump(snapshot, f, protocol=protocol)
os.replace(out_path + ".part", out_path)
# tearing down tens of millions of objects takes minutes; nothing is left to flush
os._exit(0)
