//! A memory-only replica of ggml's graph allocator, so compute buffers are
//! computed the way llama.cpp computes them instead of guessed.
//!
//! llama.cpp sizes its compute buffers by building the worst-case graph
//! (a full micro-batch against a full KV cache) and asking
//! `ggml_backend_sched_reserve` how much each backend needs. That number is
//! what `ggml_gallocr` reaches when it walks the graph in order, placing
//! every node in a per-backend buffer with a best-fit free list and freeing
//! each tensor after its last consumer. Nothing here runs a kernel: a
//! [`Graph`] holds tensor sizes, sources and views; [`Graph::expand`] orders
//! nodes exactly as `ggml_build_forward_expand` does (depth-first, sources
//! left to right); [`Graph::allocate`] replays the allocator.
//!
//! Replicated from ggml (`src/ggml-alloc.c`, `src/ggml-backend.cpp`, read at
//! ggml-org/ggml commit d99724f2):
//! * `ggml_dyn_tallocr_alloc`: best fit among the free blocks except the
//!   last one (ties go to the later block), else the last block, which
//!   grows the buffer; sizes padded to the buffer type's alignment;
//! * `ggml_dyn_tallocr_free_bytes`: freed ranges merge with neighbours;
//! * `ggml_gallocr_allocate_node`: an op that may run in place (add, mul,
//!   scale, unary, rope, rms_norm, soft_max, …) takes over its first source
//!   that has exactly one remaining consumer, no views, the same layout and
//!   is not a graph output; a *view* source is never taken over (its hash
//!   node is never marked allocated, so `ggml_gallocr_is_own` is false);
//! * parents are freed when their consumer count reaches zero; a view
//!   releases its source when the last view and consumer are done;
//! * `ggml_backend_sched_split_graph`: a source on another backend is
//!   copied into the consumer's backend once per (tensor, backend); the
//!   copy is a plain node allocated at the start of its split and freed
//!   after its last consumer (only pipeline parallelism, `n_copies > 1`,
//!   pins copies as inputs).
//!
//! Checked against real ggml: the same graphs fed to `ggml_gallocr_reserve`
//! (ggml d99724f2, CPU buffer type) give the byte counts in the tests, and
//! the llama.cpp builders in [`crate::compute`] reproduce published
//! `compute buffer size` lines (calibration/data/published/llamacpp.jsonl).

use std::collections::HashMap;
use vramfit_core::CoreError;

/// Index of a tensor in a [`Graph`].
pub type TensorId = usize;

/// Where a tensor lives: the CPU (host) buffer or a GPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    Cpu,
    Gpu(u32),
}

/// What the allocator needs to know about an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// no op: a leaf (weight, KV cache, graph input) or a scheduler copy
    None,
    /// a view of another tensor (view, reshape, permute, transpose): no memory
    View,
    /// writes into another tensor's memory (`ggml_cpy`, `ggml_set_rows`):
    /// no memory, runs where the destination lives
    Store,
    /// may reuse a source's memory (`ggml_op_can_inplace`)
    Inplace,
    /// needs its own memory (mul_mat, cont, norm, get_rows, flash_attn, …)
    Fresh,
}

/// One tensor of the graph.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: &'static str,
    /// bytes as `ggml_backend_buft_get_alloc_size` reports them
    pub bytes: u64,
    /// (type tag, shape) — `ggml_are_same_layout` compares these
    pub layout: (u8, [u64; 4]),
    pub op: OpKind,
    pub srcs: Vec<TensorId>,
    /// the tensor whose memory a view aliases (always the root, as ggml does)
    pub view_src: Option<TensorId>,
    /// memory not owned by the compute allocator (weights, KV cache)
    pub external: bool,
    /// a model weight (buffer usage WEIGHTS): ops that read it run where it is
    pub weight: bool,
    /// a host weight in the CPU's repack buffer (not a host buffer to ggml):
    /// a GPU never takes over the ops reading it
    pub repacked: bool,
    /// `ggml_set_input`: allocated before everything else, on the host
    pub input: bool,
    /// `ggml_set_output`: never freed, never reused in place
    pub output: bool,
    /// rows the op processes (`get_op_batch_size`): a GPU takes over an op
    /// whose weight is in host memory from 32 rows on (CUDA's `offload_op`)
    pub rows: u64,
    /// false for ops a GPU never takes over (`get_rows`; `rope`, whose tiny
    /// frequency weight ggml ignores when choosing)
    pub offloadable: bool,
    /// backend, fixed (externals, inputs, pins) or chosen by [`Graph::schedule`]
    pub device: Option<Device>,
}

