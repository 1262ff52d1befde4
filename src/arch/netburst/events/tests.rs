//! The catalog against the SDM and libpfm4 tables, transcribed separately.

use super::*;
use Escr::*;

/// The SDM event tables (Vol. 3B Tables 19-28, 19-29, 19-34) and libpfm4's
/// `lib/events/intel_netburst_events.h`, one row per event, transcribed
/// independently: (name, EvSel, CCCRsel, ESCR MSRs, masks as
/// (name, bit, default), TS/TI: 'S', 'I' or '-').
type Row = (
    &'static str,
    u8,
    u8,
    &'static [u32],
    &'static [(&'static str, u8, bool)],
    char,
);
const REF: &[Row] = &[
    (
        "TC_deliver_mode",
        0x01,
        1,
        &[0x3C4, 0x3C5],
        &[
            ("DD", 0, false),
            ("DB", 1, false),
            ("DI", 2, false),
            ("BD", 3, false),
            ("BB", 4, false),
            ("BI", 5, false),
            ("ID", 6, false),
            ("IB", 7, false),
        ],
        'I',
    ),
    (
        "BPU_fetch_request",
        0x03,
        0,
        &[0x3B2, 0x3B3],
        &[("TCMISS", 0, true)],
        'S',
    ),
    (
        "ITLB_reference",
        0x18,
        3,
        &[0x3B6, 0x3B7],
        &[("HIT", 0, false), ("MISS", 1, false), ("HIT_UC", 2, false)],
        'S',
    ),
    (
        "memory_cancel",
        0x02,
        5,
        &[0x3A8, 0x3A9],
        &[("ST_RB_FULL", 2, false), ("64K_CONF", 3, false)],
        'S',
    ),
    (
        "memory_complete",
        0x08,
        2,
        &[0x3AE, 0x3AF],
        &[("LSC", 0, false), ("SSC", 1, false)],
        'S',
    ),
    (
        "load_port_replay",
        0x04,
        2,
        &[0x3AE, 0x3AF],
        &[("SPLIT_LD", 1, true)],
        'S',
    ),
    (
        "store_port_replay",
        0x05,
        2,
        &[0x3AE, 0x3AF],
        &[("SPLIT_ST", 1, true)],
        'S',
    ),
    (
        "MOB_load_replay",
        0x03,
        2,
        &[0x3AA, 0x3AB],
        &[
            ("NO_STA", 1, false),
            ("NO_STD", 3, false),
            ("PARTIAL_DATA", 4, false),
            ("UNALGN_ADDR", 5, false),
        ],
        'S',
    ),
    (
        "page_walk_type",
        0x01,
        4,
        &[0x3AC, 0x3AD],
        &[("DTMISS", 0, false), ("ITMISS", 1, false)],
        'I',
    ),
    (
        "BSQ_cache_reference",
        0x0C,
        7,
        &[0x3A0, 0x3A1],
        &[
            ("RD_2ndL_HITS", 0, false),
            ("RD_2ndL_HITE", 1, false),
            ("RD_2ndL_HITM", 2, false),
            ("RD_3rdL_HITS", 3, false),
            ("RD_3rdL_HITE", 4, false),
            ("RD_3rdL_HITM", 5, false),
            ("RD_2ndL_MISS", 8, false),
            ("RD_3rdL_MISS", 9, false),
            ("WR_2ndL_MISS", 10, false),
        ],
        'S',
    ),
    ("IOQ_allocation", 0x03, 6, &[0x3A2, 0x3A3], REF_IOQ, 'S'),
    ("IOQ_active_entries", 0x1A, 6, &[0x3A3], REF_IOQ, 'S'),
    (
        "FSB_data_activity",
        0x17,
        6,
        &[0x3A2, 0x3A3],
        &[
            ("DRDY_DRV", 0, false),
            ("DRDY_OWN", 1, false),
            ("DRDY_OTHER", 2, false),
            ("DBSY_DRV", 3, false),
            ("DBSY_OWN", 4, false),
            ("DBSY_OTHER", 5, false),
        ],
        'I',
    ),
    ("BSQ_allocation", 0x05, 7, &[0x3A0], REF_BSQ, 'S'),
    ("BSQ_active_entries", 0x06, 7, &[0x3A1], REF_BSQ, '-'),
    (
        "SSE_input_assist",
        0x34,
        1,
        &[0x3A4, 0x3A5],
        &[("ALL", 15, true)],
        'I',
    ),
    ("packed_SP_uop", 0x08, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("packed_DP_uop", 0x0C, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("scalar_SP_uop", 0x0A, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("scalar_DP_uop", 0x0E, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("64bit_MMX_uop", 0x02, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("128bit_MMX_uop", 0x1A, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    ("x87_FP_uop", 0x04, 1, &[0x3A4, 0x3A5], REF_UOP, 'I'),
    (
        "TC_misc",
        0x06,
        1,
        &[0x3C4, 0x3C5],
        &[("FLUSH", 4, true)],
        'S',
    ),
    (
        "global_power_events",
        0x13,
        6,
        &[0x3A2, 0x3A3],
        &[("RUNNING", 0, true)],
        'S',
    ),
    (
        "tc_ms_xfer",
        0x05,
        0,
        &[0x3C0, 0x3C1],
        &[("CISC", 0, true)],
        'S',
    ),
    (
        "uop_queue_writes",
        0x09,
        0,
        &[0x3C0, 0x3C1],
        &[
            ("FROM_TC_BUILD", 0, false),
            ("FROM_TC_DELIVER", 1, false),
            ("FROM_ROM", 2, false),
        ],
        'S',
    ),
    (
        "retired_mispred_branch_type",
        0x05,
        2,
        &[0x3C2, 0x3C3],
        REF_BR,
        'S',
    ),
    ("retired_branch_type", 0x04, 2, &[0x3C2, 0x3C3], REF_BR, 'S'),
    (
        "resource_stall",
        0x01,
        1,
        &[0x3CA, 0x3CB],
        &[("SBFULL", 5, true)],
        'S',
    ),
    (
        "WC_Buffer",
        0x05,
        5,
        &[0x3A8, 0x3A9],
        &[("WCB_EVICTS", 0, false), ("WCB_FULL_EVICT", 1, false)],
        'I',
    ),
    (
        "b2b_cycles",
        0x16,
        3,
        &[0x3A2, 0x3A3],
        // SDM bits 1-6 (libpfm4 maps BIT5/BIT6 to bit 4: not followed).
        &[
            ("BIT1", 1, false),
            ("BIT2", 2, false),
            ("BIT3", 3, false),
            ("BIT4", 4, false),
            ("BIT5", 5, false),
            ("BIT6", 6, false),
        ],
        '-',
    ),
    (
        "bnr",
        0x08,
        3,
        &[0x3A2, 0x3A3],
        &[("BIT0", 0, false), ("BIT1", 1, false), ("BIT2", 2, false)],
        '-',
    ),
    (
        "snoop",
        0x06,
        3,
        &[0x3A2, 0x3A3],
        &[("BIT2", 2, false), ("BIT6", 6, false), ("BIT7", 7, false)],
        '-',
    ),
    (
        "response",
        0x04,
        3,
        &[0x3A2, 0x3A3],
        &[
            ("BIT1", 1, false),
            ("BIT2", 2, false),
            ("BIT8", 8, false),
            ("BIT9", 9, false),
        ],
        '-',
    ),
    (
        "front_end_event",
        0x08,
        5,
        &[0x3CC, 0x3CD],
        &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
        'S',
    ),
    (
        "execution_event",
        0x0C,
        5,
        &[0x3CC, 0x3CD],
        &[
            ("NBOGUS0", 0, false),
            ("NBOGUS1", 1, false),
            ("NBOGUS2", 2, false),
            ("NBOGUS3", 3, false),
            ("BOGUS0", 4, false),
            ("BOGUS1", 5, false),
            ("BOGUS2", 6, false),
            ("BOGUS3", 7, false),
        ],
        'S',
    ),
    (
        "replay_event",
        0x09,
        5,
        &[0x3CC, 0x3CD],
        &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
        'S',
    ),
    (
        "instr_retired",
        0x02,
        4,
        &[0x3B8, 0x3B9],
        &[
            ("NBOGUSNTAG", 0, false),
            ("NBOGUSTAG", 1, false),
            ("BOGUSNTAG", 2, false),
            ("BOGUSTAG", 3, false),
        ],
        'S',
    ),
    (
        "uops_retired",
        0x01,
        4,
        &[0x3B8, 0x3B9],
        &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
        'S',
    ),
    (
        "uop_type",
        0x02,
        2,
        &[0x3BC, 0x3BD],
        &[("TAGLOADS", 1, false), ("TAGSTORES", 2, false)],
        'S',
    ),
    (
        "branch_retired",
        0x06,
        5,
        &[0x3CC, 0x3CD],
        &[
            ("MMNP", 0, false),
            ("MMNM", 1, false),
            ("MMTP", 2, false),
            ("MMTM", 3, false),
        ],
        'S',
    ),
    (
        "mispred_branch_retired",
        0x03,
        4,
        &[0x3B8, 0x3B9],
        &[("NBOGUS", 0, true)],
        'S',
    ),
    (
        "x87_assist",
        0x03,
        5,
        &[0x3CC, 0x3CD],
        &[
            ("FPSU", 0, false),
            ("FPSO", 1, false),
            ("POAO", 2, false),
            ("POAU", 3, false),
            ("PREA", 4, false),
        ],
        'S',
    ),
    (
        "machine_clear",
        0x02,
        5,
        &[0x3CC, 0x3CD],
        &[
            ("CLEAR", 0, false),
            ("MOCLEAR", 2, false),
            ("SMCLEAR", 6, false),
        ],
        'S',
    ),
    (
        "instr_completed",
        0x07,
        4,
        &[0x3B8, 0x3B9],
        &[("NBOGUS", 0, false), ("BOGUS", 1, false)],
        'S',
    ),
];
const REF_IOQ: &[(&str, u8, bool)] = &[
    ("TYPE_BIT0", 0, false),
    ("TYPE_BIT1", 1, false),
    ("TYPE_BIT2", 2, false),
    ("TYPE_BIT3", 3, false),
    ("TYPE_BIT4", 4, false),
    ("ALL_READ", 5, false),
    ("ALL_WRITE", 6, false),
    ("MEM_UC", 7, false),
    ("MEM_WC", 8, false),
    ("MEM_WT", 9, false),
    ("MEM_WP", 10, false),
    ("MEM_WB", 11, false),
    ("OWN", 13, false),
    ("OTHER", 14, false),
    ("PREFETCH", 15, false),
];
const REF_BSQ: &[(&str, u8, bool)] = &[
    ("REQ_TYPE0", 0, false),
    ("REQ_TYPE1", 1, false),
    ("REQ_LEN0", 2, false),
    ("REQ_LEN1", 3, false),
    ("REQ_IO_TYPE", 5, false),
    ("REQ_LOCK_TYPE", 6, false),
    ("REQ_CACHE_TYPE", 7, false),
    ("REQ_SPLIT_TYPE", 8, false),
    ("REQ_DEM_TYPE", 9, false),
    ("REQ_ORD_TYPE", 10, false),
    ("MEM_TYPE0", 11, false),
    ("MEM_TYPE1", 12, false),
    ("MEM_TYPE2", 13, false),
];
const REF_UOP: &[(&str, u8, bool)] = &[("ALL", 15, true)];
const REF_BR: &[(&str, u8, bool)] = &[
    ("CONDITIONAL", 1, false),
    ("CALL", 2, false),
    ("RETURN", 3, false),
    ("INDIRECT", 4, false),
];

#[test]
fn catalog_matches_reference_table() {
    assert_eq!(EventName::ALL.len(), 46);
    assert_eq!(REF.len(), 46);
    for (i, (e, row)) in EventName::ALL.iter().zip(REF).enumerate() {
        let (name, sel, csel, escrs, masks, tsti) = *row;
        let info = e.info();
        assert_eq!(*e as usize, i);
        assert_eq!(info.name, name);
        assert_eq!(info.event_select.get(), sel, "{name}");
        assert_eq!(info.escr_select.get(), csel, "{name}");
        let msrs: Vec<u32> = info.escrs.iter().map(|x| x.msr()).collect();
        assert_eq!(msrs, escrs, "{name}");
        let real: Vec<(&str, u8, bool)> = info
            .masks
            .iter()
            .filter_map(|mi| match mi.kind {
                MaskKind::Bit(b) => Some((mi.name, b, mi.default)),
                _ => None,
            })
            .collect();
        assert_eq!(real, masks, "{name}");
        let spec = match tsti {
            'S' => Specificity::ThreadSpecific,
            'I' => Specificity::ThreadIndependent,
            _ => Specificity::Unlisted,
        };
        assert_eq!(info.specificity, spec, "{name}");
        assert_eq!(EventName::from_name(name), Some(*e));
        assert_eq!(EventName::from_name(&name.to_ascii_uppercase()), Some(*e));
    }
}

#[test]
fn internal_consistency() {
    for e in EventName::ALL {
        let info = e.info();
        // Every allowed ESCR answers to the event's CCCR select value.
        let disputed = info
            .constraints
            .iter()
            .any(|c| matches!(c, Constraint::DisputedEscrSelect { .. }));
        for escr in info.escrs {
            if disputed {
                assert_ne!(escr.select(), info.escr_select, "{}", info.name);
                assert_eq!(escr.select().get(), 6);
            } else {
                assert_eq!(escr.select(), info.escr_select, "{}", info.name);
            }
            assert!(e.allows(*escr));
        }
        // At most one default mask; mask names unique.
        assert!(info.masks.iter().filter(|m| m.default).count() <= 1);
        for (i, a) in info.masks.iter().enumerate() {
            assert_eq!(info.mask_index(a.name), Some(i), "{}:{}", info.name, a.name);
            if let Some(al) = a.alias {
                assert_eq!(info.mask_index(al), Some(i));
            }
            if let MaskKind::Bit(b) = a.kind {
                assert!(b < 16);
            }
            if let MaskKind::Tag(t) = a.kind {
                assert!(t < 4);
            }
        }
        // At-retirement events are exactly the CRU/RAT ones of Table 19-29.
        let at_ret = info.escrs.iter().all(|x| {
            matches!(
                x,
                CruEscr0 | CruEscr1 | CruEscr2 | CruEscr3 | RatEscr0 | RatEscr1
            )
        });
        assert_eq!(
            info.counting == Counting::AtRetirement,
            at_ret,
            "{}",
            info.name
        );
    }
}

#[test]
fn disagreement_resolutions() {
    // libpfm4 alias spellings.
    assert_eq!(EventName::from_name("uops_type"), Some(EventName::UopType));
    let mbr = EventName::MispredBranchRetired.info();
    assert_eq!(mbr.mask_index("BOGUS"), mbr.mask_index("NBOGUS"));
    // machine_clear follows the SDM.
    let mc = EventName::MachineClear.info();
    assert_eq!(
        mc.masks[mc.mask_index("SMCLEAR").unwrap()].kind,
        MaskKind::Bit(6)
    );
    // instr_completed on CRU_ESCR0/1, only on models 3, 4, 6.
    assert_eq!(
        EventName::InstrCompleted.info().escrs,
        &[CruEscr0, CruEscr1]
    );
    for model in 0..16 {
        assert_eq!(
            EventName::InstrCompleted.available_on(model),
            matches!(model, 3 | 4 | 6)
        );
        assert!(EventName::GlobalPowerEvents.available_on(model));
    }
    // IOQ_active_entries only on FSB_ESCR1, with IOQ_allocation.
    let ioq = EventName::IoqActiveEntries.info();
    assert_eq!(ioq.escrs, &[FsbEscr1]);
    assert!(
        ioq.constraints
            .contains(&Constraint::RequiresCompanion(EventName::IoqAllocation))
    );
    // Table-19-34-only bits are not accepted.
    assert_eq!(
        EventName::MemoryComplete.info().valid_mask_bits(),
        EventMask(0b11)
    );
    assert_eq!(
        EventName::WcBuffer.info().valid_mask_bits(),
        EventMask(0b11)
    );
    assert!(EventName::from_name("nonexistent").is_none());
}

#[test]
fn replay_metrics_match_table_19_33() {
    // (metric, PEBS_ENABLE incl. bit 24, MATRIX_VERT) from Linux's
    // p4_pebs_bind_map (== SDM Table 19-33 bits without bit 25).
    let expect = [
        (ReplayMetric::L1LoadMiss, 0x0100_0001u64, 0x1u64),
        (ReplayMetric::L2LoadMiss, 0x0100_0002, 0x1),
        (ReplayMetric::DtlbLoadMiss, 0x0100_0004, 0x1),
        (ReplayMetric::DtlbStoreMiss, 0x0100_0004, 0x2),
        (ReplayMetric::DtlbAllMiss, 0x0100_0004, 0x3),
        (ReplayMetric::TaggedMispredBranch, 0x0101_8000, 0x10),
        (ReplayMetric::MobLoadReplay, 0x0100_0200, 0x1),
        (ReplayMetric::SplitLoad, 0x0100_0400, 0x1),
        (ReplayMetric::SplitStore, 0x0100_0400, 0x2),
    ];
    for (mt, en, vert) in expect {
        assert_eq!(
            mt.pebs_enable().with_uop_tag(true).bits(),
            en,
            "{}",
            mt.name()
        );
        assert_eq!(mt.matrix_vert().bits(), vert, "{}", mt.name());
    }
    let up = ReplayMetric::SplitLoad.upstream().unwrap();
    assert_eq!(
        (up.event, up.escr),
        (EventName::LoadPortReplay, Some(SaatEscr1))
    );
    let up = ReplayMetric::MobLoadReplay.upstream().unwrap();
    assert_eq!(up.mask, EventMask(0x30));
    assert!(ReplayMetric::L1LoadMiss.upstream().is_none());
    // Every metric is selectable by name on replay_event.
    let re = EventName::ReplayEvent.info();
    for mt in ReplayMetric::ALL {
        assert!(
            re.masks
                .iter()
                .any(|m| m.kind == MaskKind::ReplayMetric(mt))
        );
    }
}

/// `EventName::tags_uops` is exactly the front-end tagging events (constraint
/// `TagsFor(front_end_event)`; execution tagging needs `Tag_Enable`) and
/// the replay metrics' upstream events.
#[test]
fn tagging_events_are_the_catalogs() {
    for e in EventName::ALL {
        let front_end = e
            .info()
            .constraints
            .iter()
            .any(|c| matches!(c, Constraint::TagsFor(EventName::FrontEndEvent)));
        let replay = ReplayMetric::ALL
            .iter()
            .any(|m| m.upstream().is_some_and(|u| u.event == e));
        assert_eq!(e.tags_uops(), front_end || replay, "{}", e.name());
    }
}

/// `EventName::needs_tagging` is the catalog's `NeedsTagging` constraint.
#[test]
fn needs_tagging_is_the_catalogs() {
    for e in EventName::ALL {
        let catalog = e.info().constraints.iter().find_map(|c| match c {
            Constraint::NeedsTagging(t) => Some(*t),
            _ => None,
        });
        assert_eq!(e.needs_tagging(), catalog, "{}", e.name());
    }
}
