    /* From 32-bit protected mode with paging off to long mode (shared by
       the boot CPU's entry and the APs' trampoline): PAE, the kernel's
       page tables, EFER.LME, paging; then the 64-bit GDT (the far jump
       into its code segment follows at each caller). */
    mov eax, cr4
    or eax, 1 << 5
    mov cr4, eax
    mov eax, offset hobby_pml4
    mov cr3, eax
    mov ecx, 0xC0000080
    rdmsr
    or eax, 1 << 8
    wrmsr
    mov eax, cr0
    or eax, (1 << 31) | 1
    mov cr0, eax
    lgdt [hobby_gdt_ptr]
