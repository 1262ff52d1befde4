//! Address-to-name lookup for attributing sampled instruction pointers.
//!
//! A [`Symbol`] is a name and a half-open address range. A
//! [`SymbolTable`] holds the ranges as pairs of code labels (function
//! pointers to a start and an end label, e.g. exported from `global_asm!`),
//! so that it can be a `static` (the linker fills in the addresses; a
//! pointer cannot be turned into a `usize` at compile time) and resolves them
//! on each use, without locks or allocation: an interrupt handler may call
//! [`SymbolTable::position`] on the interrupted RIP.

/// A named half-open address range `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// The name reported for addresses in the range.
    pub name: &'static str,
    /// The first address of the range.
    pub start: usize,
    /// The first address past the range.
    pub end: usize,
}

impl Symbol {
    /// Whether `address` lies in `start..end`.
    pub const fn contains(&self, address: usize) -> bool {
        self.start <= address && address < self.end
    }

    /// The size of the range in bytes.
    pub const fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range is empty.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The index of the symbol in `symbols` whose range holds `address`.
pub fn position(symbols: &[Symbol], address: usize) -> Option<usize> {
    symbols.iter().position(|s| s.contains(address))
}

/// A code address the linker resolves: any label declared as a function in
/// an `unsafe extern "C"` block (never called through this type).
pub type Label = unsafe extern "C" fn();

/// One entry of a [`SymbolTable`]: a name and the labels at the start and
/// just past the end of its code.
#[derive(Clone, Copy, Debug)]
pub struct LabelRange {
    /// The symbol's name.
    pub name: &'static str,
    /// The label at the first instruction.
    pub start: Label,
    /// The label just past the last instruction.
    pub end: Label,
}

/// A `static`-friendly table of `N` symbols given by labels.
#[derive(Debug)]
pub struct SymbolTable<const N: usize> {
    entries: [LabelRange; N],
}

impl<const N: usize> SymbolTable<N> {
    /// A table of `entries`.
    pub const fn new(entries: [LabelRange; N]) -> Self {
        Self { entries }
    }

    /// The number of symbols.
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether the table is empty.
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Symbol `index`, resolved to addresses.
    ///
    /// # Panics
    ///
    /// If `index >= N`.
    pub fn get(&self, index: usize) -> Symbol {
        let e = &self.entries[index];
        Symbol {
            name: e.name,
            start: e.start as usize,
            end: e.end as usize,
        }
    }

    /// Every symbol, resolved to addresses.
    pub fn symbols(&self) -> [Symbol; N] {
        core::array::from_fn(|i| self.get(i))
    }

    /// The index of the symbol whose range holds `address`.
    pub fn position(&self, address: usize) -> Option<usize> {
        (0..N).find(|&i| self.get(i).contains(address))
    }

    /// The symbol whose range holds `address`.
    pub fn lookup(&self, address: usize) -> Option<Symbol> {
        self.position(address).map(|i| self.get(i))
    }

    /// The name of the symbol holding `address`, or `other`.
    pub fn name_or(&self, address: usize, other: &'static str) -> &'static str {
        self.lookup(address).map_or(other, |s| s.name)
    }
}
