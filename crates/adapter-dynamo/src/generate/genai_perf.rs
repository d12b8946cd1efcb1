//! Synthetic `genai_perf` inputs (to be written).
