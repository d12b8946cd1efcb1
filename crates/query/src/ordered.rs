//! The stream behind [`Datasets::register_ordered`](crate::Datasets::register_ordered): a table's files read one
//! after the other, each row numbered.

use std::fs::File;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array, new_null_array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::scalar::ScalarValue;
use infertrace_schema::TableFile;

/// Batches in flight between the reading thread and the query.
const BUFFERED_BATCHES: usize = 2;

/// One partition: every file of a table, in order.
#[derive(Debug)]
pub(crate) struct Ordered {
    /// The columns read, then the ordinal.
    pub(crate) schema: SchemaRef,
    pub(crate) files: Vec<TableFile>,
}

impl PartitionStream for Ordered {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _context: Arc<TaskContext>) -> SendableRecordBatchStream {
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema.clone(), BUFFERED_BATCHES);
        let sender = builder.tx();
        let (schema, files) = (self.schema.clone(), self.files.clone());
        builder.spawn_blocking(move || {
            let mut ordinal = 0u64;
            for file in &files {
                for columns in read(&schema, file)? {
                    let mut columns = columns?;
                    let n = columns.first().map_or(0, |c| c.len()) as u64;
                    columns.push(Arc::new(UInt64Array::from_iter_values(ordinal..ordinal + n)));
                    ordinal += n;
                    if sender.blocking_send(Ok(RecordBatch::try_new(schema.clone(), columns)?)).is_err() {
                        // The query stopped reading: nothing more to do.
                        return Ok(());
                    }
                }
            }
            Ok(())
        });
        builder.build()
    }
}

/// The batches of one file as the columns of `schema` but its last (the ordinal): columns the file holds are read
/// (and cast to the canonical type), the partition column of a part is its constant value, a column the file lacks
/// (an older schema version) is null.
fn read(schema: &SchemaRef, file: &TableFile) -> Result<impl Iterator<Item = Result<Vec<ArrayRef>>> + use<>> {
    let context = |e: &dyn std::fmt::Display| DataFusionError::Execution(format!("{}: {e}", file.path.display()));
    let opened = File::open(&file.path).map_err(|e| context(&e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(opened).map_err(|e| context(&e))?;
    let stored = builder.schema().clone();
    let wanted: Vec<Option<usize>> =
        schema.fields().iter().take(schema.fields().len() - 1).map(|f| stored.index_of(f.name()).ok()).collect();
    let roots: Vec<usize> = {
        let mut roots: Vec<usize> = wanted.iter().flatten().copied().collect();
        roots.sort_unstable();
        roots
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let reader = builder.with_projection(mask).build().map_err(|e| context(&e))?;
    let schema = schema.clone();
    let (path, partition) = (file.path.clone(), file.partition.clone());
    Ok(reader.map(move |batch| {
        let batch = batch.map_err(|e| DataFusionError::Execution(format!("{}: {e}", path.display())))?;
        let n = batch.num_rows();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (field, index) in schema.fields().iter().zip(&wanted) {
            // `wanted` has no entry for the ordinal: the zip stops before it.
            let column = match (index, &partition) {
                (Some(index), _) => {
                    let read = batch.column(roots.binary_search(index).expect("a projected root"));
                    cast(read, field.data_type())?
                }
                (None, Some((key, value))) if key == field.name() => {
                    cast(&ScalarValue::Utf8(value.clone()).to_array_of_size(n)?, field.data_type())?
                }
                (None, _) => new_null_array(field.data_type(), n),
            };
            columns.push(column);
        }
        Ok(columns)
    }))
}
