//! The planner's native Python module, `tir_planner._native`: flat little buffers in and out
//! (records as `size, first_op, last_op` triples of native-endian u64, plans as u64 arrays), so
//! that `tir_planner/__init__.py` turns them into and from NumPy arrays without a copy per
//! element and this side needs no NumPy bindings. Errors are `tir_planner.PlanError`
//! (a `ValueError`). Every plan passes the independent checker before it is returned.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use tir_planner::checker::{check_offsets, check_shared_objects, check_shared_objects_nd};
use tir_planner::multidim::{lower_bound_nd, plan_shared_objects_nd, UsageRecordNd};
use tir_planner::{OffsetStrategy, OffsetsPlan, SharedObjectStrategy, UsageRecord};

create_exception!(_native, PlanError, PyValueError);

fn plan_error(e: impl std::fmt::Display) -> PyErr {
    PlanError::new_err(e.to_string())
}

const WORD: usize = std::mem::size_of::<u64>();

fn words(bytes: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if !bytes.len().is_multiple_of(WORD) {
        return Err(plan_error(format!(
            "{what}: {} bytes is not a whole number of u64",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(WORD)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("chunks of WORD bytes")))
        .collect())
}

fn to_bytes<'py>(py: Python<'py>, values: impl IntoIterator<Item = u64>) -> Bound<'py, PyBytes> {
    let buffer: Vec<u8> = values.into_iter().flat_map(u64::to_ne_bytes).collect();
    PyBytes::new(py, &buffer)
}

fn records(bytes: &[u8]) -> PyResult<Vec<UsageRecord>> {
    let flat = words(bytes, "records")?;
    if !flat.len().is_multiple_of(3) {
        return Err(plan_error(
            "records: expected (size, first_op, last_op) triples",
        ));
    }
    flat.chunks_exact(3)
        .enumerate()
        .map(|(i, t)| {
            let op = |v: u64, what: &str| {
                usize::try_from(v).map_err(|_| {
                    plan_error(format!(
                        "usage record {i}: {what} {v} does not fit in usize"
                    ))
                })
            };
            // Field by field: `UsageRecord::new` asserts the lifetime's order, and an inverted
            // one must become the planner's error.
            Ok(UsageRecord {
                size: t[0],
                first_op: op(t[1], "first_op")?,
                last_op: op(t[2], "last_op")?,
            })
        })
        .collect()
}

fn first_error<E: std::fmt::Display>(name: &str, errs: Vec<E>) -> PyErr {
    let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
    pyo3::exceptions::PyRuntimeError::new_err(format!(
        "internal planner error: strategy `{name}` produced an invalid plan: {first}"
    ))
}

/// `(offsets bytes, total_size)`.
#[pyfunction]
fn plan_offsets<'py>(
    py: Python<'py>,
    records_bytes: &[u8],
    strategy: &str,
    align: u64,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    let s: OffsetStrategy = strategy.parse().map_err(plan_error)?;
    let records = records(records_bytes)?;
    let plan = tir_planner::plan_offsets(&records, s, align).map_err(plan_error)?;
    check_offsets(&records, &plan, align).map_err(|e| first_error(strategy, e))?;
    Ok((to_bytes(py, plan.offsets.iter().copied()), plan.total_size))
}

/// `(object ids bytes, object sizes bytes, cost)`.
#[pyfunction]
fn plan_shared_objects<'py>(
    py: Python<'py>,
    records_bytes: &[u8],
    strategy: &str,
    align: u64,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64)> {
    let s: SharedObjectStrategy = strategy.parse().map_err(plan_error)?;
    let records = records(records_bytes)?;
    let plan = tir_planner::plan_shared_objects(&records, s, align).map_err(plan_error)?;
    check_shared_objects(&records, &plan).map_err(|e| first_error(strategy, e))?;
    let ids = to_bytes(py, plan.object_ids.iter().map(|&i| i as u64));
    let sizes = to_bytes(py, plan.object_sizes.iter().copied());
    Ok((ids, sizes, plan.cost()))
}

