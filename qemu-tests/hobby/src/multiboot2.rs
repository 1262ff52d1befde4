//! The second way in: a multiboot2 header and entry, so that GRUB (its
//! `multiboot2` command) boots the same kernel image that QEMU's `-kernel`
//! boots through the PVH note ([`crate::boot`]). A bootable ISO or USB
//! image is then GRUB and the kernel's ELF file.
//!
//! The header (Multiboot2 Specification 2.0, section 3.1) lies at the start
//! of `.text`, in the image's first 32 KiB as the specification requires,
//! 8-byte aligned; besides the mandatory end tag it has an entry-address
//! tag (the ELF's own entry point is the same address) and a console-flags
//! tag saying the kernel can use an EGA text console, and no framebuffer
//! tag, so GRUB leaves the screen in 80x25 text mode ([`crate::vga`]).
//! GRUB loads the ELF's segments at their physical addresses, as QEMU
//! does.
//!
//! The machine state at entry (section 3.3) is what the PVH entry has, for
//! what the boot code uses: 32-bit protected mode, paging off, interrupts
//! off, flat segments; EAX holds the magic 36D76289H and EBX the physical
//! address of the boot information. The entry checks the magic (any other
//! value: the CPU halts) and joins the PVH path at `hobby_start32`, which
//! sets up its own stack and GDT (GRUB's may be gone) and keeps EBX, saying
//! which protocol it came by. From the boot information the kernel reads
//! what it reads from PVH's start-info structure: the command line (the
//! rest of GRUB's `multiboot2` line after the file name). The memory map
//! is not read: the kernel uses only its own image and the first 4 GiB it
//! identity-maps, and [`crate::smp`] copies its trampoline only where the
//! boot information does not lie.

use core::ffi::CStr;

core::arch::global_asm!(
    r#"
    .section .text.multiboot2, "ax"
    .balign 8
hobby_multiboot2_header:
    .long 0xE85250D6                /* magic */
    .long 0                         /* architecture: i386 protected mode */
    .long hobby_multiboot2_header_end - hobby_multiboot2_header
    .long 0x100000000 - (0xE85250D6 + (hobby_multiboot2_header_end - hobby_multiboot2_header))
    .balign 8
    .short 3                        /* entry address */
    .short 0
    .long 12
    .long hobby_multiboot2_start32
    .balign 8
    .short 4                        /* console flags */
    .short 0
    .long 12
    .long 2                         /* EGA text supported */
    .balign 8
    .short 0                        /* end */
    .short 0
    .long 8
hobby_multiboot2_header_end:

    .code32
    .global hobby_multiboot2_start32
hobby_multiboot2_start32:
    cli
    cld
    cmp eax, 0x36D76289
    jne 2f
    mov esi, 2                      /* boot::Protocol::Multiboot2 */
    jmp hobby_start32
2:
    hlt
    jmp 2b
    .code64
"#
);

/// Tag type of the boot command line (Multiboot2 Specification 3.6.2).
const TAG_CMDLINE: u32 = 1;
/// Tag type that ends the list.
const TAG_END: u32 = 0;
/// The most bytes of boot information this reads: a bound on a walk
/// through memory a loader filled (GRUB's is a few KiB).
const MAX_INFO: u32 = 64 * 1024;

/// What the kernel takes from the boot information: the command line, and
/// the range the information occupies (the command line lies inside it).
pub(crate) struct Info {
    /// The command line, empty when there is none or it is not UTF-8.
    pub cmdline: &'static str,
    /// The physical range of the boot information.
    pub range: core::ops::Range<usize>,
}

/// Reads the boot information at `address` (what GRUB passed in EBX).
///
/// # Safety
///
/// `address` is the boot information's physical address, in the
/// identity-mapped first 4 GiB, and nothing writes it while the kernel
/// runs.
pub(crate) unsafe fn read(address: u32) -> Info {
    let base = address as usize;
    // SAFETY: the caller's: the structure starts with its total size.
    let total = unsafe { (base as *const u32).read() }.min(MAX_INFO) as usize;
    let mut cmdline = "";
    // Tags start at offset 8, each 8-byte aligned: type, size, contents.
    let mut offset = 8;
    while offset + 8 <= total {
        let tag = (base + offset) as *const u32;
        // SAFETY: `offset + 8 <= total`: the tag's header lies inside the
        // structure the caller vouches for.
        let (kind, size) = unsafe { (tag.read(), tag.add(1).read()) };
        if kind == TAG_END || size < 8 || offset + size as usize > total {
            break;
        }
        if kind == TAG_CMDLINE && size > 8 {
            // SAFETY: a command-line tag holds a NUL-terminated string
            // after its header, inside the tag (`size` bytes, inside the
            // structure).
            let text = unsafe { CStr::from_ptr(tag.add(2).cast::<core::ffi::c_char>()) };
            cmdline = text.to_str().unwrap_or("");
        }
        offset = (offset + size as usize + 7) & !7;
    }
    Info {
        cmdline,
        range: base..base + total,
    }
}
