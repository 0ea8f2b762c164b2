//! A pickler that writes what CPython's `pickle.dump(obj, protocol=4)`
//! writes for plain data (Lib/pickle.py: MEMOIZE after every container and
//! string, APPENDS/SETITEMS in batches of 1000, BINGET/LONG_BINGET for an
//! object written before), and a generator of memory snapshots shaped like
//! torch.cuda.memory._dump_snapshot() (frames and tracebacks shared as
//! torch/csrc/profiler/python/combined_traceback.cpp shares them; see
//! benches/make_big_snapshot.py for the same structure from Python).

#![allow(dead_code)]

use std::collections::HashMap;

pub struct Pickler {
    pub out: Vec<u8>,
    /// protocols 2 and 3 memoize with BINPUT/LONG_BINPUT, 4 and 5 with MEMOIZE
    protocol: u8,
    memo: u32,
    /// shared strings (one Python object each): text → memo index
    shared: HashMap<String, u32>,
}

/// CPython's `_BATCHSIZE`.
pub const BATCH: usize = 1000;

impl Default for Pickler {
    fn default() -> Self {
        Self::new()
    }
}

impl Pickler {
    pub fn new() -> Self {
        Self::with_protocol(4)
    }
    pub fn with_protocol(protocol: u8) -> Self {
        Pickler { out: vec![0x80, protocol], protocol, memo: 0, shared: HashMap::new() }
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b'.');
        self.out
    }
    /// MEMOIZE the object just written; its memo index.
    pub fn memoize(&mut self) -> u32 {
        let idx = self.memo;
        if self.protocol >= 4 {
            self.out.push(0x94);
        } else if idx < 256 {
            self.out.extend([b'q', idx as u8]);
        } else {
            self.out.push(b'r');
            self.out.extend(idx.to_le_bytes());
        }
        self.memo += 1;
        idx
    }
    pub fn get(&mut self, idx: u32) {
        if idx < 256 {
            self.out.extend([b'h', idx as u8]);
        } else {
            self.out.push(b'j');
            self.out.extend(idx.to_le_bytes());
        }
    }
    pub fn none(&mut self) {
        self.out.push(b'N');
    }
    pub fn bool(&mut self, b: bool) {
        self.out.push(if b { 0x88 } else { 0x89 });
    }
    pub fn int(&mut self, v: i64) {
        if (0..256).contains(&v) {
            self.out.extend([b'K', v as u8]);
        } else if (0..65536).contains(&v) {
            self.out.push(b'M');
            self.out.extend((v as u16).to_le_bytes());
        } else if i32::try_from(v).is_ok() {
            self.out.push(b'J');
            self.out.extend((v as i32).to_le_bytes());
        } else {
            // LONG1 with the fewest bytes, as pickle.encode_long does
            let mut b = v.to_le_bytes().to_vec();
            while b.len() > 1 {
                let last = b[b.len() - 1];
                let prev_sign = b[b.len() - 2] & 0x80;
                if (last == 0 && prev_sign == 0) || (last == 0xff && prev_sign != 0) {
                    b.pop();
                } else {
                    break;
                }
            }
            self.out.extend([0x8a, b.len() as u8]);
            self.out.extend(b);
        }
    }
    /// A new str object (written and memoized).
    pub fn str_new(&mut self, s: &str) -> u32 {
        if s.len() < 256 {
            self.out.extend([0x8c, s.len() as u8]);
        } else {
            self.out.push(b'X');
            self.out.extend((s.len() as u32).to_le_bytes());
        }
        self.out.extend(s.as_bytes());
        self.memoize()
    }
    /// A str shared as one object (a key, an action name): written once,
    /// then referenced.
    pub fn str_shared(&mut self, s: &str) {
        match self.shared.get(s) {
            Some(&i) => self.get(i),
            None => {
                let i = self.str_new(s);
                self.shared.insert(s.to_string(), i);
            }
        }
    }
    /// `{` + memo; then call items and `dict_end`.
    pub fn dict_begin(&mut self) -> u32 {
        self.out.push(b'}');
        self.memoize()
    }
    pub fn list_begin(&mut self) -> u32 {
        self.out.push(b']');
        self.memoize()
    }
    pub fn mark(&mut self) {
        self.out.push(b'(');
    }
    pub fn setitems(&mut self) {
        self.out.push(b'u');
    }
    pub fn appends(&mut self) {
        self.out.push(b'e');
    }
    pub fn setitem(&mut self) {
        self.out.push(b's');
    }
    pub fn append(&mut self) {
        self.out.push(b'a');
    }
    /// A dict of `n` items written by `item(p, i)` (each writes a key and
    /// a value), batched as CPython batches.
    pub fn dict(&mut self, n: usize, mut item: impl FnMut(&mut Pickler, usize)) -> u32 {
        let id = self.dict_begin();
        self.batched(n, &mut item, true);
        id
    }
    /// A list of `n` items written by `item(p, i)`.
    pub fn list(&mut self, n: usize, mut item: impl FnMut(&mut Pickler, usize)) -> u32 {
        let id = self.list_begin();
        self.batched(n, &mut item, false);
        id
    }
    fn batched(&mut self, n: usize, item: &mut dyn FnMut(&mut Pickler, usize), dict: bool) {
        let mut i = 0;
        while i < n {
            let k = (n - i).min(BATCH);
            if k == 1 {
                item(self, i);
                if dict {
                    self.setitem()
                } else {
                    self.append()
                }
            } else {
                self.mark();
                for j in i..i + k {
                    item(self, j);
                }
                if dict {
                    self.setitems()
                } else {
                    self.appends()
                }
            }
            i += k;
        }
    }
}

