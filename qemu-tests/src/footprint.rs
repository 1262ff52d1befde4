//! The body of the footprint kernels (a module of each, by `#[path]`) (`footprint_const`, `footprint_parse`):
//! the smallest real use of the NetBurst driver on the hardware backend,
//! which `cargo size-report` builds in release and compares section by
//! section with `footprint_none`, the same kernel without the driver. Under
//! QEMU, which has no PMU, detection finds none and the kernel says so; the
//! driver is linked all the same.

use pmu::access::X86Msr;
use pmu::arch::netburst::driver::{CounterConfig, Counters, NetBurstDriver};
use pmu::arch::netburst::{Escr, EventSpec, NetBurstPmu};
use pmu::detect::{self, HardwareCpuid, NetBurstCpu};

use hobby::exit::{ExitCode, exit_qemu};
use hobby::println;

pmu::owner!(
    /// The package the footprint kernels drive.
    Package0
);

// SAFETY: the kernel runs on one CPU, of one package, and this is the
// package's one value.
static PACKAGE: NetBurstPmu = unsafe { NetBurstPmu::new() };

/// Detect the PMU and, on a NetBurst, count the event `event` returns on
/// counter 12 around a short loop; then exit with success.
pub fn count(kernel: &str, event: impl FnOnce() -> Option<EventSpec>) -> ! {
    // SAFETY: the kernel runs at CPL 0 on one CPU, and this is the only
    // backend that drives the PMU.
    let mut msr = unsafe { X86Msr::new() };
    let Ok(found) = detect::detect(&HardwareCpuid, &mut msr);
    match found.usable_netburst() {
        None => println!(
            "{kernel}: no NetBurst PMU here (QEMU has none): the driver is linked, not run"
        ),
        Some(cpu) => match run(msr, &cpu, event) {
            Ok(v) => println!("{kernel}: counted {v}"),
            Err(e) => {
                println!("{kernel}: {e}");
                exit_qemu(ExitCode::Failure)
            }
        },
    }
    exit_qemu(ExitCode::Success)
}

fn run(
    msr: X86Msr,
    cpu: &NetBurstCpu,
    event: impl FnOnce() -> Option<EventSpec>,
) -> Result<u64, &'static str> {
    let spec = event().ok_or("event string refused")?;
    let (mut pmu, c) =
        NetBurstDriver::<Package0, _>::take(msr, cpu, &PACKAGE).map_err(|_| "take")?;
    let config = CounterConfig::counting(spec, Escr::CruEscr0);
    let c12 = c
        .c12
        .configure(&mut pmu, &config)
        .map_err(|_| "configure")?;
    let c12 = c12.enable(&mut pmu).map_err(|_| "enable")?;
    for i in 0..1000u32 {
        core::hint::black_box(i);
    }
    let v = c12.read(&mut pmu).map_err(|_| "read")?;
    let c12 = c12.halt(&mut pmu).map_err(|_| "halt")?;
    let c12 = c12.release(&mut pmu).map_err(|_| "release")?;
    let _msr = pmu.give_back(Counters { c12, ..c });
    Ok(v)
}
