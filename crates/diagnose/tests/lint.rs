//! The script lint on two small scripts: one with every pattern, one with
//! the fixed version of each (no findings).

use vramfit_diagnose::lint::{lint, looks_like_python, not_python_reason, python_evidence};

fn script(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/scripts/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn every_pattern_is_found_on_its_line() {
    let r = lint(&script("train_bad.py")).unwrap();
    let got: Vec<(usize, &str)> = r.findings.iter().map(|f| (f.line, f.rule)).collect();
    assert_eq!(
        got,
        vec![
            (13, "checkpoint-rng"),
            (19, "data-parallel"),
            (29, "retain-graph-in-loop"),
            (32, "accumulated-loss"),
            (33, "tensor-list-across-steps"),
            (34, "empty-cache-in-loop"),
            (39, "eval-without-no-grad"),
            (42, "tensor-list-across-steps"),
            (46, "ddp-replicates"),
            (51, "eval-without-no-grad"),
        ],
        "{:#?}",
        r.findings
    );
    assert_eq!(r.error_nodes, 0);
    let acc = r.findings.iter().find(|f| f.rule == "accumulated-loss").unwrap();
    assert_eq!(acc.code, "total_loss += loss");
    assert_eq!(
        acc.fix,
        "`total_loss += loss.item()` (a Python float), or `loss.detach()` to keep it on the GPU without the graph"
    );
    for f in &r.findings {
        assert!(!f.why.is_empty() && !f.fix.is_empty(), "{f:?}");
    }
}

#[test]
fn fixed_script_is_clean() {
    let r = lint(&script("train_good.py")).unwrap();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn no_dropout_no_rng_finding_and_sharded_ddp_is_fine() {
    let src = "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel\ny = checkpoint(f, x, preserve_rng_state=False)\nm = DistributedDataParallel(m)\n";
    let r = lint(src).unwrap();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn broken_python_still_lints_and_prose_is_not_python() {
    let src = "import torch\nfor x in loader:\n    total += loss\n    def broken(:\n";
    let r = lint(src).unwrap();
    assert!(r.error_nodes > 0);
    assert_eq!(r.findings.iter().map(|f| f.rule).collect::<Vec<_>>(), vec!["accumulated-loss"]);
    assert!(looks_like_python(&script("train_good.py")));
    assert!(!looks_like_python("The quick brown fox.\nFrom here on, we import nothing: a story.\n"));
}

#[test]
fn a_script_that_mentions_the_oom_message_is_still_a_script() {
    let src = "import torch\ntry:\n    step()\nexcept RuntimeError as e:\n    if 'CUDA out of memory. Tried to allocate' in str(e):\n        torch.cuda.empty_cache()\n";
    let input = vramfit_diagnose::Input::from_bytes("x.txt", src.as_bytes().to_vec());
    let d = vramfit_diagnose::diagnose(&input, None).unwrap();
    assert_eq!(d.kind(), vramfit_diagnose::Kind::Script);
}

#[test]
fn deeply_nested_source_does_not_overflow_the_stack() {
    // 50,000 nested parentheses; test threads have small stacks
    let src = format!(
        "import torch\nx = {}1{}\nfor b in loader:\n    total += loss\n",
        "(".repeat(50_000),
        ")".repeat(50_000)
    );
    let r = lint(&src).unwrap();
    assert!(r.error_nodes > 0);
    // detection walks the same tree (iteratively) and still sees Python
    assert!(looks_like_python(&src));
    assert_eq!(r.findings.iter().map(|f| f.rule).collect::<Vec<_>>(), vec!["accumulated-loss"]);
}

#[test]
fn the_tutorial_loop_is_clean_and_self_sums_are_caught() {
    // the shape of the PyTorch CIFAR-10 tutorial's training loop
    let clean = r#"
import torch
for epoch in range(2):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if i % 2000 == 1999:
            print(f'[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 2000:.3f}')
            running_loss = 0.0
"#;
    assert!(lint(clean).unwrap().findings.is_empty(), "{:#?}", lint(clean).unwrap().findings);
    let leaky = "import torch\nepoch_loss = 0\nfor x in loader:\n    loss = f(x)\n    epoch_loss = epoch_loss + loss\n";
    let r = lint(leaky).unwrap();
    assert_eq!(r.findings.iter().map(|f| (f.line, f.rule)).collect::<Vec<_>>(), vec![(5, "accumulated-loss")]);
    assert!(r.findings[0].fix.starts_with("`epoch_loss += loss.item()`"), "{}", r.findings[0].fix);
}

#[test]
fn a_periodic_reset_does_not_hide_an_accumulated_loss() {
    let src = "import torch\nfor i, x in enumerate(loader):\n    loss = f(x)\n    loss.backward()\n    running_loss += loss\n    if i % 100 == 99:\n        running_loss = 0.0\n";
    let r = lint(src).unwrap();
    assert_eq!(r.findings.iter().map(|f| (f.line, f.rule)).collect::<Vec<_>>(), vec![(5, "accumulated-loss")]);
}

fn fixture_texts(dir: &str) -> Vec<(String, String)> {
    let d = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<(String, String)> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn forced_script_kind_refuses_what_is_not_python() {
    // real scripts, also with a few syntax errors, are Python
    for name in ["train_bad.py", "train_good.py"] {
        assert_eq!(not_python_reason(&script(name)), None, "{name}: {:?}", python_evidence(&script(name)));
        let broken = script(name).replacen("):", "", 1).replacen("(", "", 1);
        assert_eq!(not_python_reason(&broken), None, "{name} broken: {:?}", python_evidence(&broken));
    }
    assert_eq!(not_python_reason("import torch\nfor x in loader:\n    total += loss\n    def broken(:\n"), None);
    assert_eq!(not_python_reason("total_loss += loss\n"), None);
    // logs with tracebacks, plain text, JSON, a bare word: not scripts
    let mut others = fixture_texts("oom");
    others.extend(fixture_texts("memory_summary"));
    others.push(("hello".into(), "hello world\n".into()));
    others.push(("word".into(), "hello\n".into()));
    others.push(("json".into(), r#"{"a": 1, "b": [1, 2, {"c": null}], "d": "x"}"#.into()));
    others.push(("prose".into(), "The quick brown fox.\nFrom here on, we import nothing: a story.\n".into()));
    assert!(others.len() > 40);
    for (name, text) in &others {
        let why = not_python_reason(text);
        assert!(
            why.as_deref().is_some_and(|w| w.starts_with("not a Python script")),
            "{name}: {:?}",
            python_evidence(text)
        );
    }
}