/// A graph under construction and its execution order.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub tensors: Vec<Tensor>,
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    visited: Vec<bool>,
}

/// Peak bytes of each backend's compute buffer.
pub type BufferSizes = Vec<(Device, u64)>;

/// `offload_op` threshold of the CUDA backend (`min_batch_size = 32` in
/// `ggml_backend_cuda_device_offload_op`).
pub const OFFLOAD_MIN_BATCH: u64 = 32;

/// Name of the scheduler's copies of split inputs.
const SCHED_COPY: &str = "sched copy";

/// `GGML_SCHED_MAX_COPIES`: copies of every input kept by a pipeline-
/// parallel scheduler (ggml-backend.cpp).
pub const PIPELINE_COPIES: u32 = 4;

/// `GGML_SCHED_MAX_SPLIT_INPUTS` (= `GGML_MAX_SRC`, ggml-backend.cpp).
pub const MAX_SPLIT_INPUTS: usize = 10;

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    fn push(&mut self, t: Tensor) -> TensorId {
        self.tensors.push(t);
        self.visited.push(false);
        self.tensors.len() - 1
    }

    fn blank(name: &'static str) -> Tensor {
        Tensor {
            name,
            bytes: 0,
            layout: (255, [0; 4]),
            op: OpKind::None,
            srcs: vec![],
            view_src: None,
            external: false,
            weight: false,
            repacked: false,
            input: false,
            output: false,
            rows: 0,
            offloadable: true,
            device: None,
        }
    }

    /// A model weight living in `device`'s model buffer.
    pub fn weight(&mut self, name: &'static str, bytes: u64, device: Device) -> TensorId {
        self.push(Tensor {
            bytes,
            layout: (254, [bytes, 1, 1, 1]),
            external: true,
            weight: true,
            device: Some(device),
            ..Graph::blank(name)
        })
    }

    /// A KV-cache (or recurrent-state) tensor living in `device`'s KV buffer.
    pub fn cache(&mut self, name: &'static str, bytes: u64, device: Device) -> TensorId {
        self.push(Tensor {
            bytes,
            layout: (254, [bytes, 1, 1, 1]),
            external: true,
            device: Some(device),
            ..Graph::blank(name)
        })
    }

    /// A graph input (`ggml_set_input`): llama.cpp's inputs live on the host.
    pub fn input(&mut self, name: &'static str, ty: u8, ne: [u64; 4], bytes: u64) -> TensorId {
        self.push(Tensor { bytes, layout: (ty, ne), input: true, device: Some(Device::Cpu), ..Graph::blank(name) })
    }

    /// An op producing a new tensor of `bytes` with the given layout,
    /// processing `rows` rows; its backend is chosen by [`Graph::schedule`].
    #[allow(clippy::too_many_arguments)]
    pub fn op(
        &mut self,
        name: &'static str,
        kind: OpKind,
        ty: u8,
        ne: [u64; 4],
        bytes: u64,
        srcs: &[TensorId],
        rows: u64,
    ) -> TensorId {
        debug_assert!(matches!(kind, OpKind::Inplace | OpKind::Fresh));
        self.push(Tensor { bytes, layout: (ty, ne), op: kind, srcs: srcs.to_vec(), rows, ..Graph::blank(name) })
    }

    /// Fix the backend of an op (llama.cpp pins per-layer `norm` results
    /// to the layer's device under full offload).
    pub fn pin(&mut self, t: TensorId, device: Device) {
        self.tensors[t].device = Some(device);
    }

    /// Mark an op a GPU never takes over from the host.
    pub fn not_offloadable(&mut self, t: TensorId) {
        self.tensors[t].offloadable = false;
    }

    /// A view of `src`.
    pub fn view(&mut self, name: &'static str, src: TensorId) -> TensorId {
        let root = self.tensors[src].view_src.unwrap_or(src);
        self.push(Tensor { op: OpKind::View, srcs: vec![src], view_src: Some(root), ..Graph::blank(name) })
    }

    /// `ggml_cpy(src, dst)` / `ggml_set_rows(dst, src, idx)`: writes `src`
    /// into `dst`'s memory; extra sources (row indices) may be given.
    pub fn store(&mut self, name: &'static str, src: TensorId, dst: TensorId, extra: &[TensorId]) -> TensorId {
        let root = self.tensors[dst].view_src.unwrap_or(dst);
        let mut srcs = vec![src];
        srcs.extend_from_slice(extra);
        self.push(Tensor { op: OpKind::Store, srcs, view_src: Some(root), ..Graph::blank(name) })
    }

    /// Mark a result as a graph output (`ggml_set_output`).
    pub fn set_output(&mut self, t: TensorId) {
        self.tensors[t].output = true;
    }

    /// `ggml_build_forward_expand`: append `t` and its unvisited ancestors,
    /// depth first, sources left to right (ggml's default eval order).
    pub fn expand(&mut self, t: TensorId) {
        if self.visited[t] {
            return;
        }
        // iterative post-order DFS: graphs have tens of thousands of nodes
        self.visited[t] = true;
        let mut stack: Vec<(TensorId, usize)> = vec![(t, 0)];
        while let Some((id, i)) = stack.pop() {
            if i < self.tensors[id].srcs.len() {
                stack.push((id, i + 1));
                let s = self.tensors[id].srcs[i];
                if !self.visited[s] {
                    self.visited[s] = true;
                    stack.push((s, 0));
                }
            } else if self.tensors[id].op == OpKind::None {
                self.leafs.push(id);
            } else {
                self.nodes.push(id);
            }
        }
    }

    /// Execution order (nodes only).
    pub fn nodes(&self) -> &[TensorId] {
        &self.nodes
    }

    fn root(&self, id: TensorId) -> TensorId {
        self.tensors[id].view_src.unwrap_or(id)
    }

    /// Choose a backend for every node as `ggml_backend_sched_split_graph`
    /// does: (1) an op reading a weight runs where the weight is, unless the
    /// weight is in host memory and a GPU exists, `op_offload` is on and the
    /// op has at least [`OFFLOAD_MIN_BATCH`] rows, in which case GPU 0 takes
    /// it (the weight is copied over); a store runs where its destination
    /// is; (2) unassigned ops inherit from neighbours: GPUs expand down then
    /// up, then any backend down then up; views go where their source is.
    pub fn schedule(&mut self, has_gpu: bool, op_offload: bool) {
        let nodes = self.nodes.clone();
        // pass 1
        for &n in &nodes {
            if self.tensors[n].device.is_some() {
                continue;
            }
            let t = &self.tensors[n];
            let dev = match t.op {
                OpKind::Store => self.tensors[self.root(n)].device,
                OpKind::View => None,
                _ => t.srcs.iter().find_map(|&s| {
                    let r = self.root(s);
                    let rt = &self.tensors[r];
                    if !rt.weight {
                        return None;
                    }
                    let d = rt.device?;
                    if d == Device::Cpu
                        && has_gpu
                        && op_offload
                        && !rt.repacked
                        && t.offloadable
                        && t.rows >= OFFLOAD_MIN_BATCH
                    {
                        Some(Device::Gpu(0))
                    } else {
                        Some(d)
                    }
                }),
            };
            self.tensors[n].device = dev;
        }
        // pass 2: expand gpu down/up, then the rest down/up (views skipped)
        let order: Vec<TensorId> = nodes.iter().copied().filter(|&n| self.tensors[n].op != OpKind::View).collect();
        let expand = |g: &mut Graph, it: &mut dyn Iterator<Item = TensorId>, gpu_only: bool| {
            let mut cur: Option<Device> = None;
            for n in it {
                match g.tensors[n].device {
                    Some(d) => cur = if gpu_only && d == Device::Cpu { None } else { Some(d) },
                    None => {
                        if let Some(d) = cur {
                            g.tensors[n].device = Some(d);
                        }
                    }
                }
            }
        };
        expand(self, &mut order.clone().into_iter(), true);
        expand(self, &mut order.clone().into_iter().rev(), true);
        expand(self, &mut order.clone().into_iter(), false);
        expand(self, &mut order.clone().into_iter().rev(), false);
        for &n in &order {
            if self.tensors[n].device.is_none() {
                self.tensors[n].device = Some(Device::Cpu);
            }
        }
        for &n in &nodes {
            if self.tensors[n].op == OpKind::View {
                let r = self.root(n);
                self.tensors[n].device = Some(self.tensors[r].device.unwrap_or(Device::Cpu));
            }
        }
    }

    fn dev(&self, tensors: &[Tensor], id: TensorId) -> Device {
        let r = tensors[id].view_src.unwrap_or(id);
        tensors[r].device.or(tensors[id].device).unwrap_or(Device::Cpu)
    }

    /// Insert the scheduler's copies as `ggml_backend_sched_split_graph`
    /// does. Nodes run in splits: a split ends where the device changes, and
    /// also before a node reading a weight from another device's memory
    /// when the split already has inputs ("by starting a new split, the
    /// memory of the previously offloaded weights can be reused"), or when
    /// the split is at [`MAX_SPLIT_INPUTS`] and the node needs a new copy.
    /// Every source used on a device other than its own is copied to that
    /// device once (later splits reuse the copy) at the start of the split
    /// that first needs it, after a no-op node reading the source
    /// (`input_dep`) that keeps the source alive until then. Views belong to
    /// whichever split their position falls in.
    fn split(&self) -> (Vec<Tensor>, Vec<TensorId>) {
        let mut tensors = self.tensors.clone();
        let mut order: Vec<TensorId> = Vec::with_capacity(self.nodes.len() * 2);
        let mut copies: HashMap<(TensorId, Device), TensorId> = HashMap::new();
        let mut cur: Option<Device> = None;
        let mut inputs: Vec<TensorId> = Vec::new(); // dep, copy, dep, copy, …
        let mut n_inputs = 0usize;
        let mut body: Vec<TensorId> = Vec::new();
        for &n in &self.nodes {
            if tensors[n].op == OpKind::View {
                body.push(n); // a view reads its source where it lives
                continue;
            }
            let dev = tensors[n].device.unwrap_or(Device::Cpu);
            let foreign = |ts: &Vec<Tensor>, s: TensorId| self.dev(ts, s) != dev;
            let mut new_split = cur != Some(dev);
            if !new_split && n_inputs > 0 {
                let reads_foreign_weight = tensors[n].srcs.iter().any(|&s| {
                    let r = tensors[s].view_src.unwrap_or(s);
                    tensors[r].weight && foreign(&tensors, s)
                });
                let needs_new_copy = n_inputs == MAX_SPLIT_INPUTS
                    && tensors[n].srcs.iter().any(|&s| foreign(&tensors, s) && !copies.contains_key(&(s, dev)));
                new_split = reads_foreign_weight || needs_new_copy;
            }
            if new_split {
                order.append(&mut inputs);
                order.append(&mut body);
                n_inputs = 0;
                cur = Some(dev);
            }
            for k in 0..tensors[n].srcs.len() {
                let s = tensors[n].srcs[k];
                if !foreign(&tensors, s) {
                    continue;
                }
                let c = match copies.get(&(s, dev)) {
                    Some(&c) => c,
                    None => {
                        let st = &tensors[s];
                        // a copied view carries its source's extent (cache views
                        // span the layer's cache at the reserve's full n_kv)
                        let (bytes, layout) = if st.op == OpKind::View {
                            let r = &tensors[st.view_src.unwrap_or(s)];
                            (r.bytes, r.layout)
                        } else {
                            (st.bytes, st.layout)
                        };
                        // ggml-backend's `input_dep`: a no-op node reading the
                        // source just before the copy, so that the source is
                        // freed there (not before) when nothing else reads it
                        let src_dev = self.dev(&tensors, s);
                        tensors.push(Tensor {
                            srcs: vec![s],
                            external: true,
                            device: Some(src_dev),
                            ..Graph::blank("sched input dep")
                        });
                        inputs.push(tensors.len() - 1);
                        tensors.push(Tensor { bytes, layout, device: Some(dev), ..Graph::blank(SCHED_COPY) });
                        let c = tensors.len() - 1;
                        copies.insert((s, dev), c);
                        inputs.push(c);
                        n_inputs += 1;
                        c
                    }
                };
                tensors[n].srcs[k] = c;
            }
            body.push(n);
        }
        order.append(&mut inputs);
        order.append(&mut body);
        (tensors, order)
    }

    /// Replay `ggml_gallocr` on the scheduled, split graph: the peak of each
    /// device's buffer, allocations padded to `alignment(device)` bytes.
    /// With `pipeline_copies` > 1 (a pipeline-parallel scheduler: several
    /// GPUs, every layer offloaded) every graph input and every split input
    /// is kept that many times, allocated before any node and never freed
    /// (`ggml_backend_sched_split_graph` adds them as input+output leafs).
    /// Call [`Graph::schedule`] first.
    pub fn allocate(&self, alignment: &dyn Fn(Device) -> u64, pipeline_copies: u32) -> Result<BufferSizes, CoreError> {
        let (mut tensors, order) = self.split();
        let n = tensors.len();
        let mut children = vec![0u32; n];
        let mut views = vec![0u32; n];
        let mut allocated = vec![false; n];
        let mut offset = vec![0u64; n];
        let mut pools: HashMap<Device, Pool> = HashMap::new();
        if pipeline_copies > 1 {
            let kept: Vec<TensorId> = self
                .leafs
                .iter()
                .copied()
                .filter(|&id| tensors[id].input)
                .chain(order.iter().copied().filter(|&id| tensors[id].name == SCHED_COPY))
                .collect();
            for id in kept {
                let d = tensors[id].device.unwrap_or(Device::Cpu);
                let pool = pools.entry(d).or_insert_with(|| Pool::new(alignment(d).max(1)));
                for _ in 0..pipeline_copies {
                    pool.alloc(tensors[id].bytes)?;
                }
                // held for good: never allocated again, never freed
                tensors[id].external = true;
                tensors[id].output = true;
            }
        }
        for &id in &order {
            let t = &tensors[id];
            if matches!(t.op, OpKind::View | OpKind::Store) {
                if let Some(root) = t.view_src {
                    views[root] += 1;
                }
            }
            for &s in &t.srcs {
                children[s] += 1;
            }
        }
        let dev_of = |t: &Tensor| t.device.unwrap_or(Device::Cpu);
        let alloc = |id: TensorId,
                     allocated: &mut Vec<bool>,
                     offset: &mut Vec<u64>,
                     pools: &mut HashMap<Device, Pool>,
                     children: &Vec<u32>,
                     views: &Vec<u32>|
         -> Result<(), CoreError> {
            let t = &tensors[id];
            if allocated[id] || t.external || matches!(t.op, OpKind::View | OpKind::Store) {
                return Ok(());
            }
            allocated[id] = true;
            if t.op == OpKind::Inplace {
                for &p in &t.srcs {
                    let pt = &tensors[p];
                    // a view is never "own" (its hash node is never allocated)
                    if matches!(pt.op, OpKind::View | OpKind::Store) || !allocated[p] || pt.output {
                        continue;
                    }
                    if pt.layout != t.layout || dev_of(pt) != dev_of(t) {
                        continue;
                    }
                    if children[p] == 1 && views[p] == 0 {
                        offset[id] = offset[p];
                        allocated[p] = false; // the node now owns the memory
                        return Ok(());
                    }
                }
            }
            let d = dev_of(t);
            let pool = pools.entry(d).or_insert_with(|| Pool::new(alignment(d).max(1)));
            offset[id] = pool.alloc(t.bytes)?;
            Ok(())
        };
        // graph inputs are allocated before anything else
        for &id in &self.leafs {
            if tensors[id].input {
                alloc(id, &mut allocated, &mut offset, &mut pools, &children, &views)?;
            }
        }
        for &id in &order {
            let srcs = tensors[id].srcs.clone();
            for &s in &srcs {
                alloc(s, &mut allocated, &mut offset, &mut pools, &children, &views)?;
            }
            alloc(id, &mut allocated, &mut offset, &mut pools, &children, &views)?;
            for &p in &srcs {
                children[p] -= 1;
                if children[p] == 0 && views[p] == 0 {
                    let pt = &tensors[p];
                    match (pt.op, pt.view_src) {
                        (OpKind::View | OpKind::Store, Some(root)) => {
                            views[root] -= 1;
                            if views[root] == 0 && children[root] == 0 && allocated[root] {
                                free(root, &tensors, &mut allocated, &offset, &mut pools);
                            }
                        }
                        _ => {
                            if allocated[p] {
                                free(p, &tensors, &mut allocated, &offset, &mut pools);
                            }
                        }
                    }
                }
            }
        }
        let mut out: BufferSizes = pools.into_iter().map(|(d, p)| (d, p.max)).collect();
        out.sort();
        Ok(out)
    }
}

