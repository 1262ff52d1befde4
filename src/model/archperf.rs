//! A register-level model of Intel's architectural performance monitoring,
//! versions 1 to 5: a test instrument the architectural-PMU driver runs
//! against, on the host and inside the QEMU test kernels.
//!
//! It is written from the manuals, with its own constants (`tables.rs`),
//! independently of the driver, so that each can catch the other's
//! mistakes. Sources: Intel SDM Vol. 3B chapter "Performance Monitoring"
//! (chapter 20 in current editions, 18 in editions before 2022: section
//! 20.2.x here is 18.2.x there), in particular 20.2.1 (version 1,
//! IA32_PERFEVTSELx), Table 20-1 ("UMask and Event Select Encodings for
//! Pre-Defined Architectural Performance Events"), 20.2.2 (version 2: fixed
//! counters, IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL/STATUS/OVF_CTRL),
//! 20.2.3 (version 3: AnyThread), 20.2.4 (version 4: CTR_Frz/LBR_Frz,
//! IA32_PERF_GLOBAL_STATUS_RESET/SET, IA32_PERF_GLOBAL_INUSE), 20.2.5
//! (version 5: fixed-counter bitmap, AnyThread deprecation), 20.2.6
//! (full-width writes); Vol. 3B 18.4.7 (17.4.7 in older editions, freezing
//! on PMI); Vol. 4 Table 2-2 (IA-32 architectural MSRs); Vol. 2A CPUID
//! (leaves 0AH, 07H, 1AH); Vol. 2B RDPMC.
//! PEBS from the SDM's PEBS sections of Nehalem, Haswell, Skylake and Ice
//! Lake (IA32_PEBS_ENABLE, MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT, the 64-bit
//! DS save area, record formats 1-5), Vol. 4's IA32_MISC_ENABLE.
//! `no_std`, allocation-free, no `unsafe` but the DS memory's two accesses
//! (`memory.rs`, under [`ArchPerfModel::attach_ds_memory`]'s contract);
//! [`ArchPerfModel::new`] is a
//! `const fn`, so a model can live in a `static` (behind a lock:
//! [`SharedArchPerfModel`]).
//!
//! # How a test drives it
//!
//! ```
//! use pmu::access::MsrAccess;
//! use pmu::model::archperf::*;
//! # fn main() -> Result<(), Fault> {
//! let mut m = ArchPerfModel::new(Config::skylake());
//! // IA32_PERFEVTSEL0: instructions retired (C0H/00H), OS, EN, INT.
//! m.write_msr(0x186, 0xC0 | (1 << 17) | (1 << 22) | (1 << 20))?;
//! m.write_msr(0x4C1, (1 << 48) - 3)?;          // IA32_A_PMC0: 3 before the wrap
//! let instr = Event::arch(ArchEvent::InstructionsRetired, 10);
//! let done = m.inject_until_pmi(instr);        // one per clock
//! assert_eq!(done, Injected { injected: 3, pmi_pending: true });
//! assert_eq!(m.read_msr(0x38E)?, 1);           // IA32_PERF_GLOBAL_STATUS: PMC0
//! assert_eq!(m.rdpmc(0)?, 0);
//! assert!(m.take_pmi());
//! m.write_msr(0x390, 1)?;                      // acknowledge
//! assert_eq!(m.global_status(), 0);
//! # Ok(())
//! # }
//! ```
//!
//! [`ArchPerfModel`] implements [`crate::access::MsrAccess`] (RDMSR, WRMSR,
//! RDPMC at CPL 0, faulting with [`Fault`]) and [`crate::detect::Cpuid`]
//! ([`Config::cpuid`]).
//!
//! # What it models
//!
//! * **Register file** (`registers.rs`): IA32_PMCx (C1H + x), IA32_A_PMCx
//!   (4C1H + x, with full-width writes), IA32_PERFEVTSELx (186H + x),
//!   IA32_FIXED_CTRx (309H + x), IA32_FIXED_CTR_CTRL (38DH),
//!   IA32_PERF_GLOBAL_STATUS (38EH), IA32_PERF_GLOBAL_CTRL (38FH),
//!   IA32_PERF_GLOBAL_OVF_CTRL / STATUS_RESET (390H),
//!   IA32_PERF_GLOBAL_STATUS_SET (391H) and IA32_PERF_GLOBAL_INUSE (392H),
//!   IA32_PERF_CAPABILITIES (345H), IA32_DEBUGCTL (1D9H), the LBR MSRs
//!   (below). The #GP rules, each
//!   a [`GpReason`]; a faulting access changes nothing:
//!   - any other MSR, an MSR of a counter that does not exist, the
//!     IA32_PERF_GLOBAL_* MSRs and IA32_FIXED_CTR_CTRL on version 1,
//!     STATUS_SET and INUSE before version 4, IA32_A_PMCx without
//!     FW_WRITE, IA32_PERF_CAPABILITIES without PDCM: [`GpReason::UnknownMsr`]
//!     (Vol. 4 Table 2-2 "If CPUID..." conditions; SDM 20.2.2, 20.2.4, 20.2.6);
//!   - IA32_PERFEVTSELx bits 63:32, and bit 21 (AnyThread) outside versions
//!     3-4 (SDM 20.2.1.1 figure: 63:32 reserved; 20.2.3; choice 1):
//!     [`GpReason::ReservedBits`];
//!   - IA32_FIXED_CTR_CTRL: fields of fixed counters that do not exist,
//!     AnyThread outside versions 3-4 (SDM 20.2.2, 20.2.3, 20.2.5):
//!     [`GpReason::ReservedBits`];
//!   - IA32_PERF_GLOBAL_CTRL: bits of counters that do not exist (Vol. 4
//!     Table 2-2, 38FH: "Reserved" above EN_PMCn and EN_FIXED_CTRn):
//!     [`GpReason::ReservedBits`];
//!   - IA32_PERF_GLOBAL_OVF_CTRL / STATUS_RESET and STATUS_SET: bits other
//!     than the counters' and the status bits the version defines
//!     ([`Config::status_reset_bits`], [`Config::status_set_bits`]):
//!     [`GpReason::ReservedBits`];
//!   - IA32_DEBUGCTL: bits other than [`Config::debugctl_writable`]:
//!     [`GpReason::ReservedBits`];
//!   - WRMSR to IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_INUSE or
//!     IA32_PERF_CAPABILITIES (read-only, Vol. 4 Table 2-2 "(RO)"):
//!     [`GpReason::ReadOnly`];
//!   - IA32_A_PMCx with bits at or above the general-purpose width (SDM
//!     20.2.6: "EDX\[63:COUNTERWIDTH\] are reserved"), IA32_FIXED_CTRx with
//!     bits at or above the fixed width (SDM 20.2.2: "Bits beyond the width
//!     of the fixed-function counter are reserved and must be written as
//!     zeros"): [`GpReason::OutOfWidth`];
//!   - RDPMC of a counter that does not exist (SDM Vol. 2B RDPMC):
//!     [`GpReason::NoSuchCounter`]; RDPMC with ECX\[31\] (fast read):
//!     [`GpReason::FastReadUnsupported`] (choice 5).
//!
//!   A legacy write to IA32_PMCx stores EAX\[31:0\] sign-extended to 64 bits
//!   and cut to the counter width; EDX is ignored (SDM 20.2.6). Reset:
//!   everything zero but IA32_PERF_GLOBAL_CTRL ([`Config::global_ctrl_reset`],
//!   choice 2).
//! * **Counting** (`counting.rs`): a general-purpose counter counts an
//!   [`Event`] when its PERFEVTSEL has EN, the event select and unit mask
//!   are equal to the event's, USR (CPL > 0) or OS (CPL 0) admits the
//!   event's privilege, from version 2 its IA32_PERF_GLOBAL_CTRL bit is set,
//!   and from version 4 CTR_Frz is clear (SDM 20.2.1.1, 20.2.2, 20.2.4.1).
//!   Per clock, the matching occurrences are the input: CMASK = 0 adds the
//!   input (INV ignored); CMASK > 0 adds 1 when the input is >= CMASK (INV:
//!   < CMASK); EDGE adds 1 only when that condition (CMASK = 0: input > 0)
//!   goes from false to true. Fixed counter `i` counts its architectural
//!   event ([`FIXED_EVENTS`]: 0 instructions retired C0H/00H, 1 core cycles
//!   3CH/00H, 2 reference cycles 3CH/01H, 3 TOPDOWN.SLOTS A4H/01H) at the
//!   privilege levels its IA32_FIXED_CTR_CTRL field enables (bit 0 OS, bit 1
//!   USR), with IA32_PERF_GLOBAL_CTRL bit 32 + `i` set and CTR_Frz clear.
//!   [`ArchPerfModel::inject`] spends one clock per occurrence (in bulk, in
//!   constant time), [`ArchPerfModel::cycle`] is one clock with any number of
//!   occurrences, [`ArchPerfModel::idle`] clocks without events.
//! * **Overflow** (`overflow.rs`): a counter wraps at its width; the wrap
//!   sets its IA32_PERF_GLOBAL_STATUS bit (bit `i`, or 32 + `i` for fixed
//!   counter `i`; version 2 and later) and, with INT (general-purpose) or
//!   PMI (fixed) set, requests a PMI (SDM 20.2.1.1 INT, 20.2.2). The line
//!   rises in the clock of the wrap, or with the counter's
//!   [`skid`](ArchPerfModel::set_skid)-th increment after it, and stays
//!   pending until [`ArchPerfModel::take_pmi`]. No LVT: the kernel (the
//!   QEMU harness) delivers the PMI. Writing 1s to OVF_CTRL / STATUS_RESET
//!   clears status bits, to STATUS_SET (version 4) sets them.
//!   IA32_DEBUGCTL.FREEZE_PERFMON_ON_PMI / FREEZE_LBRS_ON_PMI act when the
//!   line rises: versions 2-3 clear IA32_PERF_GLOBAL_CTRL /
//!   IA32_DEBUGCTL.LBR, versions 4-5 set CTR_Frz / LBR_Frz (SDM 18.4.7,
//!   20.2.4.1).
//! * **PEBS** (`pebs.rs`, `retire.rs`, `memory.rs`; [`PebsConfig`]): a
//!   counter with its IA32_PEBS_ENABLE bit (PMC0-3 before PEBS baseline,
//!   every general and fixed counter with it) arms its assist when it wraps
//!   (its status bit set too); the next event it counts takes the assist,
//!   which writes a record of that clock's instruction into the DS buffer
//!   at IA32_DS_AREA (read and written in memory, by linear address, once
//!   [`ArchPerfModel::attach_ds_memory`] says the memory is there), reloads
//!   the counter from the area's reset value, and at the interrupt threshold
//!   sets OvfBuf (IA32_PERF_GLOBAL_STATUS bit 62) and raises the PMI. The
//!   records are laid out from the model's own tables (`tables::ds`): format
//!   1 (RFLAGS, RIP of the next instruction, the 16 registers, status, DLA,
//!   DSE, latency), 2 (+ EventingIP, TSX), 3 (+ TSC; the status word the
//!   applicable counters), 4-5 adaptive (the basic group, and with the
//!   counter's Adaptive_Record bit MSR_PEBS_DATA_CFG's memory and GPR
//!   groups; format 5's fixed reset values after 32 general ones). The
//!   instruction comes from [`ArchPerfModel::retire`] ([`Retirement`]: its
//!   address, the next one's, registers, branch kind, load), which a
//!   single-stepping kernel feeds with the instructions it really runs: a
//!   retirement counts INST_RETIRED.ANY, a branch BR_INST_RETIRED.ALL_BRANCHES,
//!   a load above MSR_PEBS_LD_LAT's threshold the load-latency event. The
//!   bulk paths record an instruction of address 0.
//! * **Last branch records** (`lbr.rs`; [`LbrConfig`]): the legacy stack
//!   (MSR_LBR_SELECT 1C8H, MSR_LASTBRANCH_TOS 1C9H, the records at 680H +
//!   x, 6C0H + x and, formats 5 and 7, DC0H + x; IA32_PERF_CAPABILITIES\[5:0\]
//!   the format) or architectural LBR (CPUID.07H:EDX\[19\], leaf 1CH,
//!   IA32_LBR_CTL 14CEH, IA32_LBR_DEPTH 14CFH, the records at 1500H, 1600H,
//!   1200H + x). A taken branch [`ArchPerfModel::retire`] retires is
//!   recorded, before its events count (the branch that overflows a counter
//!   is in the frozen records), when the records are on (IA32_DEBUGCTL.LBR;
//!   IA32_LBR_CTL.LBREn), not frozen (LBR_Frz from version 4; the legacy
//!   freeze clears IA32_DEBUGCTL.LBR) and the filter takes its kind and
//!   privilege (MSR_LBR_SELECT's suppress bits, IA32_LBR_CTL's record
//!   bits); legacy records go to the ring at the next TOS, architectural
//!   ones shift in at record 0. Each format's words from the model's own
//!   table: format 3's MISPRED and format 4's TSX bits over FROM's sign
//!   extension, format 5's INFO with the cycles, format 6's cycles over
//!   TO, architectural INFO with the cycles (valid) and the branch type. In
//!   call-stack mode (EN_CALLSTACK, CALL_STACK) a near return flushes the
//!   newest record (zeroes it and goes back one). A write of
//!   IA32_LBR_DEPTH zeroes every record. Presets: Nehalem's 16 records in
//!   format 3, Haswell's 16 in format 4 with call-stack mode, Skylake's and
//!   Ice Lake's 32 in format 5, Alder Lake's architectural LBR (depths 8 to
//!   32).
//! * **CPUID** ([`Config::cpuid`]): leaves 0, 1, 7, 0AH and 1AH from the
//!   [`Config`] (CPUID.01H:EDX.DS with PEBS), and leaf 23H, the
//!   "Architectural Performance Monitoring Extended Leaf", with
//!   [`Config::perfmon_ext`]; presets [`Config::v1`],
//!   [`Config::core2`], [`Config::nehalem`] (PEBS format 1),
//!   [`Config::haswell`] (2), [`Config::skylake`] (3), [`Config::icelake`]
//!   (4 with PEBS baseline), and one core of each hybrid part (their PEBS
//!   not modelled): Alder Lake's [`Config::alder_lake_p_core`] (Golden
//!   Cove, as it enumerates itself with the E-cores disabled),
//!   [`Config::alder_lake_p_core_hybrid`] (the same core beside its
//!   E-cores: leaf 0AH the common view) and [`Config::alder_lake_e_core`]
//!   (Gracemont), Meteor Lake's [`Config::meteor_lake_p_core`] (Redwood
//!   Cove) and [`Config::meteor_lake_e_core`] (Crestmont), both with leaf
//!   23H, and Lunar Lake's [`Config::lunar_lake_e_core`] (Skymont:
//!   version 6, fixed counters 0-2 and 4-6). Their CPUID leaves are those
//!   InstLatx64 recorded on those parts ([`common_leaf_0a`]). A hybrid
//!   part is modelled one core at a time: a kernel that plays one runs a
//!   model of each core type, one per CPU (the `hybrid` QEMU kernel).
//!
//! # What it does not model
//!
//! Timing and the microarchitecture (events are whatever the test injects:
//! a "cycles" counter counts injected 3CH occurrences, not the model's
//! clocks); PEBS's XMM and LBR groups (reserved bits of MSR_PEBS_DATA_CFG in
//! the model), PEBS via Intel PT, precise distribution (PDIR, PDIST),
//! which events are PEBS events on a part before baseline (the model takes
//! a record for any), architectural PEBS (CPUID leaf 23H's sub-leaves 4
//! and 5) and the rest of leaf 23H beyond sub-leaves 0, 1 and 3 (auto
//! counter reload; the UMASK2 and EQ bits), BTS (its IA32_DEBUGCTL bits
//! are stored), the last exception records, the LBR's misprediction (every
//! branch predicted: MISPRED 0) and transactions (the TSX bits 0), its deep
//! C-state reset and XSAVE of the LBR state, Core 2's and Atom's stacks at
//! 40H/60H, Intel PT (Trace_ToPA_PMI), the uncore, IA32_PERF_METRICS
//! and RDPMC's performance-metrics type, the second logical processor
//! (AnyThread counts like a thread-local counter), CondChgd (never set by
//! the model), SMM (FREEZE_WHILE_SMM), CR4.PCE (RDPMC is at CPL 0), pin
//! control (PC is stored and does nothing), IA32_MISC_ENABLE's bits other
//! than performance monitoring's, a hybrid part as a whole (the model is
//! one core of the configured type; general counters beyond
//! [`MAX_GP`], such as Lunar Lake's Lion Cove's ten), model-specific events and unit-mask semantics (events
//! match on the exact select and unit mask), errata.
//!
//! # Where the SDM is silent or the sources disagree, and what the model does
//!
//! 1. **AnyThread** (PERFEVTSELx\[21\], FIXED_CTR_CTRL bit 4i+2): version 3
//!    introduced it (SDM 20.2.3); version 5 deprecates it (CPUID.0AH:EDX\[15\],
//!    which the model reports set on version 5, SDM 20.2.5) without saying
//!    whether setting it then faults. The model accepts it on versions 3
//!    and 4 only (stored; with one logical processor modelled it changes
//!    nothing) and raises #GP on versions 1, 2 and 5, as KVM and Xen do for
//!    every guest (their reserved mask includes bit 21).
//! 2. **IA32_PERF_GLOBAL_CTRL reset value**: the model sets the enable bits
//!    of the general-purpose counters and clears those of the fixed
//!    counters, the RESET state KVM adopted from the SDM (commit
//!    7b46b733bdb4, "Set enable bits for GP counters in PERF_GLOBAL_CTRL at
//!    RESET"), and the one under which software written for version 1,
//!    which knows only PERFEVTSELx.EN, counts on later versions.
//! 3. **Legacy counter writes**: the SDM (20.2.6) defines the stored value as
//!    EAX\[31:0\] sign-extended and says nothing of EDX: the model ignores
//!    EDX (no #GP), as KVM does, and keeps the counter-width low bits.
//! 4. **Fixed counters**: the sign extension of 20.2.6 is stated for
//!    IA32_PMCx only, and fixed counters have no IA32_A_ alias; the model
//!    writes the full 64-bit value and raises #GP for bits at or above the
//!    fixed width (20.2.2). KVM instead truncates silently.
//! 5. **RDPMC**: ECX\[30\] selects the fixed counters and ECX\[29:0\] is the
//!    index. Current SDMs describe ECX\[31:16\] as a type (0, 4000H fixed,
//!    2000H performance metrics) and ECX\[15:0\] as the index; every ECX the
//!    two readings treat differently has a bit of 29:16 set and is #GP under
//!    both. Fast reads (ECX\[31\]) exist only "if the processor does not
//!    support architectural performance monitoring" (Vol. 2B RDPMC): no
//!    version 1-5 honours them, they are #GP (as KVM made them for
//!    architectural guests). Reads return the counter's full width.
//! 6. **Unavailable architectural events** (a CPUID.0AH:EBX bit set): the SDM
//!    leaves counting them undefined; the model counts them on a
//!    general-purpose counter like any other event (CPUID is enumeration
//!    only), and the fixed counters count whatever EBX says.
//! 7. **Write-1 command registers** (OVF_CTRL / STATUS_RESET, STATUS_SET)
//!    read as 0, as KVM returns for OVF_CTRL.
//! 8. **STATUS_SET** sets the status bits and raises no PMI; setting CTR_Frz
//!    through it freezes the counters (SDM 20.2.4.1: CTR_Frz "also serves as
//!    a read-only control" of counting). Bit 63 (CondChgd) has no set
//!    counterpart and is reserved there; ASCI (60) is accepted in
//!    STATUS_SET and STATUS_RESET (the figures show it) though the model
//!    enumerates no SGX. OVF_CTRL takes 61 (Ovf_Uncore) from version 3 (Vol.
//!    4: "If CPUID.0AH:EAX\[7:0\] > 2").
//! 9. **Version 1**: Vol. 4 conditions the IA32_PERF_GLOBAL_* MSRs on
//!    "CPUID.0AH:EAX\[7:0\] > 0", SDM 20.2.2 introduces them with version 2:
//!    the model follows 20.2.2 (#GP on version 1). A version-1 overflow sets
//!    no status (there is none) and still raises the PMI with INT. 391H and
//!    392H before version 4 are #GP (on Nehalem they are uncore MSRs).
//! 10. **IA32_PERF_CAPABILITIES** exists from version 2 (and with full-width
//!     writes or PEBS), with CPUID.01H:ECX.PDCM reported accordingly; it
//!     reports FW_WRITE and, with PEBS, PEBS_TRAP, PEBS_ARCH_REG, the record
//!     format and PEBS_BASELINE (formats 4-5), and the legacy LBR record format in bits 5:0 (0 without a legacy stack).
//! 11. **IA32_DEBUGCTL**: bits 13 (uncore PMI), 14 (FREEZE_WHILE_SMM) and 15
//!     (RTM_DEBUG) depend on features the model does not enumerate and are
//!     reserved; FREEZE_LBRS_ON_PMI and FREEZE_PERFMON_ON_PMI exist from
//!     version 2 (Vol. 4: "CPUID.0AH:EAX\[7:0\] > 1").
//! 12. **When the freeze happens**: the SDM freezes "on any PMI request";
//!     Linux found the version-4 PMU frozen when the PMI is raised, not when
//!     it is taken. The model freezes when its PMI line rises (after the
//!     skid), from the next clock on; the legacy freeze clears every enable
//!     bit of IA32_PERF_GLOBAL_CTRL.
//! 13. **Skid** is counted in increments of the overflowing counter: a PMI
//!     requested by a wrap survives clearing INT, the status bit or
//!     rewriting the counter, and rises only as that counter keeps counting;
//!     while one is pending for a counter, a further wrap of it does not
//!     postpone it.
//! 14. **One privilege level per clock**: a [`ArchPerfModel::cycle`] runs at
//!     its first event's privilege (which decides whether the clock counts
//!     for CMASK/INV/EDGE); each event still counts only where its own
//!     privilege is admitted. Idle clocks run at the last injected
//!     privilege ([`ArchPerfModel::set_privilege`]).
//! 15. **Reference cycles**: the fixed counter 2 event is modelled as the
//!     Table 20-1 encoding 3CH/01H, so one injected event advances both a
//!     general-purpose counter programmed with it and fixed counter 2 (on
//!     hardware they tick at different reference rates).
//! 16. **PERFEVTSELx.PC** (bit 19): later SDMs call it reserved, not
//!     writeable, from Sandy Bridge on, without saying a write faults; the
//!     model accepts and ignores it on every version (KVM accepts it, Xen
//!     refuses it).
//! 17. **IA32_MISC_ENABLE**: the model has its performance-monitoring bits
//!     only (7 available, 11 BTS unavailable, 12 PEBS unavailable without
//!     PEBS), all read-only, and makes a write #GP (hardware takes writes
//!     of its other bits, which the model does not have).
//! 18. **A full PEBS buffer** (the index at the absolute maximum): the SDM
//!     says no record is written and nothing signalled, not what becomes
//!     of the counter; the model leaves it counting (no reload, the assist
//!     disarmed), so its events stay in its count, and counts the assist
//!     as lost ([`ArchPerfModel::pebs_lost`]), as the NetBurst model does.
//! 19. **PEBS and the threshold**: every record whose index reaches the
//!     interrupt threshold raises the PMI (and OvfBuf), not only the first;
//!     a PEBS counter with INT raises its overflow's PMI at once, without
//!     skid. Counters whose assists one clock takes share one record (its
//!     applicable counters); a counter past its overflow in the same clock
//!     keeps the events after the assist's.
//! 20. **Load latency**: a load above MSR_PEBS_LD_LAT's threshold is an
//!     occurrence of the configured load-latency event for any counter that
//!     selects it (the model does not require LL_EN_PMCn before baseline),
//!     and its address, data source and latency fill the record's memory
//!     fields; other records' memory fields are 0.
//! 21. **The LBR MSRs' values**: the SDM gives the record MSRs no write
//!     rule; the model stores any value written to a FROM, TO or INFO
//!     (Linux writes them back at a task switch), takes in
//!     MSR_LASTBRANCH_TOS only the index bits of its depth (others #GP),
//!     in IA32_LBR_DEPTH only a depth CPUID.1CH:EAX offers (others #GP;
//!     its reset value the deepest), and makes the architectural records
//!     at or above IA32_LBR_DEPTH #GP. With architectural LBR,
//!     IA32_DEBUGCTL.LBR is stored and records nothing (IA32_LBR_CTL
//!     enables the records), and IA32_PERF_CAPABILITIES\[5:0\] reads 0.
//! 22. **Which branches, which privilege**: a record is made of a taken
//!     branch only (a conditional branch not taken is none); its privilege
//!     filter ("branches ending in ring 0") looks at the retirement's
//!     privilege level, the one the single-stepping driver saw; the cycles
//!     of a record are the model's clocks (retirements) since the previous
//!     record; an architectural record of another kind than the near
//!     branches' types 0-5 has BR_TYPE 8. In call-stack mode a return
//!     with no record to flush (a call made before recording began)
//!     changes nothing: the SDM says the last captured record is flushed,
//!     and with none captured there is none.
//! 23. **Conditional branches**: besides the architectural events, a
//!     retired conditional branch counts as BR_INST_RETIRED.CONDITIONAL
//!     (C4H/01H), Sandy Bridge's and later parts' encoding, which the
//!     profiler's LBR mode samples.

