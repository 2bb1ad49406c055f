//! Every scheduler on every zoo model: a valid topological order that changes only the layout,
//! whose plan passes the checker; and `reorder{scheduler=exact},plan,bufferize` verifies.

mod reorder_common;

use reorder_common::*;
use std::path::PathBuf;
use std::time::Duration;
use tir_passes::pipeline::{parse_pipeline, run_pipeline};
use tir_passes::reorder::{self, layout_of, Budget, Dag, Scheduler};

const ALIGN: u64 = 64;

fn zoo() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            (p.display().to_string(), text)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_scheduler_on_every_zoo_model() {
    // A small budget keeps the debug run short; validity does not depend on it.
    let budget = Budget {
        time: Duration::from_millis(300),
        states: 200,
    };
    let models = zoo();
    assert!(models.len() >= 10, "the zoo is missing");
    for (path, text) in models {
        let module = parse(&text);
        let dag = Dag::from_function(entry(&module), ALIGN).expect("dag");
        for s in Scheduler::ALL {
            let sched = reorder::schedule(&dag, s, budget, ALIGN).expect("schedule");
            assert!(dag.is_topological(&sched.order), "{path}: {s}");
            let mut after = module.clone();
            after.entry_mut().expect("main").layout = layout_of(entry(&module), &dag, &sched.order);
            check_reordered(&module, &mut after, &dag, &sched.order, ALIGN);
            if let Some(e) = &sched.exact {
                assert!(e.lower_bound <= e.peak, "{path}: bound above the peak");
            }
        }
    }
}

#[test]
fn reorder_plan_bufferize_pipeline_verifies() {
    for name in ["googlenet.tir", "randwire_ws.tir"] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name);
        let text = std::fs::read_to_string(&path).expect("read");
        let mut module = parse(&text);
        let passes =
            parse_pipeline("reorder{scheduler=exact,budget=300ms,states=200},plan,bufferize")
                .expect("pipeline");
        let stats = run_pipeline(&mut module, &passes, true, |_, _| {}).expect("runs and verifies");
        assert_eq!(stats[0].pass, "reorder");
    }
}

#[test]
fn pipeline_rejects_bad_reorder_options() {
    assert!(parse_pipeline("reorder{scheduler=nope}").is_err());
    assert!(parse_pipeline("reorder{budget=soon}").is_err());
    assert!(parse_pipeline("reorder{colour=red}").is_err());
    assert!(parse_pipeline("reorder{scheduler=list,budget=2s,states=10}").is_ok());
}