fn free(id: TensorId, tensors: &[Tensor], allocated: &mut [bool], offset: &[u64], pools: &mut HashMap<Device, Pool>) {
    let t = &tensors[id];
    if t.output {
        return;
    }
    if let Some(pool) = pools.get_mut(&t.device.unwrap_or(Device::Cpu)) {
        pool.free(offset[id], t.bytes);
    }
    allocated[id] = false;
}

/// `ggml_dyn_tallocr` for one buffer: free blocks sorted by offset; the
/// last block is the unbounded tail.
#[derive(Debug)]
struct Pool {
    align: u64,
    /// (offset, size); the last entry is the tail, size u64::MAX / 2
    free: Vec<(u64, u64)>,
    max: u64,
}

impl Pool {
    fn new(align: u64) -> Pool {
        Pool { align, free: vec![(0, u64::MAX / 2)], max: 0 }
    }

    fn pad(&self, size: u64) -> Result<u64, CoreError> {
        size.checked_next_multiple_of(self.align)
            .ok_or_else(|| CoreError::Overflow { what: "compute buffer tensor".into() })
    }

    fn alloc(&mut self, size: u64) -> Result<u64, CoreError> {
        let size = self.pad(size)?;
        let mut best: Option<usize> = None;
        let mut best_size = u64::MAX;
        for (i, &(_, s)) in self.free[..self.free.len() - 1].iter().enumerate() {
            if s >= size && s <= best_size {
                best = Some(i);
                best_size = s;
            }
        }
        let i = best.unwrap_or(self.free.len() - 1);
        let (off, s) = self.free[i];
        if s < size {
            return Err(CoreError::Overflow { what: "compute buffer".into() });
        }
        if s == size {
            self.free.remove(i);
        } else {
            self.free[i] = (off + size, s - size);
        }
        let end = off.checked_add(size).ok_or_else(|| CoreError::Overflow { what: "compute buffer".into() })?;
        self.max = self.max.max(end);
        Ok(off)
    }

