//! Synthetic `request_trace` inputs (to be written).
