//! The workload flags every command that sizes a job shares (`estimate`,
//! `plan`, `diagnose`): parsed once, converted once into core's
//! [`Workload`], checked by core's `validate`, contradictions refused
//! naming the flags. Training-only flags live in [`crate::cmd::train_args`].

use crate::bail_on;
use crate::cmd::train_args::{flag_field, Common, FieldNames, TaskKind, TrainArgs};
use crate::error::{field_error, OnField};
use anyhow::Context;
use vramfit_core::units::MIB;
use vramfit_core::workload::{
    defaults, validate, CommSetup, EngineChoice, ServingDefaults, ServingEngine, SpeculativeAlgorithm, VllmEntry,
};
use vramfit_core::{
    DType, InferenceSetup, ModelSpec, Parallelism, QuantMethod, QuantSpec, RuntimeSetup, Task, Workload,
};

/// Workload flags common to every command that sizes a job. A flag the user
/// did not give is `None`; its default comes from
/// `vramfit_core::workload::defaults` (or `vramfit_core::runtime`).
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// What is run: inference, full training, LoRA or QLoRA
    #[arg(long, value_enum, default_value_t = TaskKind::Infer)]
    pub task: TaskKind,
    /// Weight dtype: fp32, fp16, bf16, fp8, int8, int4 (weight-only, --group-size; also gptq, awq) or nf4
    /// (bitsandbytes); default (or auto, as vLLM's): the checkpoint's quantization if any, else bf16
    #[arg(long, visible_aliases = ["quant", "quantization"])]
    pub dtype: Option<String>,
    #[arg(long, visible_alias = "kv-cache-dtype", help = format!(
        "KV cache dtype: fp16, bf16, fp8 (vLLM's fp8_e4m3, fp8_e5m2), fp32, auto [default: {}]",
        defaults::KV_DTYPE
    ))]
    pub kv_dtype: Option<String>,
    #[arg(long, help = format!(
        "Sequences per step (inference prefill batch; training micro-batch per GPU) [default: {}]",
        defaults::BATCH
    ))]
    pub batch: Option<u64>,
    #[arg(long, visible_aliases = ["seq", "max-model-len", "ctx"], value_name = "TOKENS", value_parser = tokens,
        help = format!(
        "Tokens per sequence (prompt + generated for inference; a GGUF's llama.cpp -c); 32k or 128K: k = 1024 tokens [default: {} inference, {} training]",
        defaults::CONTEXT,
        defaults::TRAIN_SEQ
    ))]
    pub context: Option<u64>,
    /// Sequences whose KV cache is resident at once [default: --batch]
    #[arg(long)]
    pub concurrency: Option<u64>,
    /// Tensor-parallel degree [default: 1]
    #[arg(long, visible_alias = "tensor-parallel-size")]
    pub tp: Option<u64>,
    /// Expert-parallel degree for a MoE model: whole routed experts split over this many ranks;
    /// serving under vLLM or SGLang (vLLM --enable-expert-parallel: EP = TP; SGLang --ep-size),
    /// training under Megatron-LM (--expert-model-parallel-size) or DeepSpeed AutoEP [default: 1]
    #[arg(long, visible_alias = "ep-size", value_name = "EP")]
    pub ep: Option<u64>,
    /// Data-parallel attention for a MoE model served by vLLM or SGLang: the --tp ranks run attention
    /// and the KV cache as this many groups, each with its share of the sequences, the experts over
    /// all of them (SGLang --enable-dp-attention --dp N; vLLM --data-parallel-size N
    /// --enable-expert-parallel); needs --ep = --tp [default: 1]
    #[arg(long, value_name = "N")]
    pub dp_attention: Option<u64>,
    /// Pipeline-parallel stages [default: 1]
    #[arg(long, visible_alias = "pipeline-parallel-size")]
    pub pp: Option<u64>,
    /// Total GPUs [default: tp × pp]
    #[arg(long, visible_alias = "num-gpus")]
    pub gpus: Option<u64>,
    #[arg(long, help = format!(
        "Input features per scale group for --dtype int4/int8 (GPTQ/AWQ-style) [default: {}]",
        defaults::GROUP_SIZE
    ))]
    pub group_size: Option<u64>,
    /// Materialise logits in fp32 (an upcast before sampling or loss)
    #[arg(long)]
    pub logits_fp32: bool,
    #[arg(long, help = format!("Paged KV block size in tokens [default: {}]", defaults::BLOCK_SIZE))]
    pub block_size: Option<u64>,
    /// How sliding-window layers are cached: window (vLLM/SGLang hybrid KV manager,
    /// transformers' generate), full (vLLM --disable-hybrid-kv-cache-manager), llamacpp
    /// (window + 512-token ubatch, padded to 256) [default: window]
    #[arg(long, value_name = "window|full|llamacpp")]
    pub sliding_window_cache: Option<String>,
    #[arg(long, help = format!(
        "CUDA context + library handles per process per GPU, MiB [default: {}]",
        vramfit_core::runtime::DEFAULT_CUDA_CONTEXT / MIB
    ))]
    pub cuda_context_mib: Option<u64>,
    /// cuBLAS + cuBLASLt workspaces per GPU, MiB (fractional allowed) [default: 8.1 + 4 MiB]
    #[arg(long)]
    pub workspace_mib: Option<f64>,
    #[arg(long, help = format!(
        "Headroom fraction on top of tensors + runtime (0.2 = the ×1.2 rule) [default: {}]",
        vramfit_core::runtime::DEFAULT_MARGIN
    ))]
    pub margin: Option<f64>,
    /// The engine that runs the job: its behaviour sets the defaults (loss path, adapter dtype,
    /// QLoRA preparation, communication buffers; vLLM/SGLang start-up sizing). A serving engine's
    /// release after '@' (vllm@0.8, sglang@0.4; default: the latest modelled) [default: transformers]
    #[arg(long, value_parser = parse_engine, value_name = "ENGINE")]
    pub engine: Option<EngineChoice>,
    #[arg(long, value_name = "TOKENS", value_parser = tokens, help = serving_default_help(
        "Serving engines: tokens of the start-up profiling forward (vLLM max_num_batched_tokens; 8k = 8192)",
        |d| d.tokens_label(),
    ))]
    pub max_num_batched_tokens: Option<u64>,
    #[arg(long, value_name = "N", help = serving_default_help(
        "Serving engines: sequences the sampler sees at start-up (vLLM max_num_seqs)",
        |d| d.seqs_label(),
    ))]
    pub max_num_seqs: Option<u64>,
    /// vLLM: which entry point starts the engine, serve (vllm serve, the OpenAI API server) or llm
    /// (the offline LLM(...) class, whose V1 default max_num_batched_tokens is 16384 on cards
    /// ≥ 70 GiB other than A100, else 8192) [default: serve]
    #[arg(long, value_name = "serve|llm", value_parser = parse_vllm_entry)]
    pub vllm_entry: Option<VllmEntry>,
    /// Serving engines: the CUDA-graph pool per GPU as the engine's start-up log gives it, MiB
    /// (vLLM "Graph capturing finished … took X GiB" up to 0.20, "Estimated CUDA graph memory: X
    /// GiB" from 0.21) [default: vLLM modelled from the release's capture sizes, off the KV pool
    /// from 0.21, on top of --gpu-util before; SGLang not counted]
    #[arg(long, value_name = "MIB")]
    pub cuda_graph_mib: Option<f64>,
    /// SGLang: the speculative decoding algorithm (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, as
    /// SGLang names them): its mem_fraction_static rule keeps 2 GiB (6 GiB for STANDALONE, none for
    /// NGRAM from 0.5.3) for the draft
    #[arg(long, value_name = "ALGORITHM", value_parser = parse_speculative)]
    pub speculative_algorithm: Option<SpeculativeAlgorithm>,
    /// vLLM: --enforce-eager as given to the engine: no CUDA graphs are captured, so no graph pool
    /// is counted
    #[arg(long)]
    pub enforce_eager: bool,
    #[command(flatten)]
    pub train: TrainArgs,
}

