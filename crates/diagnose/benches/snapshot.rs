//! Snapshot decode throughput: `cargo bench -p vramfit-diagnose --bench snapshot`
//! decodes a generated 64 MiB snapshot (protocol 4, the default of
//! `pickle.dump` on Python 3.8–3.13, and protocol 2) from memory and from
//! the file, and reports MB/s (criterion's `thrpt` in bytes). Needs python3
//! to build the file once (benches/make_big_snapshot.py).

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use vramfit_diagnose::snapshot;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_decode");
    g.sample_size(10);
    for protocol in [4u8, 2] {
        let path = match common::snapshot(64, protocol) {
            Ok(p) => p,
            Err(why) => {
                eprintln!("snapshot bench skipped: {why}");
                return;
            }
        };
        let bytes = std::fs::read(&path).expect("read the generated snapshot");
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("64MiB_p{protocol}_from_memory"), |b| {
            b.iter(|| black_box(snapshot::load(black_box(&bytes)).expect("decodes")))
        });
        g.bench_function(format!("64MiB_p{protocol}_streamed_from_file"), |b| {
            b.iter(|| {
                let f = std::fs::File::open(&path).expect("open");
                black_box(snapshot::load_reader(f, bytes.len() as u64).expect("decodes"))
            })
        });
        let snap = snapshot::load(&bytes).expect("decodes");
        g.bench_function(format!("64MiB_p{protocol}_analyze"), |b| b.iter(|| black_box(snap.analyze())));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
