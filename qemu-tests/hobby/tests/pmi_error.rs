//! The words of a failed model PMI (`hobby::pmi_error`), on the host: each
//! message says what was observed and no more.

use hobby::pmi_error::{InjectError, PmiError, WAIT_CYCLES, Waited};
use pmu::apic::{LvtPerfCounter, PmiDelivery, Vector};

fn fixed(v: u8) -> LvtPerfCounter {
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(v).unwrap()))
}

#[test]
fn each_failure_says_what_was_seen() {
    let hobby = Waited::Cycles(WAIT_CYCLES);
    let table: [(PmiError, &str); 9] = [
        (
            // The firmware's value: nothing ever programmed the entry.
            PmiError::Masked {
                entry: LvtPerfCounter::RESET,
                handled: 0,
            },
            "PMI 1 not delivered: the LVT performance-counter entry is masked and holds its reset value (0x10000: vector 0x0, below 16, masked): it was never programmed (the firmware leaves it masked); program it with set_perf_counter_entry",
        ),
        (
            PmiError::Masked {
                entry: fixed(0xF0).masked(),
                handled: 0,
            },
            "PMI 1 not delivered: the LVT performance-counter entry is masked (0x100f0: vector 0xf0, masked): it was programmed masked, or the handler of an earlier PMI left it masked; unmask it with set_perf_counter_entry",
        ),
        (
            PmiError::Masked {
                entry: LvtPerfCounter::new(PmiDelivery::Nmi).masked(),
                handled: 3,
            },
            "PMI 4 not delivered: the LVT performance-counter entry is masked (0x10400: NMI, masked), though PMI 3's handler had unmasked it: something masked it since",
        ),
        (
            PmiError::Invalid {
                entry: LvtPerfCounter::from_bits(0x200),
            },
            "PMI not delivered: the LVT performance-counter entry (0x200: delivery mode 010, unmasked) holds a delivery a PMI cannot use (fixed with a vector from 16 to 255, or NMI); program it with set_perf_counter_entry",
        ),
        (
            PmiError::Invalid {
                entry: LvtPerfCounter::from_bits(0x05),
            },
            "PMI not delivered: the LVT performance-counter entry (0x5: vector 0x5, below 16, unmasked) holds a delivery a PMI cannot use (fixed with a vector from 16 to 255, or NMI); program it with set_perf_counter_entry",
        ),
        (
            PmiError::NotHandled {
                vector: Some(0xF0),
                pmi: 2,
                waited: hobby,
            },
            "PMI 2 was sent as vector 0xf0, but the LVT entry stayed masked for 2^32 TSC cycles: its handler did not run, or ran and left the entry masked",
        ),
        (
            PmiError::NotHandled {
                vector: None,
                pmi: 1,
                waited: Waited::Polls(1_000_000),
            },
            "PMI 1 was sent as an NMI, but the LVT entry stayed masked for 1000000 polls: its handler did not run, or ran and left the entry masked",
        ),
        (
            PmiError::Runs {
                pmi: 5,
                runs: 0,
                waited: hobby,
            },
            "PMI 5 was sent, but its handler did not run within 2^32 TSC cycles",
        ),
        (
            PmiError::Runs {
                pmi: 1,
                runs: 2,
                waited: Waited::Cycles(1000),
            },
            "PMI 1 was sent once, but its handler ran 2 times within 1000 TSC cycles",
        ),
    ];
    for (error, message) in table {
        assert_eq!(error.to_string(), message, "{error:?}");
    }
}

/// The old message blamed the handler for an entry nobody had programmed;
/// no message says the handler failed unless a handler ran.
#[test]
fn a_never_programmed_entry_does_not_blame_the_handler() {
    let e: InjectError = PmiError::Masked {
        entry: LvtPerfCounter::RESET,
        handled: 0,
    };
    let said = e.to_string();
    assert!(said.contains("never programmed"), "{said}");
    assert!(said.contains("set_perf_counter_entry"), "{said}");
    assert!(!said.contains("handler"), "{said}");
}
