//! How Megatron-LM places decoder layers on pipeline stages when the layer
//! count does not divide by the stage count: `--decoder-first-pipeline-num-layers`
//! and `--decoder-last-pipeline-num-layers` give the two end stages their own
//! counts and the middle stages split the rest evenly (Megatron-Core
//! `TransformerConfig.__post_init__`, "Uneven PP": the middle layers must
//! divide by the middle stages, each end at least one layer; with virtual
//! stages each count must also divide by the virtual stage count, which is
//! not planned here). NVIDIA/Megatron-LM d98e8a64, Megatron-Core 0.20.0.

/// Layers per pipeline stage as Megatron is told them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageSplit {
    /// `layers / pp` on every stage (no flag needed)
    Even { per_stage: u64 },
    /// the first and last stages' counts; the `pp − 2` middle stages hold
    /// `per_stage` each
    Uneven { first: u64, per_stage: u64, last: u64 },
}

impl StageSplit {
    /// The most layers any stage holds (what the memory of the worst stage
    /// and the step time of the slowest follow).
    pub fn fullest(self) -> u64 {
        match self {
            StageSplit::Even { per_stage } => per_stage,
            StageSplit::Uneven { first, per_stage, last } => first.max(per_stage).max(last),
        }
    }
}

/// How `layers` go on `pp` stages: evenly when they divide, else the middle
/// stages at ⌈layers/pp⌉ each and the remainder split between the end
/// stages, the last (which also holds the output head and the loss) the
/// lighter. No stage holds more than ⌈layers/pp⌉, so the per-stage
/// memory and time (sized at ⌈layers/pp⌉) stay upper bounds. `None` when
/// no such split exists (an end stage would get no layer) or with virtual
/// stages on an uneven split.
pub fn megatron_stage_split(layers: u64, pp: u64, virtual_stages: u64) -> Option<StageSplit> {
    let pp = pp.max(1);
    if layers == 0 || pp > layers {
        return None;
    }
    if layers.is_multiple_of(pp) {
        return Some(StageSplit::Even { per_stage: layers / pp });
    }
    if virtual_stages > 1 || pp < 2 {
        return None;
    }
    let per_stage = layers.div_ceil(pp);
    let ends = layers.checked_sub(per_stage.checked_mul(pp - 2)?)?;
    if ends < 2 {
        return None;
    }
    let last = ends / 2;
    let first = ends - last;
    (first <= per_stage).then_some(StageSplit::Uneven { first, per_stage, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisible_layers_split_evenly() {
        assert_eq!(megatron_stage_split(80, 4, 1), Some(StageSplit::Even { per_stage: 20 }));
        assert_eq!(megatron_stage_split(80, 4, 5), Some(StageSplit::Even { per_stage: 20 }));
    }

    #[test]
    fn deepseek_v3_on_16_stages() {
        // 61 layers, PP 16: ⌈61/16⌉ = 4 on each of the 14 middle stages (56),
        // 5 left for the ends: first 3, last 2
        let s = megatron_stage_split(61, 16, 1).unwrap();
        assert_eq!(s, StageSplit::Uneven { first: 3, per_stage: 4, last: 2 });
        assert_eq!(s.fullest(), 4);
        // Megatron's rule: the middle layers divide by the middle stages
        assert_eq!((61 - 3 - 2) % 14, 0);
    }

    #[test]
    fn two_stages_take_the_ends_only() {
        // 61 on 2 stages: 31 and 30, no middle stage (Megatron accepts 0 middle
        // layers on 0 middle stages)
        assert_eq!(megatron_stage_split(61, 2, 1), Some(StageSplit::Uneven { first: 31, per_stage: 31, last: 30 }));
    }

    #[test]
    fn impossible_splits_are_none() {
        // 5 layers on 4 stages: 2 per middle stage leaves 1 for both ends
        assert_eq!(megatron_stage_split(5, 4, 1), None);
        assert_eq!(megatron_stage_split(3, 4, 1), None);
        // uneven with virtual stages is not planned
        assert_eq!(megatron_stage_split(61, 16, 2), None);
    }

    #[test]
    fn every_split_covers_the_layers_and_obeys_megatron() {
        for layers in 1..200u64 {
            for pp in 1..=32u64 {
                let Some(s) = megatron_stage_split(layers, pp, 1) else { continue };
                let per = layers.div_ceil(pp);
                assert!(s.fullest() <= per, "{layers}/{pp}: {s:?}");
                if let StageSplit::Uneven { first, per_stage, last } = s {
                    assert!(first >= 1 && last >= 1);
                    assert_eq!(first + per_stage * (pp - 2) + last, layers, "{layers}/{pp}");
                }
            }
        }
    }
}
