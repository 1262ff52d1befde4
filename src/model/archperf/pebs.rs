//! PEBS (SDM Vol. 3B "Processor Event Based Sampling (PEBS)" of Nehalem,
//! Haswell, Skylake and Ice Lake): a counter with its IA32_PEBS_ENABLE bit
//! arms the assist when it overflows, and the next event it counts takes
//! the assist, which writes a record of the instruction of that event into
//! the DS buffer and reloads the counter with the DS area's reset value;
//! the PMI comes when the PEBS index reaches the interrupt threshold
//! (IA32_PERF_GLOBAL_STATUS.OvfBuf). The records are laid out here from
//! the manual's tables (the model's own transcription: `tables::ds`).

use super::counting::Increment;
use super::overflow::status_bit;
use super::registers::{ArchPerfModel, width_mask};
use super::tables::{MAX_GP, SLOTS, data_cfg, ds, evtsel, fixed_ctrl, global_status};

/// The largest record the model writes, in words: an adaptive record with
/// the basic, memory and GPR groups.
const MAX_WORDS: usize = ds::BASIC_WORDS + ds::MEMORY_WORDS + ds::GPR_WORDS;

impl ArchPerfModel {
    /// Whether counter slot `s` is a PEBS counter now (its IA32_PEBS_ENABLE
    /// bit, where the configuration has one).
    pub(super) fn pebs_slot(&self, s: usize) -> bool {
        self.config.pebs_enabled(self.pebs_enable, s)
    }

    /// Whether a PEBS counter increments in the first clock of `plan` (the
    /// run then goes one clock at a time: an assist belongs to one
    /// instruction).
    pub(super) fn pebs_live(&self, plan: &[Increment; SLOTS]) -> bool {
        (0..SLOTS).any(|s| plan[s].first > 0 && self.pebs_slot(s))
    }

    /// PEBS records written since reset.
    pub const fn pebs_records(&self) -> u64 {
        self.pebs_records
    }

    /// PEBS assists that wrote no record: the buffer was full (the PEBS
    /// index at the absolute maximum; the counter is then not reloaded and
    /// counts on, choice 18), or no memory was attached.
    pub const fn pebs_lost(&self) -> u64 {
        self.pebs_lost
    }

    /// One clock of the PEBS counters of `plan`: each counts its increments
    /// of the clock; a wrap arms its assist (and sets its status bit, as a
    /// PEBS counter's overflow does, and with INT raises the PMI at once);
    /// the next event of an armed counter takes the assist. The counters
    /// whose assists this clock takes share one record (their applicable
    /// counters), each reloaded from the DS area's reset value, the events
    /// after the assist counting on from there; a counter whose assist
    /// wrote no record keeps counting (0 to 1).
    pub(super) fn pebs_clock(&mut self, plan: &[Increment; SLOTS]) {
        let mut left = [0u64; SLOTS];
        for (s, l) in left.iter_mut().enumerate() {
            if self.pebs_slot(s) {
                *l = plan[s].first;
            }
        }
        loop {
            let mut applicable = 0u64;
            for (s, left) in left.iter_mut().enumerate() {
                while *left > 0 {
                    if self.pebs_armed[s] {
                        *left -= 1;
                        self.pebs_armed[s] = false;
                        applicable |= status_bit(s);
                        break;
                    }
                    let span = 1u128 << self.width(s);
                    let to_wrap = span - u128::from(self.counters[s]);
                    if u128::from(*left) >= to_wrap {
                        *left -= to_wrap as u64;
                        self.counters[s] = 0;
                        self.pebs_armed[s] = true;
                        if self.config.has_global_msrs() {
                            self.global_status |= status_bit(s);
                        }
                        if self.interrupts(s) {
                            self.pmi_sources |= status_bit(s);
                            self.raise_pmi();
                        }
                    } else {
                        self.counters[s] += *left;
                        *left = 0;
                    }
                }
            }
            if applicable == 0 {
                break;
            }
            let written = self.write_record(applicable);
            for s in (0..SLOTS).filter(|&s| applicable & status_bit(s) != 0) {
                let mask = width_mask(self.width(s));
                self.counters[s] = if written {
                    let reset = self.ds_area + ds::COUNTER_RESET + 8 * self.reset_index(s) as u64;
                    self.read_word(reset).unwrap_or(0) & mask
                } else {
                    (self.counters[s] + 1) & mask
                };
            }
        }
    }

    /// Where slot `s`'s reset value is, as a counter index from 40H.
    fn reset_index(&self, s: usize) -> usize {
        if s < MAX_GP {
            s
        } else {
            ds::fixed_reset_index(self.config.pebs.format, s - MAX_GP)
        }
    }

