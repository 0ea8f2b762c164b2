//! The MIG search: the must-show cases (hand-worked), refusals, and
//! proptests (every returned layout obeys the placement rules; the exact
//! search never uses more GPUs, or wastes more, than brute force).

mod common;
use common::*;
use proptest::prelude::*;
use vramfit_mig::{check_layout, find_placement, plan, Advice, MigGpu, Placed, Refusal, Service, ServiceKind};

fn svc(name: &str, bytes: u64) -> Service {
    Service { name: name.into(), need_bytes: bytes, kind: ServiceKind::Inference, params: None }
}

fn placed_of(gpu: &MigGpu, l: &vramfit_mig::GpuLayout) -> Vec<Placed> {
    l.instances.iter().map(|i| Placed { profile: gpu.profile_index(&i.profile).unwrap(), start: i.start }).collect()
}

#[test]
fn twelve_gib_takes_3g_20gb_and_wastes_about_8_gb() {
    let gpu = a100_40gb();
    let p = plan(&gpu, &[svc("chat", 12 * GIB)]).unwrap();
    assert_eq!(p.gpus, 1);
    let i = &p.layouts[0].instances[0];
    // 2g.10gb / 1g.10gb have 9984 MiB < 12288 MiB; 3g.20gb and 4g.20gb both
    // have 20091 MiB: same waste, 3g uses fewer compute slices.
    assert_eq!(i.profile, "3g.20gb");
    // 20091 MiB - 12 GiB = 20091 - 12288 = 7803 MiB = 7.62 GiB = 8.18 GB.
    assert_eq!(i.waste_bytes, 7803 * MIB);
    assert_eq!(i.start, 0);
    // One user: the whole card is the better buy.
    assert!(p.advice.iter().any(|a| matches!(a, Advice::OneUser { .. })));
}

#[test]
fn seven_4gib_services_fit_one_a100_40gb() {
    let gpu = a100_40gb();
    let s: Vec<Service> = (0..7).map(|i| svc(&format!("s{i}"), 4 * GIB)).collect();
    let p = plan(&gpu, &s).unwrap();
    assert_eq!(p.gpus, 1);
    let l = &p.layouts[0];
    assert_eq!(l.instances.len(), 7);
    assert!(l.instances.iter().all(|i| i.profile == "1g.5gb"));
    let mut starts: Vec<u8> = l.instances.iter().map(|i| i.start).collect();
    starts.sort();
    assert_eq!(starts, vec![0, 1, 2, 3, 4, 5, 6]);
    // each wastes 4864 - 4096 = 768 MiB; 7 x 768 = 5376 MiB
    assert_eq!(p.total_waste_bytes, 5376 * MIB);
    check_layout(&gpu, &placed_of(&gpu, l)).unwrap();
    // 14 of 108 SMs each: all seven give 98/108 = 0.907 of the card, well under 1.
    let total: f64 = l.instances.iter().map(|i| i.throughput.compute_share).sum();
    assert!((total - 98.0 / 108.0).abs() < 1e-9, "{total}");
}

#[test]
fn eight_4gib_services_need_two_cards() {
    let gpu = a100_40gb();
    let s: Vec<Service> = (0..8).map(|i| svc(&format!("s{i}"), 4 * GIB)).collect();
    let p = plan(&gpu, &s).unwrap();
    assert_eq!(p.gpus, 2);
}

#[test]
fn set_too_big_for_one_card_splits_over_two_valid_layouts() {
    let gpu = a100_40gb();
    // three 12 GiB services each need 4 memory slices (3g/4g.20gb): 12 > 8.
    let s = vec![svc("a", 12 * GIB), svc("b", 12 * GIB), svc("c", 12 * GIB), svc("d", 3 * GIB)];
    let p = plan(&gpu, &s).unwrap();
    assert_eq!(p.gpus, 2);
    assert_eq!(p.layouts.len(), 2);
    for l in &p.layouts {
        check_layout(&gpu, &placed_of(&gpu, l)).unwrap();
        assert!(!l.instances.is_empty());
    }
    let names: usize = p.layouts.iter().map(|l| l.instances.len()).sum();
    assert_eq!(names, 4);
    // waste: 3 x 7803 MiB + (4864 - 3072) = 23409 + 1792 = 25201 MiB
    assert_eq!(p.total_waste_bytes, 25201 * MIB);
}

