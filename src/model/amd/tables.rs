//! The model's own constants, transcribed from the manuals (not from the
//! driver): MSR addresses (AMD64 APM Vol. 2 13.2; the family 17h/19h
//! Processor Programming References' MSR list), the bit fields of the
//! event-select registers (APM Vol. 2 Figure "Performance Event-Select
//! Register (PerfEvtSeln)") and the CPUID bits (APM Vol. 3 Appendix E).

/// PerfEvtSel0 / `PERF_LEGACY_CTL0` (C001_0000H); legacy control n at
/// C001_0000H + n, n = 0-3.
pub const LEGACY_CTL0: u32 = 0xC001_0000;
/// PerfCtr0 / `PERF_LEGACY_CTR0` (C001_0004H); legacy counter n at
/// C001_0004H + n.
pub const LEGACY_CTR0: u32 = 0xC001_0004;
/// `PERF_CTL0` (C001_0200H); control n at C001_0200H + 2n (PerfCtrExtCore).
pub const CORE_CTL0: u32 = 0xC001_0200;
/// `PERF_CTR0` (C001_0201H); counter n at C001_0201H + 2n.
pub const CORE_CTR0: u32 = 0xC001_0201;
/// PerfCntrGlobalStatus (C000_0300H, PerfMonV2): read only.
pub const GLOBAL_STATUS: u32 = 0xC000_0300;
/// PerfCntrGlobalCtl (C000_0301H, PerfMonV2).
pub const GLOBAL_CTL: u32 = 0xC000_0301;
/// PerfCntrGlobalStatusClr (C000_0302H, PerfMonV2): write 1 to clear.
pub const GLOBAL_STATUS_CLR: u32 = 0xC000_0302;
/// PerfCntrGlobalStatusSet (C000_0303H, PerfMonV2): write 1 to set.
pub const GLOBAL_STATUS_SET: u32 = 0xC000_0303;

/// The legacy counters every AMD64 processor has (nothing enumerates them).
pub const LEGACY: usize = 4;
/// The most core counters the model has: six, PerfCtrExtCore's; a larger
/// PerfMonV2 count is clamped.
pub const MAX: usize = 6;
/// The counter width (APM Vol. 2 13.2.1: "48-bit counters").
pub const WIDTH: u32 = 48;

/// PerfEvtSeln fields (APM Vol. 2 13.2.1).
pub mod ctl {
    /// EventSelect\[7:0\], bits 7:0.
    pub const EVENT_LOW: u64 = 0xFF;
    /// UnitMask, bits 15:8.
    pub const UNIT_MASK: u64 = 0xFF << 8;
    /// OS and USR: bit 16 counts at CPL > 0, bit 17 at CPL 0.
    pub const USR: u64 = 1 << 16;
    /// See [`USR`].
    pub const OS: u64 = 1 << 17;
    /// Edge, bit 18.
    pub const EDGE: u64 = 1 << 18;
    /// INT, bit 20: interrupt on overflow.
    pub const INT: u64 = 1 << 20;
    /// EN, bit 22.
    pub const EN: u64 = 1 << 22;
    /// INV, bit 23.
    pub const INV: u64 = 1 << 23;
    /// CntMask, bits 31:24.
    pub const CNT_MASK_SHIFT: u32 = 24;
    /// See [`CNT_MASK_SHIFT`].
    pub const CNT_MASK: u64 = 0xFF << CNT_MASK_SHIFT;
    /// EventSelect\[11:8\], bits 35:32.
    pub const EVENT_HIGH_SHIFT: u32 = 32;
    /// See [`EVENT_HIGH_SHIFT`].
    pub const EVENT_HIGH: u64 = 0xF << EVENT_HIGH_SHIFT;
    /// GuestOnly, bit 40.
    pub const GUEST_ONLY: u64 = 1 << 40;
    /// HostOnly, bit 41.
    pub const HOST_ONLY: u64 = 1 << 41;
    /// Every bit the register holds; the rest (19, 21, 36-39, 42-63) is
    /// reserved.
    pub const WRITABLE: u64 = EVENT_LOW
        | UNIT_MASK
        | USR
        | OS
        | EDGE
        | INT
        | EN
        | INV
        | CNT_MASK
        | EVENT_HIGH
        | GUEST_ONLY
        | HOST_ONLY;
}

/// CPUID bits the model reports (APM Vol. 3 Appendix E).
pub mod cpuid {
    /// Fn0000_0001_EDX: FPU (0), TSC (4), MSR (5), APIC (9).
    pub const EDX1: u32 = 1 | 1 << 4 | 1 << 5 | 1 << 9;
    /// Fn8000_0001_ECX\[23\]: PerfCtrExtCore.
    pub const PERF_CTR_EXT_CORE: u32 = 1 << 23;
    /// Fn8000_0022_EAX\[0\]: PerfMonV2.
    pub const PERFMON_V2: u32 = 1;
    /// Fn8000_0022_EBX\[3:0\]: NumPerfCtrCore.
    pub const NUM_PERF_CTR_CORE: u32 = 0xF;
}