    fn free(&mut self, off: u64, size: u64) {
        let Ok(size) = self.pad(size) else { return };
        for i in 0..self.free.len() {
            let (bo, bs) = self.free[i];
            if bo + bs == off {
                self.free[i].1 += size;
                if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
                    self.free[i].1 += self.free[i + 1].1;
                    self.free.remove(i + 1);
                }
                return;
            }
            if off + size == bo {
                self.free[i] = (off, bs + size);
                if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == off {
                    self.free[i - 1].1 += self.free[i].1;
                    self.free.remove(i);
                }
                return;
            }
        }
        let pos = self.free.iter().position(|&(bo, _)| bo > off).unwrap_or(self.free.len());
        self.free.insert(pos, (off, size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: u8 = 0;
    const G0: Device = Device::Gpu(0);

    fn fresh(g: &mut Graph, bytes: u64, srcs: &[TensorId]) -> TensorId {
        g.op("t", OpKind::Fresh, F32, [bytes / 4, 1, 1, 1], bytes, srcs, 512)
    }

    fn run(g: &mut Graph) -> BufferSizes {
        g.schedule(true, true);
        g.allocate(&|_| 32, 1).unwrap()
    }

    #[test]
    fn chain_reuses_freed_memory() {
        // a → b → c, 128 bytes each: at most two live at once
        let mut g = Graph::new();
        let w = g.weight("w", 64, G0);
        let a = fresh(&mut g, 128, &[w]);
        let b = fresh(&mut g, 128, &[a, w]);
        let c = fresh(&mut g, 128, &[b, w]);
        g.expand(c);
        assert_eq!(run(&mut g), vec![(G0, 256)]);
    }

    #[test]
    fn inplace_ops_take_over_a_sole_consumer_but_not_a_view() {
        let mut g = Graph::new();
        let w = g.weight("w", 64, G0);
        let a = fresh(&mut g, 1024, &[w]);
        let b = g.op("add", OpKind::Inplace, F32, [256, 1, 1, 1], 1024, &[a, w], 512);
        g.expand(b);
        assert_eq!(run(&mut g)[0].1, 1024);
        // through a view (rope on a reshape): ggml allocates anew
        let mut g = Graph::new();
        let w = g.weight("w", 64, G0);
        let a = fresh(&mut g, 1024, &[w]);
        let v = g.view("reshape", a);
        let b = g.op("rope", OpKind::Inplace, F32, [256, 1, 1, 1], 1024, &[v], 512);
        g.expand(b);
        assert_eq!(run(&mut g)[0].1, 2048);
    }

    #[test]
    fn best_fit_prefers_holes_and_grows_at_the_end() {
        let mut g = Graph::new();
        let w = g.weight("w", 64, G0);
        let a = fresh(&mut g, 3200, &[w]); // [0, 3200)
        let b = fresh(&mut g, 9600, &[a, w]); // [3200, 12800)
        let c = fresh(&mut g, 3200, &[b, w]); // a was freed: the hole [0, 3200) fits
        let d = fresh(&mut g, 12800, &[c, w]); // b freed and merged into the tail: [3200, 16000)
        g.expand(d);
        assert_eq!(run(&mut g)[0].1, 16000);
    }

    #[test]
    fn host_inputs_are_copied_once_per_device() {
        let mut g = Graph::new();
        let w = g.weight("w", 64, G0);
        let x = g.input("x", F32, [256, 1, 1, 1], 1024);
        let a = g.op("a", OpKind::Fresh, F32, [256, 1, 1, 1], 1024, &[w, x], 512);
        let b = g.op("b", OpKind::Fresh, F32, [256, 1, 1, 1], 1024, &[w, a, x], 512);
        g.expand(b);
        // host: x; GPU: the copy of x (kept until b), a, b
        assert_eq!(run(&mut g), vec![(Device::Cpu, 1024), (G0, 3072)]);
    }

    #[test]
    fn host_weights_are_offloaded_from_32_rows() {
        // a matmul whose weight is on the host runs on the GPU with a copy of
        // the weight when it has >= 32 rows, on the host below that
        for (rows, expect_gpu) in [(512, 4096 + 1024), (8, 0)] {
            let mut g = Graph::new();
            let w = g.weight("w", 4096, Device::Cpu);
            let x = g.input("x", F32, [256, 1, 1, 1], 1024);
            let a = g.op("mm", OpKind::Fresh, F32, [256, 1, 1, 1], 1024, &[w, x], rows);
            g.expand(a);
            let sizes = run(&mut g);
            let gpu = sizes.iter().find(|(d, _)| *d == G0).map(|(_, b)| *b).unwrap_or(0);
            assert_eq!(gpu, if expect_gpu > 0 { expect_gpu + 1024 } else { 0 }, "rows {rows}");
        }
    }

    #[test]
    fn pipeline_parallel_keeps_every_input_and_copy_four_times() {
        let build = || {
            let mut g = Graph::new();
            let w = g.weight("w", 64, G0);
            let x = g.input("x", F32, [256, 1, 1, 1], 1024);
            let a = g.op("a", OpKind::Fresh, F32, [256, 1, 1, 1], 1024, &[w, x], 512);
            let b = g.op("b", OpKind::Fresh, F32, [256, 1, 1, 1], 1024, &[w, a], 512);
            g.expand(b);
            g.schedule(true, true);
            g
        };
        assert_eq!(build().allocate(&|_| 32, 1).unwrap(), vec![(Device::Cpu, 1024), (G0, 2048)]);
        // host: x ×4; GPU: the copy of x ×4 held for good, then a and b on top
        let sizes = build().allocate(&|_| 32, PIPELINE_COPIES).unwrap();
        assert_eq!(sizes, vec![(Device::Cpu, 4 * 1024), (G0, 4 * 1024 + 2048)]);
    }
}
