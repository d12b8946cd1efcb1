//! Synthetic `kv_events` inputs (to be written).