mod counting;
mod lbr;
mod memory;
mod overflow;
mod pebs;
mod registers;
mod retire;
#[cfg(target_arch = "x86_64")]
pub mod shared;
mod tables;

#[cfg(test)]
mod tests;

pub use crate::arch::ia32::Gprs;
pub use counting::{CONDITIONAL_BRANCHES, Event, Injected, Privilege};
pub use registers::{
    ArchPerfModel, Config, Fault, GpReason, Instruction, LbrConfig, MAX_BASIC_LEAF, MAX_EXT_LEAF,
    MAX_LBR_LEAF, PebsConfig, common_leaf_0a, msr_name,
};
pub use retire::{Branch, BranchKind, Load, Retirement};
#[cfg(target_arch = "x86_64")]
pub use shared::{ArchPerfMsr, SharedArchPerfModel};
pub use tables::{
    ArchEvent, Encoding, FIXED_EVENTS, IA32_A_PMC0, IA32_DEBUGCTL, IA32_DS_AREA,
    IA32_FIXED_CTR_CTRL, IA32_FIXED_CTR0, IA32_MISC_ENABLE, IA32_PEBS_ENABLE,
    IA32_PERF_CAPABILITIES, IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_INUSE,
    IA32_PERF_GLOBAL_OVF_CTRL, IA32_PERF_GLOBAL_STATUS, IA32_PERF_GLOBAL_STATUS_RESET,
    IA32_PERF_GLOBAL_STATUS_SET, IA32_PERFEVTSEL0, IA32_PMC0, LD_LAT_THRESHOLD, MAX_FIXED, MAX_GP,
    MSR_PEBS_DATA_CFG, MSR_PEBS_LD_LAT, data_cfg, debugctl, ds, evtsel, fixed_ctrl, global_status,
    misc_enable, pebs_enable, perf_capabilities, rdpmc,
};
