//! Register file, #GP rules, RDPMC, CPUID/detection, per-thread views.

use super::helpers::*;
use crate::detect::{PmuKind, detect};

fn gp(instruction: Instruction, ecx: u32, reason: GpReason) -> Fault {
    Fault::GeneralProtection {
        instruction,
        ecx,
        reason,
    }
}

/// Asserts that writing `value` to `msr` faults with `reason` and changes
/// nothing.
fn assert_write_gp(m: &mut NetBurstModel, msr: u32, value: u64, reason: GpReason) {
    let before = dump(m);
    assert_eq!(
        m.write_msr(msr, value),
        Err(gp(Instruction::Wrmsr, msr, reason)),
        "WRMSR {msr:#x} <- {value:#x}"
    );
    assert_eq!(dump(m), before, "a faulting WRMSR {msr:#x} changed state");
}

#[test]
fn reset_state_and_register_map() {
    let mut m = ht();
    for n in 0..18 {
        assert_eq!(m.read_msr(0x300 + n), Ok(0));
        assert_eq!(m.read_msr(0x360 + n), Ok(0));
    }
    // 43 ESCRs on model 3 (no IQ_ESCR0/1), 45 on model 2.
    let count = |m: &mut NetBurstModel| (0x3A0..=0x3E1).filter(|&a| m.read_msr(a).is_ok()).count();
    assert_eq!(count(&mut m), 43);
    let mut nw = NetBurstModel::new(Config::northwood());
    assert_eq!(count(&mut nw), 45);
    assert_eq!(m.read_msr(0x3F0), Ok(0xFC00));
    assert_eq!(m.read_msr(0x1A0), Ok(1 << 7));
    // Round trips.
    m.write_msr(0x30B, WRAP - 1).unwrap();
    assert_eq!(m.read_msr(0x30B), Ok(WRAP - 1));
    let v = escr_value(0x3F, 0xFFFF, 0x1FF);
    m.write_msr(0x3E1, v).unwrap();
    assert_eq!(m.read_msr(0x3E1), Ok(v));
    let c = 0xCFFF_F000;
    m.write_msr(0x371, c).unwrap();
    assert_eq!(
        m.read_msr(0x371),
        Ok(c),
        "every defined CCCR bit of IQ_CCCR5 on model 3"
    );
}

#[test]
fn gp_no_such_msr() {
    let mut m = ht();
    for msr in [
        0x2FF,
        0x312,
        0x35F,
        0x372,
        0x39F,
        0x3BF,
        0x3C6,
        0x3C7,
        0x3CE,
        0x3DF,
        0x3E2,
        0x3F3,
        0,
        0xC000_0080,
    ] {
        assert_eq!(
            m.read_msr(msr),
            Err(gp(Instruction::Rdmsr, msr, GpReason::NoSuchMsr))
        );
        assert_write_gp(&mut m, msr, 0, GpReason::NoSuchMsr);
    }
    // IQ_ESCR0/1 exist only on models 1 and 2.
    for msr in [0x3BA, 0x3BB] {
        assert_eq!(
            m.read_msr(msr),
            Err(gp(Instruction::Rdmsr, msr, GpReason::NoSuchMsr))
        );
        let mut nw = NetBurstModel::new(Config::northwood());
        assert_eq!(nw.read_msr(msr), Ok(0));
        let mut p0 = NetBurstModel::new(Config::new(0, false));
        assert!(p0.read_msr(msr).is_err());
    }
}

#[test]
fn gp_perf_mon_unavailable() {
    let mut config = Config::prescott_ht();
    config.perf_mon_available = false;
    let mut m = NetBurstModel::new(config);
    assert_eq!(m.read_msr(0x1A0), Ok(0), "IA32_MISC_ENABLE[7] clear");
    for msr in [0x300, 0x360, 0x3A0, 0x3F1] {
        assert_eq!(
            m.read_msr(msr),
            Err(gp(Instruction::Rdmsr, msr, GpReason::PerfMonUnavailable))
        );
        assert_write_gp(&mut m, msr, 0, GpReason::PerfMonUnavailable);
    }
    assert_eq!(
        m.rdpmc(0),
        Err(gp(Instruction::Rdpmc, 0, GpReason::PerfMonUnavailable))
    );
}

