//! The CSV form of usage records: one behaviour per test; every rejection names its line.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tir_planner::csv::{read_records_csv, write_records_csv, CsvError, CsvErrorKind, CsvRecord};
use tir_planner::UsageRecord;

fn rec(id: &str, first_op: usize, last_op: usize, size: u64) -> CsvRecord {
    CsvRecord {
        id: id.to_string(),
        record: UsageRecord {
            first_op,
            last_op,
            size,
        },
    }
}

/// Reads `text` expecting a rejection on `line`, and checks that the message says so.
fn rejected(text: &str, inclusive: bool, line: u64) -> CsvError {
    let err = match read_records_csv(text, inclusive) {
        Ok(records) => panic!("accepted {text:?} as {records:?}"),
        Err(err) => err,
    };
    assert_eq!(err.line, line, "{err}");
    assert!(
        err.to_string().starts_with(&format!("line {line}: ")),
        "{err}"
    );
    err
}

// ---- accepted input -------------------------------------------------------------------------

#[test]
fn half_open_lifetime_becomes_closed() {
    let records = read_records_csv("id,lower,upper,size\n0,2,5,64\n", false).unwrap();
    assert_eq!(records, vec![rec("0", 2, 4, 64)]);
}

#[test]
fn inclusive_lifetime_is_kept() {
    let records = read_records_csv("id,lower,upper,size\n0,2,5,64\n", true).unwrap();
    assert_eq!(records, vec![rec("0", 2, 5, 64)]);
}

#[test]
fn inclusive_accepts_single_operator_lifetime() {
    let records = read_records_csv("id,lower,upper,size\n7,3,3,8\n", true).unwrap();
    assert_eq!(records, vec![rec("7", 3, 3, 8)]);
}

#[test]
fn columns_are_found_by_header_name() {
    let records = read_records_csv("size,upper,id,lower\n64,5,a,2\n", false).unwrap();
    assert_eq!(records, vec![rec("a", 2, 4, 64)]);
}

#[test]
fn surrounding_whitespace_is_tolerated() {
    let text = "  id , lower,upper ,size\n  x1 ,  0 , 3,\t16  \n";
    assert_eq!(
        read_records_csv(text, false).unwrap(),
        vec![rec("x1", 0, 2, 16)]
    );
}

#[test]
fn offset_column_is_ignored() {
    let text = "id,lower,upper,size,offset\n0,0,1,8,128\n1,1,2,8,\n";
    let records = read_records_csv(text, false).unwrap();
    assert_eq!(records, vec![rec("0", 0, 0, 8), rec("1", 1, 1, 8)]);
}

#[test]
fn header_without_rows_is_an_empty_record_set() {
    assert_eq!(
        read_records_csv("id,lower,upper,size\n", false).unwrap(),
        vec![]
    );
    assert_eq!(
        read_records_csv("id,lower,upper,size", false).unwrap(),
        vec![]
    );
}

#[test]
fn blank_lines_and_crlf_are_accepted() {
    let text = "id,lower,upper,size\r\n\r\n0,0,1,8\r\n\r\n1,0,2,4\r\n";
    assert_eq!(
        read_records_csv(text, false).unwrap(),
        vec![rec("0", 0, 0, 8), rec("1", 0, 1, 4)]
    );
}

#[test]
fn byte_order_mark_is_skipped() {
    let text = "\u{feff}id,lower,upper,size\n0,0,1,8\n";
    assert_eq!(
        read_records_csv(text, false).unwrap(),
        vec![rec("0", 0, 0, 8)]
    );
}

#[test]
fn ids_are_kept_as_text() {
    let text = "id,lower,upper,size\nb1,0,3,4\n007,3,9,4\n\"a,b\",0,1,1\n";
    let ids: Vec<_> = read_records_csv(text, false)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["b1", "007", "a,b"]);
}

