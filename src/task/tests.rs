//! Per-task counting on the models: the register traffic of every kind of
//! switch asserted exactly with the recording backend, the semantics
//! (counts, periods resumed across a switch, overflows pending at a
//! switch-out, CPU-wide counters beside, refusal, inheritance), and a
//! randomized run of switches, PMIs and migrations on two CPUs
//! (`random.rs`). Every count here comes from a model.

mod archperf;
mod random;
mod rigs;
