//! Column kinds: how a Rust field value becomes an Arrow column.
//!
//! Each kind names its Arrow type, its builder and the spelling of the type that pyarrow prints, which is what
//! `schemas/*.json` records so that the interop test can compare types as strings.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray as _, DictionaryArray, Float64Builder, ListBuilder, PrimitiveArray,
    PrimitiveBuilder, StringBuilder, TimestampNanosecondBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow::buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer, ScalarBuffer};
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
    /// Appends `n` cells of one value: what `n` calls of [`append`](Self::append) give, at once where the builder
    /// keeps runs.
    fn append_n(builder: &mut Self::Builder, value: Option<&Self::Value>, n: usize) {
        for _ in 0..n {
            Self::append(builder, value);
        }
    }
    /// The cells of `array`, which has [`ColumnKind::data_type`] (the reader casts first); a value outside a closed
    /// vocabulary reads as null.
    fn read(array: &ArrayRef) -> Vec<Option<Self::Value>>;
}

/// A value stored as dictionary text: free text, or one of the closed vocabularies.
pub trait Text: AsRef<str> + Sized {
    /// The value spelled `text`; `None` outside a closed vocabulary.
    fn from_text(text: &str) -> Option<Self>;
    /// The value as shared text, for [`Dict`] to recognise by address; `None` for text owned by the row.
    fn shared(&self) -> Option<&Arc<str>> {
        None
    }
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
    fn shared(&self) -> Option<&Arc<str>> {
        Some(self)
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
        match value.and_then(Text::shared) {
            Some(shared) => builder.push_shared(shared),
            None => builder.push(value.map(AsRef::as_ref)),
        }
    }
    fn append_n(builder: &mut Self::Builder, value: Option<&T>, n: usize) {
        match (value, value.and_then(Text::shared)) {
            (None, _) => builder.push_key_n(None, n),
            (Some(_), Some(shared)) => builder.push_shared_n(shared, n),
            (Some(text), None) => (0..n).for_each(|_| builder.push(Some(text.as_ref()))),
        }
    }
    fn read(array: &ArrayRef) -> Vec<Option<T>> {
        read_strings(array)
    }
}

