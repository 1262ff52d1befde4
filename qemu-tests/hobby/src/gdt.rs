//! Each CPU's GDT, TSS and GS base (`smp::cpu`), so that a double fault runs on a stack of its
//! own (IST 1) and can be reported even when the kernel stack is broken,
//! and an interrupt at CPL 3 (`hobby::user`) switches to a kernel stack
//! (TSS.RSP0). The GDT also has the CPL-3 code and data segments.
//! The boot code's GDT only gets a CPU into 64-bit mode. A TSS is marked
//! busy when its CPU loads it, so every CPU has its own TSS and GDT.

use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;

use crate::smp::MAX_CPUS;

/// The IST slot (0-based, as `EntryOptions::set_stack_index` counts) of the
/// double-fault stack.
pub const DOUBLE_FAULT_IST_INDEX: u16 = 0;

const DOUBLE_FAULT_STACK_SIZE: usize = 16 * 1024;

#[repr(C, align(16))]
struct Stack([u8; DOUBLE_FAULT_STACK_SIZE]);

/// Written only by the CPUs, when they deliver a double fault: CPU `i`
/// uses stack `i`.
/// In `.bss.hobby_stacks`, which `hobby.ld` keeps out of the range the
/// boot code clears: the ELF loader zero-fills it as it does `.bss`, and
/// no page of it is touched before a CPU uses it.
#[unsafe(link_section = ".bss.hobby_stacks")]
static mut DOUBLE_FAULT_STACKS: [Stack; MAX_CPUS] =
    [const { Stack([0; DOUBLE_FAULT_STACK_SIZE]) }; MAX_CPUS];

static TSS: [spin::Once<TaskStateSegment>; MAX_CPUS] = [const { spin::Once::new() }; MAX_CPUS];

const PRIVILEGE_STACK_SIZE: usize = 32 * 1024;

/// The stack CPU `i` switches to when an interrupt or exception comes at
/// CPL 3 (TSS.RSP0): only the CPU uses it.
/// In `.bss.hobby_stacks`, which `hobby.ld` keeps out of the range the
/// boot code clears: the ELF loader zero-fills it as it does `.bss`, and
/// no page of it is touched before a CPU uses it.
#[unsafe(link_section = ".bss.hobby_stacks")]
static mut PRIVILEGE_STACKS: [[u8; PRIVILEGE_STACK_SIZE]; MAX_CPUS] =
    [[0; PRIVILEGE_STACK_SIZE]; MAX_CPUS];

/// The user code and data selectors (RPL 3), the same in every CPU's GDT.
static USER: spin::Once<(SegmentSelector, SegmentSelector)> = spin::Once::new();

/// The CPL-3 code and data selectors (`hobby::user`), once the GDT is
/// loaded.
pub fn user_selectors() -> Option<(SegmentSelector, SegmentSelector)> {
    USER.get().copied()
}
static GDT: [spin::Once<GlobalDescriptorTable>; MAX_CPUS] = [const { spin::Once::new() }; MAX_CPUS];

/// Loads the boot CPU's GDT (kernel code, kernel data, TSS) and task
/// register.
pub(crate) fn init() {
    init_cpu(0);
}

/// Loads CPU `cpu`'s GDT and task register (once per CPU; `cpu` <
/// [`MAX_CPUS`], others are ignored).
pub(crate) fn init_cpu(cpu: usize) {
    // Segment state too: the GS base that `smp::cpu` reads.
    crate::smp::set_this_cpu(cpu);
    let (Some(tss), Some(gdt)) = (TSS.get(cpu), GDT.get(cpu)) else {
        return;
    };
    let tss = tss.call_once(|| {
        let mut tss = TaskStateSegment::new();
        let stacks = (&raw mut DOUBLE_FAULT_STACKS).cast::<Stack>();
        let stack = stacks.wrapping_add(cpu).cast::<u8>();
        let top = VirtAddr::from_ptr(stack) + DOUBLE_FAULT_STACK_SIZE as u64;
        tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST_INDEX)] = top;
        let stacks = (&raw mut PRIVILEGE_STACKS).cast::<[u8; PRIVILEGE_STACK_SIZE]>();
        let stack = stacks.wrapping_add(cpu).cast::<u8>();
        tss.privilege_stack_table[0] = VirtAddr::from_ptr(stack) + PRIVILEGE_STACK_SIZE as u64;
        tss
    });
    let mut selectors = None;
    let gdt = gdt.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss = gdt.append(Descriptor::tss_segment(tss));
        let user_data = gdt.append(Descriptor::user_data_segment());
        let user_code = gdt.append(Descriptor::user_code_segment());
        USER.call_once(|| (user_code, user_data));
        selectors = Some((code, data, tss));
        gdt
    });
    gdt.load();
    let Some((code, data, tss)) = selectors else {
        return; // already loaded once
    };
    // SAFETY: the selectors index the GDT just loaded: a 64-bit ring-0 code
    // segment, a ring-0 data segment and this CPU's available TSS.
    unsafe {
        CS::set_reg(code);
        DS::set_reg(data);
        ES::set_reg(data);
        SS::set_reg(data);
        load_tss(tss);
    }
}