#[test]
fn gp_reserved_bits_counters_and_escrs() {
    let mut m = ht();
    for bit in 40..64 {
        assert_write_gp(
            &mut m,
            0x300,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // A sign-extended preset is rejected; the 40-bit one is accepted.
    let preset = (-100i64) as u64;
    assert_write_gp(
        &mut m,
        0x305,
        preset,
        GpReason::ReservedBits {
            bits: preset & !(WRAP - 1),
        },
    );
    m.write_msr(0x305, preset & (WRAP - 1)).unwrap();
    for bit in 31..64 {
        assert_write_gp(
            &mut m,
            0x3B2,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // Without Hyper-Threading ESCR bits 1:0 are reserved.
    let mut nw = NetBurstModel::new(Config::northwood());
    assert_write_gp(
        &mut nw,
        0x3B2,
        escr_value(3, 1, 0b1011),
        GpReason::ReservedBits { bits: 0b11 },
    );
    nw.write_msr(0x3B2, escr_value(3, 1, 0b1100)).unwrap();
}

#[test]
fn gp_reserved_bits_cccrs() {
    let mut m = ht();
    let base = cccr_value(0);
    for bit in (0..11).chain([28, 29]).chain(32..64) {
        assert_write_gp(
            &mut m,
            0x360,
            base | 1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // Bit 11 (extended cascading) only on IQ_CCCR0/3/4/5 of models 2, 3, 4, 6.
    for n in 0..18u32 {
        let r = m.write_msr(0x360 + n, base | cccr::EXTENDED_CASCADE);
        assert_eq!(r.is_ok(), matches!(n, 12 | 15 | 16 | 17), "CCCR {n}");
    }
    let mut m1 = NetBurstModel::new(Config::new(1, false));
    assert_write_gp(
        &mut m1,
        0x36C,
        base | cccr::EXTENDED_CASCADE,
        GpReason::ReservedBits {
            bits: cccr::EXTENDED_CASCADE,
        },
    );
    // Without Hyper-Threading: OVF_PMI_T1 reserved, active thread must be 11b.
    let mut nw = NetBurstModel::new(Config::northwood());
    assert_write_gp(
        &mut nw,
        0x360,
        base | cccr::OVF_PMI_T1,
        GpReason::ReservedBits {
            bits: cccr::OVF_PMI_T1,
        },
    );
    for at in 0..3u64 {
        assert_write_gp(
            &mut nw,
            0x360,
            cccr::ENABLE | at << 16,
            GpReason::ActiveThreadMustBeAny,
        );
    }
    nw.write_msr(0x360, base | cccr::OVF_PMI_T0).unwrap();
    // With Hyper-Threading every active-thread value is legal.
    for at in 0..4u64 {
        m.write_msr(0x360, cccr::ENABLE | at << 16).unwrap();
    }
}

#[test]
fn gp_reserved_bits_pebs_tagging_and_misc() {
    let mut m = ht();
    for bit in (13..15).chain(17..24).chain(27..64) {
        assert_write_gp(
            &mut m,
            0x3F1,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    m.write_msr(0x3F1, 0x0701_9FFF).unwrap();
    for bit in [2, 3, 5, 31, 63] {
        assert_write_gp(
            &mut m,
            0x3F2,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    m.write_msr(0x3F2, 0x13).unwrap();
    assert_write_gp(
        &mut m,
        0x3F0,
        1 << 16,
        GpReason::ReservedBits { bits: 1 << 16 },
    );
    for bit in [1, 4, 5, 6, 8, 35, 63] {
        assert_write_gp(
            &mut m,
            0x1A0,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // Read-only bits ignore writes.
    m.write_msr(0x1A0, (1 << 11) | (1 << 12) | 1).unwrap();
    assert_eq!(m.read_msr(0x1A0), Ok((1 << 7) | 1));
    // Non-HT: ENABLE_PEBS_OTH_THR reserved; PEBS unavailable: 25 too.
    let mut nw = NetBurstModel::new(Config::northwood());
    assert_write_gp(
        &mut nw,
        0x3F1,
        1 << 26,
        GpReason::ReservedBits { bits: 1 << 26 },
    );
    nw.write_msr(0x3F1, 1 << 25).unwrap();
    let mut config = Config::northwood();
    config.pebs_available = false;
    let mut nopebs = NetBurstModel::new(config);
    assert_eq!(nopebs.read_msr(0x1A0), Ok((1 << 7) | (1 << 12)));
    assert_write_gp(
        &mut nopebs,
        0x3F1,
        1 << 25,
        GpReason::ReservedBits { bits: 1 << 25 },
    );
    nopebs.write_msr(0x3F1, (1 << 24) | 1).unwrap();
}

#[test]
fn gp_non_canonical_ds_area() {
    let mut m = ht();
    for addr in [
        1u64 << 47,
        0x0000_8000_0000_0000,
        0x1234_0000_0000_0000,
        0xFFFF_0000_0000_0000,
    ] {
        assert_write_gp(&mut m, 0x600, addr, GpReason::NonCanonicalAddress);
    }
    for addr in [0, 0x7FFF_FFFF_F000, 0xFFFF_8000_0000_0000, u64::MAX] {
        m.write_msr(0x600, addr).unwrap();
        assert_eq!(m.read_msr(0x600), Ok(addr));
    }
}

#[test]
fn rdpmc_full_and_fast_reads() {
    let mut m = ht();
    for n in 0..18u32 {
        let v = 0xAB_0000_0000 | (u64::from(n) * 0x0101_0101);
        m.write_msr(0x300 + n, v).unwrap();
        assert_eq!(m.rdpmc(n), Ok(v));
        assert_eq!(m.rdpmc(n | 1 << 31), Ok(v & 0xFFFF_FFFF));
    }
    for index in [18, 25, 0x7FFF_FFFF, 18 | 1 << 31, u32::MAX] {
        assert_eq!(
            m.rdpmc(index),
            Err(gp(
                Instruction::Rdpmc,
                index,
                GpReason::CounterIndexOutOfRange
            ))
        );
    }
}

#[test]
fn random_accesses_never_panic_and_faults_change_nothing() {
    let mut m = ht();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4000 {
        let msr = match rng.below(4) {
            0 => 0x300 + rng.below(0x100) as u32,
            1 => rng.next() as u32,
            2 => [0x1A0, 0x600, 0x3F0, 0x3F1, 0x3F2][rng.below(5) as usize],
            _ => 0x360 + rng.below(18) as u32,
        };
        let value = match rng.below(3) {
            0 => rng.next(),
            1 => rng.next() & 0xFFFF_FFFF,
            _ => 1 << rng.below(64),
        };
        let before = dump(&mut m);
        if m.write_msr(msr, value).is_err() {
            assert_eq!(dump(&mut m), before);
        }
        let _ = m.rdpmc(rng.next() as u32);
        // The model keeps counting whatever the driver wrote.
        m.inject(EventKind::new(EscrGroup::Cru23, 0x0C, 0xFF).on(T0, OS, rng.below(5)));
        m.cycle(&[EventKind::new(EscrGroup::Bpu, 0x03, 1).on(T1, USR, rng.below(20))]);
    }
}

#[test]
fn detect_recognises_the_model() {
    let mut m = ht();
    let cpuid = m.clone();
    let d = detect(&cpuid, &mut m).unwrap();
    let nb = d.usable_netburst().expect("usable NetBurst");
    assert_eq!(nb.model, 3);
    assert!(nb.pebs_available && nb.hyper_threading);
    assert_eq!(nb.logical_processors, 2);

    let mut config = Config::northwood();
    config.pebs_available = false;
    let mut m = NetBurstModel::new(config);
    let d = detect(&m.clone(), &mut m).unwrap();
    let PmuKind::NetBurst(nb) = d.pmu else {
        panic!("not NetBurst")
    };
    assert_eq!(
        (nb.model, nb.pebs_available, nb.hyper_threading),
        (2, false, false)
    );

    // Each logical processor reports its own initial APIC ID.
    let mut m = ht();
    let t1 = m.thread(T1).unwrap();
    assert_eq!(crate::detect::Cpuid::cpuid(&t1, 1, 0).ebx >> 24, 1);
}

#[test]
fn thread_views_share_the_pmu_but_not_per_thread_registers() {
    let mut m = ht();
    m.thread(T1).unwrap().write_msr(0x300, 77).unwrap();
    assert_eq!(m.read_msr(0x300), Ok(77), "counters are shared");
    m.thread(T1).unwrap().write_msr(0x600, 0x2000).unwrap();
    m.write_msr(0x600, 0x1000).unwrap();
    assert_eq!(
        m.thread(T1).unwrap().read_msr(0x600),
        Ok(0x2000),
        "IA32_DS_AREA is per thread"
    );
    assert_eq!(m.read_msr(0x600), Ok(0x1000));
    // ENABLE_PEBS_MY_THR written by T1 is "other thread" for T0.
    m.thread(T1)
        .unwrap()
        .write_msr(0x3F1, (1 << 25) | (1 << 24) | 1)
        .unwrap();
    assert_eq!(m.read_msr(0x3F1), Ok((1 << 26) | (1 << 24) | 1));
    assert_eq!(
        m.thread(T1).unwrap().read_msr(0x3F1),
        Ok((1 << 25) | (1 << 24) | 1)
    );
    // No T1 without Hyper-Threading.
    let mut nw = NetBurstModel::new(Config::northwood());
    assert!(nw.thread(T1).is_none());
}

/// The model can live in a `static`, as a QEMU test kernel needs.
static SHARED: spin::Mutex<NetBurstModel> =
    spin::Mutex::new(NetBurstModel::new(Config::prescott_ht()));

#[test]
fn usable_in_a_static() {
    let mut m = SHARED.lock();
    m.write_msr(0x300, 5).unwrap();
    assert_eq!(m.rdpmc(0), Ok(5));
    assert!(
        core::mem::size_of::<NetBurstModel>() < 8 * 1024,
        "reasonably small"
    );
}

#[test]
fn faults_display_the_escr_name_and_reason() {
    let mut m = NetBurstModel::new(Config::prescott_ht());
    let e = m.write_msr(0x3A2, 1 << 31).unwrap_err();
    assert_eq!(
        std::format!("{e}"),
        "#GP(0) on WRMSR to MSR_FSB_ESCR0 (3A2H): reserved bits 0x80000000 set"
    );
    let e = m.rdpmc(18).unwrap_err();
    assert_eq!(
        std::format!("{e}"),
        "#GP(0) on RDPMC of counter 12H: no counter with that index"
    );
}

/// The model's ESCR lookups (tables computed at compile time) find what a
/// search of SDM Table 18-63's rows finds, for every address around the
/// ESCRs and every counter and ESCR-select value, out-of-range ones too.
#[test]
fn escr_lookups_agree_with_a_search_of_the_table() {
    use crate::model::netburst::tables::{ESCR_TABLE, escr_index, selected_escr};
    for msr in 0..0x500 {
        let searched = ESCR_TABLE.iter().position(|e| e.msr == msr);
        assert_eq!(escr_index(msr), searched, "ESCR at {msr:#x}");
    }
    assert_eq!(escr_index(u32::MAX), None);
    for counter in 0..20 {
        for select in 0..=u8::MAX {
            let searched = ESCR_TABLE
                .iter()
                .position(|e| e.select == select && e.feeds(counter));
            assert_eq!(
                selected_escr(counter, select),
                searched,
                "counter {counter}, ESCR select {select}"
            );
        }
    }
}
