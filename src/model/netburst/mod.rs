//! A register-level model of the NetBurst PMU.
