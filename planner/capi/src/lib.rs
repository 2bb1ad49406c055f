//! The planner's C API (issue 21): `planner/include/tir_planner.h` declares exactly what this
//! file exports. Records in, offsets or shared objects out, both lower bounds of the paper, and
//! errors as a status code plus a message for the calling thread.
//!
//! The caller owns every buffer: the library never allocates memory the caller must free.
//! Nothing unwinds across the boundary: every entry point checks its pointers and runs the
//! planner under `catch_unwind`, so a bug becomes `TIR_PLANNER_INTERNAL`, not an abort.
//! Every plan passes the independent checker before it is returned.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tir_planner::checker::{check_offsets, check_shared_objects, check_shared_objects_nd};
use tir_planner::multidim::{lower_bound_nd, plan_shared_objects_nd, UsageRecordNd};
use tir_planner::{
    lower_bounds, plan_offsets, plan_shared_objects, OffsetStrategy, PlanError,
    SharedObjectStrategy, UsageRecord,
};

/// One tensor: `size` bytes, live over the closed operator interval `[first_op, last_op]`
/// (paper §3). Mirrors `tir_planner_record`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TirPlannerRecord {
    pub size: u64,
    pub first_op: u64,
    pub last_op: u64,
}

/// One texture: `size[0..dims]` (w, h[, d]) elements, live over the closed operator interval
/// `[first_op, last_op]`. Mirrors `tir_planner_texture_record`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TirPlannerTextureRecord {
    pub size: [u64; 3],
    pub first_op: u64,
    pub last_op: u64,
}

/// What a plan costs next to the paper's two lower bounds. Mirrors `tir_planner_summary`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TirPlannerSummary {
    /// Slab size (offsets) or Σ object sizes (shared objects), in bytes.
    pub total_size: u64,
    /// §5.1: the largest operator breadth.
    pub offsets_lower_bound: u64,
    /// §4.1: the sum of the positional maxima.
    pub shared_objects_lower_bound: u64,
}

/// Status codes; the values are part of the ABI (`tir_planner_status` in the header).
pub const TIR_PLANNER_OK: i32 = 0;
pub const TIR_PLANNER_NULL_ARGUMENT: i32 = 1;
pub const TIR_PLANNER_UNKNOWN_STRATEGY: i32 = 2;
pub const TIR_PLANNER_INVALID_RECORD: i32 = 3;
pub const TIR_PLANNER_INVALID_ALIGNMENT: i32 = 4;
pub const TIR_PLANNER_OVERFLOW: i32 = 5;
pub const TIR_PLANNER_TOO_LARGE: i32 = 6;
pub const TIR_PLANNER_INTERNAL: i32 = 7;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

struct Failure {
    status: i32,
    message: String,
}

impl Failure {
    fn new(status: i32, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<PlanError> for Failure {
    fn from(e: PlanError) -> Self {
        let status = match e {
            PlanError::InvalidLifetime { .. } => TIR_PLANNER_INVALID_RECORD,
            PlanError::ZeroAlignment => TIR_PLANNER_INVALID_ALIGNMENT,
            PlanError::AlignmentOverflow { .. }
            | PlanError::RecordTooLarge { .. }
            | PlanError::Overflow { .. } => TIR_PLANNER_OVERFLOW,
            PlanError::TooManyOperators { .. }
            | PlanError::TooLarge { .. }
            | PlanError::TimeBudget { .. } => TIR_PLANNER_TOO_LARGE,
            PlanError::UnknownStrategy { .. } | PlanError::UnsupportedDimensions { .. } => {
                TIR_PLANNER_UNKNOWN_STRATEGY
            }
            PlanError::InvalidPreviousPlan { .. } => TIR_PLANNER_INVALID_RECORD,
            PlanError::Internal(_) => TIR_PLANNER_INTERNAL,
        };
        Failure::new(status, e.to_string())
    }
}

fn set_last_error(message: &str) {
    // Interior NULs cannot occur in the planner's messages, but a C string must not carry one.
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = text);
}

/// Runs `body` with the boundary's guarantees: no unwinding out, the message stored on error.
fn guard(body: impl FnOnce() -> Result<(), Failure>) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(Failure::new(
            TIR_PLANNER_INTERNAL,
            "internal planner error: a panic was caught at the C boundary",
        ))
    });
    match result {
        Ok(()) => {
            set_last_error("");
            TIR_PLANNER_OK
        }
        Err(f) => {
            set_last_error(&f.message);
            f.status
        }
    }
}

