//! The `MsrAccess` adapter (a harness address map) and use from a `static`.

use super::helpers::*;
use crate::access::Recording;

#[test]
fn adapter_maps_pmcs_pmds_and_psr() {
    for g in GENERATIONS {
        let mut m = ItaniumModel::new(g);
        let mut msr = m.msr();
        msr.write_msr(PSR_ADDRESS, Psr::UP | Psr::PP).unwrap();
        msr.write_msr(PMC_BASE, 0).unwrap();
        let config = counter_config(g, 5, events::CPU_CYCLES, 0);
        msr.write_msr(PMC_BASE + 5, config).unwrap();
        msr.write_msr(PMD_BASE + 5, wrap(g) - 3).unwrap();
        assert_eq!(msr.read_msr(PMC_BASE + 5), Ok(config));
        assert_eq!(msr.read_msr(PSR_ADDRESS), Ok(Psr::UP | Psr::PP));
        msr.model().inject(cycles(1));
        // The RDPMC slot reads the PMD, sign-extended like mov r = pmd[].
        assert_eq!(msr.rdpmc(5), Ok((-2i64) as u64), "{g:?}");
        assert_eq!(msr.read_msr(PMD_BASE + 5), Ok((-2i64) as u64));
        assert_eq!(m.psr(), Psr::MONITORING);
        assert_eq!(m.counter(5), wrap(g) - 2);
    }
}

#[test]
fn adapter_faults() {
    let mut msr = MsrAdapter(ItaniumModel::new(Itanium));
    for a in [0x201, 0x300, 0xFFFF_FFFF] {
        assert_eq!(msr.read_msr(a), Err(Fault::NotMapped { msr: a }));
        assert_eq!(msr.write_msr(a, 0), Err(Fault::NotMapped { msr: a }));
    }
    assert_eq!(
        msr.write_msr(PSR_ADDRESS, Psr::UP | 1),
        Err(Fault::UnmodelledPsrBits { bits: 1 })
    );
    // The model's own faults pass through, with the register number.
    assert_eq!(
        msr.read_msr(PMC_BASE + 14),
        Err(Fault::ReservedRegisterField {
            access: AccessKind::ReadPmc,
            index: 14,
            violation: Violation::Unimplemented
        })
    );
    assert_eq!(
        msr.rdpmc(18).map(|_| ()),
        rrf(AccessKind::ReadPmd, 18, Violation::Unimplemented)
    );
    assert_eq!(
        msr.write_msr(PMC_BASE + 6, 1 << 22),
        pmc_fixed(6, 1 << 22),
        "Itanium PMC6 threshold bit 22"
    );
}

#[test]
fn adapter_under_recording_counts_accesses() {
    let mut rec: Recording<_, 8> = Recording::new(MsrAdapter(ItaniumModel::new(Itanium2)));
    rec.write_msr(PMC_BASE, 0).unwrap();
    rec.write_msr(
        PMC_BASE + 4,
        counter_config(Itanium2, 4, events::CPU_CYCLES, 0),
    )
    .unwrap();
    rec.rdpmc(4).unwrap();
    let counts = rec.take_counts();
    assert_eq!(
        (counts.msr_writes, counts.rdpmc, counts.msr_reads),
        (2, 1, 0)
    );
    assert!(!rec.inner_mut().model().frozen());
}

static MODEL: spin::Mutex<ItaniumModel> = spin::Mutex::new(ItaniumModel::new(Itanium2));
static ADAPTER: spin::Mutex<MsrAdapter<ItaniumModel>> = spin::Mutex::new(MsrAdapter(
    ItaniumModel::with_checking(Montecito, Checking::Hardware),
));

#[test]
fn models_live_in_statics() {
    let mut m = MODEL.lock();
    m.write_pmc(0, 0).unwrap();
    m.set_psr(Psr::MONITORING);
    program(&mut m, 7, events::CPU_CYCLES, 0, 0);
    m.inject(cycles(9));
    assert_eq!(m.counter(7), 9);
    let mut a = ADAPTER.lock();
    assert_eq!(a.read_msr(PMC_BASE + 200), Ok(0), "hardware mode: no fault");
    assert_eq!(a.model().generation(), Montecito);
}
