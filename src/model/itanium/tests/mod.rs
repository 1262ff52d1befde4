//! Unit tests of the Itanium model.