/// The records as the planner takes them.
///
/// # Safety
/// `records` must point to `count` readable records (or be null with `count == 0`).
unsafe fn read_records(
    records: *const TirPlannerRecord,
    count: usize,
) -> Result<Vec<UsageRecord>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if records.is_null() {
        return Err(Failure::new(TIR_PLANNER_NULL_ARGUMENT, "`records` is null"));
    }
    let raw = std::slice::from_raw_parts(records, count);
    raw.iter()
        .enumerate()
        .map(|(i, r)| {
            let op = |v: u64, what: &str| {
                usize::try_from(v).map_err(|_| {
                    Failure::new(
                        TIR_PLANNER_INVALID_RECORD,
                        format!("usage record {i}: {what} {v} does not fit in size_t"),
                    )
                })
            };
            // Built field by field: `UsageRecord::new` asserts the order, and an inverted
            // lifetime must become the planner's error, not a panic.
            Ok(UsageRecord {
                size: r.size,
                first_op: op(r.first_op, "first_op")?,
                last_op: op(r.last_op, "last_op")?,
            })
        })
        .collect()
}

/// # Safety
/// `strategy` must be null or a NUL-terminated string.
unsafe fn read_name<'a>(strategy: *const c_char) -> Result<&'a str, Failure> {
    if strategy.is_null() {
        return Err(Failure::new(
            TIR_PLANNER_NULL_ARGUMENT,
            "`strategy` is null",
        ));
    }
    CStr::from_ptr(strategy).to_str().map_err(|_| {
        Failure::new(
            TIR_PLANNER_UNKNOWN_STRATEGY,
            "`strategy` is not valid UTF-8",
        )
    })
}

fn internal_check<E: std::fmt::Display>(
    result: Result<(), Vec<E>>,
    name: &str,
) -> Result<(), Failure> {
    result.map_err(|errs| {
        let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
        Failure::new(
            TIR_PLANNER_INTERNAL,
            format!("internal planner error: strategy `{name}` produced an invalid plan: {first}"),
        )
    })
}

/// Plans offsets in one slab. See `tir_planner_plan_offsets` in the header.
///
/// # Safety
/// `records` points to `count` records; `strategy` is a NUL-terminated string; `offsets` points
/// to `count` writable `uint64_t`; `summary` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tir_planner_plan_offsets(
    records: *const TirPlannerRecord,
    count: usize,
    strategy: *const c_char,
    align: u64,
    offsets: *mut u64,
    summary: *mut TirPlannerSummary,
) -> i32 {
    guard(|| {
        let name = read_name(strategy)?;
        let strategy: OffsetStrategy = name.parse()?;
        let records = read_records(records, count)?;
        if count > 0 && offsets.is_null() {
            return Err(Failure::new(TIR_PLANNER_NULL_ARGUMENT, "`offsets` is null"));
        }
        let plan = plan_offsets(&records, strategy, align)?;
        internal_check(check_offsets(&records, &plan, align), name)?;
        let bounds = lower_bounds(&records, align)?;
        if count > 0 {
            std::slice::from_raw_parts_mut(offsets, count).copy_from_slice(&plan.offsets);
        }
        if !summary.is_null() {
            *summary = TirPlannerSummary {
                total_size: plan.total_size,
                offsets_lower_bound: bounds.offsets,
                shared_objects_lower_bound: bounds.shared_objects,
            };
        }
        Ok(())
    })
}

