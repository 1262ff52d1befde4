//! From QEMU's `-kernel` (or GRUB) to Rust: the PVH entry note, the 32-bit
//! to 64-bit trampoline, and the hand-off to the kernel's `main`.
//!
//! QEMU loads the ELF image and, finding a Xen `PHYS32_ENTRY` note (type 18),
//! starts the CPU at that address in 32-bit protected mode with paging off and
//! EBX pointing at an `hvm_start_info` structure (magic 336EC578H). GRUB
//! enters the same image through its multiboot2 header in the same state,
//! EBX pointing at its boot information ([`crate::multiboot2`]); both
//! entries join at `hobby_start32`, ESI saying which came ([`Protocol`]).
//! The trampoline takes its own stack (neither protocol provides one),
//! clears `.bss`, identity-maps the first 4 GiB with 2 MiB pages
//! (the top gigabyte, where the local APIC lives, uncacheable), turns on PAE,
//! long mode (EFER.LME) and paging, loads a 64-bit GDT and far-returns into
//! 64-bit code, which sets up the stack and calls `rust_start`.

use core::ffi::CStr;

use crate::{idt, serial};

core::arch::global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4                 /* name size: "Xen\0" */
    .long 8                 /* descriptor size */
    .long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .balign 4
    .quad pvh_start32
    .balign 4

    .section .data.boot, "aw"
    .balign 8
hobby_start_info:
    .long 0
hobby_boot_protocol:
    .long 0
    .balign 8
hobby_gdt:
    .quad 0                         /* null */
    .quad 0x00AF9A000000FFFF        /* 0x08: 64-bit code, DPL 0 */
    .quad 0x00CF92000000FFFF        /* 0x10: data, DPL 0 */
hobby_gdt_end:
    .global hobby_gdt_ptr
hobby_gdt_ptr:
    .word hobby_gdt_end - hobby_gdt - 1
    .quad hobby_gdt

    .section .bss.boot, "aw", @nobits
    .balign 4096
    .global hobby_pml4
hobby_pml4:
    .skip 4096
hobby_pdpt:
    .skip 4096
hobby_pd:
    .skip 4 * 4096
    .global hobby_stack
hobby_stack:
    .skip 128 * 1024
    .global hobby_stack_top
hobby_stack_top:

    .section .text.boot, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    mov esi, 1                      /* Protocol::Pvh */
    /* The multiboot2 entry joins here (ESI = 2). EBX: the loader's
       structure. */
    .global hobby_start32
hobby_start32:
    mov esp, offset hobby_stack_top
    /* Clear .bss (page tables and stack included; nothing is on the
       stack yet). */
    mov edi, offset __bss_start
    mov ecx, offset __bss_end
    sub ecx, edi
    shr ecx, 2
    xor eax, eax
    rep stosd
    mov dword ptr [hobby_start_info], ebx
    mov dword ptr [hobby_boot_protocol], esi

    /* PML4[0] -> PDPT; PDPT[0..4] -> the four page directories. Every
       level is present, writable and user-accessible (U/S), so that test
       code can run at CPL 3 (`hobby::user`); the kernel turns on no
       SMEP/SMAP. */
    mov eax, offset hobby_pdpt
    or eax, 0x7
    mov dword ptr [hobby_pml4], eax
    mov edi, offset hobby_pdpt
    mov eax, offset hobby_pd
    or eax, 0x7
    mov ecx, 4
2:
    mov dword ptr [edi], eax
    add eax, 4096
    add edi, 8
    loop 2b

    /* 2048 PDEs of 2 MiB: present, writable, user, page size; PCD|PWT
       above 3 GiB. */
    mov edi, offset hobby_pd
    xor ebx, ebx
3:
    mov eax, ebx
    shl eax, 21
    or eax, 0x87
    cmp ebx, 1536
    jb 4f
    or eax, 0x18
4:
    mov dword ptr [edi], eax
    add edi, 8
    inc ebx
    cmp ebx, 2048
    jb 3b

"#,
    include_str!("long_mode.s"),
    r#"
    push 0x08
    mov eax, offset hobby_start64
    push eax
    retf

    .code64
hobby_start64:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    lea rsp, [rip + hobby_stack_top]
    xor ebp, ebp
    mov edi, dword ptr [rip + hobby_start_info]
    mov esi, dword ptr [rip + hobby_boot_protocol]
    call {rust_start}
    ud2
"#,
    rust_start = sym rust_start,
);

