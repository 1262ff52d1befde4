//! µop tagging (SDM 18.15.6.2-18.15.6.4) and PEBS.

use super::helpers::*;

const PACKED_SP: EventKind = EventKind::new(EscrGroup::Firm, 0x08, 1 << 15);
const SCALAR_DP: EventKind = EventKind::new(EscrGroup::Firm, 0x0E, 1 << 15);

fn tag_bits(value: u64) -> u64 {
    escr::TAG_ENABLE | value << 5
}

/// Upstream: FIRM_ESCR0 packed_SP_uop tag 1 (counter 8 counts it), FIRM_ESCR1
/// scalar_DP_uop tag 2 (counter 10). Downstream: CRU_ESCR2 execution_event
/// `mask2` -> counter 12, CRU_ESCR3 execution_event `mask3` -> counter 14.
fn execution_setup(mask2: u16, mask3: u16) -> NetBurstModel {
    let mut m = ht();
    let t0 = escr::T0_OS | escr::T0_USR;
    m.write_msr(0x3A4, escr_value(0x08, 1 << 15, t0 | tag_bits(1)))
        .unwrap();
    m.write_msr(0x3A5, escr_value(0x0E, 1 << 15, t0 | tag_bits(2)))
        .unwrap();
    m.write_msr(0x368, cccr_value(1)).unwrap();
    m.write_msr(0x36A, cccr_value(1)).unwrap();
    m.write_msr(0x3CC, escr_value(0x0C, mask2, t0)).unwrap();
    m.write_msr(0x3CD, escr_value(0x0C, mask3, t0)).unwrap();
    m.write_msr(0x36C, cccr_value(5)).unwrap();
    m.write_msr(0x36E, cccr_value(5)).unwrap();
    m
}

fn batch<'a>(upstream: &'a [EventKind], count: u64, bogus: bool) -> Uops<'a> {
    Uops {
        upstream,
        bogus,
        ..Uops::new(T0, USR, UopKind::Other, count)
    }
}

#[test]
fn execution_tagging_with_two_tag_values_at_once() {
    // NBOGUS0 on counter 12, NBOGUS1 on counter 14.
    let mut m = execution_setup(1 << 0, 1 << 1);
    m.retire(&batch(&[PACKED_SP], 5, false));
    m.retire(&batch(&[SCALAR_DP], 7, false));
    m.retire(&batch(&[PACKED_SP], 3, true));
    m.retire(&batch(&[], 11, false));
    assert_eq!(m.rdpmc(12), Ok(5), "tag 1 NBOGUS");
    assert_eq!(m.rdpmc(14), Ok(7), "tag 2 NBOGUS");
    assert_eq!(m.rdpmc(8), Ok(8), "upstream counters count their events");
    assert_eq!(m.rdpmc(10), Ok(7));
    // A µop tagged by both ESCRs (tag 3) counts on both counters.
    m.retire(&batch(&[PACKED_SP, SCALAR_DP], 2, false));
    assert_eq!((m.rdpmc(12), m.rdpmc(14)), (Ok(7), Ok(9)));
    // BOGUS0|NBOGUS1 downstream: the bogus packed µops count too.
    let mut m = execution_setup((1 << 0) | (1 << 1), 1 << 4);
    m.retire(&batch(&[PACKED_SP], 3, true));
    m.retire(&batch(&[PACKED_SP], 4, false));
    m.retire(&batch(&[SCALAR_DP], 6, false));
    assert_eq!(
        m.rdpmc(12),
        Ok(10),
        "NBOGUS0|NBOGUS1: any tag bit selected counts once"
    );
    assert_eq!(m.rdpmc(14), Ok(3), "BOGUS0");
}

#[test]
fn execution_tagging_needs_tag_enable_qualification_and_power() {
    // Tag enable clear on FIRM_ESCR0: no tag.
    let mut m = execution_setup(1, 2);
    let v = m.read_msr(0x3A4).unwrap();
    m.write_msr(0x3A4, v & !escr::TAG_ENABLE).unwrap();
    m.retire(&batch(&[PACKED_SP], 5, false));
    assert_eq!(m.rdpmc(12), Ok(0));
    // The upstream ESCR's T0 bits do not admit T1's µops (a TI event, but
    // T1_OS/T1_USR and the other thread's state: T0 at USR is not admitted
    // by T0_OS only).
    let mut m = execution_setup(1, 2);
    m.write_msr(0x3A4, escr_value(0x08, 1 << 15, escr::T0_OS | tag_bits(1)))
        .unwrap();
    m.set_thread_state(
        T1,
        ThreadState {
            active: false,
            privilege: USR,
        },
    );
    m.retire(&batch(&[PACKED_SP], 5, false));
    assert_eq!(m.rdpmc(12), Ok(0), "USR µops, OS-only upstream ESCR");
    // No counter of the FLAME block running: the FIRM ESCRs are powered down.
    let mut m = execution_setup(1, 2);
    m.write_msr(0x368, 0).unwrap();
    m.write_msr(0x36A, 0).unwrap();
    m.retire(&batch(&[PACKED_SP], 5, false));
    assert_eq!(m.rdpmc(12), Ok(0));
}

