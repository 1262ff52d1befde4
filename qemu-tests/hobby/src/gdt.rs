//! The kernel's own GDT and TSS, so that a double fault runs on a stack of
//! its own (IST 1) and can be reported even when the kernel stack is broken.
//! The boot code's GDT only gets the CPU into 64-bit mode.

use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable};
use x86_64::structures::tss::TaskStateSegment;

/// The IST slot (0-based, as `EntryOptions::set_stack_index` counts) of the
/// double-fault stack.
pub const DOUBLE_FAULT_IST_INDEX: u16 = 0;

const DOUBLE_FAULT_STACK_SIZE: usize = 16 * 1024;

#[repr(C, align(16))]
struct Stack([u8; DOUBLE_FAULT_STACK_SIZE]);

/// Written only by the CPU, when it delivers a double fault.
static mut DOUBLE_FAULT_STACK: Stack = Stack([0; DOUBLE_FAULT_STACK_SIZE]);

static TSS: spin::Once<TaskStateSegment> = spin::Once::new();
static GDT: spin::Once<GlobalDescriptorTable> = spin::Once::new();

/// Loads the GDT (kernel code, kernel data, TSS) and the task register.
pub(crate) fn init() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        let stack = (&raw mut DOUBLE_FAULT_STACK).cast::<u8>();
        let top = VirtAddr::from_ptr(stack) + DOUBLE_FAULT_STACK_SIZE as u64;
        tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST_INDEX)] = top;
        tss
    });
    let mut selectors = None;
    let gdt = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss = gdt.append(Descriptor::tss_segment(tss));
        selectors = Some((code, data, tss));
        gdt
    });
    gdt.load();
    let Some((code, data, tss)) = selectors else {
        return; // already loaded once
    };
    // SAFETY: the selectors index the GDT just loaded: a 64-bit ring-0 code
    // segment, a ring-0 data segment and an available TSS.
    unsafe {
        CS::set_reg(code);
        DS::set_reg(data);
        ES::set_reg(data);
        SS::set_reg(data);
        load_tss(tss);
    }
}