/// Magic number at the start of the PVH `hvm_start_info` structure.
const PVH_MAGIC: u32 = 0x336E_C578;

/// How the kernel was entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Through the PVH note: QEMU's `-kernel` (and the `cargo test` boots).
    Pvh,
    /// Through the multiboot2 header: GRUB's `multiboot2` command (the
    /// bootable image, on bare metal or under QEMU's `-cdrom`).
    Multiboot2,
}

impl Protocol {
    /// The protocol's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Pvh => "PVH",
            Protocol::Multiboot2 => "multiboot2",
        }
    }
}

/// What the boot loader told the kernel.
#[derive(Debug)]
pub struct BootInfo {
    /// The kernel command line (QEMU's `-append`, or what follows the file
    /// name on GRUB's `multiboot2` line), empty when there is none.
    pub cmdline: &'static str,
    /// How the kernel was entered.
    pub protocol: Protocol,
}

impl BootInfo {
    /// The value of `key=value` on the command line, if present.
    pub fn arg(&self, key: &str) -> Option<&'static str> {
        self.cmdline.split_ascii_whitespace().find_map(|word| {
            let (k, v) = word.split_once('=')?;
            (k == key).then_some(v)
        })
    }
}

unsafe extern "Rust" {
    /// The kernel's `main`, defined by [`crate::entry_point!`].
    safe fn hobby_kernel_main(boot: &'static BootInfo) -> !;
}

static BOOT_INFO: spin::Once<BootInfo> = spin::Once::new();

/// What the boot loader told the kernel (what its `main` gets), once the
/// kernel runs.
pub fn info() -> Option<&'static BootInfo> {
    BOOT_INFO.get()
}

/// The physical ranges the boot loader's data occupies (start-info
/// structure, command line) and the kernel keeps using: [`crate::smp`]
/// must not copy its trampoline over them.
pub(crate) static LOADER_DATA: spin::Once<[core::ops::Range<usize>; 2]> = spin::Once::new();

/// Reads the command line out of the PVH start-info structure.
///
/// # Safety
///
/// `start_info` is the physical address QEMU passed in EBX, and memory is
/// identity-mapped, so it and the command line it points to are readable.
unsafe fn read_cmdline(start_info: u32) -> &'static str {
    if start_info == 0 {
        return "";
    }
    let base = start_info as usize as *const u32;
    // SAFETY: the caller guarantees the structure is mapped; the magic is its
    // first field, `cmdline_paddr` the u64 at byte offset 24.
    let (magic, cmdline) = unsafe { (base.read(), base.byte_add(24).cast::<u64>().read()) };
    if magic != PVH_MAGIC || cmdline == 0 {
        return "";
    }
    // SAFETY: QEMU places a NUL-terminated command line at `cmdline`, in
    // identity-mapped memory that nothing else writes.
    let text = unsafe { CStr::from_ptr(cmdline as usize as *const core::ffi::c_char) };
    let start = start_info as usize;
    let line = cmdline as usize;
    LOADER_DATA.call_once(|| [start..start + 64, line..line + text.count_bytes() + 1]);
    text.to_str().unwrap_or("")
}

/// The first Rust code to run, on the boot stack, interrupts disabled:
/// `start_info` is what the loader passed in EBX, `protocol` which entry
/// the trampoline came through (1: PVH, 2: multiboot2).
extern "C" fn rust_start(start_info: u32, protocol: u32) -> ! {
    serial::init();
    idt::init();
    // The APIC as the kernel needs it, whichever firmware ran: a CPU
    // leaves reset with it software-disabled (see `crate::apic`), and a
    // firmware may leave it in x2APIC mode.
    crate::apic::adopt_firmware_mode();
    crate::apic::enable_this_cpu();
    let (cmdline, protocol) = if protocol == 2 {
        // SAFETY: the multiboot2 entry checked EAX's magic, so `start_info`
        // is GRUB's boot information, in the identity-mapped first 4 GiB,
        // which nothing writes.
        let info = unsafe { crate::multiboot2::read(start_info) };
        LOADER_DATA.call_once(|| [info.range.clone(), info.range]);
        (info.cmdline, Protocol::Multiboot2)
    } else {
        // SAFETY: `start_info` is what QEMU passed in EBX (see the
        // trampoline), and the whole first 4 GiB are identity-mapped.
        (unsafe { read_cmdline(start_info) }, Protocol::Pvh)
    };
    hobby_kernel_main(BOOT_INFO.call_once(|| BootInfo { cmdline, protocol }))
}
