//! Record decoding per format, from words placed at the SDM's offsets by
//! hand (the model's records, written from its own tables, are decoded in
//! the driver's tests).

use super::*;

/// A record of `n` words whose word `i` is `0x1000 + i`, with `set`
/// overriding words.
fn words(n: usize, set: &[(usize, u64)]) -> Vec<u64> {
    let mut w: Vec<u64> = (0..n as u64).map(|i| 0x1000 + i).collect();
    for &(i, v) in set {
        w[i] = v;
    }
    w
}

/// Formats 1-3: RFLAGS 00H, RIP 08H, RAX 10H ... R15 88H, status 90H, DLA
/// 98H, DSE A0H, latency A8H; format 2 adds EventingIP B0H and TSX B8H,
/// format 3 the TSC C0H. Their sizes: 176, 192, 200 bytes.
#[test]
fn formats_1_to_3_decode_at_the_manual_offsets() {
    for (format, bytes) in [(1u8, 176u32), (2, 192), (3, 200)] {
        let layout = RecordLayout::new(format, None).unwrap();
        assert_eq!(layout.bytes(), bytes);
        let w = words(layout.words(), &[(0x90 / 8, 0b101)]);
        let r = layout.decode(&w).unwrap();
        assert_eq!(r.format(), format);
        assert_eq!(r.rflags(), Some(0x1000));
        assert_eq!(r.next_ip(), Some(0x1001));
        let g = r.gprs().unwrap();
        assert_eq!(
            (g.rax, g.rbx, g.rcx, g.rdx),
            (0x1002, 0x1003, 0x1004, 0x1005)
        );
        assert_eq!(
            (g.rsi, g.rdi, g.rbp, g.rsp),
            (0x1006, 0x1007, 0x1008, 0x1009)
        );
        assert_eq!((g.r8, g.r15), (0x100A, 0x1011));
        assert_eq!(r.counters().bits(), 0b101);
        let m = r.memory().unwrap();
        assert_eq!((m.address, m.source, m.latency), (0x1013, 0x1014, 0x1015));
        assert_eq!(r.eventing_ip(), (format >= 2).then_some(0x1016));
        assert_eq!(m.tsx, (format >= 2).then_some(0x1017));
        assert_eq!(r.tsc(), (format >= 3).then_some(0x1018));
        assert!(layout.decode(&w[..w.len() - 1]).is_none(), "short");
        // The IPs a sample takes.
        assert_eq!(r.ip(Precise::Constant), 0x1001);
        let eventing = if format >= 2 { 0x1016 } else { 0x1001 };
        assert_eq!(r.ip(Precise::Zero), eventing);
        assert_eq!(r.ip(Precise::MustBeZero), eventing);
    }
}

/// Adaptive records (formats 4-5): the basic group (format and size,
/// EventingIP, applicable counters, TSC), then the memory group, then the
/// GPR group in the registers' encoding order (RAX, RCX, RDX, RBX, RSP,
/// RBP, RSI, RDI); a record whose basic group names other groups or
/// another size than the layout's is refused.
#[test]
fn adaptive_records_decode_by_their_groups() {
    let none = PebsDataCfg::from_bits(0);
    let mem = none.with_memory(true);
    let gprs = none.with_gprs(true);
    let both = mem.with_gprs(true);
    for format in [4u8, 5] {
        for (cfg, bytes) in [(none, 32u32), (mem, 64), (gprs, 176), (both, 208)] {
            let layout = RecordLayout::new(format, Some(cfg)).unwrap();
            assert_eq!(layout.bytes(), bytes, "{cfg:?}");
            let head = cfg.bits() | u64::from(bytes) << 48;
            let w = words(layout.words(), &[(0, head), (2, 1 << 33 | 1)]);
            let r = layout.decode(&w).unwrap();
            assert_eq!(r.format(), format);
            assert_eq!(r.eventing_ip(), Some(0x1001));
            assert_eq!(r.counters().bits(), 1 << 33 | 1);
            assert_eq!(r.tsc(), Some(0x1003));
            let mut at = 4;
            match r.memory() {
                Some(m) => {
                    assert!(cfg.memory());
                    assert_eq!(
                        (m.address, m.source, m.latency, m.tsx),
                        (0x1004, 0x1005, 0x1006, Some(0x1007))
                    );
                    at += 4;
                }
                None => assert!(!cfg.memory()),
            }
            match r.gprs() {
                Some(g) => {
                    let at = 0x1000 + at as u64;
                    assert_eq!(r.rflags(), Some(at));
                    assert_eq!(r.next_ip(), Some(at + 1));
                    assert_eq!(
                        (g.rax, g.rcx, g.rdx, g.rbx),
                        (at + 2, at + 3, at + 4, at + 5)
                    );
                    assert_eq!(
                        (g.rsp, g.rbp, g.rsi, g.rdi),
                        (at + 6, at + 7, at + 8, at + 9)
                    );
                    assert_eq!((g.r8, g.r15), (at + 10, at + 17));
                    assert_eq!(r.ip(Precise::Constant), at + 1);
                }
                None => {
                    assert!(!cfg.gprs());
                    assert_eq!(r.ip(Precise::Constant), 0x1001, "the only IP");
                }
            }
            assert_eq!(r.ip(Precise::Zero), 0x1001);
            let other = words(layout.words(), &[(0, head ^ 1)]);
            assert!(layout.decode(&other).is_none(), "other groups");
            let resized = words(layout.words(), &[(0, cfg.bits() | 8 << 48)]);
            assert!(layout.decode(&resized).is_none(), "other size");
        }
    }
    // Format 4 without PEBS baseline: the basic group only.
    let basic = RecordLayout::new(4, None).unwrap();
    assert_eq!(basic.bytes(), 32);
    assert!(basic.decode(&words(4, &[(0, 32 << 48)])).is_some());
}

/// Layouts that are not the driver's: format 0 and 6, the XMM and LBR
/// groups; the packed form the PMI state keeps round-trips.
#[test]
fn layouts_pack_and_refuse_what_is_not_driven() {
    assert!(RecordLayout::new(0, None).is_none());
    assert!(RecordLayout::new(6, None).is_none());
    let xmm = PebsDataCfg::from_bits(0).with_xmms(true);
    assert!(RecordLayout::new(4, Some(xmm)).is_none());
    for layout in [
        RecordLayout::new(1, None),
        RecordLayout::new(3, None),
        RecordLayout::new(4, None),
        RecordLayout::new(5, Some(PebsDataCfg::from_bits(3))),
    ] {
        let layout = layout.unwrap();
        assert_eq!(RecordLayout::unpack(layout.pack()), Some(layout));
    }
    assert_eq!(RecordLayout::unpack(0), None);
    assert_eq!(Precise::from_level(0), None);
    for level in 1..=3 {
        assert_eq!(Precise::from_level(level).map(Precise::level), Some(level));
    }
}
