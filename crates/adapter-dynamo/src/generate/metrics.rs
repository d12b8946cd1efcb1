//! Synthetic `metrics` inputs (to be written).
