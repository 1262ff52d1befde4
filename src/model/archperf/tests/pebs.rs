//! The model's PEBS at the MSR and memory level, with the SDM's addresses,
//! bit positions and record offsets written out: which MSRs exist per
//! configuration and their #GP rules, the records' words at their offsets,
//! the threshold PMI, and a full buffer.

use super::helpers::*;

const MISC_ENABLE: u32 = 0x1A0;
const PEBS_ENABLE: u32 = 0x3F1;
const DATA_CFG: u32 = 0x3F2;
const LD_LAT: u32 = 0x3F6;
const DS_AREA: u32 = 0x600;

/// A DS area in a leaked buffer of words: management area at word 0 (1C0H
/// bytes, 56 words), the PEBS buffer after it, with room for `records` of
/// `size` bytes, the threshold after `threshold` of them; every counter
/// reset value `reset`. Returns the buffer and the area's address.
fn area(records: u64, size: u64, threshold: u64, reset: u64) -> (&'static mut [u64], u64) {
    let words: &'static mut [u64] = Box::leak(vec![0u64; 56 + 64 * 4].into_boxed_slice());
    let address = words.as_mut_ptr().expose_provenance() as u64;
    let base = address + 0x1C0;
    words[4] = base;
    words[5] = base;
    words[6] = base + records * size;
    words[7] = base + threshold * size;
    for w in &mut words[8..56] {
        *w = reset;
    }
    (words, address)
}

fn model_with_area(
    config: Config,
    records: u64,
    size: u64,
    threshold: u64,
) -> (ArchPerfModel, &'static mut [u64]) {
    let mut m = ArchPerfModel::new(config);
    let (words, address) = area(records, size, threshold, (1 << 48) - 1);
    m.write_msr(DS_AREA, address).unwrap();
    // SAFETY: the leaked buffer is the DS area at IA32_DS_AREA; the test
    // reads it only through the raw words after the model wrote them, and
    // no other reference to it is used while the model runs.
    unsafe { m.attach_ds_memory() };
    (m, words)
}

fn read_words(words: &[u64], from: usize, n: usize) -> Vec<u64> {
    (from..from + n)
        // SAFETY: inside the leaked buffer; read volatile, as the model
        // wrote it through a raw pointer.
        .map(|i| unsafe { core::ptr::read_volatile(&words[i]) })
        .collect()
}

