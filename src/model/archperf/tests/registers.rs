//! The register file: existence, reset values, the #GP rules, legacy and
//! full-width writes, RDPMC, IA32_PERF_GLOBAL_INUSE.

use super::helpers::*;

#[test]
fn reset_values() {
    // IA32_PERF_GLOBAL_CTRL: GP enable bits set, fixed clear (choice 2).
    for (config, ctrl) in [
        (Config::core2(), 0x3),
        (Config::skylake(), 0xF),
        (Config::alder_lake_p_core(), 0xFF),
        (v3(), 0xF),
    ] {
        let mut m = ArchPerfModel::new(config);
        assert_eq!(m.read_msr(GLOBAL_CTRL).unwrap(), ctrl);
        assert_eq!(config.global_ctrl_reset(), ctrl);
        for msr in [
            FIXED_CTRL, STATUS, DEBUGCTL, OVF_CTRL, PMC0, EVTSEL0, FIXED0,
        ] {
            assert_eq!(m.read_msr(msr).unwrap(), 0, "{msr:#X}");
        }
        assert!(!m.pmi_pending());
        assert_eq!(m.skid(), 0);
        assert_eq!(m.privilege(), OS);
    }
    let mut v1 = ArchPerfModel::new(Config::v1());
    assert_eq!(v1.read_msr(PMC0 + 1).unwrap(), 0);
    assert_eq!(v1.read_msr(EVTSEL0 + 1).unwrap(), 0);
    assert_eq!(v1.read_msr(DEBUGCTL).unwrap(), 0);
}

#[test]
fn counters_exist_per_configuration() {
    let mut m = sky();
    for i in 0..4 {
        for msr in [PMC0 + i, EVTSEL0 + i, A_PMC0 + i] {
            m.read_msr(msr).unwrap();
        }
    }
    for i in 0..3 {
        m.read_msr(FIXED0 + i).unwrap();
    }
    // PMC4-7, PERFEVTSEL4-7, A_PMC4-7, FIXED_CTR3 and up do not exist.
    for i in 4..8 {
        absent(&mut m, PMC0 + i);
        absent(&mut m, EVTSEL0 + i);
        absent(&mut m, A_PMC0 + i);
    }
    for i in 3..16 {
        absent(&mut m, FIXED0 + i);
    }
    let mut adl = ArchPerfModel::new(Config::alder_lake_p_core());
    adl.read_msr(PMC0 + 7).unwrap();
    adl.read_msr(EVTSEL0 + 7).unwrap();
    adl.read_msr(A_PMC0 + 7).unwrap();
    adl.read_msr(FIXED0 + 3).unwrap();
    absent(&mut adl, PMC0 + 8);
    absent(&mut adl, A_PMC0 + 8);
    absent(&mut adl, FIXED0 + 4);
}

