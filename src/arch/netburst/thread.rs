//! Logical-processor and CPL qualification (documented on [`counts`]).

use super::escr::ThreadCpl;
pub use crate::arch::ia32::Privilege;

/// An event's logical-processor qualification (SDM Table 19-34), a column
/// of the event catalog ([`EventInfo::specificity`](crate::arch::netburst::EventInfo::specificity)):
/// which of [`counts`]'s rules applies to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Specificity {
    /// TS: attributable to one logical processor (Table 18-29 applies).
    ThreadSpecific,
    /// TI: not attributable (Table 18-30 applies).
    ThreadIndependent,
    /// Not listed in Table 19-34.
    Unlisted,
}

/// A logical processor of a Hyper-Threading core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LogicalProcessor {
    /// T0.
    T0,
    /// T1.
    T1,
}

impl LogicalProcessor {
    /// Both, T0 first.
    pub const ALL: [LogicalProcessor; 2] = [LogicalProcessor::T0, LogicalProcessor::T1];

    /// 0 or 1.
    pub const fn index(self) -> usize {
        match self {
            LogicalProcessor::T0 => 0,
            LogicalProcessor::T1 => 1,
        }
    }

    /// The other logical processor of the core.
    pub const fn other(self) -> LogicalProcessor {
        match self {
            LogicalProcessor::T0 => LogicalProcessor::T1,
            LogicalProcessor::T1 => LogicalProcessor::T0,
        }
    }
}

/// Where both logical processors currently are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CplState {
    /// T0's privilege level.
    pub t0: Privilege,
    /// T1's privilege level.
    pub t1: Privilege,
}

impl CplState {
    /// The privilege level of `lp`.
    pub const fn of(self, lp: LogicalProcessor) -> Privilege {
        match lp {
            LogicalProcessor::T0 => self.t0,
            LogicalProcessor::T1 => self.t1,
        }
    }
}

const fn flag(cpl: ThreadCpl, lp: LogicalProcessor, p: Privilege) -> bool {
    match (lp, p) {
        (LogicalProcessor::T0, Privilege::Os) => cpl.t0_os,
        (LogicalProcessor::T0, Privilege::Usr) => cpl.t0_usr,
        (LogicalProcessor::T1, Privilege::Os) => cpl.t1_os,
        (LogicalProcessor::T1, Privilege::Usr) => cpl.t1_usr,
    }
}

/// SDM Table 18-29: does a TS event that occurs on `on`, while `on` is at
/// privilege `level`, count?
pub const fn ts_counts(cpl: ThreadCpl, on: LogicalProcessor, level: Privilege) -> bool {
    flag(cpl, on, level)
}

/// SDM Table 18-30: does a TI event count while the processors are in
/// `state`?
pub const fn ti_counts(cpl: ThreadCpl, state: CplState) -> bool {
    let os = cpl.t0_os || cpl.t1_os;
    let usr = cpl.t0_usr || cpl.t1_usr;
    let any_os = matches!(state.t0, Privilege::Os) || matches!(state.t1, Privilege::Os);
    let any_usr = matches!(state.t0, Privilege::Usr) || matches!(state.t1, Privilege::Usr);
    (os && any_os) || (usr && any_usr)
}

