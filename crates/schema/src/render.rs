//! A compact text rendering of a batch, one row per line with only its non-null cells, for golden tests and for
//! people reading a dataset in a terminal.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};

/// Renders the rows of `batch` selected by `rows` as `column=value` lines, skipping null cells.
///
/// When the batch has more than `head + tail` rows, only the first `head` and last `tail` are shown, with a line
/// saying how many were left out.
pub fn render_rows(batch: &RecordBatch, head: usize, tail: usize) -> String {
    // Timestamps are shown without their zone name (formatting a named zone needs the tz database, which this
    // crate does not carry) and with a `Z` suffix added below, since every canonical timestamp is UTC.
    let utc = FormatOptions::default().with_null("").with_timestamp_format(Some("%Y-%m-%dT%H:%M:%S%.fZ"));
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Timestamp(unit, Some(_)) => {
                cast(c, &DataType::Timestamp(*unit, None)).expect("a timestamp casts to a naive timestamp")
            }
            _ => c.clone(),
        })
        .collect();
    let formatters: Vec<_> = columns
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &utc).expect("every canonical type has a formatter"))
        .collect();
    let names: Vec<_> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    let n = batch.num_rows();
    let shown: Vec<usize> = if n > head + tail { (0..head).chain(n - tail..n).collect() } else { (0..n).collect() };
    let mut out = String::new();
    for (i, &row) in shown.iter().enumerate() {
        if i == head && n > head + tail {
            out.push_str(&format!("… {} rows not shown\n", n - head - tail));
        }
        let cells: Vec<String> = batch
            .columns()
            .iter()
            .zip(&formatters)
            .zip(&names)
            .filter(|((column, _), _)| column.is_valid(row))
            .map(|((_, formatter), name)| format!("{name}={}", formatter.value(row)))
            .collect();
        out.push_str(&cells.join(" "));
        out.push('\n');
    }
    out
}
