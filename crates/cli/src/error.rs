//! Which input an error is about, as a typed value: a front end that shows
//! the message beside an input (the local web page) reads the field from
//! the error, never from its text.
//!
//! A command's error stays an `anyhow::Error` whose text is the CLI's
//! message. Where the input is known, the error carries a [`FieldError`]
//! (same text, the field beside it); core's [`WorkloadError`] names its
//! [`Field`] itself, and core's [`QuantityError`] the flag it parsed.
//! [`error_field`] finds the first of these in the error's chain.

use std::borrow::Cow;
use std::fmt;
use vramfit_core::quantity::QuantityError;
use vramfit_core::workload::{Field, WorkloadError};
use vramfit_core::CoreError;

/// An input of a command: a flag by its long name (`gpu-mem`), `model`
/// (the model argument) or `files` (the outputs `check` reads). The web API's request field is the same name in
/// snake_case ([`FieldId::request_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldId(Cow<'static, str>);

impl FieldId {
    /// The model argument (a preset, hub id or file).
    pub const MODEL: FieldId = FieldId(Cow::Borrowed("model"));
    /// The nvidia-smi outputs and bandwidth reports `check` reads (its file flags).
    pub const FILES: FieldId = FieldId(Cow::Borrowed("files"));

    /// A flag by its long name, without the dashes (`gpu-mem`).
    pub const fn flag(long: &'static str) -> FieldId {
        FieldId(Cow::Borrowed(long))
    }

    /// The long flag name (`gpu-mem`); `model` for the model argument.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// The name as the web API's request spells it (`gpu_mem`).
    pub fn request_key(&self) -> String {
        self.0.replace('-', "_")
    }
}

impl From<&'static str> for FieldId {
    fn from(long: &'static str) -> FieldId {
        FieldId::flag(long)
    }
}

/// The flag that sets a workload field of core (`--context` sets the
/// training sequence too; its `--seq` is an alias).
impl From<Field> for FieldId {
    fn from(f: Field) -> FieldId {
        match f {
            Field::Seq => FieldId::flag("context"),
            other => FieldId::flag(other.id()),
        }
    }
}

impl fmt::Display for FieldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An error about one input: the error's own text, and the field.
#[derive(Debug)]
pub struct FieldError {
    pub field: FieldId,
    error: anyhow::Error,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for FieldError {
    /// The wrapped error itself: its text is this one's (so `error_text`
    /// skips it) and a downcast through the chain still finds it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let inner: &(dyn std::error::Error + Send + Sync + 'static) = &*self.error;
        Some(inner)
    }
}

/// `error` as an error about `field`.
pub fn field_error(field: impl Into<FieldId>, error: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(FieldError { field: field.into(), error: error.into() })
}

/// Return early with a message about `field`: `bail_on!("gpu-util", "--gpu-util needs …")`.
#[macro_export]
macro_rules! bail_on {
    ($field:expr, $($arg:tt)*) => {
        return Err($crate::error::field_error($field, anyhow::anyhow!($($arg)*)))
    };
}

/// Mark the error of a result as being about a field.
pub trait OnField<T> {
    /// The error is about `field`, whatever it said before (the outermost mark wins).
    fn on_field(self, field: impl Into<FieldId>) -> anyhow::Result<T>;
    /// The error is about `field` unless it already names one.
    fn or_field(self, field: impl Into<FieldId>) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> OnField<T> for Result<T, E> {
    fn on_field(self, field: impl Into<FieldId>) -> anyhow::Result<T> {
        self.map_err(|e| field_error(field, e))
    }

    fn or_field(self, field: impl Into<FieldId>) -> anyhow::Result<T> {
        self.map_err(|e| {
            let e: anyhow::Error = e.into();
            if error_field(&e).is_some() {
                e
            } else {
                field_error(field, e)
            }
        })
    }
}

/// The input `e` is about: the first [`FieldError`], core [`WorkloadError`]
/// (by its [`Field`]) or [`QuantityError`] (by the flag it parsed) in its
/// chain; `None` when no input is named (a file that is not what it should
/// be, vramfit's own inconsistency).
pub fn error_field(e: &anyhow::Error) -> Option<FieldId> {
    e.chain().find_map(|c| {
        if let Some(f) = c.downcast_ref::<FieldError>() {
            return Some(f.field.clone());
        }
        if let Some(w) = c.downcast_ref::<WorkloadError>() {
            return Some(w.field().into());
        }
        if let Some(CoreError::Workload(w)) = c.downcast_ref::<CoreError>() {
            return Some(w.field().into());
        }
        let q = c.downcast_ref::<QuantityError>()?;
        q.flag.strip_prefix("--").map(|long| FieldId(Cow::Owned(long.to_string())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_rides_along_and_the_text_is_the_errors() {
        let e = field_error("gpu-util", anyhow::anyhow!("--gpu-util needs --gpu or --gpu-mem"));
        assert_eq!(e.to_string(), "--gpu-util needs --gpu or --gpu-mem");
        assert_eq!(crate::error_text(&e), "--gpu-util needs --gpu or --gpu-mem");
        assert_eq!(error_field(&e), Some(FieldId::flag("gpu-util")));
        // under added context, the field is still found; the outermost field wins
        let e = field_error("service", e.context("--service a=b"));
        assert_eq!(error_field(&e).unwrap().request_key(), "service");
        // or_field keeps a field already named
        let inner: anyhow::Result<()> = Err(field_error("config-json", anyhow::anyhow!("pasted config.json: bad")));
        assert_eq!(error_field(&inner.or_field(FieldId::MODEL).unwrap_err()).unwrap().name(), "config-json");
        let plain: anyhow::Result<()> = Err(anyhow::anyhow!("unknown model 'x'"));
        assert_eq!(error_field(&plain.or_field(FieldId::MODEL).unwrap_err()), Some(FieldId::MODEL));
        // an internal error keeps its exit code through the wrapper
        let e = field_error("batch", CoreError::Internal("x".into()));
        assert_eq!(crate::exit_code(&e), crate::EXIT_INTERNAL);
    }

    #[test]
    fn core_errors_name_their_fields() {
        let e = anyhow::Error::from(CoreError::Workload(WorkloadError::Zero { field: Field::Seq }));
        assert_eq!(error_field(&e), Some(FieldId::flag("context")));
        let e = anyhow::Error::from(WorkloadError::TpSplitsHeads { tp: 3, heads: 32 });
        assert_eq!(error_field(&e).unwrap().request_key(), "tp");
        let q = vramfit_core::quantity::parse_count("--tokens", "lots", 1..=10).unwrap_err();
        assert_eq!(error_field(&anyhow::Error::from(q)).unwrap().request_key(), "tokens");
        let q = vramfit_core::quantity::parse_size("service 'chat'", "-1GiB", 1..=10).unwrap_err();
        assert_eq!(error_field(&anyhow::Error::from(q)), None, "not a flag");
        assert_eq!(error_field(&anyhow::anyhow!("--batch is mentioned only in the text")), None);
    }
}
