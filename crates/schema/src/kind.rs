//! Column kinds: how a Rust field value becomes an Arrow column.
//!
//! Each kind names its Arrow type, its builder and the spelling of the type that pyarrow prints, which is what
//! `schemas/*.json` records so that the interop test can compare types as strings.

use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray as _, Float64Builder, ListBuilder, PrimitiveBuilder, StringBuilder,
    StringDictionaryBuilder, TimestampNanosecondBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, Float64Type, Int32Type, TimeUnit, TimestampNanosecondType, UInt16Type,
    UInt32Type, UInt64Type,
};

/// How values of one column are typed, built and documented.
pub trait ColumnKind {
    /// The Rust value of one cell.
    type Value;
    /// The Arrow builder the column is accumulated in.
    type Builder: ArrayBuilder;
    /// The Arrow type of the column.
    fn data_type() -> DataType;
    /// The type as pyarrow prints it (`str(pa_type)`), used in the generated documentation.
    fn type_name() -> &'static str;
    /// A builder with room for `capacity` rows.
    fn builder(capacity: usize) -> Self::Builder;
    /// A builder for the batch after the one `previous` holds, which had `rows` rows: room for as many.
    fn renew(previous: &Self::Builder, rows: usize) -> Self::Builder {
        let _ = previous;
        Self::builder(rows)
    }
    /// Appends one cell, `None` being null.
    fn append(builder: &mut Self::Builder, value: Option<&Self::Value>);
    /// The cells of `array`, which has [`ColumnKind::data_type`] (the reader casts first); a value outside a closed
    /// vocabulary reads as null.
    fn read(array: &ArrayRef) -> Vec<Option<Self::Value>>;
}

/// A value stored as dictionary text: free text, or one of the closed vocabularies.
pub trait Text: AsRef<str> + Sized {
    /// The value spelled `text`; `None` outside a closed vocabulary.
    fn from_text(text: &str) -> Option<Self>;
}

impl Text for String {
    fn from_text(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

/// Shared text, for the columns of high-volume rows that repeat a few values (the `samples` table's source, instance,
/// metric and file): an adapter makes each value once and every row clones a pointer instead of allocating a string.
impl Text for Arc<str> {
    fn from_text(text: &str) -> Option<Self> {
        Some(text.into())
    }
}

fn read_strings<T: Text>(array: &ArrayRef) -> Vec<Option<T>> {
    let casted = arrow::compute::cast(array, &DataType::Utf8).expect("dictionary text casts to utf8");
    casted.as_string::<i32>().iter().map(|v| v.and_then(T::from_text)).collect()
}

/// Plain UTF-8 strings, for high-cardinality text such as request ids.
#[derive(Debug)]
pub enum Utf8 {}

impl ColumnKind for Utf8 {
    type Value = String;
    type Builder = StringBuilder;
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn type_name() -> &'static str {
        "string"
    }
    fn builder(capacity: usize) -> StringBuilder {
        StringBuilder::with_capacity(capacity, capacity * 16)
    }
    fn append(builder: &mut StringBuilder, value: Option<&String>) {
        builder.append_option(value);
    }
    fn read(array: &ArrayRef) -> Vec<Option<String>> {
        read_strings(array)
    }
}

/// Dictionary-encoded strings (`Int32` keys), for small-cardinality text such as model names and statuses.
///
/// `T` is the Rust value: `String`, or one of the closed vocabularies such as [`crate::Status`].
#[derive(Debug)]
pub struct Dict<T>(PhantomData<T>);

impl<T: Text> ColumnKind for Dict<T> {
    type Value = T;
    type Builder = DictBuilder;
    fn data_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    }
    fn type_name() -> &'static str {
        "dictionary<values=string, indices=int32, ordered=0>"
    }
    fn builder(capacity: usize) -> Self::Builder {
        DictBuilder::with_capacity(capacity)
    }
    fn append(builder: &mut Self::Builder, value: Option<&T>) {
        builder.push(value.map(AsRef::as_ref));
    }
    fn read(array: &ArrayRef) -> Vec<Option<T>> {
        read_strings(array)
    }
}