#[test]
fn row_order_is_preserved() {
    let text = "id,lower,upper,size\n2,0,1,8\n0,0,1,8\n1,0,1,8\n";
    let ids: Vec<_> = read_records_csv(text, false)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["2", "0", "1"]);
}

// ---- rejected input -------------------------------------------------------------------------

#[test]
fn empty_input_is_rejected() {
    let err = rejected("", false, 1);
    assert_eq!(err.kind, CsvErrorKind::Empty);
}

#[test]
fn blank_only_input_is_rejected() {
    let err = rejected("\n\n  \n", false, 1);
    assert!(
        matches!(
            err.kind,
            CsvErrorKind::Empty | CsvErrorKind::MissingColumn { .. }
        ),
        "{err}"
    );
}

#[test]
fn missing_column_is_rejected() {
    let err = rejected("id,lower,size\n0,0,8\n", false, 1);
    assert_eq!(err.kind, CsvErrorKind::MissingColumn { column: "upper" });
    assert_eq!(err.column(), Some("upper"));
}

#[test]
fn header_missing_is_rejected() {
    let err = rejected("0,0,1,8\n", false, 1);
    assert_eq!(err.kind, CsvErrorKind::UnknownColumn { column: "0".into() });
}

#[test]
fn unknown_column_is_rejected() {
    let err = rejected("id,lower,upper,size,colour\n0,0,1,8,red\n", false, 1);
    assert_eq!(err.column(), Some("colour"));
}

#[test]
fn duplicate_column_is_rejected() {
    let err = rejected("id,lower,upper,size,lower\n0,0,1,8,0\n", false, 1);
    assert_eq!(
        err.kind,
        CsvErrorKind::DuplicateColumn {
            column: "lower".into()
        }
    );
}

#[test]
fn too_few_fields_are_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,8\n1,0,1\n", false, 3);
    assert_eq!(
        err.kind,
        CsvErrorKind::FieldCount {
            expected: 4,
            found: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "line 3: expected 4 fields as in the header, got 3"
    );
}

#[test]
fn too_many_fields_are_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,8,\n", false, 2);
    assert_eq!(
        err.kind,
        CsvErrorKind::FieldCount {
            expected: 4,
            found: 5
        }
    );
}

#[test]
fn line_numbers_count_blank_lines() {
    let err = rejected("id,lower,upper,size\n\n0,0,1,8\n\n1,0,x,8\n", false, 5);
    assert_eq!(err.column(), Some("upper"));
}

#[test]
fn non_integer_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,8\n1,0.5,2,8\n", false, 3);
    assert_eq!(
        err.kind,
        CsvErrorKind::NotAnInteger {
            column: "lower",
            value: "0.5".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "line 3: `lower` must be an integer, got \"0.5\""
    );
}

#[test]
fn empty_number_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,\n", false, 2);
    assert_eq!(err.column(), Some("size"));
}

#[test]
fn negative_operator_index_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,-1,2,8\n", false, 2);
    assert_eq!(
        err.kind,
        CsvErrorKind::Negative {
            column: "lower",
            value: "-1".into()
        }
    );
}

#[test]
fn zero_size_is_rejected() {
    let err = rejected(
        "id,lower,upper,size\n0,0,1,8\n1,0,1,8\n2,0,1,8\n3,0,1,8\n4,0,1,8\n5,0,1,0\n",
        false,
        7,
    );
    assert_eq!(err.to_string(), "line 7: size must be positive, got 0");
}

#[test]
fn negative_size_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,-8\n", false, 2);
    assert_eq!(err.to_string(), "line 2: size must be positive, got -8");
}

#[test]
fn size_overflowing_u64_is_rejected() {
    let err = rejected(
        "id,lower,upper,size\n0,0,1,18446744073709551616\n",
        false,
        2,
    );
    assert!(
        matches!(err.kind, CsvErrorKind::Overflow { column: "size", .. }),
        "{err}"
    );
}