#[test]
fn unknown_msrs_fault() {
    for config in [
        Config::v1(),
        Config::core2(),
        v3(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ] {
        let mut m = ArchPerfModel::new(config);
        for msr in [
            0, 0x10, 0xC0, 0xC9, 0x185, 0x18E, 0x1A1, 0x300, 0x308, 0x329, 0x393, 0x4C0, 0x3F0,
            0x3F3, 0x601,
        ] {
            absent(&mut m, msr);
        }
    }
}

#[test]
fn version_1_has_no_global_msrs_and_no_fixed_counters() {
    let mut m = ArchPerfModel::new(Config::v1());
    for msr in [
        FIXED_CTRL,
        STATUS,
        GLOBAL_CTRL,
        OVF_CTRL,
        STATUS_SET,
        INUSE,
        PERF_CAPS,
        FIXED0,
        FIXED0 + 1,
        FIXED0 + 2,
        A_PMC0,
    ] {
        absent(&mut m, msr);
    }
}

#[test]
fn status_set_and_inuse_only_from_version_4() {
    for config in [Config::core2(), v3()] {
        let mut m = ArchPerfModel::new(config);
        absent(&mut m, STATUS_SET);
        absent(&mut m, INUSE);
        m.read_msr(OVF_CTRL).unwrap();
    }
    let mut m = sky();
    assert_eq!(m.read_msr(STATUS_SET).unwrap(), 0);
    assert_eq!(m.read_msr(INUSE).unwrap(), 0);
}

#[test]
fn full_width_aliases_only_with_fw_write() {
    let mut m = ArchPerfModel::new(Config::core2());
    absent(&mut m, A_PMC0);
    absent(&mut m, A_PMC0 + 1);
    // IA32_PERF_CAPABILITIES exists (PDCM) and reports FW_WRITE clear.
    assert_eq!(m.read_msr(PERF_CAPS).unwrap(), 0);
    // Skylake: FW_WRITE, and PEBS: trap-like, architectural registers,
    // record format 3; LBR record format 5.
    assert_eq!(
        sky().read_msr(PERF_CAPS).unwrap(),
        1 << 13 | 1 << 6 | 1 << 7 | 3 << 8 | 5
    );
    let mut v3 = ArchPerfModel::new(v3());
    absent(&mut v3, A_PMC0);
}

#[test]
fn read_only_msrs_fault_on_write() {
    let mut m = sky();
    for msr in [STATUS, INUSE, PERF_CAPS] {
        write_faults(&mut m, msr, 0, GpReason::ReadOnly);
        write_faults(&mut m, msr, 1, GpReason::ReadOnly);
    }
    let mut c2 = ArchPerfModel::new(Config::core2());
    write_faults(&mut c2, STATUS, 0, GpReason::ReadOnly);
    write_faults(&mut c2, PERF_CAPS, 0, GpReason::ReadOnly);
}

#[test]
fn evtsel_high_bits_are_reserved() {
    let mut m = sky();
    write_faults(
        &mut m,
        EVTSEL0,
        1 << 32,
        GpReason::ReservedBits { bits: 1 << 32 },
    );
    write_faults(
        &mut m,
        EVTSEL0 + 3,
        0xFFFF_FFFF_0000_00C0,
        GpReason::ReservedBits {
            bits: 0xFFFF_FFFF_0000_0000,
        },
    );
    write_faults(
        &mut m,
        EVTSEL0 + 1,
        1 << 63,
        GpReason::ReservedBits { bits: 1 << 63 },
    );
    // Every one of bits 31:0 is accepted on version 4 and read back.
    m.write_msr(EVTSEL0, 0xFFFF_FFFF).unwrap();
    assert_eq!(m.read_msr(EVTSEL0).unwrap(), 0xFFFF_FFFF);
    assert_eq!(m.evtsel(0), 0xFFFF_FFFF);
}

#[test]
fn any_thread_only_on_versions_3_and_4() {
    for config in [Config::v1(), Config::core2(), Config::alder_lake_p_core()] {
        let mut m = ArchPerfModel::new(config);
        write_faults(
            &mut m,
            EVTSEL0,
            counting(INSTR, ANY),
            GpReason::ReservedBits { bits: ANY },
        );
        if config.version >= 2 {
            // FIXED_CTR_CTRL bit 2 (field 0) and bit 6 (field 1).
            write_faults(
                &mut m,
                FIXED_CTRL,
                0x7,
                GpReason::ReservedBits { bits: 0x4 },
            );
            write_faults(
                &mut m,
                FIXED_CTRL,
                0x40,
                GpReason::ReservedBits { bits: 0x40 },
            );
        }
    }
    for config in [v3(), Config::skylake()] {
        let mut m = ArchPerfModel::new(config);
        m.write_msr(EVTSEL0, counting(INSTR, ANY)).unwrap();
        assert_eq!(m.read_msr(EVTSEL0).unwrap(), 0x63_00C0);
        m.write_msr(FIXED_CTRL, 0x777).unwrap();
        assert_eq!(m.read_msr(FIXED_CTRL).unwrap(), 0x777);
    }
}

#[test]
fn pin_control_is_accepted_and_inert() {
    let mut m = ArchPerfModel::new(Config::alder_lake_p_core());
    m.write_msr(EVTSEL0, counting(INSTR, PC)).unwrap();
    assert_eq!(m.read_msr(EVTSEL0).unwrap(), 0x4B_00C0);
    m.inject(ev(INSTR, 4));
    assert_eq!(m.rdpmc(0).unwrap(), 4);
}

#[test]
fn fixed_ctr_ctrl_fields_of_absent_counters_are_reserved() {
    let mut m = sky();
    // Fields 0-2 (OS, USR, AnyThread, PMI) are writable on version 4.
    m.write_msr(FIXED_CTRL, 0xFFF).unwrap();
    assert_eq!(m.fixed_ctrl(), 0xFFF);
    write_faults(
        &mut m,
        FIXED_CTRL,
        0x1000,
        GpReason::ReservedBits { bits: 0x1000 },
    );
    write_faults(
        &mut m,
        FIXED_CTRL,
        0xFFFF,
        GpReason::ReservedBits { bits: 0xF000 },
    );
    write_faults(
        &mut m,
        FIXED_CTRL,
        1 << 63,
        GpReason::ReservedBits { bits: 1 << 63 },
    );
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(FIXED_CTRL, 0xBBB).unwrap();
    write_faults(
        &mut c2,
        FIXED_CTRL,
        0xFFF,
        GpReason::ReservedBits { bits: 0x444 },
    );
    let mut adl = ArchPerfModel::new(Config::alder_lake_p_core());
    adl.write_msr(FIXED_CTRL, 0xBBBB).unwrap();
    write_faults(
        &mut adl,
        FIXED_CTRL,
        0x1_BBBB,
        GpReason::ReservedBits { bits: 0x1_0000 },
    );
}

#[test]
fn version_5_fixed_counter_bitmap() {
    // EDX[4:0] = 1 and ECX = 1010b: fixed counters 0, 1 and 3 exist, 2 not
    // (SDM 20.2.5: "ECX[i] || EDX[4:0] > i").
    let config = Config {
        fixed_counters: 1,
        fixed_bitmap: 0b1010,
        ..Config::alder_lake_p_core()
    };
    let mut m = ArchPerfModel::new(config);
    for i in [0, 1, 3] {
        m.write_msr(FIXED0 + i, 7).unwrap();
        assert_eq!(m.rdpmc((1 << 30) | i).unwrap(), 7);
    }
    absent(&mut m, FIXED0 + 2);
    assert_eq!(reason(m.rdpmc((1 << 30) | 2)), GpReason::NoSuchCounter);
    m.write_msr(GLOBAL_CTRL, 0xB_0000_00FF).unwrap();
    write_faults(
        &mut m,
        GLOBAL_CTRL,
        1 << 34,
        GpReason::ReservedBits { bits: 1 << 34 },
    );
    m.write_msr(FIXED_CTRL, 0xB0BB).unwrap();
    write_faults(
        &mut m,
        FIXED_CTRL,
        0x100,
        GpReason::ReservedBits { bits: 0x100 },
    );
    assert_eq!(config.counter_bits(), 0xB_0000_00FF);
    // Before version 5 ECX is reserved and the bitmap means nothing.
    let v4 = Config {
        fixed_bitmap: 0b1000,
        ..Config::skylake()
    };
    let mut m = ArchPerfModel::new(v4);
    absent(&mut m, FIXED0 + 3);
    assert_eq!(m.cpuid(0xA, 0).ecx, 0);
}

#[test]
fn global_ctrl_bits_of_absent_counters_are_reserved() {
    let mut m = sky();
    m.write_msr(GLOBAL_CTRL, 0x7_0000_000F).unwrap();
    assert_eq!(m.read_msr(GLOBAL_CTRL).unwrap(), 0x7_0000_000F);
    for bit in [4, 7, 31, 35, 47, 48, 63] {
        write_faults(
            &mut m,
            GLOBAL_CTRL,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(GLOBAL_CTRL, 0x7_0000_0003).unwrap();
    write_faults(
        &mut c2,
        GLOBAL_CTRL,
        0x7_0000_0007,
        GpReason::ReservedBits { bits: 4 },
    );
    let mut adl = ArchPerfModel::new(Config::alder_lake_p_core());
    adl.write_msr(GLOBAL_CTRL, 0xF_0000_00FF).unwrap();
    write_faults(
        &mut adl,
        GLOBAL_CTRL,
        1 << 36,
        GpReason::ReservedBits { bits: 1 << 36 },
    );
}

#[test]
fn ovf_ctrl_reserved_bits_per_version() {
    // Version 2: counters, 62 (ClrOvfBuffer), 63 (ClrCondChgd).
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(OVF_CTRL, 0xC000_0007_0000_0003).unwrap();
    for bit in [2, 35, 55, 58, 59, 60, 61] {
        write_faults(
            &mut c2,
            OVF_CTRL,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // Version 3 adds 61 (Ovf_Uncore).
    let mut m3 = ArchPerfModel::new(v3());
    m3.write_msr(OVF_CTRL, 0xE000_0007_0000_000F).unwrap();
    for bit in [4, 55, 58, 59, 60] {
        write_faults(
            &mut m3,
            OVF_CTRL,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    // Version 4 (STATUS_RESET) adds 55, 58, 59, 60.
    let mut m = sky();
    m.write_msr(OVF_CTRL, 0xFC80_0007_0000_000F).unwrap();
    for bit in [4, 31, 35, 48, 54, 56, 57] {
        write_faults(
            &mut m,
            OVF_CTRL,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    assert_eq!(Config::skylake().status_reset_bits(), 0xFC80_0007_0000_000F);
}

#[test]
fn status_set_reserved_bits() {
    let mut m = sky();
    m.write_msr(STATUS_SET, 0x7C80_0007_0000_000F).unwrap();
    assert_eq!(m.global_status(), 0x7C80_0007_0000_000F);
    for bit in [4, 35, 56, 57, 63] {
        write_faults(
            &mut m,
            STATUS_SET,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
}

#[test]
fn debugctl_reserved_bits_per_version() {
    let mut v1 = ArchPerfModel::new(Config::v1());
    v1.write_msr(DEBUGCTL, 0x7C3).unwrap();
    assert_eq!(v1.read_msr(DEBUGCTL).unwrap(), 0x7C3);
    for bit in [2, 3, 4, 5, 11, 12, 13, 14, 15, 16, 63] {
        write_faults(
            &mut v1,
            DEBUGCTL,
            1 << bit,
            GpReason::ReservedBits { bits: 1 << bit },
        );
    }
    for config in [
        Config::core2(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ] {
        let mut m = ArchPerfModel::new(config);
        m.write_msr(DEBUGCTL, 0x1FC3).unwrap();
        assert_eq!(m.debugctl(), 0x1FC3);
        for bit in [2, 5, 13, 14, 15, 32] {
            write_faults(
                &mut m,
                DEBUGCTL,
                1 << bit,
                GpReason::ReservedBits { bits: 1 << bit },
            );
        }
    }
}

#[test]
fn a_faulting_write_changes_nothing() {
    let mut m = sky();
    m.write_msr(EVTSEL0, counting(INSTR, INT)).unwrap();
    m.write_msr(A_PMC0, 0xFFFF_FFFF_FFF0).unwrap();
    m.write_msr(FIXED_CTRL, 0x333).unwrap();
    m.write_msr(GLOBAL_CTRL, 0x7_0000_000F).unwrap();
    m.write_msr(STATUS_SET, 0x2).unwrap();
    m.write_msr(DEBUGCTL, 1).unwrap();
    m.inject(ev(INSTR, 3));
    // Every kind of #GP (write_faults compares the whole model).
    write_faults(
        &mut m,
        EVTSEL0,
        counting(INSTR, 1 << 40),
        GpReason::ReservedBits { bits: 1 << 40 },
    );
    write_faults(&mut m, A_PMC0, 1 << 48, GpReason::OutOfWidth);
    write_faults(&mut m, FIXED0, u64::MAX, GpReason::OutOfWidth);
    write_faults(
        &mut m,
        FIXED_CTRL,
        0x3333,
        GpReason::ReservedBits { bits: 0x3000 },
    );
    write_faults(
        &mut m,
        GLOBAL_CTRL,
        0x1F,
        GpReason::ReservedBits { bits: 0x10 },
    );
    write_faults(
        &mut m,
        OVF_CTRL,
        0x12,
        GpReason::ReservedBits { bits: 0x10 },
    );
    write_faults(
        &mut m,
        STATUS_SET,
        1 << 63,
        GpReason::ReservedBits { bits: 1 << 63 },
    );
    write_faults(&mut m, STATUS, 0, GpReason::ReadOnly);
    write_faults(
        &mut m,
        DEBUGCTL,
        1 << 13,
        GpReason::ReservedBits { bits: 1 << 13 },
    );
    write_faults(&mut m, 0x1A0, 0, GpReason::ReadOnly);
    // The partly valid OVF_CTRL write did not clear bit 1 either.
    assert_eq!(m.global_status(), 0x2);
    assert_eq!(m.counter(0), 0xFFFF_FFFF_FFF3);
}

#[test]
fn legacy_counter_writes_sign_extend_eax() {
    // Core 2: 40-bit counters (SDM 20.2.6: sign-extended EAX[31:0]).
    let mut c2 = ArchPerfModel::new(Config::core2());
    for (written, stored) in [
        (0x0000_0000_0000_0005, 0x00_0000_0005),
        (0x0000_0000_7FFF_FFFF, 0x00_7FFF_FFFF),
        (0x0000_0000_8000_0000, 0xFF_8000_0000),
        (0x0000_0000_FFFF_FFFF, 0xFF_FFFF_FFFF),
        // EDX is ignored, without a fault.
        (0xFFFF_FFFF_0000_0005, 0x00_0000_0005),
        (0x0000_00AB_8000_0001, 0xFF_8000_0001),
    ] {
        c2.write_msr(PMC0 + 1, written).unwrap();
        assert_eq!(c2.read_msr(PMC0 + 1).unwrap(), stored, "{written:#X}");
        assert_eq!(c2.rdpmc(1).unwrap(), stored);
        assert_eq!(c2.counter(1), stored);
    }
    // Skylake: 48 bits.
    let mut m = sky();
    m.write_msr(PMC0 + 2, 0x8000_0000).unwrap();
    assert_eq!(m.rdpmc(2).unwrap(), 0xFFFF_8000_0000);
    assert_eq!(m.read_msr(A_PMC0 + 2).unwrap(), 0xFFFF_8000_0000);
    m.write_msr(PMC0 + 2, (-100i64) as u64).unwrap();
    assert_eq!(m.rdpmc(2).unwrap(), (1 << 48) - 100);
}

#[test]
fn full_width_writes() {
    let mut m = sky();
    m.write_msr(A_PMC0 + 1, 0xFFFF_FFFF_FFFF).unwrap();
    assert_eq!(m.read_msr(PMC0 + 1).unwrap(), 0xFFFF_FFFF_FFFF);
    assert_eq!(m.read_msr(A_PMC0 + 1).unwrap(), 0xFFFF_FFFF_FFFF);
    m.write_msr(A_PMC0 + 1, 0x1234_0000_0001).unwrap();
    assert_eq!(m.rdpmc(1).unwrap(), 0x1234_0000_0001);
    // EDX[63:COUNTERWIDTH] reserved: #GP.
    write_faults(&mut m, A_PMC0 + 1, 1 << 48, GpReason::OutOfWidth);
    write_faults(&mut m, A_PMC0 + 1, 1 << 63, GpReason::OutOfWidth);
    write_faults(&mut m, A_PMC0, u64::MAX, GpReason::OutOfWidth);
    assert_eq!(m.counter(1), 0x1234_0000_0001);
}

#[test]
fn fixed_counter_writes_are_full_width_and_checked() {
    let mut m = sky();
    m.write_msr(FIXED0, 0xFFFF_FFFF_FFFF).unwrap();
    assert_eq!(m.read_msr(FIXED0).unwrap(), 0xFFFF_FFFF_FFFF);
    // No sign extension for fixed counters.
    m.write_msr(FIXED0 + 1, 0x8000_0000).unwrap();
    assert_eq!(m.rdpmc((1 << 30) | 1).unwrap(), 0x8000_0000);
    assert_eq!(m.fixed(1), 0x8000_0000);
    write_faults(&mut m, FIXED0 + 2, 1 << 48, GpReason::OutOfWidth);
    let mut c2 = ArchPerfModel::new(Config::core2());
    c2.write_msr(FIXED0 + 2, 0xFF_FFFF_FFFF).unwrap();
    write_faults(&mut c2, FIXED0 + 2, 1 << 40, GpReason::OutOfWidth);
}

#[test]
fn rdpmc_forms() {
    let mut m = sky();
    for i in 0..4u32 {
        m.write_msr(A_PMC0 + i, 0xAB_0000_0000 + u64::from(i))
            .unwrap();
        assert_eq!(m.rdpmc(i).unwrap(), 0xAB_0000_0000 + u64::from(i));
    }
    for i in 0..3u32 {
        m.write_msr(FIXED0 + i, 0xCD_0000_0000 + u64::from(i))
            .unwrap();
        assert_eq!(
            m.rdpmc((1 << 30) | i).unwrap(),
            0xCD_0000_0000 + u64::from(i)
        );
    }
    for ecx in [
        4,
        7,
        8,
        1 << 16,
        1 << 29,
        (1 << 30) | 3,
        (1 << 30) | (1 << 16),
        0x3FFF_FFFF,
    ] {
        let e = m.rdpmc(ecx).unwrap_err();
        assert_eq!(e.reason(), GpReason::NoSuchCounter, "{ecx:#X}");
        assert_eq!(e.instruction(), Instruction::Rdpmc);
        assert_eq!(e.ecx(), ecx);
    }
    // Fast reads (ECX[31]): only without architectural perfmon.
    for config in [
        Config::v1(),
        Config::core2(),
        Config::skylake(),
        Config::alder_lake_p_core(),
    ] {
        let m = ArchPerfModel::new(config);
        for ecx in [1 << 31, (1 << 31) | 1, (1 << 31) | (1 << 30)] {
            assert_eq!(reason(m.rdpmc(ecx)), GpReason::FastReadUnsupported);
        }
    }
    let v1 = ArchPerfModel::new(Config::v1());
    v1.rdpmc(1).unwrap();
    assert_eq!(reason(v1.rdpmc(2)), GpReason::NoSuchCounter);
    assert_eq!(reason(v1.rdpmc(1 << 30)), GpReason::NoSuchCounter);
    let adl = ArchPerfModel::new(Config::alder_lake_p_core());
    adl.rdpmc(7).unwrap();
    adl.rdpmc((1 << 30) | 3).unwrap();
    assert_eq!(reason(adl.rdpmc(8)), GpReason::NoSuchCounter);
    assert_eq!(reason(adl.rdpmc((1 << 30) | 4)), GpReason::NoSuchCounter);
}

#[test]
fn write_one_command_registers_read_as_zero() {
    let mut m = sky();
    m.write_msr(STATUS_SET, 0xF).unwrap();
    assert_eq!(m.read_msr(STATUS_SET).unwrap(), 0);
    m.write_msr(OVF_CTRL, 0x3).unwrap();
    assert_eq!(m.read_msr(OVF_CTRL).unwrap(), 0);
    assert_eq!(m.read_msr(STATUS).unwrap(), 0xC);
}

#[test]
fn global_inuse_follows_the_sdm_definition() {
    let mut m = sky();
    // PERFEVTSEL0: umask only (7:0 = 0): not in use. PERFEVTSEL1: event C0H
    // without EN: in use. PERFEVTSEL2: INT only: PMI_InUse, not in use.
    m.write_msr(EVTSEL0, sel(0, 1, OS_BIT | EN)).unwrap();
    m.write_msr(EVTSEL0 + 1, sel(0xC0, 0, 0)).unwrap();
    assert_eq!(m.read_msr(INUSE).unwrap(), 0x2);
    m.write_msr(EVTSEL0 + 2, INT).unwrap();
    assert_eq!(m.read_msr(INUSE).unwrap(), (1 << 63) | 0x2);
    m.write_msr(EVTSEL0 + 2, 0).unwrap();
    // FIXED_CTR_CTRL: field 1 = OS (in use), field 2 = PMI only (PMI_InUse).
    m.write_msr(FIXED_CTRL, 0x810).unwrap();
    assert_eq!(m.read_msr(INUSE).unwrap(), (1 << 63) | (1 << 33) | 0x2);
    m.write_msr(FIXED_CTRL, 0x220).unwrap();
    assert_eq!(m.read_msr(INUSE).unwrap(), (1 << 34) | (1 << 33) | 0x2);
    assert_eq!(m.global_inuse(), (1 << 34) | (1 << 33) | 0x2);
}

#[test]
fn fault_display_and_error() {
    let mut m = sky();
    let e = m.write_msr(STATUS, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on WRMSR to IA32_PERF_GLOBAL_STATUS (38EH): read-only MSR"
    );
    let e = m.write_msr(EVTSEL0 + 2, 1 << 40).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on WRMSR to IA32_PERFEVTSEL2 (188H): reserved bits 0x10000000000 set"
    );
    let e = m.read_msr(0x1A1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on RDMSR of MSR 1A1H: no such MSR on this processor"
    );
    let e = m.rdpmc(9).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on RDPMC with ECX 0x9: no counter with that index"
    );
    let e = m.write_msr(A_PMC0, 1 << 50).unwrap_err();
    assert_eq!(
        e.to_string(),
        "#GP(0) on WRMSR to IA32_A_PMC0 (4C1H): value wider than the counter"
    );
    let _: &dyn core::error::Error = &e;
    assert_eq!(msr_name(0x30B), Some(("IA32_FIXED_CTR", Some(2))));
    assert_eq!(msr_name(0x390), Some(("IA32_PERF_GLOBAL_OVF_CTRL", None)));
    assert_eq!(msr_name(0x393), None);
}

#[test]
fn config_values_beyond_the_model_are_clamped() {
    let config = Config {
        gp_counters: 12,
        gp_width: 70,
        fixed_counters: 20,
        ..Config::skylake()
    };
    assert_eq!(config.gp_count(), 8);
    assert_eq!(config.gp_bits(), 64);
    let leaf = config.cpuid(0xA, 0);
    assert_eq!(leaf.eax, 0x0740_0804);
    assert_eq!(leaf.edx & 0x1F, 16);
    let mut m = ArchPerfModel::new(config);
    m.write_msr(A_PMC0 + 7, u64::MAX).unwrap();
    absent(&mut m, PMC0 + 8);
}
