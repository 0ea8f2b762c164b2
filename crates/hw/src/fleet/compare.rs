//! The nodes against each other. A rented cluster is only as fast as its
//! slowest node: the same GPUs, memory, driver and CUDA, ECC and MIG
//! state, persistence mode, clocks and power limit are expected
//! everywhere, and each node's bandwidth within [`NODE_SHARE_OF_MEDIAN`]
//! of the fleet median. The odd node is named with its figure and the
//! others'.

use super::{median, Column, FleetFinding, NodeChecked, NodeFacts, NODE_SHARE_OF_MEDIAN};
use crate::verdict::Level;

fn evidence(nodes: &[&NodeChecked], column: Column) -> Vec<String> {
    let kinds = column.evidence_kinds();
    nodes
        .iter()
        .flat_map(|n| n.files.iter())
        .filter(|f| f.error.is_none() && f.kind.is_some_and(|k| kinds.contains(&k)))
        .map(|f| f.path.clone())
        .collect()
}

/// Nodes that differ from the others on a value. With a majority, each
/// other node is named against it; with none (a tie), every group is.
fn categorical(
    nodes: &[NodeChecked],
    column: Column,
    code: &'static str,
    what: &str,
    odd: Level,
    get: impl Fn(&NodeFacts) -> Option<String>,
    out: &mut Vec<FleetFinding>,
) {
    let mut groups: Vec<(String, Vec<&NodeChecked>)> = Vec::new();
    for n in nodes {
        let Some(v) = get(&n.facts) else { continue };
        match groups.iter_mut().find(|(g, _)| *g == v) {
            Some((_, ns)) => ns.push(n),
            None => groups.push((v, vec![n])),
        }
    }
    let known: usize = groups.iter().map(|(_, ns)| ns.len()).sum();
    if known < 2 {
        return;
    }
    if groups.len() == 1 {
        let (v, ns) = &groups[0];
        out.push(FleetFinding {
            level: Level::Pass,
            code,
            node: None,
            column,
            evidence: evidence(ns, column),
            message: format!("{what}: {v}, on all {} nodes that report it", ns.len()),
        });
        return;
    }
    groups.sort_by_key(|(_, ns)| std::cmp::Reverse(ns.len()));
    let majority = (groups[0].1.len() > groups[1].1.len()).then(|| groups[0].clone());
    match majority {
        Some((mv, mns)) => {
            for (v, ns) in &groups[1..] {
                for n in ns {
                    out.push(FleetFinding {
                        level: odd,
                        code,
                        node: Some(n.name.clone()),
                        column,
                        evidence: evidence(&[n], column),
                        message: {
                            let others = mns.len()
                                + groups[1..].iter().filter(|(g, _)| g != v).map(|(_, x)| x.len()).sum::<usize>();
                            if others == mns.len() {
                                format!("{}: {what} {v}; the other {others} node(s): {mv}", n.name)
                            } else {
                                format!("{}: {what} {v}; {} of the other {others} node(s): {mv}", n.name, mns.len())
                            }
                        },
                    });
                }
            }
        }
        None => {
            let desc: Vec<String> = groups
                .iter()
                .map(|(v, ns)| format!("{v} on {}", ns.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")))
                .collect();
            for (_, ns) in &groups {
                for n in ns {
                    out.push(FleetFinding {
                        level: odd,
                        code,
                        node: Some(n.name.clone()),
                        column,
                        evidence: evidence(&[n], column),
                        message: format!("{}: the nodes disagree on {what}, no majority: {}", n.name, desc.join("; ")),
                    });
                }
            }
        }
    }
}

/// Nodes whose figure is below [`NODE_SHARE_OF_MEDIAN`] of the fleet median.
fn below_median(
    nodes: &[NodeChecked],
    column: Column,
    code: &'static str,
    what: &str,
    get: impl Fn(&NodeFacts) -> Option<f64>,
    out: &mut Vec<FleetFinding>,
) {
    let vals: Vec<(&NodeChecked, f64)> = nodes.iter().filter_map(|n| get(&n.facts).map(|v| (n, v))).collect();
    if vals.len() < 2 {
        return;
    }
    let Some(med) = median(&vals.iter().map(|(_, v)| *v).collect::<Vec<_>>()) else { return };
    if med <= 0.0 {
        return;
    }
    let slow: Vec<&(&NodeChecked, f64)> = vals.iter().filter(|(_, v)| *v < med * NODE_SHARE_OF_MEDIAN).collect();
    for (n, v) in &slow {
        out.push(FleetFinding {
            level: Level::Fail,
            code,
            node: Some(n.name.clone()),
            column,
            evidence: evidence(&[n], column),
            message: format!(
                "{}: {what} {:.2} GB/s, {:.0}% of the fleet median {:.2} GB/s (below {:.0}%)",
                n.name,
                v,
                v / med * 100.0,
                med,
                NODE_SHARE_OF_MEDIAN * 100.0
            ),
        });
    }
    if slow.is_empty() {
        let ns: Vec<&NodeChecked> = vals.iter().map(|(n, _)| *n).collect();
        let lo = vals.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
        out.push(FleetFinding {
            level: Level::Pass,
            code,
            node: None,
            column,
            evidence: evidence(&ns, column),
            message: format!(
                "{what}: every one of {} nodes within {:.0}% of the fleet median {:.2} GB/s (lowest {:.2} GB/s)",
                vals.len(),
                NODE_SHARE_OF_MEDIAN * 100.0,
                med,
                lo
            ),
        });
    }
}

/// Compare the nodes. With a rented fabric (`fabric_judged`) each node's
/// ports are judged against it instead of against each other.
pub(crate) fn compare(nodes: &[NodeChecked], fabric_judged: bool) -> Vec<FleetFinding> {
    let mut out = Vec::new();
    let onoff = |b: bool| if b { "on".to_string() } else { "off".to_string() };
    categorical(nodes, Column::Gpus, "fleet_gpus", "GPUs", Level::Fail, |f| f.gpus.clone(), &mut out);
    categorical(
        nodes,
        Column::Memory,
        "fleet_memory",
        "GPU memory",
        Level::Fail,
        |f| f.memory_mib.map(|m| format!("{m} MiB")),
        &mut out,
    );
    categorical(nodes, Column::Driver, "fleet_driver", "driver", Level::Fail, |f| f.driver.clone(), &mut out);
    categorical(nodes, Column::Driver, "fleet_cuda", "CUDA", Level::Fail, |f| f.cuda.clone(), &mut out);
    categorical(
        nodes,
        Column::Ecc,
        "fleet_ecc",
        "ECC",
        Level::Fail,
        |f| f.ecc.map(|b| if b { "on on every GPU".into() } else { "off on some GPU".into() }),
        &mut out,
    );
    categorical(
        nodes,
        Column::Mig,
        "fleet_mig",
        "MIG",
        Level::Fail,
        |f| f.mig.map(|b| if b { "enabled".into() } else { "disabled".into() }),
        &mut out,
    );
    categorical(
        nodes,
        Column::Persistence,
        "fleet_persistence",
        "persistence mode",
        Level::Warn,
        |f| f.persistence.map(onoff),
        &mut out,
    );
    categorical(
        nodes,
        Column::Clocks,
        "fleet_max_clock",
        "max SM clock",
        Level::Fail,
        |f| f.max_sm_mhz.map(|m| format!("{m} MHz")),
        &mut out,
    );
    categorical(
        nodes,
        Column::Clocks,
        "fleet_app_clocks",
        "application clocks",
        Level::Warn,
        |f| f.applications_clocks.clone(),
        &mut out,
    );
    categorical(
        nodes,
        Column::Power,
        "fleet_power",
        "power limit",
        Level::Fail,
        |f| f.power_limit_mw.map(|m| format!("{:.0} W", m as f64 / 1000.0)),
        &mut out,
    );
    categorical(
        nodes,
        Column::Nvlink,
        "fleet_nvlink",
        "NVLink between every GPU pair",
        Level::Fail,
        |f| f.all_nvlink.map(|b| if b { "yes".into() } else { "no".into() }),
        &mut out,
    );
    if !fabric_judged {
        categorical(
            nodes,
            Column::Fabric,
            "fleet_fabric",
            "fabric ports",
            Level::Fail,
            |f| f.fabric.as_ref().map(|s| s.describe()),
            &mut out,
        );
    }
    categorical(
        nodes,
        Column::NicAffinity,
        "fleet_nic_affinity",
        "GPU↔NIC paths",
        Level::Fail,
        |f| {
            (!f.nic_affinity.is_empty()).then(|| {
                f.nic_affinity
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        format!("GPU{i} {}", a.as_ref().map(|(_, l)| l.label()).unwrap_or_else(|| "-".into()))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        },
        &mut out,
    );
    compare_bandwidth(nodes, &mut out);
    out
}

/// Each node's bandwidth against the fleet median.
fn compare_bandwidth(nodes: &[NodeChecked], out: &mut Vec<FleetFinding>) {
    below_median(nodes, Column::Nccl, "fleet_allreduce", "all-reduce bus bandwidth", |f| f.allreduce_busbw_gbs, out);
    below_median(
        nodes,
        Column::HostLink,
        "fleet_host_to_device",
        "host→device bandwidth",
        |f| f.host_to_device_gbs,
        out,
    );
    below_median(
        nodes,
        Column::HostLink,
        "fleet_device_to_host",
        "device→host bandwidth",
        |f| f.device_to_host_gbs,
        out,
    );
    below_median(nodes, Column::P2p, "fleet_p2p", "slowest GPU pair (P2P)", |f| f.p2p_min_gbs, out);
    below_median(
        nodes,
        Column::Perftest,
        "fleet_perftest",
        "perftest bandwidth",
        |f| f.perftest_gbps.map(|g| g / 8.0),
        out,
    );
}
