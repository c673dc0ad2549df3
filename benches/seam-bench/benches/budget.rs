//! Criterion benchmarks of what budget accounting costs a run (issue 35):
//!
//! - `budget/none`: the full mock-component run of `run/seam`, its caller with no budget (the
//!   run still gets its account, as every run does, and its usage is still counted);
//! - `budget/set`: the same run under a caller whose tree has a budget: each start holds and
//!   settles one run on the caller's account before the run exists, and the run's account
//!   hangs under it.
//!
//! The goal is at most 3% between the two.

use criterion::{criterion_group, criterion_main, Criterion};
use seam_bench::{host, options, request, runtime, time_runs, MOCK};
use seam_host::ledger::Account;
use seam_host::spend::{Budget, Spent};

fn budget(c: &mut Criterion) {
    let rt = runtime();
    let host = rt.block_on(host(options(1000), "", 1000));
    let mut group = c.benchmark_group("budget");
    for name in ["none", "set"] {
        let caller = request().parent.id;
        if name == "set" {
            // Room for every run criterion makes, in every dimension a run start touches.
            let tree = Budget {
                runs: Some(u64::MAX / 2),
                output_tokens: Some(u64::MAX / 2),
                ..Budget::default()
            };
            host.subagents().accounts().insert(Account::root(
                caller.clone(),
                tree,
                Spent::default(),
            ));
        }
        group.bench_function(name, |b| {
            b.iter_custom(|iters| time_runs(&rt, &host, MOCK, iters))
        });
        host.subagents().accounts().remove(&caller);
    }
    group.finish();
    rt.block_on(host.unload_all());
}

criterion_group!(benches, budget);
criterion_main!(benches);