/// A flag's help with each serving engine's default from its row of facts:
/// `[default: 256]` when they agree, else `[default: max(--context, 2048) for
/// vllm, 8192 for sglang]`.
fn serving_default_help(what: &str, value: fn(&ServingDefaults) -> String) -> String {
    let per: Vec<(String, &str)> =
        ServingEngine::ALL.iter().map(|e| (value(&e.facts().startup), e.engine().name())).collect();
    let defaults = if per.iter().all(|(v, _)| *v == per[0].0) {
        per[0].0.clone()
    } else {
        per.iter().map(|(v, name)| format!("{v} for {name}")).collect::<Vec<_>>().join(", ")
    };
    format!("{what} [default: {defaults}]")
}

fn parse_engine(s: &str) -> Result<EngineChoice, String> {
    s.parse()
}

fn parse_vllm_entry(s: &str) -> Result<VllmEntry, String> {
    s.parse()
}

fn parse_speculative(s: &str) -> Result<SpeculativeAlgorithm, String> {
    s.parse()
}

/// A token length (`8192`, `32k`, `128K`: k = 1024 tokens, core's
/// [`vramfit_core::quantity::parse_tokens`]); clap's message names the flag.
pub fn tokens(s: &str) -> Result<u64, String> {
    vramfit_core::quantity::parse_tokens("", s, 0..=u64::MAX)
        .map_err(|e| e.to_string().trim_start_matches([':', ' ']).to_string())
}

