//! What `plan` and `heapmap` work on: usage records with display names, from a model's
//! liveness or from a CSV file of records.

use super::{input, Failure};
use std::path::Path;
use tir_ir::{Bindings, Module};
use tir_passes::liveness::{self, Liveness};
use tir_passes::planner::csv::{read_any_records_columns, AnyCsvRows, CsvIds, CsvRows};
use tir_passes::planner::multidim::UsageRecordNd;
use tir_passes::planner::UsageRecord;

/// Records to plan, with everything needed to show them.
pub struct PlanInput {
    /// The file the records came from.
    pub source: String,
    /// The model's name, or the CSV file's stem.
    pub name: String,
    pub records: Vec<UsageRecord>,
    /// A display name per record: `%value` or the CSV id (in one buffer: a million ids are
    /// two allocations, not a million).
    pub names: CsvIds,
    /// Number of operators (time steps).
    pub num_ops: usize,
    /// Present when the records come from a model.
    pub model: Option<(Module, Liveness)>,
}

/// The records of a model; a dynamic model at `dims` (`flag` is how the command takes them,
/// `None` when it does not).
pub fn from_model(path: &Path, dims: &Bindings, flag: Option<&str>) -> Result<PlanInput, Failure> {
    let (_, module) = input::load_static(path, dims, flag)?;
    from_module(path, module)
}

/// The records of a static module read from `path`.
pub fn from_module(path: &Path, module: Module) -> Result<PlanInput, Failure> {
    let Some(func) = module.entry() else {
        eprintln!(
            "{}: error: the module has no `@main` function to plan",
            path.display()
        );
        return Err(Failure::Reported);
    };
    let live = liveness::analyze(func).map_err(|e| {
        eprintln!("{}: error: {e}", path.display());
        Failure::Reported
    })?;
    let names = live.values.iter().map(|&v| func.value_name(v)).collect();
    Ok(PlanInput {
        source: path.display().to_string(),
        name: module.name.clone(),
        records: live.records.clone(),
        names,
        num_ops: live.num_operators,
        model: Some((module, live)),
    })
}

/// Records with multi-dimensional sizes (`w,h[,d]` columns), with their display names.
pub struct NdInput<const D: usize> {
    pub source: String,
    pub name: String,
    pub records: Vec<UsageRecordNd<D>>,
    pub names: Vec<String>,
    pub num_ops: usize,
}

/// A CSV file's records, by the kind of size its header names.
pub enum AnyInput {
    Bytes(PlanInput),
    Dims2(NdInput<2>),
    Dims3(NdInput<3>),
}

/// Reads a CSV of byte sizes; a file of `w,h[,d]` sizes is refused (only `tirc plan` plans
/// those, as shared objects).
pub fn from_csv(path: &Path, inclusive: bool) -> Result<PlanInput, Failure> {
    match from_any_csv(path, inclusive)? {
        AnyInput::Bytes(input) => Ok(input),
        AnyInput::Dims2(NdInput { source, .. }) | AnyInput::Dims3(NdInput { source, .. }) => {
            eprintln!(
                "{source}: error: the sizes are multi-dimensional (`w,h[,d]`): only shared objects \
                 can plan them (`tirc plan --records {source}`), not offsets"
            );
            Err(Failure::Reported)
        }
    }
}

fn nd_input<const D: usize>(
    shown: String,
    name: String,
    rows: CsvRows<UsageRecordNd<D>>,
) -> NdInput<D> {
    let names = rows.ids.iter().map(str::to_string).collect();
    let records = rows.records;
    let num_ops = records.iter().map(|r| r.last_op + 1).max().unwrap_or(0);
    NdInput {
        source: shown,
        name,
        records,
        names,
        num_ops,
    }
}

/// Reads a CSV of either kind of size.
pub fn from_any_csv(path: &Path, inclusive: bool) -> Result<AnyInput, Failure> {
    let shown = path.display().to_string();
    let text = std::fs::read(path).map_err(|e| {
        eprintln!("{shown}: error: cannot read the file: {e}");
        Failure::Reported
    })?;
    let text = String::from_utf8(text).map_err(|e| {
        eprintln!(
            "{shown}: error: the file is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        );
        Failure::Reported
    })?;
    let rows = read_any_records_columns(&text, inclusive).map_err(|e| {
        eprintln!("{shown}:{}: error: {}", e.line, e.kind);
        Failure::Reported
    })?;
    drop(text);
    let name = path
        .file_stem()
        .map_or_else(|| "records".into(), |s| s.to_string_lossy().into_owned());
    let CsvRows {
        ids: names,
        records,
    } = match rows {
        AnyCsvRows::Bytes(rows) => rows,
        AnyCsvRows::Dims2(rows) => return Ok(AnyInput::Dims2(nd_input(shown, name, rows))),
        AnyCsvRows::Dims3(rows) => return Ok(AnyInput::Dims3(nd_input(shown, name, rows))),
    };
    let num_ops = records.iter().map(|r| r.last_op + 1).max().unwrap_or(0);
    Ok(AnyInput::Bytes(PlanInput {
        source: shown,
        name,
        names,
        records,
        num_ops,
        model: None,
    }))
}

/// Loads either a model (a dynamic one at `dims`) or a CSV, as the command line says.
pub fn load(
    model: Option<&Path>,
    records: Option<&Path>,
    inclusive: bool,
    dims: &Bindings,
    flag: Option<&str>,
) -> Result<PlanInput, Failure> {
    match (model, records) {
        (Some(m), None) => from_model(m, dims, flag),
        (None, Some(r)) => from_csv(r, inclusive),
        _ => Err(Failure::Usage(
            "give either a MODEL.tir or --records FILE.csv".into(),
        )),
    }
}
