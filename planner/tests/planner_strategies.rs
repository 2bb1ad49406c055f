//! Strategy names: snake_case, unique, and parsed back by `FromStr`.

use std::collections::HashSet;

use tir_planner::{OffsetStrategy, PlanError, SharedObjectStrategy};

#[test]
fn names_round_trip() {
    for s in SharedObjectStrategy::ALL
        .into_iter()
        .chain([SharedObjectStrategy::Best])
    {
        assert_eq!(s.name().parse::<SharedObjectStrategy>(), Ok(s));
        assert_eq!(s.to_string(), s.name());
    }
    let objects_best = OffsetStrategy::ObjectsToOffsets(SharedObjectStrategy::Best);
    for s in OffsetStrategy::ALL
        .into_iter()
        .chain([objects_best, OffsetStrategy::Best])
    {
        assert_eq!(s.name().parse::<OffsetStrategy>(), Ok(s));
    }
    assert_eq!(
        "objects:greedy_by_size".parse::<OffsetStrategy>(),
        Ok(OffsetStrategy::ObjectsToOffsets(
            SharedObjectStrategy::GreedyBySize
        ))
    );
}

#[test]
fn names_are_unique_snake_case_and_best_is_not_in_all() {
    let names: Vec<&str> = OffsetStrategy::names();
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
    for name in names.iter().chain(SharedObjectStrategy::names().iter()) {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':'),
            "{name}"
        );
    }
    assert!(!SharedObjectStrategy::ALL.contains(&SharedObjectStrategy::Best));
    assert!(!OffsetStrategy::ALL.contains(&OffsetStrategy::Best));
    assert_eq!(
        OffsetStrategy::ALL.len(),
        7 + SharedObjectStrategy::ALL.len()
    );
}

#[test]
fn unknown_names_list_the_choices() {
    let Err(PlanError::UnknownStrategy { name, expected }) = "buchsbaum".parse::<OffsetStrategy>()
    else {
        panic!("buchsbaum is not implemented and must not parse");
    };
    assert_eq!(name, "buchsbaum");
    assert!(expected.contains("greedy_by_size") && expected.contains("objects:min_cost_flow"));
    assert!(expected.contains("gergov"));
    assert_eq!(
        "gergov".parse::<OffsetStrategy>().ok(),
        Some(OffsetStrategy::Gergov)
    );
    assert!("Greedy_By_Size".parse::<SharedObjectStrategy>().is_err());
}
