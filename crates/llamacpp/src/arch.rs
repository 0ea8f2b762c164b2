//! The architectures (`general.architecture`) whose graph the simulator
//! builds on its own terms, as a typed table. Any other architecture is
//! sized from its header's hyper-parameters as a plain attention decoder;
//! its name is only displayed.
//!
//! Names are llama.cpp's (`LLM_ARCH_NAMES`, `src/llama-arch.cpp`).

/// How llama.cpp builds an architecture's attention, as far as the
/// compute-buffer replica is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionGraph {
    /// multi-head latent attention (`llm_build_deepseek2`: a compressed KV
    /// latent, decompressed per head), which the replica sizes as plain
    /// attention with the cache's head sizes
    Latent,
    /// latent attention when the file's K and V head sizes differ (the MLA
    /// variant of the family), plain attention otherwise
    LatentWhenKvHeadSizesDiffer,
}

/// One architecture the simulator knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownArch {
    /// `general.architecture`
    pub name: &'static str,
    pub attention: AttentionGraph,
}

/// The table. DeepSeek's family: `deepseek` (V1), `deepseek2` (V2/V3, MLA),
/// `deepseek2-ocr`, `deepseek32` (V3.2, MLA + sparse indexer); GLM-4.5's
/// `glm4moe`, whose MLA conversions have K and V heads of different sizes.
pub const KNOWN_ARCHS: &[KnownArch] = &[
    KnownArch { name: "deepseek", attention: AttentionGraph::Latent },
    KnownArch { name: "deepseek2", attention: AttentionGraph::Latent },
    KnownArch { name: "deepseek2-ocr", attention: AttentionGraph::Latent },
    KnownArch { name: "deepseek32", attention: AttentionGraph::Latent },
    KnownArch { name: "glm4moe", attention: AttentionGraph::LatentWhenKvHeadSizesDiffer },
];

/// The table's row for an architecture name, `None` for one the simulator
/// treats as a plain decoder.
pub fn known_arch(name: &str) -> Option<&'static KnownArch> {
    KNOWN_ARCHS.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_found() {
        for (i, a) in KNOWN_ARCHS.iter().enumerate() {
            assert_eq!(known_arch(a.name), Some(a));
            assert!(KNOWN_ARCHS[..i].iter().all(|b| b.name != a.name), "{} twice", a.name);
        }
        assert_eq!(known_arch("llama"), None);
    }
}