/// Plans shared objects. See `tir_planner_plan_shared_objects` in the header.
///
/// # Safety
/// `records` points to `count` records; `strategy` is a NUL-terminated string; `object_ids`
/// and `object_sizes` point to `count` writable elements each; `object_count` and `summary`
/// are null or writable.
#[no_mangle]
pub unsafe extern "C" fn tir_planner_plan_shared_objects(
    records: *const TirPlannerRecord,
    count: usize,
    strategy: *const c_char,
    align: u64,
    object_ids: *mut usize,
    object_sizes: *mut u64,
    object_count: *mut usize,
    summary: *mut TirPlannerSummary,
) -> i32 {
    guard(|| {
        let name = read_name(strategy)?;
        let strategy: SharedObjectStrategy = name.parse()?;
        let records = read_records(records, count)?;
        if count > 0 && (object_ids.is_null() || object_sizes.is_null()) {
            return Err(Failure::new(
                TIR_PLANNER_NULL_ARGUMENT,
                "`object_ids` or `object_sizes` is null",
            ));
        }
        let plan = plan_shared_objects(&records, strategy, align)?;
        internal_check(check_shared_objects(&records, &plan), name)?;
        // Every strategy uses at most one object per tensor; the caller's buffer holds `count`.
        if plan.object_sizes.len() > count {
            return Err(Failure::new(
                TIR_PLANNER_INTERNAL,
                "internal planner error: more objects than records",
            ));
        }
        let bounds = lower_bounds(&records, align)?;
        if count > 0 {
            std::slice::from_raw_parts_mut(object_ids, count).copy_from_slice(&plan.object_ids);
            std::slice::from_raw_parts_mut(object_sizes, plan.object_sizes.len())
                .copy_from_slice(&plan.object_sizes);
        }
        if !object_count.is_null() {
            *object_count = plan.object_sizes.len();
        }
        if !summary.is_null() {
            *summary = TirPlannerSummary {
                total_size: plan.cost(),
                offsets_lower_bound: bounds.offsets,
                shared_objects_lower_bound: bounds.shared_objects,
            };
        }
        Ok(())
    })
}

/// Both lower bounds alone. See `tir_planner_lower_bounds` in the header.
///
/// # Safety
/// `records` points to `count` records; `summary` is writable.
#[no_mangle]
pub unsafe extern "C" fn tir_planner_lower_bounds(
    records: *const TirPlannerRecord,
    count: usize,
    align: u64,
    summary: *mut TirPlannerSummary,
) -> i32 {
    guard(|| {
        if summary.is_null() {
            return Err(Failure::new(TIR_PLANNER_NULL_ARGUMENT, "`summary` is null"));
        }
        let records = read_records(records, count)?;
        let bounds = lower_bounds(&records, align)?;
        *summary = TirPlannerSummary {
            total_size: 0,
            offsets_lower_bound: bounds.offsets,
            shared_objects_lower_bound: bounds.shared_objects,
        };
        Ok(())
    })
}

/// Plans multi-dimensional shared objects (textures). See `tir_planner_plan_textures` in the
/// header.
///
/// # Safety
/// `records` points to `count` records; `strategy` is a NUL-terminated string; `object_ids`
/// points to `count` writable elements and `object_sizes` to `count * dims`; `object_count`,
/// `cost` and `lower_bound` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn tir_planner_plan_textures(
    records: *const TirPlannerTextureRecord,
    count: usize,
    dims: usize,
    strategy: *const c_char,
    object_ids: *mut usize,
    object_sizes: *mut u64,
    object_count: *mut usize,
    cost: *mut u64,
    lower_bound: *mut u64,
) -> i32 {
    guard(|| {
        let name = read_name(strategy)?;
        let strategy: SharedObjectStrategy = name.parse()?;
        if count > 0 && records.is_null() {
            return Err(Failure::new(TIR_PLANNER_NULL_ARGUMENT, "`records` is null"));
        }
        if count > 0 && (object_ids.is_null() || object_sizes.is_null()) {
            return Err(Failure::new(
                TIR_PLANNER_NULL_ARGUMENT,
                "`object_ids` or `object_sizes` is null",
            ));
        }
        let raw = if count == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(records, count)
        };
        let out = TextureOut {
            name,
            count,
            object_ids,
            object_sizes,
            object_count,
            cost,
            lower_bound,
        };
        match dims {
            2 => out.plan::<2>(raw, strategy),
            3 => out.plan::<3>(raw, strategy),
            _ => Err(Failure::new(
                TIR_PLANNER_INVALID_RECORD,
                format!("`dims` must be 2 or 3, got {dims}"),
            )),
        }
    })
}

/// The output side of `tir_planner_plan_textures`.
struct TextureOut<'a> {
    name: &'a str,
    count: usize,
    object_ids: *mut usize,
    object_sizes: *mut u64,
    object_count: *mut usize,
    cost: *mut u64,
    lower_bound: *mut u64,
}

