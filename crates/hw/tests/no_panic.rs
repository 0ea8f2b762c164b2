//! Parsers are total: random edits of real fixtures give a value or an error, never a panic.

use proptest::prelude::*;
use std::path::PathBuf;

fn read(rel: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)).unwrap()
}

/// Cut, duplicate or replace a span of `base`.
fn mutate(base: &str, a: usize, b: usize, ins: &str, op: u8) -> String {
    let chars: Vec<char> = base.chars().collect();
    let n = chars.len().max(1);
    let (i, j) = ((a % n).min(b % n), (a % n).max(b % n));
    let head: String = chars[..i].iter().collect();
    let mid: String = chars[i..j].iter().collect();
    let tail: String = chars[j..].iter().collect();
    match op % 3 {
        0 => head + &tail,
        1 => head + &mid + &mid + &tail,
        _ => head + ins + &tail,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mutated_fixtures_never_panic(a in any::<usize>(), b in any::<usize>(), ins in "[ -~\n\t|:{}<>/]{0,24}", op in any::<u8>()) {
        let x = mutate(&read("nvidia_smi/01.xml"), a, b, &ins, op);
        let _ = vramfit_hw::xml::parse_xml(&x, "m.xml");
        let t = mutate(&read("nvidia_smi/13.txt"), a, b, &ins, op);
        if let Ok(t) = vramfit_hw::topo::parse_topo(&t, "m.txt") {
            prop_assert!(t.links.iter().all(|r| r.len() == t.gpus.len()));
        }
        let q = mutate(&read("constructed/a100-40gb-mig.q.txt"), a, b, &ins, op);
        let _ = vramfit_hw::text::parse_text(&q, "q.txt");
        let l = mutate(&read("nvidia_smi/11.txt"), a, b, &ins, op);
        let _ = vramfit_hw::list::parse_list(&l, "l.txt");
        let p = mutate(&read("constructed/a100-40gb.lgip.txt"), a, b, &ins, op);
        let _ = vramfit_hw::mig::parse_lgip(&p, "p.txt");
        let pp = mutate(&read("constructed/a100-40gb.lgipp.txt"), a, b, &ins, op);
        let _ = vramfit_hw::mig::parse_lgipp(&pp, "pp.txt");
        let gi = mutate(&read("constructed/a100-40gb.lgi.txt"), a, b, &ins, op);
        let _ = vramfit_hw::mig::parse_lgi(&gi, "gi.txt");
        let t = mutate(&read("derived/12-ansi-crlf.topo.txt"), a, b, &ins, op);
        let _ = vramfit_hw::topo::parse_topo(&t, "t.txt");
        let bt = mutate(&read("bandwidth/autodl-2080ti.bandwidthTest.txt"), a, b, &ins, op);
        if let Ok(x) = vramfit_hw::bandwidth::bandwidth_test::parse_bandwidth_test(&bt, "b.txt") {
            prop_assert!(x.transfers.iter().all(|t| t.gbs.is_finite() && t.gbs >= 0.0));
        }
        let p = mutate(&read("bandwidth/autodl-2080ti.p2p.txt"), a, b, &ins, op);
        if let Ok(x) = vramfit_hw::bandwidth::p2p::parse_p2p(&p, "p.txt") {
            let n = x.size();
            prop_assert!(x.matrices.iter().all(|m| m.values.len() == n && m.values.iter().all(|r| r.len() == n)));
            prop_assert!(x.access.len() == n);
        }
        let nc = mutate(&read("bandwidth/autodl-2080ti.all_reduce.txt"), a, b, &ins, op);
        let _ = vramfit_hw::bandwidth::nccl::parse_nccl(&nc, "n.txt");
    }
}