#[test]
fn largest_u64_size_is_accepted() {
    let records = read_records_csv("id,lower,upper,size\n0,0,1,18446744073709551615\n", false);
    assert_eq!(records.unwrap(), vec![rec("0", 0, 0, u64::MAX)]);
}

#[test]
fn empty_half_open_lifetime_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,4,4,8\n", false, 2);
    assert_eq!(
        err.to_string(),
        "line 2: lower must be less than upper in a half-open interval, got [4, 4)"
    );
}

#[test]
fn reversed_half_open_lifetime_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,5,4,8\n", false, 2);
    assert!(matches!(
        err.kind,
        CsvErrorKind::EmptyLifetime {
            lower: 5,
            upper: 4,
            ..
        }
    ));
}

#[test]
fn reversed_inclusive_lifetime_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,1,1,8\n1,5,4,8\n", true, 3);
    assert_eq!(
        err.to_string(),
        "line 3: lower must not exceed upper in a closed interval, got [5, 4]"
    );
}

#[test]
fn inclusive_upper_at_the_largest_u64_is_rejected_at_upper() {
    // Closed `[0, u64::MAX]` spans 2^64 operators: the count does not fit in 64 bits.
    let err = rejected(
        "id,lower,upper,size\n0,0,18446744073709551615,16\n",
        true,
        2,
    );
    assert_eq!(
        err.kind,
        CsvErrorKind::ClosedUpperTooLarge { upper: u64::MAX }
    );
    assert_eq!(err.column(), Some("upper"));
}

#[test]
fn half_open_upper_at_the_largest_u64_is_accepted() {
    let records =
        read_records_csv("id,lower,upper,size\n0,0,18446744073709551615,16\n", false).unwrap();
    assert_eq!(records, vec![rec("0", 0, usize::MAX - 1, 16)]);
}

#[test]
fn a_megabyte_field_is_shortened_in_the_message() {
    let field = "x".repeat(1 << 20);
    let err = rejected(&format!("id,lower,upper,size\n0,0,{field},8\n"), false, 2);
    let message = err.to_string();
    assert!(
        message.len() < 200,
        "{} bytes: {}",
        message.len(),
        &message[..300]
    );
    assert!(
        message.ends_with(&format!("{:?}... (1048576 characters)", "x".repeat(100))),
        "{message}"
    );
}

#[test]
fn a_megabyte_duplicate_id_is_shortened_in_the_message() {
    let id = "y".repeat(1 << 20);
    let err = rejected(
        &format!("id,lower,upper,size\n{id},0,1,8\n{id},0,1,8\n"),
        false,
        3,
    );
    assert!(err.to_string().len() < 200, "{}", &err.to_string()[..300]);
}

#[test]
fn duplicate_id_is_rejected() {
    let err = rejected("id,lower,upper,size\n0,0,1,8\n1,0,1,8\n0,2,3,8\n", false, 4);
    assert_eq!(
        err.to_string(),
        "line 4: duplicate id \"0\" (first on line 2)"
    );
}

#[test]
fn empty_id_is_rejected() {
    let err = rejected("id,lower,upper,size\n ,0,1,8\n", false, 2);
    assert_eq!(err.kind, CsvErrorKind::EmptyId { column: "id" });
}

#[test]
fn unterminated_quote_is_rejected_or_read_without_panic() {
    // The csv crate reads an unterminated quote to the end of input: one field, so a field count
    // error on the line where the row starts.
    let err = rejected("id,lower,upper,size\n\"0,0,1,8\n1,0,1,8\n", false, 2);
    assert!(matches!(
        err.kind,
        CsvErrorKind::FieldCount { .. } | CsvErrorKind::Malformed { .. }
    ));
}

// ---- writing --------------------------------------------------------------------------------

#[test]
fn write_is_half_open_by_default() {
    let text = write_records_csv(&[rec("0", 2, 4, 64), rec("b", 0, 0, 8)], None, false);
    assert_eq!(text, "id,lower,upper,size\n0,2,5,64\nb,0,1,8\n");
}

