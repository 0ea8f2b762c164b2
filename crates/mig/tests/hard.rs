//! A tight packing found by a random stress run (63 services, 7 sizes, on
//! A100-40GB): the lower bound (22 cards) is reached, but proving the least
//! waste needs ~0.7M branch-and-bound nodes with the transposition table
//! (4.5M without it).

mod common;
use common::*;
use vramfit_mig::{check_layout, plan, Placed, Service, ServiceKind};

#[test]
fn sixty_three_services_tight_packing() {
    let gib = [
        15.0, 1.0, 1.0, 1.0, 4.5, 4.5, 15.0, 1.0, 30.0, 9.7, 6.0, 9.7, 15.0, 30.0, 4.5, 15.0, 4.5, 19.0, 6.0, 9.7, 1.0,
        19.0, 1.0, 9.7, 19.0, 6.0, 9.7, 15.0, 30.0, 1.0, 19.0, 6.0, 6.0, 30.0, 4.5, 15.0, 6.0, 1.0, 1.0, 15.0, 30.0,
        1.0, 9.7, 1.0, 30.0, 6.0, 9.7, 1.0, 1.0, 30.0, 19.0, 1.0, 4.5, 4.5, 1.0, 9.7, 9.7, 19.0, 9.7, 9.7, 1.0, 15.0,
        19.0,
    ];
    let s: Vec<Service> = gib
        .iter()
        .enumerate()
        .map(|(i, &g)| Service {
            name: format!("s{i}"),
            need_bytes: (g * GIB as f64).ceil() as u64,
            kind: ServiceKind::Inference,
            params: None,
        })
        .collect();
    let gpu = a100_40gb();
    let p = plan(&gpu, &s).unwrap();
    // 7 x 30 GiB take a 7g.40gb card each; 15 x 15-19 GiB take 3g.20gb (two per card):
    // 15 cards; 17 two-slice + 24 one-slice services need 58 slices and 41 compute
    // slices on the remaining space: 7 more cards.
    assert_eq!(p.gpus, 22);
    assert_eq!(p.search.lower_bound_gpus, 22);
    assert!(p.refused.is_empty());
    for l in &p.layouts {
        let placed: Vec<Placed> = l
            .instances
            .iter()
            .map(|i| Placed { profile: gpu.profile_index(&i.profile).unwrap(), start: i.start })
            .collect();
        check_layout(&gpu, &placed).unwrap();
    }
    assert_eq!(p.layouts.iter().map(|l| l.instances.len()).sum::<usize>(), 63);
}
