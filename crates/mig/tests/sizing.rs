//! The MIG training lower bound agrees with core's training formulas: the
//! model states of a mixed-bf16 AdamW full fine-tune are 16 B/param.

use vramfit_core::train::{Optimizer, Precision, TrainProfile, TrainSetup};
use vramfit_core::{ModelSpec, Parallelism};
use vramfit_mig::{training_state_bytes, TRAIN_BYTES_PER_PARAM};

#[test]
fn sixteen_bytes_per_param_is_cores_mixed_precision_adamw() {
    let model = ModelSpec::llama_like("tiny", 256, 2, 4, 4, 688, 32000);
    let setup = TrainSetup { precision: Precision::MixedBf16, optimizer: Optimizer::AdamW, ..TrainSetup::default() };
    let states = TrainProfile::new(&model, &setup).unwrap().states(&Parallelism::default()).unwrap();
    // weights 2 + master 4 + gradients 2 + Adam 8 = 16 B per trainable parameter
    assert_eq!(states.total().unwrap(), states.trainable_per_gpu * TRAIN_BYTES_PER_PARAM, "{states:?}");
    assert_eq!(training_state_bytes(states.trainable_per_gpu).unwrap(), states.total().unwrap());
}

#[test]
fn absurd_counts_overflow_with_a_name() {
    let e = training_state_bytes(u64::MAX / 8).unwrap_err().to_string();
    assert!(e.contains("training state"), "{e}");
}
