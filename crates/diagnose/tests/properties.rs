//! Invariants over generated inputs: messages printed the way PyTorch's
//! `format_size` prints them parse back within their rounding and get a
//! class their numbers support; plain-data pickles (with shared objects)
//! round-trip through the restricted unpickler; no text makes the scanner panic.

use proptest::prelude::*;
use vramfit_diagnose::classify::{classify_torch, OomClass, FRAG_MIN_SHARE};
use vramfit_diagnose::oom::{parse_torch_message, OomKind};
use vramfit_diagnose::pickle::{parse, Node, Value};

/// c10 `format_size`: ≤1024 "N bytes", ≤1 MiB KiB, ≤1 GiB MiB, else GiB, two decimals.
fn format_size(b: u64) -> String {
    let f = b as f64;
    if b <= 1024 {
        format!("{b} bytes")
    } else if b <= 1 << 20 {
        format!("{:.2} KiB", f / 1024.0)
    } else if b <= 1 << 30 {
        format!("{:.2} MiB", f / (1u64 << 20) as f64)
    } else {
        format!("{:.2} GiB", f / (1u64 << 30) as f64)
    }
}

fn message(r: u64, t: u64, f: u64, a: u64, u: u64) -> String {
    format!(
        "CUDA out of memory. Tried to allocate {}. GPU 0 has a total capacity of {} of which {} is free. Including non-PyTorch memory, this process has {} memory in use. Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        format_size(r),
        format_size(t),
        format_size(f),
        format_size(a + u + (300 << 20)),
        format_size(a),
        format_size(u)
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn printed_messages_parse_within_rounding_and_classes_hold(
        t in (4u64 << 30)..(96u64 << 30),
        a_frac in 0.0f64..1.0,
        u_frac in 0.0f64..0.5,
        r in 0u64..(120u64 << 30),
    ) {
        let a = (t as f64 * a_frac * 0.9) as u64;
        let u = ((t - a) as f64 * u_frac) as u64;
        let f = t.saturating_sub(a + u + (300 << 20));
        let OomKind::Torch(m) = parse_torch_message(&message(r, t, f, a, u)) else { panic!("not parsed") };
        prop_assert!(m.missing.is_empty(), "{:?}", m.missing);
        let (mt, mf, ma) = (m.total.clone().unwrap(), m.free.clone().unwrap(), m.allocated.clone().unwrap());
        for (got, want) in [(&m.requested, r), (&mt, t), (&mf, f), (&ma, a)] {
            prop_assert!(got.bytes.abs_diff(want) <= got.tolerance + 1, "{} vs {}", got.text, want);
        }
        let v = classify_torch(&m, None);
        let (r, t, f, u) = (m.requested.bytes, mt.bytes, mf.bytes, m.unallocated_bytes());
        let tol = mf.tolerance + m.unallocated_tolerance() + m.requested.tolerance + mt.tolerance;
        match v.class {
            OomClass::RequestExceedsCard => prop_assert!(r > t),
            OomClass::Unexplained => prop_assert!(f + tol >= r),
            OomClass::Fragmentation => {
                // the cache alone could serve the request (issue 27 §4)
                prop_assert!(u + tol >= r && f + u + tol >= r);
                prop_assert!(u as f64 >= FRAG_MIN_SHARE * m.reserved_bytes() as f64);
            }
            OomClass::GenuineShortage => {
                if let Some(g) = v.gap_bytes { prop_assert_eq!(g, r - f - u) }
            }
            OomClass::OtherProcess => {}
            OomClass::Unknown => prop_assert!(false, "unknown for a full message"),
            OomClass::Budget => prop_assert!(false, "budget is vLLM's"),
        }
        prop_assert!(!v.reasoning.is_empty() && !v.fixes.is_empty());
        // the main cause is the class; contributors are other causes, largest first, with shares of the card
        prop_assert_eq!(v.main_cause.class, v.class);
        prop_assert!(v.contributors.iter().all(|c| c.class != v.class && c.bytes.is_some() && c.share.is_some()));
        prop_assert!(v.contributors.windows(2).all(|w| w[0].bytes >= w[1].bytes));
    }

    #[test]
    fn scanning_fragments_never_panics(parts in proptest::collection::vec(prop_oneof![
        Just("CUDA out of memory. "), Just("Tried to allocate "), Just("2.00 GiB"), Just(" (GPU 0; "),
        Just("GPU 1 has a total capacity of "), Just(" of which "), Just(" is free. "), Just("Process 12 has "),
        Just("Of the allocated memory "), Just("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 99 bytes"),
        Just("OOM when allocating tensor with shape[2,3] and type float"), Just("\n[rank3]: "), Just("é日本"),
        Just("Buffer 1:\n Size: 1.0MiB\n"), Just("File \"x.py\", line 3, in step\n"), Just("max seq len (5) is larger than the maximum number of tokens that can be stored in KV cache (3)"),
    ], 0..40)) {
        let text: String = parts.concat();
        for e in vramfit_diagnose::oom::scan(&text) {
            let _ = vramfit_diagnose::classify(&e);
        }
    }
}

// ---- pickle round trip

#[derive(Debug, Clone)]
enum T {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<T>),
    Dict(Vec<(String, T)>),
    Tuple(Vec<T>),
}