/// Textures of `D` dimensions from `(extents..., first_op, last_op)` rows of u64.
fn texture_records<const D: usize>(bytes: &[u8]) -> PyResult<Vec<UsageRecordNd<D>>> {
    let flat = words(bytes, "records")?;
    if !flat.len().is_multiple_of(D + 2) {
        return Err(plan_error(format!(
            "records: expected rows of {D} extents, first_op and last_op"
        )));
    }
    flat.chunks_exact(D + 2)
        .enumerate()
        .map(|(i, row)| {
            let op = |v: u64, what: &str| {
                usize::try_from(v).map_err(|_| {
                    plan_error(format!(
                        "usage record {i}: {what} {v} does not fit in usize"
                    ))
                })
            };
            let mut size = [0u64; D];
            size.copy_from_slice(&row[..D]);
            Ok(UsageRecordNd {
                size,
                first_op: op(row[D], "first_op")?,
                last_op: op(row[D + 1], "last_op")?,
            })
        })
        .collect()
}

fn plan_textures_of<'py, const D: usize>(
    py: Python<'py>,
    records_bytes: &[u8],
    strategy: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64, u64)> {
    let s: SharedObjectStrategy = strategy.parse().map_err(plan_error)?;
    let records = texture_records::<D>(records_bytes)?;
    let plan = plan_shared_objects_nd(&records, s).map_err(plan_error)?;
    check_shared_objects_nd(&records, &plan).map_err(|e| first_error(strategy, e))?;
    let bound = lower_bound_nd(&records).map_err(plan_error)?;
    let ids = to_bytes(py, plan.object_ids.iter().map(|&i| i as u64));
    let sizes = to_bytes(py, plan.object_sizes.iter().flatten().copied());
    // The checker verified that the cost fits in u64.
    Ok((ids, sizes, plan.cost().unwrap_or(u64::MAX), bound))
}

/// `(object ids bytes, object extents bytes, cost, lower bound)` for 2D or 3D textures.
#[pyfunction]
fn plan_textures<'py>(
    py: Python<'py>,
    records_bytes: &[u8],
    dims: usize,
    strategy: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64, u64)> {
    match dims {
        2 => plan_textures_of::<2>(py, records_bytes, strategy),
        3 => plan_textures_of::<3>(py, records_bytes, strategy),
        _ => Err(plan_error(format!(
            "textures have 2 or 3 dimensions, got {dims}"
        ))),
    }
}

/// `(offsets bound, shared objects bound)`: paper §5.1 and §4.1.
#[pyfunction]
fn lower_bounds(records_bytes: &[u8], align: u64) -> PyResult<(u64, u64)> {
    let records = records(records_bytes)?;
    let b = tir_planner::lower_bounds(&records, align).map_err(plan_error)?;
    Ok((b.offsets, b.shared_objects))
}

/// The checker's complaints about an offsets plan (empty when it is valid).
#[pyfunction]
fn check_offsets_plan(
    records_bytes: &[u8],
    offsets_bytes: &[u8],
    total_size: u64,
    align: u64,
) -> PyResult<Vec<String>> {
    let records = records(records_bytes)?;
    let plan = OffsetsPlan {
        offsets: words(offsets_bytes, "offsets")?,
        total_size,
    };
    Ok(match check_offsets(&records, &plan, align) {
        Ok(()) => Vec::new(),
        Err(errs) => errs.iter().map(|e| e.to_string()).collect(),
    })
}

#[pyfunction]
fn offset_strategy_names() -> Vec<&'static str> {
    OffsetStrategy::names()
}

#[pyfunction]
fn shared_object_strategy_names() -> Vec<&'static str> {
    SharedObjectStrategy::names()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PlanError", m.py().get_type::<PlanError>())?;
    m.add_function(wrap_pyfunction!(plan_offsets, m)?)?;
    m.add_function(wrap_pyfunction!(plan_shared_objects, m)?)?;
    m.add_function(wrap_pyfunction!(lower_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(plan_textures, m)?)?;
    m.add_function(wrap_pyfunction!(check_offsets_plan, m)?)?;
    m.add_function(wrap_pyfunction!(offset_strategy_names, m)?)?;
    m.add_function(wrap_pyfunction!(shared_object_strategy_names, m)?)?;
    Ok(())
}