/// Whether an event counts under the ESCR's thread and CPL flags `cpl`,
/// with the logical processors at `state`, by the event's qualification:
/// for a TS event, one occurring on `on`; for a TI event `on` is ignored.
/// `None` for events Table 19-34 does not list.
///
/// # Logical-processor and CPL qualification
///
/// Logical-processor and CPL qualification on Hyper-Threading parts (SDM
/// Vol. 3B 18.16.4, Tables 18-29 and 18-30).
///
/// An ESCR has four flags, `T0_OS`, `T0_USR`, `T1_OS`, `T1_USR`
/// ([`ThreadCpl`]). What they mean depends on whether the event is
/// thread-specific (TS) or thread-independent (TI), SDM Table 19-34:
///
/// * TS events (Table 18-29): an event that occurs on logical processor Tn is
///   counted iff the Tn flag for Tn's current privilege level is set; the
///   other processor's flags are irrelevant.
/// * TI events (Table 18-30): the event belongs to neither processor. The OS
///   flags of both processors act as one "count while some processor is at
///   CPL 0" condition, the USR flags as one "count while some processor is at
///   CPL 1-3" condition; with an OS and a USR flag set the event counts
///   irrespective of CPL and thread.
///
/// Source disagreement: SDM Table 18-29, row `T0_OS/T0_USR = 01`, column
/// `T1_OS/T1_USR = 10`, reads "counts while (a) T0 in OS or (b) T1 in OS".
/// With `T0_OS` clear that contradicts the rule stated just above the table
/// ("depends only on the setting of the T0_USR and T0_OS flags") and the
/// symmetric cells; this crate follows the rule: T0 in USR or T1 in OS.
/// (The cell at row 11, column 10 is garbled in the same edition; its meaning,
/// T0 at any CPL or T1 in OS, is unambiguous.)
///
/// # Examples
///
/// ```
/// use pmu::arch::netburst::ts_counts;
/// use pmu::arch::netburst::{LogicalProcessor, Privilege, ThreadCpl};
///
/// // An ESCR with T1_USR only counts a TS event on T1 at CPL 3, nothing on T0.
/// let cpl = ThreadCpl { t1_usr: true, ..ThreadCpl::NONE };
/// assert!(ts_counts(cpl, LogicalProcessor::T1, Privilege::Usr));
/// assert!(!ts_counts(cpl, LogicalProcessor::T0, Privilege::Usr));
/// assert!(!ts_counts(cpl, LogicalProcessor::T1, Privilege::Os));
/// ```
pub const fn counts(
    specificity: Specificity,
    cpl: ThreadCpl,
    on: LogicalProcessor,
    state: CplState,
) -> Option<bool> {
    match specificity {
        Specificity::ThreadSpecific => Some(ts_counts(cpl, on, state.of(on))),
        Specificity::ThreadIndependent => Some(ti_counts(cpl, state)),
        Specificity::Unlisted => None,
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // row/column index two tables at once
mod tests {
    use super::*;
    use LogicalProcessor::*;
    use Privilege::*;

    /// Row/column order of both SDM tables: flag pairs (OS, USR) = 00, 01, 11, 10.
    const ORDER: [(bool, bool); 4] = [(false, false), (false, true), (true, true), (true, false)];

    /// SDM Table 18-29, cell by cell (rows T0_OS/T0_USR, columns
    /// T1_OS/T1_USR): the (processor, level) conditions under which a TS
    /// event counts. "T0U" = T0 in USR, "T1O" = T1 in OS; "ALL" =
    /// irrespective of CPL, T0, T1; "" = zero count. The one corrected cell
    /// is marked.
    const TABLE_18_29: [[&str; 4]; 4] = [
        ["", "T1U", "T1O T1U", "T1O"],
        [
            "T0U",
            "T0U T1U",
            "T0U T1O T1U",
            "T0U T1O", /* SDM text: "T0 in OS or T1 in OS" */
        ],
        ["T0O T0U", "T0O T0U T1U", "ALL", "T0O T0U T1O"],
        ["T0O", "T0O T1U", "T0O T1O T1U", "T0O T1O"],
    ];

    /// SDM Table 18-30 (TI events), same notation: a condition holds when
    /// that processor is at that level.
    const TABLE_18_30: [[&str; 4]; 4] = [
        ["", "T0U T1U", "ALL", "T0O T1O"],
        ["T0U T1U", "T0U T1U", "ALL", "ALL"],
        ["ALL", "ALL", "ALL", "ALL"],
        ["T0O T1O", "ALL", "ALL", "T0O T1O"],
    ];

    fn holds(cell: &str, lp: LogicalProcessor, p: Privilege) -> bool {
        let tok = match (lp, p) {
            (T0, Os) => "T0O",
            (T0, Usr) => "T0U",
            (T1, Os) => "T1O",
            (T1, Usr) => "T1U",
        };
        cell == "ALL" || cell.split(' ').any(|t| t == tok)
    }

    fn cpl(row: usize, col: usize) -> ThreadCpl {
        ThreadCpl {
            t0_os: ORDER[row].0,
            t0_usr: ORDER[row].1,
            t1_os: ORDER[col].0,
            t1_usr: ORDER[col].1,
        }
    }

    const STATES: [CplState; 4] = [
        CplState { t0: Os, t1: Os },
        CplState { t0: Os, t1: Usr },
        CplState { t0: Usr, t1: Os },
        CplState { t0: Usr, t1: Usr },
    ];

    #[test]
    fn table_18_29_exhaustive() {
        for row in 0..4 {
            for col in 0..4 {
                let c = cpl(row, col);
                for lp in [T0, T1] {
                    for p in [Os, Usr] {
                        let want = holds(TABLE_18_29[row][col], lp, p);
                        assert_eq!(
                            ts_counts(c, lp, p),
                            want,
                            "row {row} col {col} {lp:?} {p:?}"
                        );
                        for st in STATES.iter().filter(|s| s.of(lp) == p) {
                            assert_eq!(counts(Specificity::ThreadSpecific, c, lp, *st), Some(want));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn table_18_30_exhaustive() {
        for row in 0..4 {
            for col in 0..4 {
                let c = cpl(row, col);
                for st in STATES {
                    let cell = TABLE_18_30[row][col];
                    let want = holds(cell, T0, st.t0) || holds(cell, T1, st.t1);
                    assert_eq!(ti_counts(c, st), want, "row {row} col {col} {st:?}");
                    for lp in [T0, T1] {
                        assert_eq!(
                            counts(Specificity::ThreadIndependent, c, lp, st),
                            Some(want)
                        );
                    }
                    assert_eq!(counts(Specificity::Unlisted, c, T0, st), None);
                }
            }
        }
    }

    #[test]
    fn all_sixteen_flag_combinations_are_covered() {
        let mut seen = [false; 16];
        for row in 0..4 {
            for col in 0..4 {
                seen[cpl(row, col).bits() as usize] = true;
            }
        }
        assert!(seen.iter().all(|s| *s));
    }
}