/// A `--kv-dtype` value: a dtype, or vLLM's `--kv-cache-dtype` spellings
/// (`auto`: the default; `fp8_e4m3`, `fp8_e5m2`: fp8).
fn parse_kv_dtype(s: &str) -> anyhow::Result<DType> {
    let lower = s.trim().to_ascii_lowercase();
    match lower.as_str() {
        "auto" => Ok(defaults::KV_DTYPE),
        "fp8_e4m3" | "fp8_e5m2" => Ok(DType::F8),
        other => other.parse().map_err(|e: String| field_error("kv-dtype", anyhow::anyhow!("--kv-dtype: {e}, auto"))),
    }
}

/// Parse a `--dtype` value into (storage dtype, quantization); `group` is
/// the scale group of int4/int8 (checked with the rest of the workload).
pub fn parse_dtype(s: &str, group: u64, model: &ModelSpec) -> anyhow::Result<(DType, Option<QuantSpec>)> {
    let compute = model.native_dtype.filter(|d| matches!(d, DType::F16 | DType::BF16)).unwrap_or(DType::BF16);
    let lower = s.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "nf4" | "bnb4" | "qlora" | "bitsandbytes" | "bnb" => (DType::I4, Some(QuantSpec::nf4(true, compute))),
        "int4" | "q4" | "gptq" | "awq" => (DType::I4, Some(QuantSpec::int(4, group, DType::F16))),
        "int8" | "i8" => (DType::I8, Some(QuantSpec::int(8, group, DType::F16))),
        "fp8" | "f8" | "e4m3" => (DType::F8, Some(QuantSpec::fp8_per_tensor(compute))),
        other => {
            let d: DType =
                other.parse().map_err(|e: String| field_error("dtype", anyhow::anyhow!("--dtype: {e}, nf4")))?;
            (d, None)
        }
    })
}

impl WorkloadArgs {
    /// The checkpoint as a training run with `--dtype` loads it: a quantized
    /// checkpoint trained with 16- or 32-bit weights (`--task train --dtype
    /// bf16` on gpt-oss's MXFP4) is loaded dequantized (core's
    /// [`ModelSpec::dequantized`]), not refused as training quantized
    /// weights. None: the checkpoint as it is.
    pub fn dequantized_for_training(&self, spec: &ModelSpec) -> Option<ModelSpec> {
        let training = matches!(self.task, TaskKind::Train | TaskKind::Lora);
        let dtype: DType = self.dtype()?.parse().ok()?;
        (training && spec.quantization.is_some() && matches!(dtype, DType::F32 | DType::F16 | DType::BF16))
            .then(|| spec.dequantized(dtype))
    }

