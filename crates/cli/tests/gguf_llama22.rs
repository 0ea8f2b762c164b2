//! llama.cpp behaviours by build (issue 22, llama.cpp part), through the
//! real binary: MLA files' V-less cache (PR #19067). Expected figures are
//! worked out here from the files' shapes.

mod common;
use common::{json, run};
use std::path::PathBuf;
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_llamacpp::GgmlType;

fn write(name: &str, w: &GgufWriter) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-llama22");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    // tests of one binary run on threads of one process: a per-thread count
    // keeps two writers of the same name apart
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    w.write_sparse(&tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p.display().to_string()
}

/// DeepSeek-V3's attention as the current converter writes it: 61 layers,
/// 128 heads, one latent KV head of `key_length` 576 (kv_lora_rank 512 +
/// rope 64), `value_length` 512, and the MLA keys (192 / 128) that make
/// llama.cpp's `llama_hparams::is_mla()` true. FFN and vocabulary shrunk.
fn deepseek_v3_mla() -> String {
    let s = Shape { arch: "deepseek2", head_dim: 576, ..Shape::llama(61, 7168, 128, 1, 256, 1000) };
    let mut w = writer(&s)
        .set("deepseek2.attention.value_length", WValue::U32(512))
        .set("deepseek2.attention.key_length_mla", WValue::U32(192))
        .set("deepseek2.attention.value_length_mla", WValue::U32(128))
        .set("deepseek2.attention.kv_lora_rank", WValue::U32(512))
        .set("deepseek2.rope.dimension_count", WValue::U32(64))
        .retain_tensors(|n| !n.contains("attn_k.") && !n.contains("attn_v."));
    for il in 0..61 {
        w = w
            .tensor(&format!("blk.{il}.attn_kv_a_mqa.weight"), GgmlType::Q8_0, &[7168, 512 + 64])
            .tensor(&format!("blk.{il}.attn_k_b.weight"), GgmlType::Q8_0, &[128, 512, 128])
            .tensor(&format!("blk.{il}.attn_v_b.weight"), GgmlType::Q8_0, &[512, 128, 128]);
    }
    write("deepseek-v3-mla.gguf", &w)
}

fn kv_line(v: &serde_json::Value) -> u64 {
    let b = v["devices"][0]["buffers"].as_array().unwrap();
    b.iter().find(|b| b["kind"] == "kv").map(|b| b["bytes"].as_u64().unwrap()).unwrap()
}