/// A [`StringDictionaryBuilder`] that appends a run of equal values with one dictionary lookup.
///
/// The rows of one input repeat their `source`, `source_file` and `instance`; looking each up again in the
/// dictionary's hash table was about a tenth of writing the samples of an SGLang log. Keys and dictionary order are
/// what appending one value at a time gives, so the bytes written are the same.
#[derive(Default)]
pub struct DictBuilder {
    inner: StringDictionaryBuilder<Int32Type>,
    /// The value of the pending run, when it is not a run of nulls.
    value: String,
    null: bool,
    /// Length of the pending run, not yet in `inner`.
    run: usize,
}

impl std::fmt::Debug for DictBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DictBuilder").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl DictBuilder {
    /// A builder with room for `capacity` keys (and a few distinct values: these columns repeat a handful).
    pub fn with_capacity(capacity: usize) -> Self {
        Self { inner: StringDictionaryBuilder::with_capacity(capacity, 16, 256), ..Self::default() }
    }

    fn push(&mut self, value: Option<&str>) {
        let same = self.run > 0
            && match value {
                None => self.null,
                Some(v) => !self.null && self.value == v,
            };
        if !same {
            self.flush();
            self.null = value.is_none();
            self.value.clear();
            self.value.push_str(value.unwrap_or_default());
        }
        self.run += 1;
    }

    fn flush(&mut self) {
        match (self.run, self.null) {
            (0, _) => {}
            (n, true) => self.inner.append_nulls(n),
            (n, false) => self.inner.append_values(&self.value, n),
        }
        self.run = 0;
    }
}