    /// `--dtype`, unless it is `auto` (vLLM's word for the default).
    pub fn dtype(&self) -> Option<&str> {
        self.dtype.as_deref().filter(|d| !d.trim().eq_ignore_ascii_case("auto"))
    }

    fn tp(&self) -> u64 {
        self.tp.unwrap_or(1)
    }

    fn pp(&self) -> u64 {
        self.pp.unwrap_or(1)
    }

    /// Total GPUs: `--gpus`, else one replica of TP × PP (validate refuses a
    /// TP or PP above 2^12, so their product is only a stand-in when absurd).
    fn gpus(&self) -> u64 {
        let cp = self.train.cp.unwrap_or(1).max(1);
        self.gpus.unwrap_or(self.tp().saturating_mul(self.pp()).saturating_mul(cp))
    }

    fn common(&self) -> Common {
        Common {
            task: self.task,
            batch: self.batch,
            seq: self.context.unwrap_or(defaults::TRAIN_SEQ),
            gpus: self.gpus(),
            tp: self.tp(),
            pp: self.pp(),
            ep: self.ep.unwrap_or(1),
            dtype: None,
            engine: self.engine.unwrap_or_default().engine,
        }
    }

    pub fn runtime(&self) -> anyhow::Result<RuntimeSetup> {
        let defaults = RuntimeSetup::default();
        let workspace = match self.workspace_mib {
            Some(w) if !(w.is_finite() && w >= 0.0) => {
                bail_on!("workspace-mib", "--workspace-mib: {w} is not a non-negative number")
            }
            Some(w) => (w * MIB as f64) as u64,
            None => defaults.workspace_bytes,
        };
        let cuda_context_bytes = match self.cuda_context_mib {
            Some(m) => {
                m.checked_mul(MIB).context("--cuda-context-mib is absurdly large").on_field("cuda-context-mib")?
            }
            None => defaults.cuda_context_bytes,
        };
        Ok(RuntimeSetup {
            cuda_context_bytes,
            workspace_bytes: workspace,
            margin: self.margin.unwrap_or(defaults.margin),
            ..defaults
        })
    }

