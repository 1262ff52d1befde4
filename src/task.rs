//! Per-task counting: counters that follow their task across a kernel's
//! context switches (placeholder docs, written below).

mod context;
mod cpu;
mod switcher;

pub use context::{InheritError, TaskCount, TaskEvents};
pub use cpu::{Attribution, OnCpu};
pub use switcher::{TaskError, TaskSwitcher};

#[cfg(test)]
mod tests;