#[test]
fn pebs_msrs_exist_where_the_configuration_has_pebs() {
    for config in [Config::v1(), Config::core2(), Config::alder_lake_p_core()] {
        let mut m = ArchPerfModel::new(config);
        for msr in [PEBS_ENABLE, DATA_CFG, LD_LAT, DS_AREA] {
            absent(&mut m, msr);
        }
        assert_eq!(m.read_msr(MISC_ENABLE).unwrap(), 1 << 7 | 1 << 11 | 1 << 12);
        assert_eq!(config.cpuid(1, 0).edx & 1 << 21, 0, "no DS");
    }
    for config in [Config::nehalem(), Config::haswell(), Config::skylake()] {
        let mut m = ArchPerfModel::new(config);
        absent(&mut m, DATA_CFG);
        assert_eq!(
            m.read_msr(MISC_ENABLE).unwrap(),
            1 << 7 | 1 << 11,
            "PEBS available"
        );
        assert_ne!(config.cpuid(1, 0).edx & 1 << 21, 0, "DS");
        // PEBS_EN_PMC0-3 and LL_EN_PMC0-3 only.
        m.write_msr(PEBS_ENABLE, 0xF | 0xF << 32).unwrap();
        write_faults(
            &mut m,
            PEBS_ENABLE,
            1 << 4,
            GpReason::ReservedBits { bits: 1 << 4 },
        );
        write_faults(
            &mut m,
            PEBS_ENABLE,
            1 << 63,
            GpReason::ReservedBits { bits: 1 << 63 },
        );
        m.write_msr(LD_LAT, 0xFFFF).unwrap();
        write_faults(
            &mut m,
            LD_LAT,
            1 << 16,
            GpReason::ReservedBits { bits: 1 << 16 },
        );
        write_faults(
            &mut m,
            EVTSEL0,
            1 << 34,
            GpReason::ReservedBits { bits: 1 << 34 },
        );
        write_faults(
            &mut m,
            DS_AREA,
            1 << 47,
            GpReason::ReservedBits { bits: 1 << 47 },
        );
        m.write_msr(DS_AREA, 0xFFFF_8000_0000_0000).unwrap();
        write_faults(&mut m, MISC_ENABLE, 0, GpReason::ReadOnly);
    }
    let mut ice = ArchPerfModel::new(Config::icelake());
    assert_eq!(
        ice.read_msr(PERF_CAPS).unwrap(),
        1 << 13 | 1 << 14 | 4 << 8 | 1 << 7 | 1 << 6 | 5
    );
    // Every general and fixed counter's PEBS enable.
    ice.write_msr(PEBS_ENABLE, 0xFF | 0xF << 32).unwrap();
    write_faults(
        &mut ice,
        PEBS_ENABLE,
        1 << 36,
        GpReason::ReservedBits { bits: 1 << 36 },
    );
    ice.write_msr(DATA_CFG, 0b11).unwrap();
    write_faults(
        &mut ice,
        DATA_CFG,
        0b100,
        GpReason::ReservedBits { bits: 0b100 },
    );
    ice.write_msr(EVTSEL0, 1 << 34).unwrap();
    ice.write_msr(FIXED_CTRL, 1 << 32 | 1 << 44).unwrap();
    // PEBS unavailable: IA32_MISC_ENABLE[12] set, no PEBS MSRs, DS still.
    let off = Config {
        pebs: PebsConfig {
            available: false,
            ..PebsConfig::format(3)
        },
        ..Config::skylake()
    };
    let mut m = ArchPerfModel::new(off);
    assert_ne!(m.read_msr(MISC_ENABLE).unwrap() & 1 << 12, 0);
    absent(&mut m, PEBS_ENABLE);
    m.write_msr(DS_AREA, 0x1000).unwrap();
}

/// Skylake: PMC0 counts instructions retired with PEBS, preset 3 before
/// the wrap: the 3rd instruction wraps it, the 4th takes the assist. The
/// record (format 3, 200 bytes): RFLAGS 00H, RIP 08H (the next
/// instruction), RAX 10H ... R15 88H, applicable counters 90H, DLA 98H, DSE
/// A0H, latency A8H, EventingIP B0H, TSX B8H, TSC C0H; the counter is
/// reloaded from the reset value at 40H; at the threshold OvfBuf is set and
/// the PMI line rises.
#[test]
fn a_format_3_record_is_written_at_the_manual_offsets() {
    let (mut m, words) = model_with_area(Config::skylake(), 4, 200, 1);
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(A_PMC0, (1 << 48) - 3).unwrap();
    m.write_msr(PEBS_ENABLE, 1).unwrap();
    for k in 0..4u64 {
        let r = Retirement {
            ip: 0x1000 + k,
            next_ip: 0x2000 + k,
            rflags: 0x46,
            registers: Gprs {
                rax: 0xA,
                rbx: 0xB,
                rsi: 0x51,
                r15: 0xF15,
                ..Gprs::default()
            },
            ..Retirement::NONE
        };
        let pmi = m.retire(&r);
        assert_eq!(pmi, k == 3, "the threshold PMI at the 4th");
    }
    let record = read_words(words, 56, 25);
    assert_eq!(record[0], 0x46);
    assert_eq!(record[1], 0x2003, "RIP: the next instruction");
    assert_eq!(
        (record[2], record[3], record[6], record[17]),
        (0xA, 0xB, 0x51, 0xF15)
    );
    assert_eq!(record[18], 1, "applicable counters");
    assert_eq!(record[22], 0x1003, "EventingIP");
    assert_eq!(record[24], 4, "the clock");
    assert_eq!(
        read_words(words, 5, 1)[0],
        words.as_ptr().expose_provenance() as u64 + 0x1C0 + 200
    );
    assert_ne!(m.global_status() & 1 << 62, 0, "OvfBuf");
    assert_eq!(m.counter(0), (1 << 48) - 1, "reloaded from 40H");
    assert_eq!((m.pebs_records(), m.pebs_lost()), (1, 0));
}

