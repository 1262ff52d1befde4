//! Address-to-name lookup for kernels: which function (and which load
//! module) a sampled address falls in, without locks or allocation.
//!
//! * [`Function`]: a name and a half-open address range `start..end`.
//! * [`LoadModule`]: a load module ("shared library or the main
//!   executable", HP Caliper) and its functions, the symbol table the
//!   Itanium reports ([`crate::itlb`], [`crate::dear`]) attribute samples
//!   with.
//! * [`SymbolTable`]: functions given by pairs of code labels (function
//!   pointers to a start and an end label, e.g. exported from
//!   `global_asm!`), so that it can be a `static` (the linker fills in the
//!   addresses; a pointer cannot be turned into an integer at compile time)
//!   and resolves them on each use: an interrupt handler may call
//!   [`SymbolTable::position`] on the interrupted RIP.
//!
//! The host runner keeps its own table, read from the kernel's ELF symbols
//! (`pmu-qemu-run`'s `stacks`).

/// A function: the named addresses `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function<'a> {
    /// Its name.
    pub name: &'a str,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
}

impl Function<'_> {
    /// Whether `address` lies in `start..end`.
    pub const fn contains(&self, address: u64) -> bool {
        self.start <= address && address < self.end
    }

    /// The size of the range in bytes.
    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range is empty.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A load module ("shared library or the main executable", HP Caliper):
/// `start..end` and the functions in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadModule<'a> {
    /// Its name.
    pub name: &'a str,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Its functions (any order; ranges should not overlap).
    pub functions: &'a [Function<'a>],
}

/// A code address the linker resolves: any label declared as a function in
/// an `unsafe extern "C"` block (never called through this type).
pub type Label = unsafe extern "C" fn();

/// One entry of a [`SymbolTable`]: a name and the labels at the start and
/// just past the end of its code.
#[derive(Clone, Copy, Debug)]
pub struct LabelRange {
    /// The function's name.
    pub name: &'static str,
    /// The label at the first instruction.
    pub start: Label,
    /// The label just past the last instruction.
    pub end: Label,
}

/// A `static`-friendly table of `N` functions given by labels.
#[derive(Debug)]
pub struct SymbolTable<const N: usize> {
    entries: [LabelRange; N],
}

impl<const N: usize> SymbolTable<N> {
    /// A table of `entries`.
    pub const fn new(entries: [LabelRange; N]) -> Self {
        Self { entries }
    }

    /// The number of functions.
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether the table is empty.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Function `index`, resolved to addresses; `None` past the end.
    pub fn get(&self, index: usize) -> Option<Function<'static>> {
        let e = self.entries.get(index)?;
        Some(Function {
            name: e.name,
            start: e.start as usize as u64,
            end: e.end as usize as u64,
        })
    }

    /// Every function, resolved to addresses, in table order.
    pub fn functions(&self) -> impl Iterator<Item = Function<'static>> + '_ {
        (0..N).filter_map(|i| self.get(i))
    }

    /// The index of the function whose range holds `address`.
    pub fn position(&self, address: u64) -> Option<usize> {
        self.functions().position(|f| f.contains(address))
    }

    /// The function whose range holds `address`.
    pub fn lookup(&self, address: u64) -> Option<Function<'static>> {
        self.functions().find(|f| f.contains(address))
    }

    /// The name of function `index`, or `"(none)"` past the end.
    pub fn name_of(&self, index: usize) -> &'static str {
        self.entries.get(index).map_or("(none)", |e| e.name)
    }

    /// The name of the function holding `address`, or `other`.
    pub fn name_or(&self, address: u64, other: &'static str) -> &'static str {
        self.lookup(address).map_or(other, |f| f.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two functions with different bodies, so that no linker folds them
    // into one address.
    unsafe extern "C" fn a() {
        core::hint::black_box(1u8);
    }
    unsafe extern "C" fn b() {
        core::hint::black_box(2u16);
    }

    #[test]
    fn a_table_of_labels_resolves_addresses_to_names() {
        let (a, b): (Label, Label) = (a, b);
        let (lo, hi) = if (a as usize) < (b as usize) {
            (a, b)
        } else {
            (b, a)
        };
        let table = SymbolTable::new([LabelRange {
            name: "first",
            start: lo,
            end: hi,
        }]);
        let f = table.get(0).unwrap();
        assert_eq!(f.name, "first");
        assert!(!f.is_empty());
        assert_eq!(table.position(f.start), Some(0));
        assert_eq!(table.position(f.end), None);
        assert_eq!(table.name_or(f.end - 1, "?"), "first");
        assert_eq!(table.name_or(f.end, "?"), "?");
        assert_eq!(table.get(1), None);
        assert_eq!((table.len(), table.is_empty()), (1, false));
    }
}