    /// The inference setup these flags describe.
    pub fn inference(&self, spec: &ModelSpec) -> anyhow::Result<InferenceSetup> {
        let (weight_dtype, mut quant) = match self.dtype() {
            Some(d) => parse_dtype(d, self.group_size.unwrap_or(defaults::GROUP_SIZE), spec)?,
            None => defaults::weights(spec),
        };
        // bitsandbytes at inference: the head in 4 or 8 bits (transformers'
        // BitsAndBytesConfig(llm_int8_skip_modules=[]); it skips lm_head by
        // default) and NF4 without double quantization
        // (bnb_4bit_use_double_quant=False)
        let bnb = quant.as_ref().map(|q| q.method);
        if self.train.quantize_lm_head && !matches!(bnb, Some(QuantMethod::Bnb4 | QuantMethod::Bnb8)) {
            bail_on!("quantize-lm-head", "--quantize-lm-head quantizes the head with bitsandbytes: give --dtype nf4 (or a bitsandbytes checkpoint)");
        }
        if self.train.no_double_quant {
            match quant.as_mut() {
                Some(q) if q.method == QuantMethod::Bnb4 => *q = QuantSpec::nf4(false, q.compute_dtype),
                _ => bail_on!(
                    "no-double-quant",
                    "--no-double-quant applies to NF4 weights (bitsandbytes 4-bit): give --dtype nf4"
                ),
            }
        }
        let kv_dtype: DType = match &self.kv_dtype {
            Some(k) => parse_kv_dtype(k)?,
            None => defaults::KV_DTYPE,
        };
        let batch = self.batch.unwrap_or(defaults::BATCH);
        let engine = self.engine.unwrap_or_default().engine;
        let cuda_graph_bytes = match self.cuda_graph_mib {
            None => None,
            Some(m) if m.is_finite() && m >= 0.0 && m * MIB as f64 <= u64::MAX as f64 => {
                Some((m * MIB as f64).round() as u64)
            }
            Some(m) => bail_on!("cuda-graph-mib", "--cuda-graph-mib: {m} is not a non-negative number of MiB"),
        };
        if cuda_graph_bytes.is_some() && !engine.serves_only() {
            bail_on!(
                "cuda-graph-mib",
                "--cuda-graph-mib is a serving engine's CUDA-graph pool: add --engine vllm or sglang, or drop it"
            );
        }
        if self.speculative_algorithm.is_some() && engine != vramfit_core::workload::Engine::Sglang {
            bail_on!(
                "speculative-algorithm",
                "--speculative-algorithm is SGLang's flag (its mem_fraction_static reserve for the draft): add --engine sglang, or drop it"
            );
        }
        if self.enforce_eager && engine != vramfit_core::workload::Engine::Vllm {
            bail_on!(
                "enforce-eager",
                "--enforce-eager is vLLM's flag (no CUDA graphs captured): add --engine vllm, or drop it"
            );
        }
        if self.enforce_eager && cuda_graph_bytes.is_some() {
            bail_on!(
                "enforce-eager",
                "--enforce-eager captures no CUDA graphs, so --cuda-graph-mib has no pool to size: drop one of them"
            );
        }
        if self.vllm_entry.is_some() && engine != vramfit_core::workload::Engine::Vllm {
            bail_on!(
                "vllm-entry",
                "--vllm-entry picks vLLM's entry point (vllm serve or the LLM(...) class): add --engine vllm, or drop it"
            );
        }
        Ok(InferenceSetup {
            weight_dtype,
            quant,
            kv_dtype,
            batch,
            concurrency: self.concurrency.unwrap_or(batch),
            context: self.context.unwrap_or(defaults::CONTEXT),
            logits_fp32: self.logits_fp32,
            block_size: self.block_size.unwrap_or(defaults::BLOCK_SIZE),
            engine,
            engine_version: self.engine.and_then(|c| c.version),
            // the card is set where it is known (estimate --gpu)
            serving_card: None,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_num_seqs: self.max_num_seqs,
            // the engine's policy unless the flag says otherwise
            sliding_window_cache: match &self.sliding_window_cache {
                Some(p) => p.parse().map_err(|e: String| {
                    field_error("sliding-window-cache", anyhow::anyhow!("--sliding-window-cache: {e}"))
                })?,
                None => engine.sliding_window_cache(),
            },
            quantize_lm_head: self.train.quantize_lm_head,
            prefill_logits: vramfit_core::PrefillLogits::Engine,
            vllm_entry: self.vllm_entry.unwrap_or_default(),
            cuda_graph_bytes,
            speculative_algorithm: self.speculative_algorithm,
            enforce_eager: self.enforce_eager,
        })
    }

    /// The full workload for `spec`, checked; notes about config files ("auto"
    /// values, unknown keys) go to stderr.
    pub fn build(&self, spec: &ModelSpec) -> anyhow::Result<Workload> {
        let (w, notes) = self.build_with_notes(spec)?;
        for n in notes {
            crate::to_stderr(&format!("note: {n}"));
        }
        Ok(w)
    }