/// Frames of a generated traceback: (filename, line, name), innermost first.
fn code_paths() -> Vec<Vec<(String, i64, String)>> {
    let sp = "/opt/conda/lib/python3.11/site-packages";
    let mut paths = Vec::new();
    for k in 0..60i64 {
        let mut f: Vec<(String, i64, String)> = vec![
            ("??".into(), 0, "torch::unwind::unwind()".into()),
            (
                "/pytorch/torch/csrc/profiler/combined_traceback.cpp".into(),
                0,
                "torch::CapturedTraceback::gather(bool, bool, bool)".into(),
            ),
            ("/pytorch/torch/csrc/cuda/memory_snapshot.cpp".into(), 0, "torch::cuda::gather_with_cpp()".into()),
            (
                "/pytorch/c10/cuda/CUDACachingAllocator.cpp".into(),
                0,
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc".into(),
            ),
            ("/pytorch/aten/src/ATen/native/Linear.cpp".into(), 100 + k, "at::native::addmm_out".into()),
        ];
        match k % 3 {
            0 => {
                f.push((format!("{sp}/torch/nn/modules/linear.py"), 125, "forward".into()));
                f.push(("/home/user/proj/model.py".into(), 50 + k % 7, "forward".into()));
                f.push(("/home/user/proj/train.py".into(), 88, "train_step".into()));
            }
            1 => {
                f.push((format!("{sp}/torch/autograd/graph.py"), 823, "_engine_run_backward".into()));
                f.push(("/home/user/proj/train.py".into(), 91, "train_step".into()));
            }
            _ => {
                f.push((format!("{sp}/torch/optim/adamw.py"), 480, "_multi_tensor_adamw".into()));
                f.push(("/home/user/proj/train.py".into(), 95, "train_step".into()));
            }
        }
        f.push(("/home/user/proj/train.py".into(), 140, "main".into()));
        paths.push(f);
    }
    paths
}

/// A snapshot of at least `bytes` bytes: trace entries with their
/// tracebacks (a new list per allocation, sharing frame dicts), then
/// segments with the blocks live at the end. Returns the pickle and the
/// number of trace entries.
pub fn snapshot(bytes: usize) -> (Vec<u8>, usize) {
    snapshot_in(bytes, 4)
}