/// Ice Lake, adaptive: fixed counter 0 (instructions) with PEBS and its
/// Adaptive_Record bit, `MSR_PEBS_DATA_CFG` memory and GPRs: a 208-byte
/// record of the basic group (format and size, EventingIP, applicable
/// counters, TSC), the memory group (address, auxiliary, latency, TSX) and
/// the GPR group (RFLAGS, RIP, RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, ...);
/// the fixed counter's reset value after 8 general counters' (80H).
/// Without its Adaptive_Record bit, the basic group only.
#[test]
fn an_adaptive_record_has_the_groups_of_data_cfg() {
    for adaptive in [true, false] {
        let (mut m, words) = model_with_area(Config::icelake(), 4, 208, 4);
        words[8 + 8] = (1 << 48) - 2;
        m.write_msr(FIXED0, (1 << 48) - 1).unwrap();
        let field = 0b11 | if adaptive { 1 << 32 } else { 0 };
        m.write_msr(FIXED_CTRL, field).unwrap();
        m.write_msr(GLOBAL_CTRL, 1 << 32).unwrap();
        m.write_msr(PEBS_ENABLE, 1 << 32).unwrap();
        m.write_msr(DATA_CFG, 0b11).unwrap();
        m.write_msr(LD_LAT, 5).unwrap();
        let r = Retirement {
            ip: 0x3000,
            next_ip: 0x3004,
            rflags: 0x2,
            registers: Gprs {
                rax: 1,
                rcx: 2,
                rdx: 3,
                rbx: 4,
                rsp: 5,
                rbp: 6,
                rsi: 7,
                rdi: 8,
                ..Gprs::default()
            },
            load: Some(Load {
                address: 0xD00D,
                latency: 9,
                source: 0x11,
            }),
            ..Retirement::NONE
        };
        m.retire(&Retirement::at(0x2FFC, 0x3000));
        assert!(!m.retire(&r));
        let size = if adaptive { 208 } else { 32 };
        let record = read_words(words, 56, size / 8);
        let groups = if adaptive { 0b11 } else { 0 };
        assert_eq!(record[0], groups | (size as u64) << 48, "format and size");
        assert_eq!(record[1], 0x3000, "EventingIP");
        assert_eq!(record[2], 1 << 32, "applicable: fixed counter 0");
        assert_eq!(record[3], 2, "the clock");
        if adaptive {
            assert_eq!(&record[4..7], &[0xD00D, 0x11, 9], "memory group");
            assert_eq!(
                &record[8..18],
                &[0x2, 0x3004, 1, 2, 3, 4, 5, 6, 7, 8],
                "GPRs"
            );
        }
        assert_eq!(m.fixed(0), (1 << 48) - 2, "reloaded from 80H");
    }
}

/// A full buffer takes no record: the counter is not reloaded and counts
/// on (its events stay in its count), and the model counts the assist as
/// lost; so does an assist with no memory attached.
#[test]
fn a_full_buffer_takes_no_record() {
    let (mut m, _) = model_with_area(Config::haswell(), 1, 192, 8);
    m.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    m.write_msr(A_PMC0, (1 << 48) - 1).unwrap();
    m.write_msr(PEBS_ENABLE, 1).unwrap();
    for k in 0..6 {
        m.retire(&Retirement::at(k, k + 1));
    }
    // Wrap at the 1st, record at the 2nd (reloaded to -1), wrap at the
    // 3rd; the assist of the 4th finds the buffer full: the counter counts
    // it and the 5th and 6th, 1 to 3.
    assert_eq!((m.pebs_records(), m.pebs_lost()), (1, 1));
    assert_eq!(m.counter(0), 3);
    m.detach_ds_memory();
    let mut plain = ArchPerfModel::new(Config::haswell());
    plain.write_msr(EVTSEL0, counting(INSTR, 0)).unwrap();
    plain.write_msr(A_PMC0, (1 << 48) - 1).unwrap();
    plain.write_msr(PEBS_ENABLE, 1).unwrap();
    plain.inject(ev(INSTR, 2));
    assert_eq!(
        (plain.pebs_records(), plain.pebs_lost(), plain.counter(0)),
        (0, 1, 1)
    );
}
