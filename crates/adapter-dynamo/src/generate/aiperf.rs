//! Synthetic `aiperf` inputs (to be written).