#[test]
fn front_end_tagging_of_loads() {
    let mut m = ht();
    let t0 = escr::T0_OS | escr::T0_USR;
    // RAT_ESCR0 uop_type TAGLOADS; CRU_ESCR2 front_end_event NBOGUS -> 12.
    m.write_msr(0x3BC, escr_value(0x02, 1 << 1, t0)).unwrap();
    m.write_msr(0x3CC, escr_value(0x08, 1, t0)).unwrap();
    m.write_msr(0x36C, cccr_value(5)).unwrap();
    m.retire(&Uops::new(T0, USR, UopKind::Load, 4));
    m.retire(&Uops::new(T0, USR, UopKind::Store, 6));
    m.retire(&Uops {
        bogus: true,
        ..Uops::new(T0, USR, UopKind::Load, 2)
    });
    assert_eq!(m.rdpmc(12), Ok(4));
}

/// 1stL_cache_load_miss_retired (Table 19-33): PEBS_ENABLE bits 0 and 24,
/// MATRIX_VERT bit 0, replay_event NBOGUS on CRU_ESCR2 -> counter `c`.
fn replay_setup(c: usize) -> NetBurstModel {
    let mut m = ht();
    m.write_msr(0x3F1, (1 << 24) | 1).unwrap();
    m.write_msr(0x3F2, 1).unwrap();
    m.write_msr(0x3CC, escr_value(0x09, 1, escr::T0_OS | escr::T0_USR))
        .unwrap();
    m.write_msr(0x360 + c as u32, cccr_value(5)).unwrap();
    m
}

fn loads(count: u64, replays: u64) -> Uops<'static> {
    Uops {
        replays,
        ..Uops::new(T0, OS, UopKind::Load, count)
    }
}

#[test]
fn replay_tagging_of_a_cache_metric() {
    let mut m = replay_setup(12);
    m.retire(&loads(10, replay::L1_LOAD_MISS));
    m.retire(&loads(5, 0));
    m.retire(&loads(4, replay::L2_LOAD_MISS | replay::DTLB_MISS));
    m.retire(&Uops {
        replays: replay::L1_LOAD_MISS,
        ..Uops::new(T0, OS, UopKind::Store, 3)
    });
    m.retire(&Uops {
        bogus: true,
        ..loads(2, replay::L1_LOAD_MISS)
    });
    assert_eq!(m.rdpmc(12), Ok(10));
    // 2ndL metric: L2 misses count.
    m.write_msr(0x3F1, (1 << 24) | 2).unwrap();
    m.retire(&loads(4, replay::L1_LOAD_MISS | replay::L2_LOAD_MISS));
    m.retire(&loads(9, replay::L1_LOAD_MISS));
    assert_eq!(m.rdpmc(12), Ok(14));
    // Without UOP_Tag no replay tagging.
    m.write_msr(0x3F1, 2).unwrap();
    m.retire(&loads(4, replay::L2_LOAD_MISS));
    assert_eq!(m.rdpmc(12), Ok(14));
}

#[test]
fn replay_tagging_split_loads_needs_the_additional_escr() {
    let mut m = replay_setup(12);
    m.write_msr(0x3F1, (1 << 24) | replay::SPLIT).unwrap();
    m.retire(&loads(3, replay::SPLIT));
    assert_eq!(m.rdpmc(12), Ok(0));
    // load_port_replay SPLIT_LD in SAAT_ESCR1, with a FLAME counter running.
    m.write_msr(0x3AF, escr_value(0x04, 1 << 1, escr::T0_OS))
        .unwrap();
    m.write_msr(0x36A, cccr_value(2)).unwrap();
    m.retire(&loads(3, replay::SPLIT));
    assert_eq!(m.rdpmc(12), Ok(3));
    assert_eq!(
        m.rdpmc(10),
        Ok(0),
        "the SAAT counter sees no load_port_replay event"
    );
}

fn pebs_setup(m: &mut NetBurstModel, lp: LogicalProcessor, records: u64) -> DsManagement {
    let base = 0x20_0000 + 0x1000 * lp.index() as u64;
    let ds = DsManagement {
        pebs_buffer_base: base,
        pebs_index: base,
        pebs_absolute_maximum: base + records * PEBS_RECORD_SIZE,
        pebs_interrupt_threshold: base + 2 * PEBS_RECORD_SIZE,
        pebs_counter_reset: WRAP - 2,
    };
    let mut view = m.thread(lp).unwrap();
    view.write_msr(0x600, 0x10_0000).unwrap();
    view.write_msr(0x3F1, (1 << 25) | (1 << 24) | 1).unwrap();
    view.write_msr(0x3F2, 1).unwrap();
    m.set_ds_management(lp, ds);
    ds
}

