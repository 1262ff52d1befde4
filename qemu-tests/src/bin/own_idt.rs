//! The guide's recipe for a kernel with its own IDT, run: the `x86_64`
//! crate's `InterruptDescriptorTable` (not hobby's), the PMI vector's gate
//! on the crate's entry stub (`pmu::pmi_entry!`), the handler calling
//! `handle_pmi`, and the NetBurst model's PMIs delivered through the local
//! APIC with `pmu::apic::deliver_model_pmi`. Hobby only boots the kernel,
//! prints the case lines and words a failed PMI (`hobby::pmi_error`); from
//! `main` on, the IDT is this kernel's.
#![no_std]
#![no_main]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use hobby::pmi_error::{PmiError, Waited};
use hobby::test::{Failure, Outcome};
use hobby::{case, check, check_eq};
use pmu::apic::{LocalApic, LvtPerfCounter, ModelPmi, PmiDelivery, Vector, deliver_model_pmi};
use pmu::arch::handle_pmi;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::pmi::overflow_rule;
use pmu::arch::netburst::{Escr, LogicalProcessor, NetBurstPmu};
use pmu::entry::PmiFrame;
use pmu::model::netburst::{Config, Event, EventKind, Privilege, SharedNetBurstModel};
use pmu::sampling::SampleAfter;
use x86_64::VirtAddr;
use x86_64::instructions::interrupts;
use x86_64::structures::idt::InterruptDescriptorTable;

hobby::entry_point!(main);
pmu::owner!(Package0);

const PMI_VECTOR: u8 = 0xF0;
const ENTRY: LvtPerfCounter =
    LvtPerfCounter::new(PmiDelivery::Fixed(Vector::new(PMI_VECTOR).unwrap()));

static MODEL: SharedNetBurstModel = SharedNetBurstModel::new(Config::prescott_ht());
// SAFETY: the model is a package of its own, and this is its one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };
static IDT: spin::Once<InterruptDescriptorTable> = spin::Once::new();
static SAMPLES: AtomicU64 = AtomicU64::new(0);
static LAST_RIP: AtomicU64 = AtomicU64::new(0);

/// This CPU's local APIC at the default base (hobby's boot code maps it
/// identity, uncached; a kernel of its own uses its mapping).
fn apic() -> LocalApic {
    // SAFETY: the xAPIC page is mapped uncached at its default address, the
    // CPU is in xAPIC mode, and each handle is used on this CPU only.
    unsafe { LocalApic::new(NonNull::new(pmu::apic::DEFAULT_BASE as *mut u8).unwrap()) }
}

extern "C" fn on_pmi(frame: &PmiFrame) {
    let mut apic = apic();
    // Services the overflow and unmasks the LVT entry.
    let serviced = handle_pmi(
        PACKAGE.logical(LogicalProcessor::T0),
        &mut MODEL.msr(),
        &mut apic,
        ENTRY,
        frame.rip,
        |_| {
            SAMPLES.fetch_add(1, Ordering::Relaxed);
        },
    );
    LAST_RIP.store(frame.rip, Ordering::Relaxed);
    apic.eoi();
    serviced.expect("the model refused an access");
}

pmu::pmi_entry!(pmi_stub => on_pmi);

fn main(_: &'static hobby::boot::BootInfo) -> ! {
    let idt = IDT.call_once(|| {
        let mut idt = InterruptDescriptorTable::new();
        // SAFETY: `pmi_stub` is an interrupt entry for a vector without an
        // error code (it saves every register and returns with IRETQ).
        unsafe { idt[PMI_VECTOR].set_handler_addr(VirtAddr::from_ptr(pmi_stub as *const ())) };
        idt
    });
    idt.load();
    let mut apic = apic();
    apic.enable(Vector::new(0xFF).unwrap());
    apic.set_perf_counter_entry(ENTRY);
    hobby::test::run("own_idt", &[case!(samples_through_the_x86_64_idt)])
}

/// How many times [`inject`] reads the LVT entry, interrupts enabled, for
/// the handler to unmask it.
const POLLS: u64 = 1_000_000;

/// Feeds `event` to the model; each PMI it raises goes out through the
/// local APIC at once, and the handler runs before the next event counts.
/// Returns the PMIs delivered.
fn inject(mut event: Event) -> Result<u64, Failure> {
    let mut pmis = 0;
    while event.count > 0 {
        let got = MODEL.inject_until_pmi(event);
        event.count -= got.injected.min(event.count);
        if !(got.pmi_pending
            && MODEL
                .take_pmi(pmu::model::netburst::LogicalProcessor::T0)
                .is_some())
        {
            continue;
        }
        let entry = apic().perf_counter_entry();
        let Ok(delivered) = deliver_model_pmi(&mut apic());
        let vector = match delivered {
            ModelPmi::Vector(v) => v.get(),
            ModelPmi::Masked => {
                return Err(PmiError::Masked {
                    entry,
                    handled: pmis,
                }
                .into());
            }
            ModelPmi::Invalid => return Err(PmiError::Invalid { entry }.into()),
            // `main` programs a fixed vector, and this IDT has no NMI gate.
            ModelPmi::Nmi => hobby::fail!(
                "the LVT entry ({:#x}) delivered an NMI, though main programmed vector {PMI_VECTOR:#x}",
                entry.bits()
            ),
        };
        // The handler shows it ran by unmasking the entry: let it in.
        interrupts::enable();
        let mut polls = 0;
        while apic().perf_counter_entry().is_masked() && polls < POLLS {
            core::hint::spin_loop();
            polls += 1;
        }
        interrupts::disable();
        if apic().perf_counter_entry().is_masked() {
            return Err(PmiError::NotHandled {
                vector: Some(vector),
                pmi: pmis + 1,
                waited: Waited::Polls(POLLS),
            }
            .into());
        }
        pmis += 1;
    }
    Ok(pmis)
}

fn samples_through_the_x86_64_idt() -> Outcome {
    let cpu = MODEL.detect().ok_or("the model is not a usable NetBurst")?;
    let (mut pmu, counters) = NetBurstDriver::<Package0, _>::take(MODEL.msr(), &cpu, &PACKAGE)?;
    let event = pmu::netburst_event!("global_power_events:RUNNING:k");
    let every = SampleAfter::new(1000, overflow_rule())?;
    let config = CounterConfig::counting(event, Escr::FsbEscr0).sampling(every);
    let c0 = counters.c0.configure(&mut pmu, &config)?.enable(&mut pmu)?;
    let running = EventKind::for_spec(&event, Escr::FsbEscr0).ok_or("no model event")?;
    let pmis = inject(running.on(
        pmu::model::netburst::LogicalProcessor::T0,
        Privilege::Os,
        5500,
    ))?;
    let (owed, residual) = every.split(c0.read(&mut pmu)?);
    check_eq!(
        (pmis, SAMPLES.load(Ordering::Relaxed), owed, residual),
        (5, 5, 0, 500)
    );
    check!(
        LAST_RIP.load(Ordering::Relaxed) != 0,
        "the handler saw the interrupted RIP"
    );
    let c0 = c0.release(&mut pmu)?;
    let _msr = pmu.give_back(Counters { c0, ..counters });
    Ok(())
}