#[test]
fn write_inclusive_keeps_closed_lifetime() {
    let text = write_records_csv(&[rec("0", 2, 4, 64)], None, true);
    assert_eq!(text, "id,lower,upper,size\n0,2,4,64\n");
}

#[test]
fn write_adds_offset_column() {
    let text = write_records_csv(
        &[rec("0", 0, 1, 8), rec("1", 1, 2, 8)],
        Some(&[0, 8]),
        false,
    );
    assert_eq!(text, "id,lower,upper,size,offset\n0,0,2,8,0\n1,1,3,8,8\n");
}

#[test]
fn write_leaves_missing_offsets_empty() {
    let text = write_records_csv(&[rec("0", 0, 1, 8), rec("1", 1, 2, 8)], Some(&[16]), false);
    assert_eq!(text, "id,lower,upper,size,offset\n0,0,2,8,16\n1,1,3,8,\n");
}

#[test]
fn write_of_nothing_is_a_header() {
    assert_eq!(write_records_csv(&[], None, false), "id,lower,upper,size\n");
    assert_eq!(
        read_records_csv(&write_records_csv(&[], None, false), false).unwrap(),
        vec![]
    );
}

#[test]
fn write_quotes_ids_that_need_it() {
    let text = write_records_csv(&[rec("a,\"b\"", 0, 0, 1)], None, false);
    assert_eq!(text, "id,lower,upper,size\n\"a,\"\"b\"\"\",0,1,1\n");
}

#[test]
fn write_does_not_wrap_at_the_last_operator_index() {
    let text = write_records_csv(&[rec("0", 0, usize::MAX, 1)], None, false);
    assert!(
        text.ends_with(&format!(",{},1\n", usize::MAX as u128 + 1)),
        "{text}"
    );
}

// ---- properties -----------------------------------------------------------------------------

fn arb_record() -> impl Strategy<Value = (String, usize, usize, u64)> {
    // Ids as in the wild plus ones that need quoting; never empty, never padded (the reader trims).
    let id = prop_oneof![
        "[0-9]{1,6}",
        "[a-z%_.][a-z0-9_.]{0,8}",
        "[a-z]{1,3}[,\"][a-z\" ,]{0,4}[a-z]",
    ];
    (id, 0usize..10_000, 0usize..500, 1u64..=u64::MAX)
        .prop_map(|(id, first, len, size)| (id, first, first + len, size))
}

fn arb_records() -> impl Strategy<Value = Vec<CsvRecord>> {
    prop::collection::vec(arb_record(), 0..40).prop_map(|raw| {
        let mut seen = std::collections::HashSet::new();
        raw.into_iter()
            .filter(|(id, ..)| seen.insert(id.clone()))
            .map(|(id, first, last, size)| rec(&id, first, last, size))
            .collect()
    })
}

proptest! {
    #[test]
    fn write_then_read_round_trips(
        records in arb_records(),
        inclusive in any::<bool>(),
        with_offsets in any::<bool>(),
    ) {
        let offsets: Vec<u64> = (0..records.len() as u64).map(|i| i * 64).collect();
        let text = write_records_csv(&records, with_offsets.then_some(&offsets[..]), inclusive);
        prop_assert_eq!(read_records_csv(&text, inclusive).unwrap(), records);
    }

    #[test]
    fn reading_arbitrary_text_never_panics(text in "[ -~\n\r\"]{0,200}", inclusive in any::<bool>()) {
        let _ = read_records_csv(&text, inclusive);
        let _ = read_records_csv(&format!("id,lower,upper,size\n{text}"), inclusive);
    }

    #[test]
    fn reading_arbitrary_rows_never_panics(
        rows in prop::collection::vec(
            prop::collection::vec("-?[0-9]{0,21}|[a-z ]{0,3}", 0..6), 0..8),
        inclusive in any::<bool>(),
    ) {
        let mut text = String::from("id,lower,upper,size\n");
        for row in rows {
            text.push_str(&row.join(","));
            text.push('\n');
        }
        match read_records_csv(&text, inclusive) {
            Ok(records) => for r in records {
                prop_assert!(r.record.first_op <= r.record.last_op);
                prop_assert!(r.record.size > 0);
            },
            Err(err) => {
                let prefix = format!("line {}: ", err.line);
                prop_assert!(err.to_string().starts_with(&prefix), "{}", err);
            }
        }
    }
}