#[test]
fn pebs_records_on_counter_16_for_t0() {
    let mut m = ht();
    m.write_msr(0x3CC, escr_value(0x09, 1, escr::T0_OS | escr::T0_USR))
        .unwrap();
    m.write_msr(0x370, cccr_value(5)).unwrap();
    m.write_msr(0x310, WRAP - 3).unwrap();
    let ds = pebs_setup(&mut m, T0, 4);
    let regs = PebsRecord {
        rflags: 0x202,
        rip: 0xFFFF_8000_0000_1234,
        gprs: [7; 16],
    };
    m.set_pebs_registers(T0, regs);
    // Overflow on the 3rd tagged load, assist on the 4th: record 1, reload.
    m.retire(&loads(4, replay::L1_LOAD_MISS));
    assert_eq!(m.pebs_records(T0), &[regs]);
    assert_eq!(m.rdpmc(16), Ok(WRAP - 2));
    assert!(!m.pmi_pending(T0), "below the interrupt threshold");
    // Two more to overflow, one for the assist: record 2 reaches the
    // threshold and raises the PMI.
    m.retire(&loads(3, replay::L1_LOAD_MISS));
    assert_eq!(m.pebs_records(T0).len(), 2);
    let pmi = m.take_pmi(T0).expect("PEBS threshold PMI");
    assert!(pmi.pebs_threshold);
    assert_eq!(
        m.ds_management(T0).pebs_index,
        ds.pebs_buffer_base + 2 * PEBS_RECORD_SIZE
    );
    // Fill the buffer: no more than 4 records.
    m.retire(&loads(100, replay::L1_LOAD_MISS));
    assert_eq!(m.pebs_records(T0).len(), 4);
    assert_eq!(m.ds_management(T0).pebs_index, ds.pebs_absolute_maximum);
    assert!(m.pebs_records(T1).is_empty());
    let bytes = regs.to_bytes();
    assert_eq!(&bytes[8..16], &0xFFFF_8000_0000_1234u64.to_le_bytes());
}

#[test]
fn pebs_on_counter_17_for_t1_and_ds_area_parsing() {
    let mut m = ht();
    m.write_msr(0x3CD, escr_value(0x09, 1, escr::T1_OS | escr::T1_USR))
        .unwrap();
    m.write_msr(0x371, cccr_value(5)).unwrap();
    m.write_msr(0x311, WRAP - 1).unwrap();
    pebs_setup(&mut m, T1, 8);
    // T0's PEBS is off: T1 wrote only "my thread".
    assert_eq!(m.read_msr(0x3F1).unwrap() & (3 << 25), 1 << 26);
    m.retire(&Uops {
        replays: replay::L1_LOAD_MISS,
        ..Uops::new(T1, USR, UopKind::Load, 2)
    });
    assert_eq!(m.pebs_records(T1).len(), 1);
    assert!(m.pebs_records(T0).is_empty());
    // The harness can mirror a DS area the driver wrote in memory.
    let mut area = [0u8; 0x48];
    for (i, w) in [0x1000u64, 0x1000, 0x1000 + 144, 0x1000, 5]
        .iter()
        .enumerate()
    {
        area[0x20 + 8 * i..0x28 + 8 * i].copy_from_slice(&w.to_le_bytes());
    }
    let ds = DsManagement::from_bytes(&area).unwrap();
    assert_eq!(ds.pebs_absolute_maximum, 0x1000 + 144);
    assert_eq!(ds.pebs_counter_reset, 5);
    assert_eq!(DsManagement::from_bytes(&area[..0x40]), None);
}

#[test]
fn pebs_with_force_ovf_and_a_full_buffer_stays_fast() {
    let mut m = ht();
    m.write_msr(0x3CC, escr_value(0x09, 1, escr::T0_OS | escr::T0_USR))
        .unwrap();
    m.write_msr(0x370, cccr_value(5) | cccr::FORCE_OVF).unwrap();
    pebs_setup(&mut m, T0, 3);
    // 2^40 µops in one bulk call: three assists, then plain counting.
    m.retire(&loads(WRAP, replay::L1_LOAD_MISS));
    assert_eq!(m.pebs_records(T0).len(), 3);
    assert_eq!(m.pebs_lost(T0), 0);
}

#[test]
fn no_pebs_on_counter_17_without_hyper_threading() {
    let mut m = NetBurstModel::new(Config::northwood());
    m.write_msr(0x3CD, escr_value(0x09, 1, escr::T0_OS | escr::T0_USR))
        .unwrap();
    m.write_msr(0x371, cccr_value(5)).unwrap();
    m.write_msr(0x311, WRAP - 1).unwrap();
    m.write_msr(0x600, 0x10_0000).unwrap();
    m.write_msr(0x3F1, (1 << 25) | (1 << 24) | 1).unwrap();
    m.write_msr(0x3F2, 1).unwrap();
    m.set_ds_management(
        T0,
        DsManagement {
            pebs_buffer_base: 0x1000,
            pebs_index: 0x1000,
            pebs_absolute_maximum: 0x1000 + 4 * PEBS_RECORD_SIZE,
            pebs_interrupt_threshold: 0x1000 + 4 * PEBS_RECORD_SIZE,
            pebs_counter_reset: 0,
        },
    );
    m.retire(&loads(5, replay::L1_LOAD_MISS));
    assert!(m.pebs_records(T0).is_empty());
    assert_eq!(m.rdpmc(17), Ok(4), "counter 17 just wraps");
}
