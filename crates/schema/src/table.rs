//! The `table!` macro: one declaration per table gives the row struct, the column-name constants, the Arrow schema,
//! the builder and the column documentation, so that none of them can drift from the others.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

/// Documentation of one column, as written to `schemas/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDoc {
    /// Column name.
    pub name: &'static str,
    /// Arrow type as pyarrow prints it.
    pub arrow_type: &'static str,
    /// Whether the column may hold nulls.
    pub nullable: bool,
    /// Unit of the values (`s`, `tokens`, `bytes`, …), empty when none applies.
    pub unit: &'static str,
    /// What the column means, one or more sentences.
    pub doc: &'static [&'static str],
}

/// A table of the canonical dataset: its name, schema and documentation.
pub trait Table: Sized {
    /// File stem of the table inside a dataset (`requests` → `requests.parquet`).
    const NAME: &'static str;
    /// The builder rows of this table are appended to.
    type Builder: TableBuilder<Row = Self>;
    /// What the table holds.
    const DOC: &'static [&'static str];
    /// Every column, in schema order.
    const COLUMNS: &'static [ColumnDoc];
    /// The Arrow schema, whose metadata holds the schema version under [`crate::SCHEMA_VERSION_KEY`].
    fn schema() -> SchemaRef;
    /// The rows of `batch`, read by column name: a column the batch lacks (a dataset of an older schema) reads as
    /// null, a required one as its default; a column of another type is cast to this schema's type, and a value
    /// that cannot be cast is an error naming the column (never a silent null).
    fn from_batch(batch: &RecordBatch) -> Result<Vec<Self>, arrow::error::ArrowError>;
}

/// Accumulates rows of one table into Arrow arrays (arrow-rs's custom-builder pattern).
pub trait TableBuilder: Default {
    /// The row type this builder takes.
    type Row;
    /// Appends one row.
    fn append(&mut self, row: &Self::Row);
    /// Rows appended since the last `finish`.
    fn len(&self) -> usize;
    /// Whether no rows were appended since the last `finish`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Returns the appended rows as a batch and resets the builder, with room for as many rows as the batch had.
    ///
    /// Arrow's builders hand their buffers to the arrays they finish and start again from empty ones, so the next
    /// batch would regrow every column by doubling (a copy and, for large buffers, fresh pages from the kernel each
    /// time). Sizing the next batch's columns like the last one's allocates each buffer once.
    fn finish(&mut self) -> RecordBatch;
}

macro_rules! field_type {
    (required, $kind:ty) => { <$kind as $crate::kind::ColumnKind>::Value };
    (optional, $kind:ty) => { Option<<$kind as $crate::kind::ColumnKind>::Value> };
}

macro_rules! cell {
    (required, $value:expr) => {
        Some(&$value)
    };
    (optional, $value:expr) => {
        $value.as_ref()
    };
}

macro_rules! read_cell {
    (required, $value:expr) => {
        $value.unwrap_or_default()
    };
    (optional, $value:expr) => {
        $value
    };
}

macro_rules! nullable {
    (required) => {
        false
    };
    (optional) => {
        true
    };
}

