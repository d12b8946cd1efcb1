//! Synthetic `log` inputs (to be written).