/// A dictionary column's builder: the keys and dictionary that arrow's
/// [`StringDictionaryBuilder`](arrow::array::StringDictionaryBuilder) gives when the cells are appended one at a time
/// (first-appearance order, nulls as null keys), at a fraction of the cost for the columns these tables have.
///
/// - **Runs.** The rows of one input repeat their `source`, `source_file` and `instance`: a cell equal to the one
///   before extends the pending run, appended at once, with no dictionary lookup (looking each cell up again was
///   about a tenth of writing the samples of an SGLang log).
/// - **Shared values.** The `samples` table's text is [`Arc<str>`] values an adapter made once per input, so a
///   cell's value is usually at the same address as an earlier one: a few recent values are kept with their keys
///   and matched by address, without reading or hashing the text (an SGLang batch line interleaves its 5 to 8
///   metrics, so the value before is rarely the same). The builder holds those `Arc`s, so an address it matches
///   cannot have been freed and reused by other text.
/// - **Static values.** A parser's metric names, given as `&'static str` when a line's samples are written together
///   ([`crate::SamplesBuilder::append_values`]), are matched by address the same way: static text is never freed.
/// - Other values are looked up by content in a hash map.
#[derive(Default)]
pub struct DictBuilder {
    keys: PrimitiveBuilder<Int32Type>,
    /// The distinct values, in key order.
    values: Vec<Box<str>>,
    lookup: HashMap<Box<str>, i32, ahash::RandomState>,
    /// Recent shared values and their keys, matched by address.
    shared: Vec<(Arc<str>, i32)>,
    /// Recent static values and their keys, matched by address.
    statics: Vec<(&'static str, i32)>,
    /// The key of the pending run (`None`: a run of nulls) and its length, not yet in `keys`.
    run_key: Option<i32>,
    run: usize,
}

/// Shared values remembered by address; past it the list starts again (a column has a handful).
const SHARED_VALUES: usize = 16;

impl std::fmt::Debug for DictBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DictBuilder").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl DictBuilder {
    /// A builder with room for `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { keys: PrimitiveBuilder::with_capacity(capacity), ..Self::default() }
    }

    /// Appends a cell given as text.
    fn push(&mut self, value: Option<&str>) {
        let key = match value {
            None => None,
            Some(v) => match self.run_key {
                // The usual case: the same value as the cell before.
                Some(last) if self.run > 0 && *self.values[last as usize] == *v => Some(last),
                _ => Some(self.key_of(v)),
            },
        };
        self.push_key(key);
    }

    /// Appends a cell whose value is shared text.
    fn push_shared(&mut self, value: &Arc<str>) {
        self.push_shared_n(value, 1);
    }

    /// Appends `n` cells whose value is shared text.
    pub(crate) fn push_shared_n(&mut self, value: &Arc<str>, n: usize) {
        let key = match self.shared.iter().find(|(seen, _)| Arc::ptr_eq(seen, value)) {
            Some(&(_, key)) => key,
            None => {
                let key = self.key_of(value);
                if self.shared.len() == SHARED_VALUES {
                    self.shared.clear();
                }
                self.shared.push((Arc::clone(value), key));
                key
            }
        };
        self.push_key_n(Some(key), n);
    }

    /// Appends a cell whose value is static text (a parser's metric name), matched by address like shared text:
    /// static text is never freed, so the same address and length are the same text.
    pub(crate) fn push_static(&mut self, value: &'static str) {
        let key = match self.statics.iter().find(|(seen, _)| std::ptr::eq(*seen, value)) {
            Some(&(_, key)) => key,
            None => {
                let key = self.key_of(value);
                if self.statics.len() == SHARED_VALUES {
                    self.statics.clear();
                }
                self.statics.push((value, key));
                key
            }
        };
        self.push_key(Some(key));
    }

    /// The key of `value`, added to the dictionary if new.
    fn key_of(&mut self, value: &str) -> i32 {
        if let Some(&key) = self.lookup.get(value) {
            return key;
        }
        // More than `i32::MAX` distinct values in one batch of at most a few hundred thousand rows cannot happen.
        let key = i32::try_from(self.values.len()).expect("a batch has fewer distinct values than i32::MAX");
        self.values.push(value.into());
        self.lookup.insert(value.into(), key);
        key
    }

    fn push_key(&mut self, key: Option<i32>) {
        self.push_key_n(key, 1);
    }

    fn push_key_n(&mut self, key: Option<i32>, n: usize) {
        if n == 0 {
            return;
        }
        if self.run > 0 && self.run_key != key {
            self.flush();
        }
        self.run_key = key;
        self.run += n;
    }

    fn flush(&mut self) {
        match (self.run, self.run_key) {
            (0, _) => {}
            (n, None) => self.keys.append_nulls(n),
            // The metric column's every cell: `append_value_n` sets up a run first.
            (1, Some(key)) => self.keys.append_value(key),
            (n, Some(key)) => self.keys.append_value_n(key, n),
        }
        self.run = 0;
    }

    /// The array of the cells so far, leaving the builder as it is.
    fn array(&self, keys: arrow::array::PrimitiveArray<Int32Type>) -> ArrayRef {
        let values = arrow::array::StringArray::from_iter_values(self.values.iter());
        Arc::new(DictionaryArray::try_new(keys, Arc::new(values)).expect("every key indexes the dictionary"))
    }
}