/// [`snapshot`] in pickle protocol `protocol` (2–5).
pub fn snapshot_in(bytes: usize, protocol: u8) -> (Vec<u8>, usize) {
    let mut p = Pickler::with_protocol(protocol);
    let paths = code_paths();
    // frame dict memo index per (path, position), created on first use
    let mut frame_memo: HashMap<(String, i64, String), u32> = HashMap::new();
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // plan the trace first: (action, addr, size, path index, alloc number)
    let per_entry = 59; // measured bytes per entry of this layout
    let n = (bytes / per_entry).max(100);
    let mut plan: Vec<(&str, u64, u64, usize, usize)> = Vec::with_capacity(n);
    let mut live: Vec<(u64, u64, usize, usize)> = Vec::new();
    let mut addr = 0x7f00_0000_0000u64;
    let mut allocs = 0usize;
    while plan.len() < n {
        if !live.is_empty() && (live.len() > 2000 || next() % 100 < 48) {
            let i = (next() as usize) % live.len();
            let (a, s, pi, an) = live.swap_remove(i);
            plan.push(("free_requested", a, s, pi, an));
            plan.push(("free_completed", a, s, pi, an));
        } else {
            let s = [512u64, 4096, 1 << 20, 4 << 20][(next() % 4) as usize];
            let pi = (next() as usize) % paths.len();
            plan.push(("alloc", addr, s, pi, allocs));
            live.push((addr, s, pi, allocs));
            allocs += 1;
            addr += s;
        }
    }
    // the traceback list object of each allocation (memo index once written)
    let mut tb_memo: HashMap<usize, u32> = HashMap::new();
    let mut write_tb = |p: &mut Pickler, frame_memo: &mut HashMap<(String, i64, String), u32>, pi: usize, an: usize| {
        if let Some(&m) = tb_memo.get(&an) {
            p.get(m);
            return;
        }
        let frames = &paths[pi];
        let m = p.list(frames.len(), |p, j| {
            let f = &frames[j];
            match frame_memo.get(f) {
                Some(&fm) => p.get(fm),
                None => {
                    let fm = p.dict(3, |p, k| match k {
                        0 => {
                            p.str_shared("name");
                            p.str_new(&f.2);
                        }
                        1 => {
                            p.str_shared("filename");
                            p.str_new(&f.0);
                        }
                        _ => {
                            p.str_shared("line");
                            p.int(f.1);
                        }
                    });
                    frame_memo.insert(f.clone(), fm);
                }
            }
        });
        tb_memo.insert(an, m);
    };
    let root = p.dict_begin();
    let _ = root;
    p.mark();
    // device_traces first (any key order is valid)
    p.str_shared("device_traces");
    p.list(1, |p, _| {
        p.list(plan.len(), |p, i| {
            let (action, a, s, pi, an) = plan[i];
            p.dict(7, |p, k| match k {
                0 => {
                    p.str_shared("action");
                    p.str_shared(action);
                }
                1 => {
                    p.str_shared("addr");
                    p.int(a as i64);
                }
                2 => {
                    p.str_shared("size");
                    p.int(s as i64);
                }
                3 => {
                    p.str_shared("stream");
                    p.int(0);
                }
                4 => {
                    p.str_shared("time_us");
                    p.int(1_700_000_000_000_000 + i as i64 * 7);
                }
                5 => {
                    p.str_shared("compile_context");
                    p.str_new("N/A");
                }
                _ => {
                    p.str_shared("frames");
                    write_tb(p, &mut frame_memo, pi, an);
                }
            });
        });
    });
    // segments: one per 64 live blocks, exactly covering them
    live.sort();
    let chunks: Vec<&[(u64, u64, usize, usize)]> = live.chunks(64).collect();
    p.str_shared("segments");
    p.list(chunks.len(), |p, si| {
        let c = chunks[si];
        let total: u64 = c.iter().map(|b| b.1).sum();
        p.dict(6, |p, k| match k {
            0 => {
                p.str_shared("device");
                p.int(0);
            }
            1 => {
                p.str_shared("address");
                p.int(c[0].0 as i64);
            }
            2 => {
                p.str_shared("total_size");
                p.int(total as i64);
            }
            3 => {
                p.str_shared("stream");
                p.int(0);
            }
            4 => {
                p.str_shared("segment_type");
                p.str_shared("large");
            }
            _ => {
                p.str_shared("blocks");
                p.list(c.len(), |p, bi| {
                    let (a, s, pi, an) = c[bi];
                    p.dict(5, |p, k| match k {
                        0 => {
                            p.str_shared("address");
                            p.int(a as i64);
                        }
                        1 => {
                            p.str_shared("size");
                            p.int(s as i64);
                        }
                        2 => {
                            p.str_shared("requested_size");
                            p.int(s as i64);
                        }
                        3 => {
                            p.str_shared("state");
                            p.str_shared("active_allocated");
                        }
                        _ => {
                            p.str_shared("frames");
                            write_tb(p, &mut frame_memo, pi, an);
                        }
                    });
                });
            }
        });
    });
    p.setitems();
    (p.finish(), plan.len())
}
