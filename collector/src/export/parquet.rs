//! The cells table as a Parquet file (`speedmatrix export -o cells.parquet`, a site's
//! `runs/cells.parquet`): the rows of [`speedmatrix_schema::cells`], typed — text as `BYTE_ARRAY`
//! annotated `STRING`, figures as `DOUBLE`, counts as `INT64`, flags as `BOOLEAN`, every column
//! optional (null where a row has no such figure) — with [`cells::CELLS_VERSION`] in the file's
//! key-value metadata under [`cells::VERSION_KEY`].
//!
//! Written with the `parquet` crate of apache/arrow-rs without its default features (no Arrow,
//! no codecs): pages are dictionary-encoded where that pays (the run header repeats on every
//! row) and not compressed.

use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use speedmatrix_schema::cells::{self, CellColumn, CellType, RunOf, Value};
use std::sync::Arc;

/// Rows per row group: enough for readers to skip whole groups, few enough that a site of
/// thousands of runs is written without holding every row at once.
const ROW_GROUP_ROWS: usize = 16_384;

/// The Parquet schema of the cells table: one optional field per column.
fn schema(columns: &[CellColumn]) -> Result<Type, ParquetError> {
    let fields = columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.kind {
                CellType::Text => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
                CellType::Float => (Physical::DOUBLE, None),
                CellType::Int => (Physical::INT64, None),
                CellType::Bool => (Physical::BOOLEAN, None),
            };
            Type::primitive_type_builder(&c.name, physical)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Type::group_type_builder("speedmatrix_cells").with_fields(fields).build()
}

/// The non-null values of one column of some rows and their definition levels (1 = present,
/// 0 = null).
fn present<T>(rows: &[Vec<Value>], i: usize, get: impl Fn(&Value) -> Option<T>) -> (Vec<T>, Vec<i16>) {
    let mut values = Vec::with_capacity(rows.len());
    let levels = rows
        .iter()
        .map(|row| match get(&row[i]) {
            Some(v) => {
                values.push(v);
                1
            }
            None => 0,
        })
        .collect();
    (values, levels)
}

/// Write one row group of `rows` (each a value per column).
fn write_group(
    w: &mut SerializedFileWriter<&mut Vec<u8>>,
    columns: &[CellColumn],
    rows: &[Vec<Value>],
) -> Result<(), ParquetError> {
    let mut group = w.next_row_group()?;
    let mut i = 0;
    while let Some(mut column) = group.next_column()? {
        match columns.get(i).map(|c| c.kind) {
            Some(CellType::Text) => {
                let (v, d) = present(rows, i, |x| match x {
                    Value::Text(t) => t.as_deref().map(ByteArray::from),
                    _ => None,
                });
                column.typed::<ByteArrayType>().write_batch(&v, Some(&d), None)?;
            }
            Some(CellType::Float) => {
                let (v, d) = present(rows, i, |x| if let Value::Float(f) = x { *f } else { None });
                column.typed::<DoubleType>().write_batch(&v, Some(&d), None)?;
            }
            Some(CellType::Int) => {
                let (v, d) = present(rows, i, |x| if let Value::Int(n) = x { *n } else { None });
                column.typed::<Int64Type>().write_batch(&v, Some(&d), None)?;
            }
            Some(CellType::Bool) => {
                let (v, d) = present(rows, i, |x| if let Value::Bool(b) = x { *b } else { None });
                column.typed::<BoolType>().write_batch(&v, Some(&d), None)?;
            }
            None => {}
        }
        column.close()?;
        i += 1;
    }
    group.close()?;
    Ok(())
}

/// The cells table of these runs as the bytes of a Parquet file (no row group when there is no
/// row: the schema and the version alone).
///
/// # Errors
/// What the Parquet writer says (it fails only on a schema or values it cannot encode, which
/// this table never has: a bug, not bad input).
pub fn to_parquet(runs: &[RunOf<'_>]) -> Result<Vec<u8>, ParquetError> {
    let columns = cells::columns();
    let props = WriterProperties::builder()
        .set_created_by(format!("speedmatrix {} (parquet-rs)", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            cells::VERSION_KEY.to_string(),
            cells::CELLS_VERSION.to_string(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut w = SerializedFileWriter::new(&mut out, Arc::new(schema(&columns)?), Arc::new(props))?;
    let mut batch: Vec<Vec<Value>> = Vec::new();
    for run in runs {
        batch.extend(cells::run_rows(&columns, *run));
        if batch.len() >= ROW_GROUP_ROWS {
            write_group(&mut w, &columns, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        write_group(&mut w, &columns, &batch)?;
    }
    w.close()?;
    Ok(out)
}