    /// The full workload for `spec` and the notes its config files raised.
    /// The workload is checked here (`vramfit_core::workload::validate`), so
    /// an error names the flag, or the config-file key, that set the value.
    pub fn build_with_notes(&self, spec: &ModelSpec) -> anyhow::Result<(Workload, Vec<String>)> {
        let runtime = self.runtime()?;
        let (workload, notes, names) = match self.task {
            TaskKind::Infer => {
                self.refuse_training_flags()?;
                // Cards named without a layout run one model across them, as
                // the engine would (core decides); an explicit --tp/--pp with
                // more cards means replicas, which keep per-GPU memory.
                let mut notes = Vec::new();
                let (tp, pp) = match (self.tp, self.pp, self.gpus) {
                    (None, None, Some(g)) if g > 1 => {
                        let l = defaults::inference_layout(spec, self.engine.unwrap_or_default().engine, g);
                        notes.push(l.why);
                        (l.tp, l.pp)
                    }
                    _ => (self.tp(), self.pp()),
                };
                let parallelism = Parallelism {
                    gpus: self.gpus(),
                    tp,
                    pp,
                    ep: self.ep.unwrap_or(1),
                    dp_attention: self.dp_attention.unwrap_or(1),
                    ..Parallelism::default()
                };
                let task = Task::Inference(self.inference(spec)?);
                (Workload { task, parallelism, runtime }, notes, FieldNames::default())
            }
            _ => {
                self.refuse_inference_flags()?;
                let mut common = self.common();
                if let Some(d) = self.dtype() {
                    common.dtype =
                        Some(d.parse::<DType>().map_err(|e| field_error("dtype", anyhow::anyhow!("--dtype: {e}")))?);
                }
                if self.engine.is_some_and(|c| c.engine.serves_only()) {
                    bail_on!("engine", "--engine {} serves models; training needs transformers, deepspeed, fsdp, litgpt, torchtune or torchtitan", self.engine.unwrap_or_default().engine.name());
                }
                let mut b = self.train.build(&common)?;
                if b.reduce_bucket_auto {
                    b.setup.comm.reduce_bucket =
                        CommSetup::hf_trainer_reduce_bucket(spec.hidden_size).on_field("deepspeed")?;
                    b.notes.push(format!(
                        "zero_optimization.reduce_bucket_size is \"auto\": the Hugging Face Trainer sets hidden_size² = {} elements",
                        b.setup.comm.reduce_bucket
                    ));
                }
                (Workload { task: Task::Train(b.setup), parallelism: b.parallelism, runtime }, b.notes, b.names)
            }
        };
        validate(spec, &workload)
            .map_err(|e| field_error(names.field(e.field()), anyhow::anyhow!(names.render(&e))))?;
        Ok((workload, notes))
    }

    fn refuse_training_flags(&self) -> anyhow::Result<()> {
        // bitsandbytes' head and double-quant switches are inference settings too
        let given: Vec<&str> = self
            .train
            .given_flags()
            .into_iter()
            .filter(|f| !matches!(*f, "--quantize-lm-head" | "--no-double-quant"))
            .collect();
        if let Some(first) = given.first() {
            bail_on!(
                flag_field(first),
                "{} appl{} to training only: add --task train|lora|qlora, or drop {}",
                given.join(", "),
                if given.len() == 1 { "ies" } else { "y" },
                if given.len() == 1 { "it" } else { "them" }
            );
        }
        Ok(())
    }

    fn refuse_inference_flags(&self) -> anyhow::Result<()> {
        let inference_only: Vec<&str> = [
            ("--concurrency", self.concurrency.is_some()),
            ("--max-num-batched-tokens", self.max_num_batched_tokens.is_some()),
            ("--max-num-seqs", self.max_num_seqs.is_some()),
            ("--vllm-entry", self.vllm_entry.is_some()),
            ("--cuda-graph-mib", self.cuda_graph_mib.is_some()),
            ("--speculative-algorithm", self.speculative_algorithm.is_some()),
            ("--enforce-eager", self.enforce_eager),
            ("--kv-dtype", self.kv_dtype.is_some()),
            ("--block-size", self.block_size.is_some()),
            ("--sliding-window-cache", self.sliding_window_cache.is_some()),
            ("--dp-attention", self.dp_attention.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        if let Some(first) = inference_only.first() {
            bail_on!(
                flag_field(first),
                "{} appl{} to inference only (--task infer)",
                inference_only.join(", "),
                if inference_only.len() == 1 { "ies" } else { "y" }
            );
        }
        Ok(())
    }
}