/// Declares a table. See the tables in this crate for the syntax.
macro_rules! table {
    (
        $(#[doc = $table_doc:literal])*
        table $name:literal, row $row:ident, builder $builder:ident, module $module:ident;
        $(
            $(#[doc = $doc:literal])*
            $field:ident / $konst:ident : $kind:ty, $presence:ident, $unit:literal;
        )*
    ) => {
        $(#[doc = $table_doc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $row {
            $(
                $(#[doc = $doc])*
                pub $field: field_type!($presence, $kind),
            )*
        }

        /// Column names of the table, as constants for readers and tests.
        pub mod $module {
            $(
                #[doc = concat!("`", stringify!($field), "`")]
                pub const $konst: &str = stringify!($field);
            )*
        }

        impl $crate::table::Table for $row {
            const NAME: &'static str = $name;
            type Builder = $builder;
            const DOC: &'static [&'static str] = &[$($table_doc),*];
            const COLUMNS: &'static [$crate::table::ColumnDoc] = &[
                $(
                    $crate::table::ColumnDoc {
                        name: stringify!($field),
                        arrow_type: "", // Filled by `columns()`: trait methods are not const.
                        nullable: nullable!($presence),
                        unit: $unit,
                        doc: &[$($doc),*],
                    },
                )*
            ];
            fn schema() -> arrow::datatypes::SchemaRef {
                static SCHEMA: std::sync::LazyLock<arrow::datatypes::SchemaRef> = std::sync::LazyLock::new(|| {
                    let fields = vec![
                        $(
                            arrow::datatypes::Field::new(
                                stringify!($field),
                                <$kind as $crate::kind::ColumnKind>::data_type(),
                                nullable!($presence),
                            ),
                        )*
                    ];
                    // One key only: the map is a HashMap, and a single entry serializes in one order.
                    let metadata = std::collections::HashMap::from([(
                        $crate::SCHEMA_VERSION_KEY.to_owned(),
                        $crate::SCHEMA_VERSION.to_string(),
                    )]);
                    std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, metadata))
                });
                SCHEMA.clone()
            }
            fn from_batch(
                batch: &arrow::array::RecordBatch,
            ) -> Result<Vec<Self>, arrow::error::ArrowError> {
                let rows = batch.num_rows();
                $(
                    let $field: Vec<Option<<$kind as $crate::kind::ColumnKind>::Value>> =
                        match batch.column_by_name(stringify!($field)) {
                            Some(array) => {
                                let array = arrow::compute::cast_with_options(
                                    array,
                                    &<$kind as $crate::kind::ColumnKind>::data_type(),
                                    &arrow::compute::CastOptions { safe: false, ..Default::default() },
                                )
                                .map_err(|e| {
                                    arrow::error::ArrowError::CastError(format!(
                                        "column {}: {e}",
                                        stringify!($field)
                                    ))
                                })?;
                                <$kind as $crate::kind::ColumnKind>::read(&array)
                            }
                            None => std::iter::repeat_with(|| None).take(rows).collect(),
                        };
                    let mut $field = $field.into_iter();
                )*
                Ok((0..rows)
                    .map(|_| $row {
                        $($field: read_cell!($presence, $field.next().flatten()),)*
                    })
                    .collect())
            }
        }

        impl $row {
            /// Every column with its pyarrow type name filled in.
            pub fn columns() -> Vec<$crate::table::ColumnDoc> {
                let types: &[&'static str] = &[$(<$kind as $crate::kind::ColumnKind>::type_name()),*];
                <$row as $crate::table::Table>::COLUMNS
                    .iter()
                    .zip(types)
                    .map(|(column, arrow_type)| $crate::table::ColumnDoc { arrow_type, ..*column })
                    .collect()
            }
        }

        #[doc = concat!("Builds `", $name, "` batches from [`", stringify!($row), "`]s.")]
        pub struct $builder {
            rows: usize,
            $($field: <$kind as $crate::kind::ColumnKind>::Builder,)*
        }

        impl std::fmt::Debug for $builder {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($builder)).field("rows", &self.rows).finish_non_exhaustive()
            }
        }

        impl $builder {
            /// A builder with room for `capacity` rows.
            pub fn with_capacity(capacity: usize) -> Self {
                Self { rows: 0, $($field: <$kind as $crate::kind::ColumnKind>::builder(capacity),)* }
            }
        }

        impl Default for $builder {
            fn default() -> Self {
                Self::with_capacity(1024)
            }
        }

        impl $crate::table::TableBuilder for $builder {
            type Row = $row;

            fn append(&mut self, row: &$row) {
                $(<$kind as $crate::kind::ColumnKind>::append(&mut self.$field, cell!($presence, row.$field));)*
                self.rows += 1;
            }

            fn len(&self) -> usize {
                self.rows
            }

            fn finish(&mut self) -> arrow::array::RecordBatch {
                let next = Self {
                    rows: 0,
                    $($field: <$kind as $crate::kind::ColumnKind>::renew(&self.$field, self.rows),)*
                };
                let mut full = std::mem::replace(self, next);
                let columns: Vec<arrow::array::ArrayRef> =
                    vec![$(arrow::array::ArrayBuilder::finish(&mut full.$field),)*];
                arrow::array::RecordBatch::try_new(<$row as $crate::table::Table>::schema(), columns)
                    .expect("table! builders produce the arrays of their own schema")
            }
        }
    };
}

pub(crate) use {cell, field_type, nullable, read_cell, table};