#[test]
fn too_large_and_training_are_refused_with_reasons() {
    let gpu = a100_40gb();
    let mut t = svc("train-small", 50 * GIB);
    t.kind = ServiceKind::Training;
    let mut big = svc("train-13b", 10 * GIB);
    big.kind = ServiceKind::Training;
    big.params = Some(13_015_864_320);
    let s = vec![svc("huge", 45 * GIB), t, big, svc("ok", 2 * GIB)];
    let p = plan(&gpu, &s).unwrap();
    assert_eq!(p.refused.len(), 3);
    assert!(matches!(&p.refused[0], Refusal::TooLarge { largest_profile, .. } if largest_profile == "7g.40gb"));
    assert!(matches!(&p.refused[1], Refusal::TrainingAcrossInstances { .. }));
    assert!(p.refused[1].reason().contains("no NVLink/P2P"));
    assert!(matches!(&p.refused[2], Refusal::LargeTraining { .. }));
    assert!(p.refused[2].reason().contains("whole card"));
    assert_eq!(p.gpus, 1);
}

#[test]
fn media_profiles_are_never_chosen_automatically() {
    let gpu = a100_40gb();
    let s: Vec<Service> = (0..3).map(|i| svc(&format!("s{i}"), GIB)).collect();
    let p = plan(&gpu, &s).unwrap();
    assert!(p.layouts[0].instances.iter().all(|i| i.profile == "1g.5gb"));
}

#[test]
fn a30_four_slices() {
    let gpu = a30();
    // 2 x 10 GiB -> 2g.12gb at 0 and 2; a third does not fit one card.
    let p = plan(&gpu, &[svc("a", 10 * GIB), svc("b", 10 * GIB)]).unwrap();
    assert_eq!(p.gpus, 1);
    let p = plan(&gpu, &[svc("a", 10 * GIB), svc("b", 10 * GIB), svc("c", GIB)]).unwrap();
    assert_eq!(p.gpus, 2);
}

#[test]
fn placement_rules_reject_overlap_and_bad_starts() {
    let gpu = a100_40gb();
    let three = gpu.profile_index("3g.20gb").unwrap();
    let two = gpu.profile_index("2g.10gb").unwrap();
    let one10 = gpu.profile_index("1g.10gb").unwrap();
    assert!(check_layout(&gpu, &[Placed { profile: three, start: 2 }]).is_err());
    assert!(check_layout(&gpu, &[Placed { profile: three, start: 0 }, Placed { profile: two, start: 2 }]).is_err());
    assert!(check_layout(&gpu, &[Placed { profile: two, start: 6 }]).is_err());
    // 3g at 4 + 2g at 0 + 1g.10gb at 2: valid (3+2+1 = 6 compute slices)
    check_layout(
        &gpu,
        &[Placed { profile: three, start: 4 }, Placed { profile: two, start: 0 }, Placed { profile: one10, start: 2 }],
    )
    .unwrap();
    // four 2g.10gb: max 3, and 2g cannot start at 6
    assert!(find_placement(&gpu, &[two, two, two, two]).is_none());
}

#[test]
fn bad_services_are_errors() {
    let gpu = a100_40gb();
    assert!(plan(&gpu, &[svc("a", 0)]).is_err());
    assert!(plan(&gpu, &[svc("a", 1), svc("a", 2)]).is_err());
    assert!(plan(&gpu, &[svc(" ", 1)]).is_err());
}

