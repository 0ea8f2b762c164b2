//! `nvidia-smi -q -x` at the sizes people have and the sizes an attacker
//! sends (issue 15: 130 000 `<gpu>` elements in a 16 MB file took 16 s):
//! parsing the most GPUs a file may list, merging two readings of them, and
//! refusing 130 000 by count.

use criterion::{criterion_group, criterion_main, Criterion};
use vramfit_hw::machine::MAX_GPUS;
use vramfit_hw::{xml, Machine};

fn log(n: usize) -> String {
    let gpu = "<gpu id=\"00000000:01:00.0\"><product_name>NVIDIA A100-SXM4-80GB</product_name>\
               <fb_memory_usage><total>81920 MiB</total></fb_memory_usage></gpu>\n";
    format!("<nvidia_smi_log><attached_gpus>{n}</attached_gpus>\n{}</nvidia_smi_log>\n", gpu.repeat(n))
}

fn bench(c: &mut Criterion) {
    let most = log(MAX_GPUS);
    c.bench_function("parse_xml 256 gpus", |b| b.iter(|| xml::parse_xml(&most, "b.xml").unwrap()));
    let parsed = xml::parse_xml(&most, "b.xml").unwrap();
    c.bench_function("merge 256 gpus twice", |b| {
        b.iter(|| {
            let mut m = Machine::default();
            m.merge(parsed.clone());
            m.merge(parsed.clone());
            m
        })
    });
    let flood = log(130_000);
    c.bench_function("refuse 130k gpus (16 MB)", |b| b.iter(|| xml::parse_xml(&flood, "b.xml").unwrap_err()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