// ---- the public benchmark instances ---------------------------------------------------------

fn benchmark_csvs() -> Option<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/benchmarks");
    if !root.is_dir() {
        println!(
            "note: {} is absent; skipping the benchmark CSVs",
            root.display()
        );
        return None;
    }
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "csv") {
                files.push(path);
            }
        }
    }
    files.sort();
    Some(files)
}

#[test]
fn every_benchmark_csv_reads_and_round_trips() {
    let Some(files) = benchmark_csvs() else {
        return;
    };
    assert!(!files.is_empty(), "no CSV under shared/benchmarks");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let records =
            read_records_csv(&text, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rows = text.lines().filter(|l| !l.trim().is_empty()).count() - 1;
        assert_eq!(records.len(), rows, "{}", path.display());
        assert!(records
            .iter()
            .all(|r| r.record.first_op <= r.record.last_op && r.record.size > 0));

        let offsets: Vec<u64> = vec![0; records.len()];
        let again = read_records_csv(&write_records_csv(&records, Some(&offsets), false), false);
        assert_eq!(again.unwrap(), records, "{}", path.display());
    }
}

#[test]
fn minimalloc_example_reads_as_published() {
    let Some(files) = benchmark_csvs() else {
        return;
    };
    let Some(path) = files
        .iter()
        .find(|p| p.ends_with("minimalloc-challenging/input.12.csv"))
    else {
        println!("note: input.12.csv is absent; skipping");
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let records = read_records_csv(&text, false).unwrap();
    assert_eq!(records[0], rec("b1", 0, 2, 4));
    assert_eq!(records[1], rec("b2", 3, 8, 4));
    assert_eq!(records.len(), 5);
}

// ---- multi-dimensional sizes ----------------------------------------------------------------

mod multidim {
    use tir_planner::csv::{
        read_any_records_csv, read_records_csv, CsvErrorKind, CsvRecordNd, CsvRecords,
    };
    use tir_planner::multidim::UsageRecordNd;

    fn any_rejected(text: &str, line: u64) -> tir_planner::csv::CsvError {
        let err = read_any_records_csv(text, false).expect_err(text);
        assert_eq!(err.line, line, "{err}");
        err
    }

    #[test]
    fn w_h_columns_read_as_2d_sizes_in_any_order() {
        let read = read_any_records_csv("h,id,w,upper,lower\n8,a,2,4,1\n", false).unwrap();
        assert_eq!(
            read,
            CsvRecords::Dims2(vec![CsvRecordNd {
                id: "a".into(),
                record: UsageRecordNd::new([2, 8], 1, 3),
            }])
        );
    }

    #[test]
    fn w_h_d_columns_read_as_3d_sizes_closed_with_inclusive() {
        let read = read_any_records_csv("id,lower,upper,w,h,d\n0,1,1,4,3,2\n", true).unwrap();
        assert_eq!(
            read,
            CsvRecords::Dims3(vec![CsvRecordNd {
                id: "0".into(),
                record: UsageRecordNd::new([4, 3, 2], 1, 1),
            }])
        );
    }

    #[test]
    fn byte_sizes_read_as_before() {
        let read = read_any_records_csv("id,lower,upper,size\n0,0,2,64\n", false).unwrap();
        let CsvRecords::Bytes(rows) = read else {
            panic!("{read:?}")
        };
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn a_zero_extent_names_its_line_and_column() {
        let err = any_rejected("id,lower,upper,w,h\n0,0,2,4,4\n1,1,3,4,0\n", 3);
        assert_eq!(err.column(), Some("h"));
        assert_eq!(err.to_string(), "line 3: h must be positive, got 0");
    }

    #[test]
    fn a_bad_depth_names_its_line_and_column() {
        let err = any_rejected("id,lower,upper,w,h,d\n\n0,0,2,4,4,x\n", 3);
        assert_eq!(err.column(), Some("d"));
        assert!(
            matches!(err.kind, CsvErrorKind::NotAnInteger { .. }),
            "{err}"
        );
        let err = any_rejected("id,lower,upper,w,h,d\n0,0,2,4,4,-1\n", 2);
        assert!(matches!(
            err.kind,
            CsvErrorKind::NonPositiveSize { column: "d", .. }
        ));
    }

    #[test]
    fn size_and_dimensions_together_are_refused() {
        let err = any_rejected("id,lower,upper,size,w,h\n", 1);
        assert_eq!(err.kind, CsvErrorKind::MixedSizes);
    }

    #[test]
    fn a_width_without_a_height_is_refused() {
        let err = any_rejected("id,lower,upper,w\n", 1);
        assert_eq!(err.kind, CsvErrorKind::MissingColumn { column: "h" });
        let err = any_rejected("id,lower,upper,h,d\n", 1);
        assert_eq!(err.kind, CsvErrorKind::MissingColumn { column: "w" });
    }

    #[test]
    fn duplicate_ids_and_empty_lifetimes_are_refused_as_for_bytes() {
        let err = any_rejected("id,lower,upper,w,h\na,0,2,1,1\na,3,4,1,1\n", 3);
        assert!(matches!(
            err.kind,
            CsvErrorKind::DuplicateId { first_line: 2, .. }
        ));
        let err = any_rejected("id,lower,upper,w,h\na,2,2,1,1\n", 2);
        assert!(matches!(err.kind, CsvErrorKind::EmptyLifetime { .. }));
    }

    #[test]
    fn the_byte_reader_refuses_dimensions_at_the_header() {
        let err = read_records_csv("id,lower,upper,w,h\n0,0,2,4,4\n", false).unwrap_err();
        assert_eq!(err.line, 1);
        assert_eq!(err.kind, CsvErrorKind::MultiDimensional { columns: "w,h" });
    }
}

// ---- rows of plain digits, read in one pass: each way out of that pass ---------------------

/// A file of `n` rows of plain digits (ids 0..n, sizes 8), lines ended by `end`.
fn plain_rows(n: usize, end: &str) -> String {
    let mut text = format!("id,lower,upper,size{end}");
    for i in 0..n {
        text.push_str(&format!("{i},{i},{},8{end}", i + 2));
    }
    text
}

#[test]
fn crlf_and_trailing_blank_lines_read_as_lf() {
    let lf = read_records_csv(&plain_rows(5, "\n"), false).expect("reads");
    assert_eq!(lf.len(), 5);
    assert_eq!(lf[4], rec("4", 4, 5, 8));
    let crlf = plain_rows(5, "\r\n");
    assert_eq!(read_records_csv(&crlf, false).expect("reads"), lf);
    assert_eq!(
        read_records_csv(&format!("{crlf}\r\n\r\n"), false).expect("reads"),
        lf
    );
    assert_eq!(
        read_records_csv(&format!("{}\n\n", plain_rows(5, "\n")), false).expect("reads"),
        lf
    );
    // The last row without a line break.
    let unterminated = plain_rows(5, "\n");
    assert_eq!(
        read_records_csv(unterminated.trim_end(), false).expect("reads"),
        lf
    );
}

#[test]
fn malformed_number_after_plain_rows_names_line_and_column() {
    let text = format!("{}5,5x,7,8\n", plain_rows(5, "\n"));
    let err = rejected(&text, false, 7);
    assert_eq!(
        err.kind,
        CsvErrorKind::NotAnInteger {
            column: "lower",
            value: "5x".into()
        }
    );
    let text = format!("{}5,5,7,8.5\r\n", plain_rows(5, "\r\n"));
    let err = rejected(&text, false, 7);
    assert_eq!(err.column(), Some("size"));
    assert_eq!(
        err.to_string(),
        "line 7: `size` must be an integer, got \"8.5\""
    );
}

#[test]
fn missing_and_empty_fields_after_plain_rows_are_rejected() {
    // The last row, unterminated, lacks its size.
    let text = format!("{}5,5,7", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(
        err.kind,
        CsvErrorKind::FieldCount {
            expected: 4,
            found: 3
        }
    );
    let text = format!("{}5,,7,8\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(err.column(), Some("lower"));
    let text = format!("{},5,7,8\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(err.kind, CsvErrorKind::EmptyId { column: "id" });
    let text = format!("{}5,5,7,8,\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(
        err.kind,
        CsvErrorKind::FieldCount {
            expected: 4,
            found: 5
        }
    );
}

#[test]
fn numbers_at_the_edge_of_64_bits_are_read_or_rejected() {
    // 19 digits always fit; 20 may or may not.
    let text = "id,lower,upper,size\n0,0,1,9999999999999999999\n1,0,1,18446744073709551615\n";
    let records = read_records_csv(text, false).expect("reads");
    assert_eq!(records[0].record.size, 9_999_999_999_999_999_999);
    assert_eq!(records[1].record.size, u64::MAX);
    let text = format!("{}3,0,1,99999999999999999999\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(
        err.kind,
        CsvErrorKind::Overflow {
            column: "size",
            value: "99999999999999999999".into()
        }
    );
    let text = format!("{}3,18446744073709551616,1,8\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(err.column(), Some("lower"));
    assert!(matches!(err.kind, CsvErrorKind::Overflow { .. }), "{err}");
    // Leading zeros do not count towards the 19 digits' safety, but the value is the same.
    let text = "id,lower,upper,size\n0,0,1,000000000000000000008\n";
    assert_eq!(
        read_records_csv(text, false).expect("reads")[0].record.size,
        8
    );
}

#[test]
fn values_refused_after_a_plain_row_is_read_are_diagnosed() {
    // A size of 0 and an empty lifetime are read by the one-pass reader, then refused, and
    // the general path names them.
    let text = format!("{}3,0,1,0\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(err.to_string(), "line 5: size must be positive, got 0");
    let text = format!("{}3,4,4,8\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert!(
        matches!(
            err.kind,
            CsvErrorKind::EmptyLifetime {
                lower: 4,
                upper: 4,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        rejected(&format!("{}3,5,4,8\n", plain_rows(3, "\n")), true, 5).column(),
        Some("upper")
    );
    // Duplicates among plain rows still name both lines.
    let text = format!("{}1,0,1,8\n", plain_rows(3, "\n"));
    let err = rejected(&text, false, 5);
    assert_eq!(
        err.kind,
        CsvErrorKind::DuplicateId {
            id: "1".into(),
            first_line: 3
        }
    );
    // Ids with leading zeros are text, kept as written.
    let text = "id,lower,upper,size\n007,0,1,8\n7,0,1,8\n";
    let records = read_records_csv(text, false).expect("reads");
    assert_eq!(records[0].id, "007");
    assert_eq!(records[1].id, "7");
}

#[test]
fn plain_rows_in_any_column_order_and_with_offsets_read_the_same() {
    let text = "size,upper,offset,id,lower\n8,2,0,0,0\n16,3,,1,1\n24,4,8,2,2\n";
    assert_eq!(
        read_records_csv(text, false).expect("reads"),
        vec![rec("0", 0, 1, 8), rec("1", 1, 2, 16), rec("2", 2, 3, 24)]
    );
}
