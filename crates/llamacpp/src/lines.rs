//! The lines of a device's memory in a plan: what each is, its label as
//! llama.cpp logs it, its bytes and explanation. A leaf module (it imports
//! no other module of the crate but `graph`'s device), so the plan and the
//! companions ([`crate::companion`]) both build lines without an import
//! circle; [`crate::plan`] re-exports these types.

use crate::graph::Device;
use serde::{Deserialize, Serialize};
use vramfit_core::Explanation;

/// What a line of a device's memory is (the JSON's `buffers[].kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    /// weights (`model buffer`)
    Model,
    /// attention KV cache (`KV buffer`)
    Kv,
    /// recurrent state (`RS buffer`)
    State,
    /// the scheduler's compute buffer
    Compute,
    /// logits (`output buffer`, host)
    Output,
    /// CUDA context and cuBLAS, outside llama.cpp's buffers
    Reserve,
}

/// One line of a device's memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryLine {
    pub kind: LineKind,
    /// llama.cpp's log name of the buffer (`CUDA0 model buffer`, …)
    pub label: String,
    pub bytes: u64,
    pub explain: Explanation,
}

/// Everything on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMemory {
    pub device: Device,
    /// `CUDA0` … or `host`
    pub name: String,
    pub lines: Vec<MemoryLine>,
    pub total_bytes: u64,
    /// GPU memory (None for the host)
    pub capacity_bytes: Option<u64>,
}

impl DeviceMemory {
    /// Bytes of the lines of one kind.
    pub fn bytes(&self, kind: LineKind) -> u64 {
        self.lines.iter().filter(|l| l.kind == kind).fold(0u64, |a, l| a.saturating_add(l.bytes))
    }

    pub fn fits(&self) -> Option<bool> {
        self.capacity_bytes.map(|c| self.total_bytes <= c)
    }
}

/// A path as a POSIX shell word: bare when it holds only safe characters,
/// else in single quotes; a path with control characters in bash's `$'…'`
/// form with them escaped, so the printed command stays one line, runs as
/// written and puts nothing raw on the terminal.
pub fn shell_quote(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "._-/+:=@%,".contains(c)) {
        s.to_string()
    } else if s.chars().any(char::is_control) {
        let mut q = String::from("$'");
        for c in s.chars() {
            match c {
                '\'' => q.push_str("\\'"),
                '\\' => q.push_str("\\\\"),
                c if c.is_control() && (c as u32) < 0x100 => q.push_str(&format!("\\x{:02x}", c as u32)),
                c if c.is_control() => q.push_str(&format!("\\u{:04x}", c as u32)),
                c => q.push(c),
            }
        }
        q.push('\'');
        q
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