fn tree() -> impl Strategy<Value = T> {
    let leaf = prop_oneof![
        Just(T::None),
        any::<bool>().prop_map(T::Bool),
        any::<i64>().prop_map(T::Int),
        "[a-z_é]{0,12}".prop_map(T::Str),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(T::List),
            proptest::collection::vec(("[a-z]{1,6}", inner.clone()), 0..6).prop_map(|kv| {
                // Python dict semantics: one entry per key, the last wins
                let mut out: Vec<(String, T)> = Vec::new();
                for (k, v) in kv {
                    out.retain(|(ek, _)| *ek != k);
                    out.push((k, v));
                }
                T::Dict(out)
            }),
            proptest::collection::vec(inner, 0..4).prop_map(T::Tuple),
        ]
    })
}

/// A minimal protocol-2 pickler (the opcodes CPython writes for plain data),
/// memoizing every container and sharing `shared` through BINGET.
fn dump(t: &T, out: &mut Vec<u8>, memo: &mut u32) {
    match t {
        T::None => out.push(b'N'),
        T::Bool(b) => out.push(if *b { 0x88 } else { 0x89 }),
        T::Int(i) => {
            if (0..256).contains(i) {
                out.extend([b'K', *i as u8]);
            } else if i32::try_from(*i).is_ok() {
                out.push(b'J');
                out.extend((*i as i32).to_le_bytes());
            } else {
                out.extend([0x8a, 8]);
                out.extend(i.to_le_bytes());
            }
        }
        T::Str(s) => {
            out.push(b'X');
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
        T::List(items) => {
            out.push(b']');
            put(out, memo);
            if !items.is_empty() {
                out.push(b'(');
                for x in items {
                    dump(x, out, memo);
                }
                out.push(b'e');
            }
        }
        T::Dict(kv) => {
            out.push(b'}');
            put(out, memo);
            if !kv.is_empty() {
                out.push(b'(');
                for (k, v) in kv {
                    dump(&T::Str(k.clone()), out, memo);
                    dump(v, out, memo);
                }
                out.push(b'u');
            }
        }
        T::Tuple(items) => {
            out.push(b'(');
            for x in items {
                dump(x, out, memo);
            }
            out.push(b't');
        }
    }
}

fn put(out: &mut Vec<u8>, memo: &mut u32) {
    out.push(b'r');
    out.extend(memo.to_le_bytes());
    *memo += 1;
}

fn same(p: &vramfit_diagnose::pickle::Pickle, v: &Value, t: &T) -> bool {
    match (v, t) {
        (Value::None, T::None) => true,
        (Value::Bool(a), T::Bool(b)) => a == b,
        (Value::Int(a), T::Int(b)) => a == b,
        (Value::Str(a), T::Str(b)) => &**a == b.as_str(),
        (Value::List(_), T::List(items)) | (Value::Tuple(_), T::Tuple(items)) => {
            let got = p.items(v).unwrap();
            got.len() == items.len() && got.iter().zip(items).all(|(g, w)| same(p, g, w))
        }
        (Value::Dict(_), T::Dict(kv)) => {
            let got = p.entries(v).unwrap();
            got.len() == kv.len()
                && got.iter().zip(kv).all(|((gk, gv), (wk, wv))| same(p, gk, &T::Str(wk.clone())) && same(p, gv, wv))
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plain_pickles_round_trip_and_sharing_is_kept(t in tree(), shared in tree()) {
        // [t, shared, shared]: the second `shared` is a memo reference to the first
        let mut out = vec![0x80, 2, b']'];
        let mut memo = 0u32;
        put(&mut out, &mut memo);
        out.push(b'(');
        dump(&t, &mut out, &mut memo);
        let shared_is_container = matches!(shared, T::List(_) | T::Dict(_));
        let slot = memo;
        dump(&shared, &mut out, &mut memo);
        if shared_is_container {
            out.push(b'j');
            out.extend(slot.to_le_bytes());
        } else {
            dump(&shared, &mut out, &mut memo);
        }
        out.extend([b'e', b'.']);
        let p = parse(&out).unwrap();
        let items = p.items(&p.root).unwrap();
        prop_assert_eq!(items.len(), 3);
        prop_assert!(same(&p, &items[0], &t));
        prop_assert!(same(&p, &items[1], &shared));
        prop_assert!(same(&p, &items[2], &shared));
        if shared_is_container {
            // the same arena slot, as Python would give the same object
            prop_assert_eq!(&items[1], &items[2]);
            prop_assert!(matches!(p.node(&items[1]), Some(Node::List(_)) | Some(Node::Dict(_))));
        }
    }

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut with_header = vec![0x80, 4];
        with_header.extend(&b);
        let _ = parse(&b);
        let _ = parse(&with_header);
        let _ = vramfit_diagnose::snapshot::load(&with_header);
    }
}

#[test]
fn absurd_figures_do_not_overflow() {
    let m = "CUDA out of memory. Tried to allocate 16000000.00 TiB. GPU 0 has a total capacity of 16000000.00 TiB of which 15000000.00 TiB is free. Of the allocated memory 15000000.00 TiB is allocated by PyTorch, and 15000000.00 TiB is reserved by PyTorch but unallocated.";
    for e in vramfit_diagnose::oom::scan(m) {
        let _ = vramfit_diagnose::classify(&e);
    }
}
