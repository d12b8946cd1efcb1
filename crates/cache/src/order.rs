//! The order requests are replayed in, and which rows take part.

use infertrace_schema::RequestRow;

/// Indices of `rows` in replay order: arrival time, rows without an arrival last, ties in input order (the order of
/// the engine's unbounded-cache reuse).
pub fn arrival_order(rows: &[RequestRow]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    // A stable sort keeps input order among equal keys.
    order.sort_by_key(|&i| (rows[i].arrival_time.is_none(), rows[i].arrival_time));
    order
}

/// The blocks of a row that takes part in a simulation: its hashes and block size, or `None` for a row without
/// `prefix_hashes` or with a null or zero `block_size`.
pub(crate) fn blocks(row: &RequestRow) -> Option<(&[u64], u32)> {
    match (&row.prefix_hashes, row.block_size) {
        (Some(hashes), Some(size)) if size > 0 => Some((hashes, size)),
        _ => None,
    }
}

/// The tokens a row counts in the denominator of hit ratios: `input_tokens`, else its blocks × `block_size`.
pub(crate) fn denominator(row: &RequestRow, hashes: &[u64], block_size: u32) -> u64 {
    row.input_tokens.map_or_else(|| hashes.len() as u64 * u64::from(block_size), u64::from)
}
