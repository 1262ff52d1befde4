//! Intel NetBurst (Pentium 4, Xeon, Pentium D) performance monitoring.
