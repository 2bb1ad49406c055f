//! CSV usage records → `read_records_csv` (half-open and inclusive), as `tirc plan --records`
//! reads them, then what `plan` does with them using only the O(n log n) strategies: the
//! lower bounds, an offsets plan and a shared-objects plan, each validated by the independent
//! checker, and `--emit-csv`'s written form, which must read back as the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tir_passes::planner::checker::{check_offsets, check_shared_objects};
use tir_passes::planner::csv::{read_records_csv, write_records_csv};
use tir_passes::planner::{
    lower_bounds, plan_offsets, plan_shared_objects, OffsetStrategy, SharedObjectStrategy,
    UsageRecord, DEFAULT_ALIGNMENT,
};

fuzz_target!(|data: &[u8]| {
    // The CLI rejects a file that is not UTF-8 before the reader sees it.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for inclusive in [false, true] {
        let rows = match read_records_csv(text, inclusive) {
            Ok(rows) => rows,
            Err(e) => {
                // What the CLI prints: `file:LINE: error: KIND`.
                let _ = format!("fuzz.csv:{}: error: {}", e.line, e.kind);
                let _ = e.column();
                continue;
            }
        };
        let records: Vec<UsageRecord> = rows.iter().map(|r| r.record).collect();
        for align in [1, DEFAULT_ALIGNMENT] {
            plan(&records, align);
        }
        let offsets: Vec<u64> = (0..rows.len() as u64).collect();
        let written = write_records_csv(&rows, Some(&offsets), inclusive);
        match read_records_csv(&written, inclusive) {
            Ok(back) => assert_eq!(back, rows, "written records read back differently"),
            Err(e) => panic!("written records do not read back: {e}\n{written}"),
        }
    }
});

fn plan(records: &[UsageRecord], align: u64) {
    // Errors (sizes that overflow once aligned, ...) are answers; only a panic is a finding.
    let Ok(bounds) = lower_bounds(records, align) else {
        return;
    };
    if let Ok(p) = plan_offsets(records, OffsetStrategy::GreedyBySize, align) {
        if let Err(e) = check_offsets(records, &p, align) {
            panic!("greedy_by_size offsets plan rejected by the checker: {e:?}");
        }
        assert!(
            p.total_size >= bounds.offsets,
            "offsets plan {} below the lower bound {}",
            p.total_size,
            bounds.offsets
        );
    }
    if let Ok(p) = plan_shared_objects(records, SharedObjectStrategy::GreedyBySize, align) {
        if let Err(e) = check_shared_objects(records, &p) {
            panic!("greedy_by_size shared-objects plan rejected by the checker: {e:?}");
        }
        assert!(
            p.cost() >= bounds.shared_objects,
            "shared-objects plan {} below the lower bound {}",
            p.cost(),
            bounds.shared_objects
        );
    }
}