/// Brute force: every (card, profile) for every service, every start combination.
fn brute(gpu: &MigGpu, s: &[Service]) -> Option<(usize, u64, u32)> {
    let usable: Vec<usize> = (0..gpu.profiles.len()).filter(|&p| !gpu.profiles[p].special).collect();
    let cands: Vec<Vec<usize>> = s
        .iter()
        .map(|x| usable.iter().copied().filter(|&p| gpu.profiles[p].memory_bytes >= x.need_bytes).collect())
        .collect();
    if cands.iter().any(|c: &Vec<usize>| c.is_empty()) {
        return None;
    }
    let n = s.len();
    let mut best: Option<(usize, u64, u32)> = None;
    let mut idx = vec![(0usize, 0usize); n];
    fn valid_card(gpu: &MigGpu, profs: &[usize]) -> bool {
        // try every combination of starts
        fn rec(gpu: &MigGpu, profs: &[usize], acc: &mut Vec<Placed>) -> bool {
            if acc.len() == profs.len() {
                return check_layout(gpu, acc).is_ok();
            }
            let p = profs[acc.len()];
            for &st in &gpu.profiles[p].starts {
                acc.push(Placed { profile: p, start: st });
                if rec(gpu, profs, acc) {
                    return true;
                }
                acc.pop();
            }
            false
        }
        rec(gpu, profs, &mut Vec::new())
    }
    loop {
        // evaluate only assignments whose cards are numbered in order of first use
        // (every other assignment is a relabelling of one of those)
        let mut top = 0usize;
        let mut canonical = true;
        for (j, &(g, _)) in idx.iter().enumerate() {
            if (j == 0 && g != 0) || g > top + 1 {
                canonical = false;
                break;
            }
            top = top.max(g);
        }
        let mut ok = canonical;
        let mut cards = 0;
        for g in 0..if ok { n } else { 0 } {
            let profs: Vec<usize> = (0..n).filter(|&j| idx[j].0 == g).map(|j| cands[j][idx[j].1]).collect();
            if !profs.is_empty() {
                cards += 1;
                if !valid_card(gpu, &profs) {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            let waste: u64 = (0..n).map(|j| gpu.profiles[cands[j][idx[j].1]].memory_bytes - s[j].need_bytes).sum();
            let comp: u32 = (0..n).map(|j| gpu.profiles[cands[j][idx[j].1]].compute_slices as u32).sum();
            let key = (cards, waste, comp);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        // next
        let mut j = 0;
        loop {
            if j == n {
                return best;
            }
            idx[j].1 += 1;
            if idx[j].1 < cands[j].len() {
                break;
            }
            idx[j].1 = 0;
            idx[j].0 += 1;
            if idx[j].0 < n {
                break;
            }
            idx[j].0 = 0;
            j += 1;
        }
    }
}

fn need_strategy() -> impl Strategy<Value = u64> {
    // 0.5 .. 40 GiB in 0.5 GiB steps, biased to small services
    prop_oneof![3 => 1u64..=10, 1 => 1u64..=80].prop_map(|h| h * GIB / 2)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn layouts_are_valid_and_match_brute_force(needs in proptest::collection::vec(need_strategy(), 1..=4), a30_card in any::<bool>()) {
        let gpu = if a30_card { a30() } else { a100_40gb() };
        let s: Vec<Service> = needs.iter().enumerate().map(|(i, &b)| svc(&format!("s{i}"), b)).collect();
        let p = plan(&gpu, &s).unwrap();
        for l in &p.layouts {
            prop_assert!(check_layout(&gpu, &placed_of(&gpu, l)).is_ok());
        }
        let placed: usize = p.layouts.iter().map(|l| l.instances.len()).sum();
        prop_assert_eq!(placed + p.refused.len(), s.len());
        if p.refused.is_empty() {
            let (cards, waste, comp) = brute(&gpu, &s).expect("brute force finds a layout when plan refuses none");
            prop_assert_eq!(p.gpus, cards);
            prop_assert_eq!(p.total_waste_bytes, waste);
            let pc: u32 = p.layouts.iter().map(|l| l.compute_slices_used as u32).sum();
            prop_assert_eq!(pc, comp);
        }
    }

    #[test]
    fn larger_inputs_stay_valid(needs in proptest::collection::vec(need_strategy(), 1..=16)) {
        let gpu = a100_40gb();
        let s: Vec<Service> = needs.iter().enumerate().map(|(i, &b)| svc(&format!("s{i}"), b)).collect();
        let p = plan(&gpu, &s).unwrap();
        for l in &p.layouts {
            prop_assert!(check_layout(&gpu, &placed_of(&gpu, l)).is_ok());
            prop_assert!(l.instances.iter().all(|i| i.slice_bytes >= i.need_bytes));
        }
    }
}

#[test]
fn twenty_eight_small_services_fill_four_cards() {
    let gpu = a100_40gb();
    let mut s: Vec<Service> = (0..28).map(|i| svc(&format!("s{i}"), GIB + i as u64 * 64 * MIB)).collect();
    s.push(svc("mid", 9 * GIB));
    let p = plan(&gpu, &s).unwrap();
    // 28 one-slice services take 4 cards' 1g.5gb positions (7 each); the 9 GiB
    // service needs 2 memory slices, and every card's 7 compute slices are used: 5 cards.
    assert_eq!(p.gpus, 5);
}
