//! The Itanium model behind the crate's access layer: its own register
//! space ([`PmcPmdAccess`], what the Itanium driver uses), and the x86
//! backend trait through [`MsrAdapter`] (for the QEMU kernels' plumbing).

use core::borrow::BorrowMut;

use crate::access::{MsrAccess, PmcPmdAccess};

use super::registers::{Fault, ItaniumModel, Psr};

impl PmcPmdAccess for ItaniumModel {
    type Error = Fault;
    fn read_pmc(&mut self, n: u8) -> Result<u64, Fault> {
        ItaniumModel::read_pmc(self, u32::from(n))
    }
    fn write_pmc(&mut self, n: u8, value: u64) -> Result<(), Fault> {
        ItaniumModel::write_pmc(self, u32::from(n), value)
    }
    fn read_pmd(&mut self, n: u8) -> Result<u64, Fault> {
        ItaniumModel::read_pmd(self, u32::from(n))
    }
    fn write_pmd(&mut self, n: u8, value: u64) -> Result<(), Fault> {
        ItaniumModel::write_pmd(self, u32::from(n), value)
    }
}

/// First PMC address of the adapter's map.
pub const PMC_BASE: u32 = 0x000;
/// First PMD address of the adapter's map.
pub const PMD_BASE: u32 = 0x100;
/// The adapter's address for the PSR performance-monitor bits.
pub const PSR_ADDRESS: u32 = 0x200;

/// An [`ItaniumModel`] (owned, or `&mut`) seen through [`MsrAccess`], the
/// crate's x86 backend trait, so that code written for MSRs (the QEMU
/// kernels' shared-model plumbing) can drive it.
///
/// Itanium has no MSRs: software reaches the PMU with `mov pmc[]`, `mov
/// pmd[]` and the PSR instructions. The address map below is a **test
/// harness convention of this crate, not an Itanium fact**:
///
/// | "MSR" address | register |
/// |---|---|
/// | [`PMC_BASE`] + n (000H-0FFH) | PMC n (`mov pmc[n]`) |
/// | [`PMD_BASE`] + n (100H-1FFH) | PMD n (`mov pmd[n]`) |
/// | [`PSR_ADDRESS`] (200H) | PSR.up (bit 2), PSR.sp (bit 20), PSR.pp (bit 21), at their PSR positions |
///
/// `read_pmc(n)` (the RDPMC slot) reads PMD n, the register a counter's value
/// lives in, as `mov r = pmd[n]` at CPL 0. Any other address is
/// [`Fault::NotMapped`]; a PSR write with other bits set is
/// [`Fault::UnmodelledPsrBits`].
#[derive(Clone, Debug)]
pub struct MsrAdapter<M>(pub M);

impl ItaniumModel {
    /// This model through the [`MsrAccess`] adapter.
    pub fn msr(&mut self) -> MsrAdapter<&mut Self> {
        MsrAdapter(self)
    }
}

impl<M: BorrowMut<ItaniumModel>> MsrAdapter<M> {
    /// The model.
    pub fn model(&mut self) -> &mut ItaniumModel {
        self.0.borrow_mut()
    }
}

impl<M: BorrowMut<ItaniumModel>> MsrAccess for MsrAdapter<M> {
    type Error = Fault;

    fn read_msr(&mut self, msr: u32) -> Result<u64, Fault> {
        let m = self.0.borrow_mut();
        match msr {
            0x000..=0x0FF => ItaniumModel::read_pmc(m, msr - PMC_BASE),
            0x100..=0x1FF => ItaniumModel::read_pmd(m, msr - PMD_BASE),
            PSR_ADDRESS => Ok(m.psr().bits()),
            _ => Err(Fault::NotMapped { msr }),
        }
    }

    fn write_msr(&mut self, msr: u32, value: u64) -> Result<(), Fault> {
        let m = self.0.borrow_mut();
        match msr {
            0x000..=0x0FF => ItaniumModel::write_pmc(m, msr - PMC_BASE, value),
            0x100..=0x1FF => ItaniumModel::write_pmd(m, msr - PMD_BASE, value),
            PSR_ADDRESS => {
                let bits = value & !Psr::MODELLED;
                if bits != 0 {
                    return Err(Fault::UnmodelledPsrBits { bits });
                }
                m.set_psr(Psr::from_bits(value));
                Ok(())
            }
            _ => Err(Fault::NotMapped { msr }),
        }
    }

    fn rdpmc(&mut self, index: u32) -> Result<u64, Fault> {
        ItaniumModel::read_pmd(self.0.borrow_mut(), index)
    }
}