impl ArrayBuilder for DictBuilder {
    fn len(&self) -> usize {
        self.keys.len() + self.run
    }
    fn finish(&mut self) -> ArrayRef {
        let keys = if self.keys.is_empty() && self.run > 0 && matches!(self.run_key, None | Some(0)) {
            // No value in the batch, or one: null keys, or keys that are all 0 (see `zeros`).
            zeros::<Int32Type>(std::mem::take(&mut self.run), self.run_key.is_some())
        } else {
            self.flush();
            self.keys.finish()
        };
        let array = self.array(keys);
        // Keys restart with the next batch, and so does everything that maps values to them.
        self.values.clear();
        self.lookup.clear();
        self.shared.clear();
        self.statics.clear();
        self.run_key = None;
        array
    }
    fn finish_cloned(&self) -> ArrayRef {
        let mut keys = self.keys.finish_cloned();
        if self.run > 0 {
            let mut pending = PrimitiveBuilder::<Int32Type>::with_capacity(keys.len() + self.run);
            pending.extend(keys.iter());
            match self.run_key {
                None => pending.append_nulls(self.run),
                Some(key) => pending.append_value_n(key, self.run),
            }
            keys = pending.finish();
        }
        self.array(keys)
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

/// A primitive column's builder that keeps a run of nulls as a count until a value or the end of the batch.
///
/// A request row has 44 columns and most inputs fill a few: appending each null on its own (a validity bit and a
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

    fn push_n(&mut self, value: Option<T::Native>, n: usize) {
        match value {
            None => self.nulls += n,
            Some(_) if n == 0 => {}
            Some(value) => {
                self.flush();
                self.inner.append_value_n(value, n);
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
        if self.inner.is_empty() && self.nulls > 0 {
            // A column with no value in the batch (most of a narrow trace's).
            let data_type = self.inner.finish().data_type().clone();
            return Arc::new(zeros::<T>(std::mem::take(&mut self.nulls), false).with_data_type(data_type));
        }
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

/// How many zeroed buffers of different sizes each thread keeps for [`zeros`]: the values of a batch's columns of
/// each width (2, 4 and 8 bytes), and their validity.
const ZERO_BUFFERS: usize = 4;

thread_local! {
    /// The zeroed buffers [`zeros`] gave last on this thread, of different sizes, the oldest first.
    static ZERO_BUFFER_CACHE: std::cell::RefCell<Vec<Buffer>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `n` cells of zeros, every one null unless `valid`: the array that appending `n` nulls (or `n` zeros) to a builder
/// gives.
///
/// A column with no value in a batch (most of a narrow trace's 44 request columns) is a null array whose values are
/// never read and whose validity is all unset, and a dictionary column with one value in the batch (`source`,
/// `source_file`) has keys that are all 0. The columns of a batch have as many cells, so these are zeroed buffers of
/// a few sizes, which the columns share with each other and with the batches after them (Arrow buffers are
/// immutable and counted), instead of each column allocating and zeroing its own (on the Mooncake trace, 31 of the
/// 44 request columns and 1.4 MiB a batch, written on the thread that folds the rows and freed on the encoder's).
/// Each array reports the memory of buffers of its length as if they were its own: a null column what
/// `new_null_array` reported, so the partitioned writer's accounting of the batches it holds does not see the
/// sharing; a one-value dictionary column's keys their length, where the builder's keys reported the room they had
/// (more in a batch shorter than the one before it: a table's last, or one ended by its lists' bytes).
fn zeros<T: ArrowPrimitiveType>(n: usize, valid: bool) -> PrimitiveArray<T> {
    let values = ScalarBuffer::new(zero_buffer(n * size_of::<T::Native>()), 0, n);
    let nulls = (!valid).then(|| NullBuffer::new(BooleanBuffer::new(zero_buffer(n.div_ceil(8)), 0, n)));
    PrimitiveArray::new(values, nulls)
}

/// A buffer of `bytes` zeros: one of [`ZERO_BUFFER_CACHE`], or a new one that replaces its oldest.
fn zero_buffer(bytes: usize) -> Buffer {
    ZERO_BUFFER_CACHE.with_borrow_mut(|cache| {
        if let Some(found) = cache.iter().find(|buffer| buffer.len() == bytes) {
            return found.clone();
        }
        let fresh = Buffer::from(MutableBuffer::from_len_zeroed(bytes));
        if cache.len() == ZERO_BUFFERS {
            cache.remove(0);
        }
        cache.push(fresh.clone());
        fresh
    })
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
    fn append_n(builder: &mut Self::Builder, value: Option<&i64>, n: usize) {
        builder.push_n(value.copied(), n);
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
            fn append_n(builder: &mut Self::Builder, value: Option<&$value>, n: usize) {
                builder.push_n(value.copied(), n);
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
    /// Room for as many items as well: a batch of vLLM rows holds up to `BATCH_LIST_BYTES` (4 MiB) of prefix
    /// hashes, which regrowing from empty would copy about twice over.
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
    use arrow::array::StringDictionaryBuilder;
    use proptest::prelude::*;

    use super::*;

    /// How a cell is appended: as null, as text, as one of a few shared values (two of them with equal text at
    /// different addresses), or as static text (the same).
    #[derive(Debug, Clone)]
    enum Cell {
        Null,
        Text(u8),
        Shared(usize),
        Static(usize),
    }

    fn cell() -> impl Strategy<Value = Cell> {
        prop_oneof![
            Just(Cell::Null),
            (0u8..5).prop_map(Cell::Text),
            (0usize..20).prop_map(Cell::Shared),
            (0usize..20).prop_map(Cell::Static)
        ]
    }

    /// Twenty static texts over eight values, `v0` to `v7`: equal text at different addresses, and more addresses
    /// than the builder remembers. Two of them share an address with another of another length (`v1` in `v12`).
    fn statics() -> &'static [&'static str; 20] {
        static STATICS: std::sync::LazyLock<[&'static str; 20]> = std::sync::LazyLock::new(|| {
            let long: &'static str = String::from("v12").leak();
            std::array::from_fn(|i| match i {
                0 => &long[..2],
                1 => long,
                _ => format!("v{}", i % 8).leak(),
            })
        });
        &STATICS
    }

    proptest! {
        /// Whatever the mix of nulls, runs, text and shared values (more shared values than the builder
        /// remembers by address), the builder gives the array `StringDictionaryBuilder` gives when fed one cell at a
        /// time: after `finish_cloned` mid-way, at `finish`, and again for the next batch.
        #[test]
        fn dictionaries_are_what_one_cell_at_a_time_gives(
            batches in proptest::collection::vec(proptest::collection::vec((cell(), 1usize..4), 0..60), 1..4),
            cut in any::<usize>(),
        ) {
            // Twenty shared values over eight texts: equal text at different addresses, and more addresses than the
            // builder remembers (`SHARED_VALUES`).
            let pool: Vec<Arc<str>> = (0..20).map(|i| Arc::from(format!("v{}", i % 8))).collect();
            let text = |c: &Cell| -> Option<String> {
                match c {
                    Cell::Null => None,
                    Cell::Text(t) => Some(format!("v{t}")),
                    Cell::Shared(i) => Some(pool[*i].to_string()),
                    Cell::Static(i) => Some(statics()[*i].to_owned()),
                }
            };
            let mut builder = Dict::<Arc<str>>::builder(4);
            for cells in &batches {
                let mut plain = StringDictionaryBuilder::<Int32Type>::new();
                let cut = cut % (cells.len() + 1);
                for (i, (c, n)) in cells.iter().enumerate() {
                    if i == cut {
                        let mut so_far = StringDictionaryBuilder::<Int32Type>::new();
                        for (c, n) in &cells[..i] {
                            (0..*n).for_each(|_| so_far.append_option(text(c)));
                        }
                        let expected: ArrayRef = Arc::new(so_far.finish());
                        prop_assert_eq!(&builder.finish_cloned(), &expected);
                    }
                    (0..*n).for_each(|_| plain.append_option(text(c)));
                    // A cell repeated is appended at once, with `append_n`, except a single one.
                    match (c, *n) {
                        (Cell::Null, 1) => Dict::<Arc<str>>::append(&mut builder, None),
                        (Cell::Null, n) => Dict::<Arc<str>>::append_n(&mut builder, None, n),
                        (Cell::Text(_), n) => (0..n).for_each(|_| builder.push(text(c).as_deref())),
                        (Cell::Shared(i), 1) => Dict::<Arc<str>>::append(&mut builder, Some(&pool[*i])),
                        (Cell::Shared(i), n) => Dict::<Arc<str>>::append_n(&mut builder, Some(&pool[*i]), n),
                        (Cell::Static(i), n) => (0..n).for_each(|_| builder.push_static(statics()[*i])),
                    }
                }
                prop_assert_eq!(builder.len(), cells.iter().map(|(_, n)| n).sum::<usize>());
                let expected: ArrayRef = Arc::new(plain.finish());
                let got = builder.finish();
                prop_assert_eq!(&got, &expected);
                // The same keys and dictionary, not only the same values.
                prop_assert_eq!(got.to_data(), expected.to_data());
            }
        }
    }

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
    fn a_batch_without_values_is_all_null_and_the_next_starts_afresh() {
        let mut dict = DictBuilder::default();
        (0..5).for_each(|_| dict.push(None));
        let nulls = dict.finish();
        let mut plain = StringDictionaryBuilder::<Int32Type>::new();
        (0..5).for_each(|_| plain.append_null());
        let expected: ArrayRef = Arc::new(plain.finish());
        assert_eq!((nulls.len(), nulls.null_count()), (5, 5));
        assert_eq!(nulls.to_data(), expected.to_data());
        dict.push(Some("a"));
        dict.push(None);
        let next = dict.finish();
        let keys: Vec<Option<i32>> = next.as_dictionary::<Int32Type>().keys().iter().collect();
        assert_eq!(keys, [Some(0), None], "no null left over from the batch before");

        let mut times = Time::builder(4);
        (0..3).for_each(|_| Time::append(&mut times, None));
        let nulls = times.finish();
        assert_eq!((nulls.len(), nulls.null_count(), nulls.data_type()), (3, 3, &Time::data_type()));
        Time::append(&mut times, Some(&7));
        let next = times.finish();
        assert_eq!((next.len(), next.null_count()), (1, 0), "no null left over from the batch before");
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
        // Runs given at once: 2 nulls, 3 × 4, none of 5, 1 null, 2 × 0, then 3 nulls to end the batch.
        let mut plain = UInt32Builder::new();
        plain.append_nulls(2);
        plain.append_value_n(4, 3);
        plain.append_null();
        plain.append_value_n(0, 2);
        plain.append_nulls(3);
        let want = plain.finish();
        let mut runs = U32::builder(0);
        for (value, n) in [(None, 2), (Some(4), 3), (Some(5), 0), (None, 1), (Some(0), 2), (None, 0), (None, 3)] {
            U32::append_n(&mut runs, value.as_ref(), n);
        }
        assert_eq!(runs.len(), 11);
        assert_eq!(runs.finish().to_data(), want.to_data());
        // Timestamps keep their zone.
        let mut times = Time::builder(1);
        Time::append(&mut times, None);
        Time::append(&mut times, Some(&5));
        assert_eq!(times.finish().data_type(), &Time::data_type());
    }

    #[test]
    fn columns_of_zeros_share_their_buffers_and_are_what_appending_gives() {
        use arrow::array::{Float64Array, UInt64Array, new_null_array};

        /// The address of `array`'s values (of its keys for a dictionary) and of its validity, if any.
        fn addresses(array: &ArrayRef) -> (*const u8, Option<*const u8>) {
            let data = match array.as_any_dictionary_opt() {
                Some(dictionary) => dictionary.keys().to_data(),
                None => array.to_data(),
            };
            (data.buffers()[0].as_ptr(), data.nulls().map(|nulls| nulls.buffer().as_ptr()))
        }

        // Larger batches first, so that a smaller one cannot pass with a buffer cut from a larger one.
        for n in [crate::BATCH_ROWS + 1, crate::BATCH_ROWS, 300, 1] {
            let batch = || {
                let (mut u64s, mut f64s, mut times) = (U64::builder(n), F64::builder(n), Time::builder(n));
                let (mut u32s, mut u16s) = (U32::builder(n), U16::builder(n));
                let (mut absent, mut one) = (DictBuilder::with_capacity(n), DictBuilder::with_capacity(n));
                for _ in 0..n {
                    U64::append(&mut u64s, None);
                    F64::append(&mut f64s, None);
                    Time::append(&mut times, None);
                    U32::append(&mut u32s, None);
                    U16::append(&mut u16s, None);
                    absent.push(None);
                    one.push(Some("mooncake"));
                }
                [
                    u64s.finish(),
                    f64s.finish(),
                    times.finish(),
                    u32s.finish(),
                    u16s.finish(),
                    absent.finish(),
                    one.finish(),
                ]
            };
            let [u64s, f64s, times, u32s, u16s, absent, one] = batch();

            // What appending the cells one by one gives, and the memory it reports.
            assert_eq!(
                one.as_dictionary::<Int32Type>().keys().get_array_memory_size(),
                PrimitiveArray::<Int32Type>::from(vec![0; n]).get_array_memory_size(),
                "{n}: one-value keys report their length"
            );
            let nulls: ArrayRef = Arc::new(UInt64Array::from(vec![None; n]));
            assert_eq!(u64s.to_data(), nulls.to_data(), "{n}");
            assert_eq!((u64s.null_count(), f64s.null_count(), u16s.null_count()), (n, n, n));
            assert_eq!(f64s.to_data(), Float64Array::from(vec![None; n]).to_data());
            assert_eq!((times.data_type(), times.null_count()), (&Time::data_type(), n));
            for (array, data_type) in [(&u64s, DataType::UInt64), (&u32s, DataType::UInt32), (&u16s, DataType::UInt16)]
            {
                assert_eq!(array.get_array_memory_size(), new_null_array(&data_type, n).get_array_memory_size(), "{n}");
            }
            let mut plain = StringDictionaryBuilder::<Int32Type>::new();
            (0..n).for_each(|_| plain.append_null());
            assert_eq!(absent.to_data(), plain.finish().to_data());
            (0..n).for_each(|_| plain.append_value("mooncake"));
            let expected: ArrayRef = Arc::new(plain.finish());
            assert_eq!(&one, &expected);
            assert_eq!(one.as_dictionary::<Int32Type>().keys().nulls(), None, "one value: keys all 0 and valid");

            // Columns of one width share their values, every null column its validity, and so does the next batch.
            let [next_u64s, .., next_one] = batch();
            let (values, validity) = addresses(&u64s);
            assert_eq!(addresses(&f64s), (values, validity));
            assert_eq!(addresses(&times), (values, validity));
            assert_eq!(addresses(&next_u64s), (values, validity));
            assert_eq!(addresses(&u32s).1, validity);
            assert_eq!(addresses(&absent), addresses(&u32s), "4-byte keys and values");
            assert_eq!(addresses(&one), (addresses(&u32s).0, None));
            assert_eq!(addresses(&next_one), addresses(&one));
            assert_ne!(addresses(&u16s).0, addresses(&u32s).0, "each width its own buffer");
        }
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