    /// Whether a record for `applicable` carries the adaptive groups: PEBS
    /// baseline, and one of its counters has its Adaptive_Record bit.
    fn adaptive(&self, applicable: u64) -> bool {
        self.config.pebs_baseline()
            && (0..SLOTS).any(|s| {
                applicable & status_bit(s) != 0
                    && if s < MAX_GP {
                        self.evtsel[s] & evtsel::ADAPTIVE != 0
                    } else {
                        self.fixed_ctrl & fixed_ctrl::adaptive(s - MAX_GP) != 0
                    }
            })
    }

    /// The record for the counters `applicable` of this clock's
    /// instruction, as words, and how many.
    fn encode(&self, applicable: u64) -> ([u64; MAX_WORDS], usize) {
        let r = &self.retirement;
        let g = &r.registers;
        // The memory fields: a load the load-latency facility sampled.
        let load = r.load.filter(|l| l.latency > self.pebs_ld_lat);
        let memory = load.map_or([0; 3], |l| [l.address, l.source, l.latency]);
        let mut w = [0u64; MAX_WORDS];
        let format = self.config.pebs.format;
        if format <= 3 {
            let head = [
                r.rflags, r.next_ip, g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8,
                g.r9, g.r10, g.r11, g.r12, g.r13, g.r14, g.r15,
            ];
            w[..head.len()].copy_from_slice(&head);
            // Format 3's applicable counters are exact; formats 1-2 hold
            // IA32_PERF_GLOBAL_STATUS as it is at the assist.
            w[18] = if format >= 3 {
                applicable
            } else {
                self.global_status | applicable
            };
            w[19..22].copy_from_slice(&memory);
            if format >= 2 {
                w[22] = r.ip;
                w[23] = 0;
            }
            if format >= 3 {
                w[24] = self.clock;
            }
            let n = match format {
                1 => ds::NEHALEM_WORDS,
                2 => ds::HASWELL_WORDS,
                _ => ds::SKYLAKE_WORDS,
            };
            return (w, n);
        }
        let groups = if self.adaptive(applicable) {
            self.pebs_data_cfg & (data_cfg::MEMORY | data_cfg::GPRS)
        } else {
            0
        };
        let mut n = ds::BASIC_WORDS;
        w[1] = r.ip;
        w[2] = applicable;
        w[3] = self.clock;
        if groups & data_cfg::MEMORY != 0 {
            w[n..n + 3].copy_from_slice(&memory);
            n += ds::MEMORY_WORDS;
        }
        if groups & data_cfg::GPRS != 0 {
            let gprs = [
                r.rflags, r.next_ip, g.rax, g.rcx, g.rdx, g.rbx, g.rsp, g.rbp, g.rsi, g.rdi, g.r8,
                g.r9, g.r10, g.r11, g.r12, g.r13, g.r14, g.r15,
            ];
            w[n..n + ds::GPR_WORDS].copy_from_slice(&gprs);
            n += ds::GPR_WORDS;
        }
        w[0] = groups | ((n as u64 * 8) << ds::SIZE_SHIFT);
        (w, n)
    }

    /// Writes the record for `applicable` at the PEBS index and advances
    /// it; at the interrupt threshold, sets OvfBuf and raises the PMI.
    /// Whether a record was written (not when the buffer is full, no DS
    /// area is set or no memory is attached).
    fn write_record(&mut self, applicable: u64) -> bool {
        let area = self.ds_area;
        let field = |offset: u64| area.checked_add(offset);
        let read = |m: &Self, offset| field(offset).and_then(|a| m.read_word(a));
        let (Some(base), Some(index), Some(maximum), Some(threshold)) = (
            read(self, ds::PEBS_BASE),
            read(self, ds::PEBS_INDEX),
            read(self, ds::PEBS_MAXIMUM),
            read(self, ds::PEBS_THRESHOLD),
        ) else {
            self.pebs_lost += 1;
            return false;
        };
        let (words, n) = self.encode(applicable);
        let size = n as u64 * 8;
        let fits = index >= base && index.checked_add(size).is_some_and(|end| end <= maximum);
        if !fits || area == 0 {
            self.pebs_lost += 1;
            return false;
        }
        for (k, word) in words[..n].iter().enumerate() {
            self.write_word(index + 8 * k as u64, *word);
        }
        let index = index + size;
        if let Some(at) = field(ds::PEBS_INDEX) {
            self.write_word(at, index);
        }
        self.pebs_records += 1;
        if index >= threshold {
            self.global_status |= global_status::OVF_BUF;
            self.raise_pmi();
        }
        true
    }
}