/// The KV line of an MLA file by build (llama.cpp PR #19067: `has_v =
/// !is_mla`, src/llama-kv-cache.cpp). At -c 32768, f16:
/// current: 61 × 576 × 2 B × 32768 = 2,302,672,896 B (K only);
/// --llamacpp-build 7916: + 61 × 512 × 2 × 32768 = 2,046,820,352 B of V,
/// 4,349,493,248 B.
#[test]
fn an_mla_file_has_no_v_cache_on_current_builds() {
    let f = deepseek_v3_mla();
    let args = |b: Option<&'static str>| {
        let mut a = vec!["estimate", f.as_str(), "-c", "32768", "--gpu-mem", "80GiB", "-ngl", "99", "--json"];
        if let Some(b) = b {
            a.extend(["--llamacpp-build", b]);
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let go = |b| {
        let a = args(b);
        json(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0)
    };
    let cur = go(None);
    assert_eq!((cur["kv"]["k_bytes"].as_u64(), cur["kv"]["v_bytes"].as_u64()), (Some(2_302_672_896), Some(0)));
    assert_eq!(kv_line(&cur), 2_302_672_896);
    let old = go(Some("b7916"));
    assert_eq!(old["kv"]["v_bytes"].as_u64(), Some(2_046_820_352));
    assert_eq!(kv_line(&old), 4_349_493_248);
    let (text, _) = run(&["estimate", &f, "-c", "32768", "--gpu-mem", "80GiB", "-ngl", "99"], 0);
    assert!(text.contains("PR #19067"), "{text}");
}

/// The target: 8 layers, 16 heads of 64, 4 KV heads.
fn target() -> String {
    write("target.gguf", &writer(&Shape::llama(8, 1024, 16, 4, 2816, 1000)))
}

/// The draft: 2 layers, 8 heads of 64, 2 KV heads.
fn draft() -> String {
    write("draft.gguf", &writer(&Shape::llama(2, 512, 8, 2, 1536, 1000)))
}

fn line(v: &serde_json::Value, label: &str) -> Option<u64> {
    v["devices"][0]["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["label"] == label)
        .map(|b| b["bytes"].as_u64().unwrap())
}

fn est(extra: &[&str]) -> serde_json::Value {
    let (t, d) = (target(), draft());
    let mut a =
        vec!["estimate", t.as_str(), "--gpu-mem", "24GiB", "-c", "8192", "-np", "4", "-md", d.as_str(), "--json"];
    a.extend_from_slice(extra);
    json(&a, 0)
}

/// llama-server before b9109 made a draft context per slot (server
/// `load_model`: `params_dft.n_ctx = -cd or llama_n_ctx_seq(ctx)`, one
/// sequence; `init`: `slot.ctx_dft = llama_init_from_model(…)` per slot).
/// -c 8192 -np 4: 2,048 cells per slot; the draft's KV per context is
/// 2 layers × (K + V) × 2 kv heads × 64 × 2 B × 2048 = 2,097,152 B, four
/// contexts 8,388,608 B (the current build's one context of 4 × 2,048 cells
/// holds the same); -cd 1024: 1,048,576 B per context, 4,194,304 B. The
/// compute buffer is four contexts' instead of one.
#[test]
fn old_builds_give_each_slot_its_own_draft_context() {
    let cur = est(&[]);
    assert_eq!(line(&cur, "draft: CUDA0 KV buffer"), Some(8_388_608));
    let old = est(&["--llamacpp-build", "9108"]);
    assert_eq!(line(&old, "draft: CUDA0 KV buffer × 4 slot contexts"), Some(8_388_608));
    let old_compute = line(&old, "draft: CUDA0 compute buffer × 4 slot contexts").unwrap();
    assert_eq!(old_compute % 4, 0);
    let old_cd = est(&["--llamacpp-build", "9108", "-cd", "1024"]);
    assert_eq!(line(&old_cd, "draft: CUDA0 KV buffer × 4 slot contexts"), Some(4_194_304));
    // the current build ignores -cd and says so
    let cur_cd = est(&["-cd", "1024"]);
    assert_eq!(line(&cur_cd, "draft: CUDA0 KV buffer"), Some(8_388_608));
    let notes = cur_cd["notes"].to_string();
    assert!(notes.contains("-cd/--ctx-size-draft"), "{notes}");
    // since b9464 --spec-type defaults to none (ggml-org/llama.cpp#25345):
    // -md alone loads the draft but drafts nothing, and the note says so
    assert!(cur["notes"].to_string().contains("-md without --spec-type"));
    let spec = est(&["--spec-type", "draft-simple"]);
    assert!(!spec["notes"].to_string().contains("-md without --spec-type"));
    assert!(spec["notes"].to_string().contains("speculative decoding (draft-simple)"));
    assert!(!est(&["--llamacpp-build", "9463"])["notes"].to_string().contains("-md without --spec-type"));
}

/// -otd places the draft's tensors as -ot does the target's
/// (`params_dft.tensor_buft_overrides`): every draft layer on the host
/// leaves only its output layer's weights on CUDA0.
#[test]
fn otd_moves_the_drafts_tensors() {
    let gpu = est(&[]);
    let host = est(&["-otd", "blk\\..*=CPU"]);
    let w = |v: &serde_json::Value| line(v, "draft: CUDA0 model buffer").unwrap();
    assert!(w(&host) < w(&gpu), "{} vs {}", w(&host), w(&gpu));
    let h = host["host"]["buffers"].to_string();
    assert!(h.contains("draft: CPU"), "{h}");
    let (text, _) = run(&["estimate", &target(), "-md", &draft(), "-otd", "blk\\..*=CPU", "--gpu-mem", "24GiB"], 0);
    assert!(text.contains("-otd"), "the command line carries -otd:\n{text}");
    let (_, err) = run(&["estimate", &target(), "-md", &draft(), "-otd", "blk=GPU"], 2);
    assert!(err.contains("-otd/--override-tensor-draft"), "{err}");
}

/// --spec-type: the target reserves 1 + n_draft logits rows per slot
/// (server_n_outputs_max); ngram-mod drafts up to 64 (common_params_
/// speculative_ngram_mod::n_max). A model drafter without -md, draft-mtp on
/// a file without NextN layers, an unknown type, and a projector beside a
/// draft on builds before b9109 are refused (exit 2) naming the flag.
#[test]
fn spec_types_reserve_their_draft_outputs_or_are_refused() {
    let t = target();
    let compute = |v: &serde_json::Value| line(v, "CUDA0 compute buffer").unwrap();
    let plain = json(&["estimate", &t, "--gpu-mem", "24GiB", "-np", "4", "--json"], 0);
    let ngram = json(&["estimate", &t, "--gpu-mem", "24GiB", "-np", "4", "--spec-type", "ngram-mod", "--json"], 0);
    assert!(compute(&ngram) > compute(&plain));
    assert!(ngram["notes"].to_string().contains("65 outputs per slot"));
    for (spec, says) in [("draft-simple", "-md"), ("draft-mtp", "NextN"), ("ngram-bogus", "ngram-mod")] {
        let (_, err) = run(&["estimate", &t, "--spec-type", spec], 2);
        assert!(err.contains("spec-type") && err.contains(says), "{spec}: {err}");
    }
}

/// Before b9109 llama-server refused speculative decoding beside a
/// projector (server `load_model`: "err: speculative decode is not
/// supported by multimodal"); the current build loads both.
#[test]
fn a_projector_beside_a_draft_is_refused_before_b9109() {
    let u = |v: u32| WValue::U32(v);
    let mm = GgufWriter::new()
        .kv("general.architecture", WValue::Str("clip".into()))
        .kv("clip.has_vision_encoder", WValue::Bool(true))
        .kv("clip.vision.image_size", u(336))
        .kv("clip.vision.patch_size", u(14))
        .kv("clip.vision.embedding_length", u(1024))
        .kv("clip.vision.feed_forward_length", u(4096))
        .kv("clip.vision.block_count", u(23))
        .kv("clip.vision.attention.head_count", u(16))
        .kv("clip.vision.projection_dim", u(768))
        .tensor("mm.0.weight", GgmlType::F16, &[1024, 4096]);
    let (t, d, m) = (target(), draft(), write("mmproj.gguf", &mm));
    let args = ["estimate", t.as_str(), "--gpu-mem", "24GiB", "--mmproj", m.as_str(), "-md", d.as_str()];
    run(&args, 0);
    let mut old = args.to_vec();
    old.extend(["--llamacpp-build", "9108"]);
    let (_, err) = run(&old, 2);
    assert!(err.contains("not supported by multimodal") && err.contains("b9109"), "{err}");
}

/// A GLM-4.5-style file with its MTP block: `block_count` 5, the last the
/// NextN layer (`nextn_predict_layers` 1, its `nextn.*` tensors), 8 heads
/// of 64, 2 KV heads.
fn with_mtp() -> String {
    let s = Shape { arch: "glm4moe", ..Shape::llama(5, 512, 8, 2, 1536, 1000) };
    let w = writer(&s)
        .kv("glm4moe.nextn_predict_layers", WValue::U32(1))
        .tensor("blk.4.nextn.eh_proj.weight", GgmlType::F16, &[1024, 512])
        .tensor("blk.4.nextn.enorm.weight", GgmlType::F32, &[512])
        .tensor("blk.4.nextn.hnorm.weight", GgmlType::F32, &[512]);
    write("glm-mtp.gguf", &w)
}

fn host_line(v: &serde_json::Value, label: &str) -> Option<u64> {
    v["host"]["buffers"].as_array().unwrap().iter().find(|b| b["label"] == label).map(|b| b["bytes"].as_u64().unwrap())
}

/// llama-server's `--spec-type draft-mtp` without `-md` (PR #22673, b9180;
/// common/speculative.cpp `common_speculative_init_result`, llama.cpp
/// b11312): the NextN layer's weights are loaded (`mparams.load_mtp`) and
/// an MTP context is built over them. -c 8192 -np 4 → 2,048 cells × 4
/// streams; hand-worked:
/// * MTP KV (`llama_kv_cache` over the NextN layer only): 1 layer × (K + V)
///   × 2 KV heads × 64 × 2 B = 512 B per cell × 2,048 × 4 = 4,194,304 B
///   (a quarter of the target's 4 layers' 16 MiB);
/// * MTP output buffer (`output_reserve(n_seq_max)`): 1,000 × 4 × 4 = 16,000 B;
/// * the target's NextN embeddings (n_embd × n_batch f32, unmasked):
///   512 × min(2048, 8192) × 4 = 4,194,304 B;
/// * the model buffer grows by the NextN block, at least its f16 eh_proj
///   (1,024 × 512 × 2 = 1,048,576 B) and two f32 norms (2 × 2,048 B).
///
/// A build before b9180 has no draft-mtp, and a file without NextN layers
/// nothing to draft with: both exit 2 naming --spec-type.
#[test]
fn draft_mtp_without_md_loads_the_nextn_layer_and_an_mtp_context() {
    let f = with_mtp();
    let go = |extra: &[&str]| {
        let mut a = vec!["estimate", f.as_str(), "--gpu-mem", "24GiB", "-c", "8192", "-np", "4", "--json"];
        a.extend_from_slice(extra);
        json(&a, 0)
    };
    let plain = go(&[]);
    let mtp = go(&["--spec-type", "draft-mtp"]);
    assert_eq!(line(&mtp, "MTP: CUDA0 KV buffer"), Some(4_194_304));
    assert_eq!(line(&plain, "CUDA0 KV buffer"), Some(4 * 4_194_304));
    assert!(line(&mtp, "MTP: CUDA0 compute buffer").unwrap() > 0);
    assert_eq!(host_line(&mtp, "MTP: CUDA_Host output buffer"), Some(16_000));
    assert_eq!(host_line(&mtp, "MTP: target NextN embeddings (output buffer growth)"), Some(4_194_304));
    let grown = line(&mtp, "CUDA0 model buffer").unwrap() - line(&plain, "CUDA0 model buffer").unwrap();
    assert!(grown >= 1_048_576 + 2 * 2048, "{grown}");
    assert_eq!(line(&plain, "MTP: CUDA0 KV buffer"), None);
    assert!(mtp["notes"].to_string().contains("creating MTP draft context"));
    let (text, _) = run(&["estimate", &f, "--gpu-mem", "24GiB", "--spec-type", "draft-mtp"], 0);
    assert!(text.contains("MTP: CUDA0 KV buffer") && text.contains("--spec-type draft-mtp"), "{text}");
    let (_, err) = run(&["estimate", &f, "--spec-type", "draft-mtp", "--llamacpp-build", "9179"], 2);
    assert!(err.contains("spec-type") && err.contains("b9180"), "{err}");
    let (_, err) = run(&["estimate", &target(), "--spec-type", "draft-mtp"], 2);
    assert!(err.contains("spec-type") && err.contains("NextN"), "{err}");
}