impl TextureOut<'_> {
    /// # Safety
    /// As `tir_planner_plan_textures`'s, with `dims == D`.
    unsafe fn plan<const D: usize>(
        self,
        raw: &[TirPlannerTextureRecord],
        strategy: SharedObjectStrategy,
    ) -> Result<(), Failure> {
        let records = raw
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let op = |v: u64, what: &str| {
                    usize::try_from(v).map_err(|_| {
                        Failure::new(
                            TIR_PLANNER_INVALID_RECORD,
                            format!("usage record {i}: {what} {v} does not fit in size_t"),
                        )
                    })
                };
                let mut size = [0u64; D];
                size.copy_from_slice(&r.size[..D]);
                Ok(UsageRecordNd {
                    size,
                    first_op: op(r.first_op, "first_op")?,
                    last_op: op(r.last_op, "last_op")?,
                })
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        let plan = plan_shared_objects_nd(&records, strategy)?;
        internal_check(check_shared_objects_nd(&records, &plan), self.name)?;
        if plan.object_sizes.len() > self.count {
            return Err(Failure::new(
                TIR_PLANNER_INTERNAL,
                "internal planner error: more objects than records",
            ));
        }
        let bound = lower_bound_nd(&records)?;
        if self.count > 0 {
            std::slice::from_raw_parts_mut(self.object_ids, self.count)
                .copy_from_slice(&plan.object_ids);
            let sizes = std::slice::from_raw_parts_mut(self.object_sizes, self.count * D);
            for (k, s) in plan.object_sizes.iter().enumerate() {
                sizes[k * D..(k + 1) * D].copy_from_slice(s);
            }
        }
        if !self.object_count.is_null() {
            *self.object_count = plan.object_sizes.len();
        }
        if !self.cost.is_null() {
            // The checker verified that the cost fits in u64.
            *self.cost = plan.cost().unwrap_or(u64::MAX);
        }
        if !self.lower_bound.is_null() {
            *self.lower_bound = bound;
        }
        Ok(())
    }
}

/// The message of the last call on this thread that failed ("" after a success). Valid until
/// the next call into the library on this thread; never null.
#[no_mangle]
pub extern "C" fn tir_planner_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(records: &[TirPlannerRecord], name: &CStr) -> (i32, Vec<u64>, TirPlannerSummary) {
        let mut offsets = vec![0u64; records.len()];
        let mut summary = TirPlannerSummary::default();
        let status = unsafe {
            tir_planner_plan_offsets(
                records.as_ptr(),
                records.len(),
                name.as_ptr(),
                64,
                offsets.as_mut_ptr(),
                &mut summary,
            )
        };
        (status, offsets, summary)
    }

    fn last_error() -> String {
        unsafe { CStr::from_ptr(tir_planner_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn errors_are_codes_with_messages() {
        let inverted = [TirPlannerRecord {
            size: 8,
            first_op: 3,
            last_op: 1,
        }];
        assert_eq!(
            plan(&inverted, c"greedy_by_size").0,
            TIR_PLANNER_INVALID_RECORD
        );
        assert!(
            last_error().contains("first_op 3 after last_op 1"),
            "{}",
            last_error()
        );
        assert_eq!(plan(&inverted, c"no_such").0, TIR_PLANNER_UNKNOWN_STRATEGY);
        assert!(last_error().contains("unknown strategy `no_such`"));
        let huge = [TirPlannerRecord {
            size: u64::MAX,
            first_op: 0,
            last_op: 0,
        }];
        assert_eq!(plan(&huge, c"greedy_by_size").0, TIR_PLANNER_OVERFLOW);
        let ok = [TirPlannerRecord {
            size: 8,
            first_op: 0,
            last_op: 0,
        }];
        assert_eq!(plan(&ok, c"greedy_by_size").0, TIR_PLANNER_OK);
        assert_eq!(last_error(), "");
    }

    #[test]
    fn null_pointers_are_reported() {
        let mut summary = TirPlannerSummary::default();
        let status = unsafe {
            tir_planner_plan_offsets(
                std::ptr::null(),
                2,
                c"naive".as_ptr(),
                64,
                std::ptr::null_mut(),
                &mut summary,
            )
        };
        assert_eq!(status, TIR_PLANNER_NULL_ARGUMENT);
        let status =
            unsafe { tir_planner_lower_bounds(std::ptr::null(), 0, 64, std::ptr::null_mut()) };
        assert_eq!(status, TIR_PLANNER_NULL_ARGUMENT);
        // No records is a valid, empty plan.
        let status = unsafe {
            tir_planner_plan_offsets(
                std::ptr::null(),
                0,
                c"best".as_ptr(),
                64,
                std::ptr::null_mut(),
                &mut summary,
            )
        };
        assert_eq!(status, TIR_PLANNER_OK);
        assert_eq!(summary.total_size, 0);
    }
}