impl ArrayBuilder for DictBuilder {
    fn len(&self) -> usize {
        self.inner.len() + self.run
    }
    fn finish(&mut self) -> ArrayRef {
        self.flush();
        Arc::new(self.inner.finish())
    }
    fn finish_cloned(&self) -> ArrayRef {
        let done = self.inner.finish_cloned();
        if self.run == 0 {
            return Arc::new(done);
        }
        // Replaying the finished values in order gives the same keys, then the pending run goes on top.
        let mut copy = DictBuilder::default();
        let values = done.downcast_dict::<arrow::array::StringArray>().expect("string values");
        values.into_iter().for_each(|v| copy.push(v));
        copy.run_from(self);
        copy.finish()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn into_box_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl DictBuilder {
    /// Appends `other`'s pending run.
    fn run_from(&mut self, other: &DictBuilder) {
        let value = (!other.null).then_some(other.value.as_str());
        (0..other.run).for_each(|_| self.push(value));
    }
}

/// A primitive column's builder that keeps a run of nulls as a count until a value or the end of the batch.
///
/// A request row has 45 columns and most inputs fill a few: appending each null on its own (a validity bit and a
/// zeroed value, with their capacity checks) was the largest cost of folding the rows of a narrow trace such as
/// Azure's. A run is appended at once (`append_nulls`), which gives the same array.
#[derive(Debug)]
pub struct NullRun<T: ArrowPrimitiveType> {
    inner: PrimitiveBuilder<T>,
    /// Nulls after the last value, not yet in `inner`.
    nulls: usize,
}

impl<T: ArrowPrimitiveType> NullRun<T> {
    fn new(inner: PrimitiveBuilder<T>) -> Self {
        Self { inner, nulls: 0 }
    }

    fn push(&mut self, value: Option<T::Native>) {
        match value {
            None => self.nulls += 1,
            Some(value) => {
                self.flush();
                self.inner.append_value(value);
            }
        }
    }

    fn flush(&mut self) {
        if self.nulls > 0 {
            self.inner.append_nulls(self.nulls);
            self.nulls = 0;
        }
    }

    /// Room for this many more cells.
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }
}

impl<T: ArrowPrimitiveType> ArrayBuilder for NullRun<T> {
    fn len(&self) -> usize {
        self.inner.len() + self.nulls
    }
    fn finish(&mut self) -> ArrayRef {
        self.flush();
        Arc::new(self.inner.finish())
    }
    fn finish_cloned(&self) -> ArrayRef {
        let done = self.inner.finish_cloned();
        let mut copy = PrimitiveBuilder::<T>::with_capacity(self.len()).with_data_type(done.data_type().clone());
        copy.extend(done.iter());
        copy.append_nulls(self.nulls);
        Arc::new(copy.finish())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn into_box_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// Instants as nanoseconds since the Unix epoch, UTC.
#[derive(Debug)]
pub enum Time {}

/// The time zone every timestamp column carries.
pub const TIME_ZONE: &str = "UTC";

impl ColumnKind for Time {
    type Value = i64;
    type Builder = NullRun<TimestampNanosecondType>;
    fn data_type() -> DataType {
        DataType::Timestamp(TimeUnit::Nanosecond, Some(TIME_ZONE.into()))
    }
    fn type_name() -> &'static str {
        "timestamp[ns, tz=UTC]"
    }
    fn builder(capacity: usize) -> Self::Builder {
        NullRun::new(TimestampNanosecondBuilder::with_capacity(capacity).with_timezone(TIME_ZONE))
    }
    fn append(builder: &mut Self::Builder, value: Option<&i64>) {
        builder.push(value.copied());
    }
    fn read(array: &ArrayRef) -> Vec<Option<i64>> {
        array.as_primitive::<TimestampNanosecondType>().iter().collect()
    }
}

macro_rules! primitive_kind {
    ($(#[$meta:meta])* $kind:ident, $value:ty, $arrow:ty, $builder:ty, $data_type:expr, $name:literal) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub enum $kind {}

        impl ColumnKind for $kind {
            type Value = $value;
            type Builder = NullRun<$arrow>;
            fn data_type() -> DataType {
                $data_type
            }
            fn type_name() -> &'static str {
                $name
            }
            fn builder(capacity: usize) -> Self::Builder {
                NullRun::new(<$builder>::with_capacity(capacity))
            }
            fn append(builder: &mut Self::Builder, value: Option<&$value>) {
                builder.push(value.copied());
            }
            fn read(array: &ArrayRef) -> Vec<Option<$value>> {
                array.as_primitive::<$arrow>().iter().collect()
            }
        }
    };
}

primitive_kind!(
    /// 64-bit floats: durations in seconds, ratios, sample values.
    F64, f64, Float64Type, Float64Builder, DataType::Float64, "double"
);
primitive_kind!(
    /// 16-bit unsigned integers: HTTP statuses.
    U16, u16, UInt16Type, UInt16Builder, DataType::UInt16, "uint16"
);
primitive_kind!(
    /// 32-bit unsigned integers: token and block counts.
    U32, u32, UInt32Type, UInt32Builder, DataType::UInt32, "uint32"
);
primitive_kind!(
    /// 64-bit unsigned integers: bytes, hashes, line numbers.
    U64, u64, UInt64Type, UInt64Builder, DataType::UInt64, "uint64"
);

/// Lists of 64-bit unsigned integers: chained prefix block hashes.
#[derive(Debug)]
pub enum U64List {}

impl ColumnKind for U64List {
    type Value = Vec<u64>;
    type Builder = ListBuilder<UInt64Builder>;
    fn data_type() -> DataType {
        DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true)))
    }
    fn type_name() -> &'static str {
        "list<item: uint64>"
    }
    fn builder(capacity: usize) -> Self::Builder {
        ListBuilder::with_capacity(UInt64Builder::new(), capacity)
    }
    /// Room for as many items as well: a batch of vLLM rows holds up to 8 MiB of prefix hashes, which regrowing
    /// from empty would copy about twice over.
    fn renew(previous: &Self::Builder, rows: usize) -> Self::Builder {
        ListBuilder::with_capacity(UInt64Builder::with_capacity(previous.values_ref().len()), rows)
    }
    fn append(builder: &mut Self::Builder, value: Option<&Vec<u64>>) {
        match value {
            Some(values) => {
                builder.values().append_slice(values);
                builder.append(true);
            }
            None => builder.append_null(),
        }
    }
    fn read(array: &ArrayRef) -> Vec<Option<Vec<u64>>> {
        let lists = array.as_list::<i32>();
        (0..lists.len())
            .map(|i| lists.is_valid(i).then(|| lists.value(i).as_primitive::<UInt64Type>().iter().flatten().collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_give_the_keys_and_dictionary_of_one_value_at_a_time() {
        let cells = [Some("a"), Some("a"), None, None, Some("b"), Some("a"), Some("a"), None, Some("c"), Some("c")];
        let mut plain = StringDictionaryBuilder::<Int32Type>::new();
        cells.iter().for_each(|v| plain.append_option(*v));
        let mut runs = DictBuilder::default();
        cells.iter().for_each(|v| runs.push(*v));
        assert_eq!(runs.len(), 10);
        let cloned = runs.finish_cloned();
        let expected: ArrayRef = Arc::new(plain.finish());
        assert_eq!(&cloned, &expected);
        assert_eq!(&runs.finish(), &expected);
        // Keys 0 0 null null 1 0 0 null 2 2 over the dictionary a, b, c.
        let keys: Vec<Option<i32>> = expected.as_dictionary::<Int32Type>().keys().iter().collect();
        assert_eq!(keys, [Some(0), Some(0), None, None, Some(1), Some(0), Some(0), None, Some(2), Some(2)]);
        // A finished builder starts afresh.
        runs.push(Some("z"));
        assert_eq!(runs.finish().len(), 1);
    }

    #[test]
    fn null_runs_give_the_array_of_one_cell_at_a_time() {
        let cells = [None, None, Some(3_u32), None, Some(0), Some(7), None, None, None];
        let mut plain = UInt32Builder::new();
        cells.iter().for_each(|v| plain.append_option(*v));
        let expected: ArrayRef = Arc::new(plain.finish());
        let mut runs = U32::builder(2);
        cells.iter().for_each(|v| U32::append(&mut runs, v.as_ref()));
        assert_eq!(runs.len(), 9);
        assert_eq!(&runs.finish_cloned(), &expected);
        assert_eq!(runs.len(), 9, "finish_cloned leaves the pending run");
        assert_eq!(&runs.finish(), &expected);
        assert_eq!(expected.null_count(), 6);
        // All null, and never null: the validity of each is what single appends give (none for the latter).
        for cells in [vec![None; 5], vec![Some(1_u32); 5]] {
            let mut plain = UInt32Builder::new();
            cells.iter().for_each(|v| plain.append_option(*v));
            let mut runs = U32::builder(0);
            cells.iter().for_each(|v| U32::append(&mut runs, v.as_ref()));
            let (got, want) = (runs.finish(), plain.finish());
            assert_eq!(got.to_data(), want.to_data());
            assert_eq!(got.nulls().is_some(), want.nulls().is_some());
        }
        // Timestamps keep their zone.
        let mut times = Time::builder(1);
        Time::append(&mut times, None);
        Time::append(&mut times, Some(&5));
        assert_eq!(times.finish().data_type(), &Time::data_type());
    }

    #[test]
    fn a_renewed_builder_has_room_for_the_last_batch() {
        let mut lists = U64List::builder(4);
        for n in 0..300_u64 {
            U64List::append(&mut lists, Some(&(0..n).collect()));
        }
        let items = (0..300).sum::<usize>();
        assert_eq!(lists.values_ref().len(), items);
        let next = U64List::renew(&lists, 300);
        assert!(next.values_ref().capacity() >= items, "{}", next.values_ref().capacity());
        assert!(next.offsets_slice().len() == 1 && next.values_ref().is_empty());
        assert!(<U64 as ColumnKind>::renew(&U64::builder(0), 300).capacity() >= 300);
    }
}
