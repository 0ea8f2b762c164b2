//! vramfit-ingest: total parsers of model artifacts. Each returns a value
//! or a typed error naming the file, the field and what was expected.

pub mod calibration;
pub mod deepspeed;
pub mod peft;
