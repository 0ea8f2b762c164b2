//! Memory lint of a Python training script, on a real syntax tree
//! (tree-sitter-python): patterns that keep GPU memory alive or multiply
//! it, each with the line, why it costs memory, and the fix.

use serde::Serialize;
use std::collections::{HashMap, HashSet};
use tree_sitter::{Node, Parser};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// stable rule id
    pub rule: &'static str,
    /// 1-based
    pub line: usize,
    /// 1-based
    pub column: usize,
    /// the source line, trimmed (at most 160 characters)
    pub code: String,
    pub why: String,
    pub fix: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LintError {
    #[error("the Python grammar could not be loaded: {0}")]
    Grammar(String),
    #[error("the script could not be parsed")]
    Parse,
    #[error(
        "the script is {0} bytes; scripts over {max} bytes are not linted (a training script is tens of KiB: generated code?)",
        max = MAX_SCRIPT_BYTES
    )]
    TooLarge(usize),
}

/// What the lint found; `error_nodes` is how much of the script the
/// parser could not read (0 = clean).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintReport {
    pub lines: usize,
    pub error_nodes: usize,
    /// the first [`MAX_FINDINGS`] findings, by line
    pub findings: Vec<Finding>,
    /// all findings, listed or not
    pub findings_total: usize,
}

/// Deeper syntax than this is not linted (counted in `error_nodes`).
const MAX_DEPTH: usize = 400;
/// Findings listed in the report (the rest are counted): a script with
/// more has one pattern repeated, and the first ones show it.
pub const MAX_FINDINGS: usize = 200;
/// Largest script linted. Hand-written training scripts are tens of KiB.
/// Measured (release build, 2-core machine under load): the lint of dense
/// generated code takes ~70 bytes of memory (tree-sitter's tree) and ~1 s
/// per MiB, so 8 MiB stays near 0.6 GB and 9 s.
pub const MAX_SCRIPT_BYTES: usize = 8 << 20;
/// Nodes one sub-walk (an expression or a loop body) looks at: patterns
/// are judged on their first nodes, so nested code cannot make the lint
/// quadratic.
const WALK_BUDGET: usize = 20_000;

#[derive(Clone, Copy, Default)]
struct Ctx {
    depth: usize,
    /// innermost loop node id and its byte range
    lp: Option<(usize, usize, usize)>,
    grad_off: bool,
    func: usize,
    /// where this node sits under its loop's body, for "an unconditional
    /// statement at the top of the body" (no `Node::parent()`: tree-sitter
    /// finds a parent by walking down from the root, which made the lint
    /// quadratic on long files)
    body: BodyPos,
    /// the parent is a `decorated_definition` with a no_grad/inference_mode decorator
    decorated_grad_off: bool,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum BodyPos {
    #[default]
    Elsewhere,
    /// the loop's body block
    Block,
    /// a statement directly in that block
    Statement,
    /// the expression of such a statement
    Expression,
}

#[derive(Default)]
struct Func {
    /// receivers of `.eval()` and where (row, column) (outside no_grad)
    evals: Vec<(String, usize, usize)>,
    /// plain calls `X(...)` made with grad on: callee names
    grad_calls: HashSet<String>,
    grad_off_anywhere: bool,
}

/// A finding before its texts are written out: only the listed ones are,
/// so a script with a hundred thousand findings holds a few words each.
struct Raw {
    rule: &'static str,
    row: usize,
    column: usize,
    why: Text,
    fix: Text,
}

enum Text {
    Fixed(&'static str),
    /// accumulated-loss: the target
    AccWhy(Box<str>),
    /// accumulated-loss: the target and the right-hand side
    AccFix(Box<str>, Box<str>),
    /// tensor-list-across-steps: the list and the appended expression
    ListFix(Box<str>, Box<str>),
}

impl Text {
    fn render(&self) -> String {
        match self {
            Text::Fixed(s) => s.to_string(),
            Text::AccWhy(target) => format!("`{target}` adds up loss tensors that are still attached to the autograd graph, so every step's graph (all its saved activations) stays alive as long as `{target}` does; memory grows every step"),
            Text::AccFix(target, rhs) => format!("`{target} += {rhs}.item()` (a Python float), or `{rhs}.detach()` to keep it on the GPU without the graph"),
            Text::ListFix(r, a) => format!("`{r}.append({a}.detach())` (still on the GPU), `{a}.detach().cpu()`, or `{a}.item()` for a scalar"),
        }
    }
}

/// Code quoted in a finding: at most 160 characters.
fn clip(s: &str) -> Box<str> {
    if s.len() <= 160 {
        return s.into();
    }
    let mut t: String = s.chars().take(159).collect();
    t.push('…');
    t.into()
}

struct Lint<'a> {
    src: &'a [u8],
    lines: Vec<&'a str>,
    findings: Vec<Raw>,
    /// (rule, line) of each finding, one finding per rule and line
    found: HashSet<(&'static str, usize)>,
    funcs: Vec<Func>,
    /// names bound to `[]`/`list()`: first and last byte offset
    list_inits: HashMap<String, (usize, usize)>,
    /// names assigned unconditionally at the top of each loop body
    loop_assigned: HashMap<usize, HashSet<String>>,
    /// names on which `.backward()` is called
    backward_on: HashSet<String>,
    has_dropout: bool,
    has_sharding: bool,
    errors: usize,
    /// `+=` of a loss in a loop: (row, column, target, right-hand side, loop id)
    pending_acc: Vec<(usize, usize, String, String, usize)>,
    /// findings decided once the whole file is seen: (row, column, rule)
    later: Vec<(usize, usize, &'static str)>,
}

fn text<'a>(n: Node, src: &'a [u8]) -> &'a str {
    n.utf8_text(src).unwrap_or("")
}

const SAFE_METHODS: [&str; 6] = ["item", "detach", "tolist", "cpu", "numpy", "float_"];
/// Loop iterables naming an evaluation split…
const EVAL_SPLITS: [&str; 4] = ["val", "eval", "test", "dev"];
/// …of a data pipeline.
const DATA_WORDS: [&str; 4] = ["loader", "data", "batches", "iter"];

/// Names that usually hold tensors (a list of `model(x)` outputs counts too).
const TENSORISH: [&str; 16] = [
    "loss",
    "logit",
    "output",
    "out",
    "pred",
    "hidden",
    "feat",
    "emb",
    "attn",
    "grad",
    "activation",
    "score",
    "prob",
    "y_hat",
    "model",
    "net",
];

impl<'a> Lint<'a> {
    fn push(&mut self, n: Node, rule: &'static str, why: &'static str, fix: Text) {
        let p = n.start_position();
        self.push_at(p.row, p.column, rule, Text::Fixed(why), fix);
    }

    fn push_at(&mut self, row: usize, column: usize, rule: &'static str, why: Text, fix: Text) {
        if !self.found.insert((rule, row + 1)) {
            return;
        }
        self.findings.push(Raw { rule, row, column, why, fix });
    }

    /// Does the expression turn a tensor into something off the graph?
    fn is_safe(&self, n: Node) -> bool {
        let mut safe = false;
        walk_limited(n, WALK_BUDGET, &mut |c| {
            if c.kind() == "call" {
                if let Some(f) = c.child_by_field_name("function") {
                    let t = text(f, self.src);
                    let last = t.rsplit('.').next().unwrap_or(t);
                    if SAFE_METHODS.contains(&last)
                        || (f.kind() == "identifier" && matches!(t, "float" | "int" | "len" | "str"))
                    {
                        safe = true;
                    }
                }
            }
        });
        safe
    }

    fn mentions(&self, n: Node, words: &[&str]) -> bool {
        let mut hit = false;
        walk_limited(n, WALK_BUDGET, &mut |c| {
            if c.kind() == "identifier" {
                let t = text(c, self.src).to_ascii_lowercase();
                if words.iter().any(|w| t.contains(w)) {
                    hit = true;
                }
            }
        });
        hit
    }

    fn keyword(&self, call: Node, name: &str) -> Option<String> {
        let args = call.child_by_field_name("arguments")?;
        let mut cur = args.walk();
        let found = args.named_children(&mut cur).find_map(|a| {
            if a.kind() != "keyword_argument" {
                return None;
            }
            let k = a.child_by_field_name("name")?;
            (text(k, self.src) == name)
                .then(|| a.child_by_field_name("value").map(|v| text(v, self.src).to_string()))?
        });
        found
    }

    fn visit(&mut self, n: Node, ctx: Ctx) {
        if n.is_error() || n.is_missing() {
            self.errors += 1;
        }
        if ctx.depth > MAX_DEPTH {
            self.errors += 1;
            return;
        }
        let decorated = ctx.decorated_grad_off;
        let here = ctx.body;
        let mut ctx = Ctx { depth: ctx.depth + 1, decorated_grad_off: false, body: BodyPos::Elsewhere, ..ctx };
        match n.kind() {
            "decorated_definition" => {
                let mut cur = n.walk();
                ctx.decorated_grad_off =
                    n.named_children(&mut cur).any(|d| d.kind() == "decorator" && grad_off_text(text(d, self.src)));
            }
            "function_definition" => {
                self.funcs.push(Func::default());
                ctx = Ctx {
                    lp: None,
                    grad_off: decorated,
                    func: self.funcs.len() - 1,
                    depth: ctx.depth,
                    body: BodyPos::Elsewhere,
                    decorated_grad_off: false,
                };
                if decorated {
                    self.funcs[ctx.func].grad_off_anywhere = true;
                }
            }
            "for_statement" | "while_statement" => {
                if n.kind() == "for_statement" && !ctx.grad_off {
                    self.check_eval_loop(n);
                }
                // the iterable/condition runs in the outer context; the body in the loop
                let mut cur = n.walk();
                let kids: Vec<Node> = n.children(&mut cur).collect();
                let body = n.child_by_field_name("body").map(|b| b.id());
                let alternative = n.child_by_field_name("alternative").map(|b| b.id());
                for k in kids {
                    let is_body = body == Some(k.id());
                    let c = if is_body || alternative == Some(k.id()) {
                        Ctx {
                            lp: Some((n.id(), n.start_byte(), n.end_byte())),
                            body: if is_body { BodyPos::Block } else { BodyPos::Elsewhere },
                            ..ctx
                        }
                    } else {
                        ctx
                    };
                    self.visit(k, c);
                }
                return;
            }
            "with_statement" => {
                let mut cur = n.walk();
                let off = n.children(&mut cur).any(|c| c.kind() == "with_clause" && grad_off_text(text(c, self.src)));
                if off {
                    ctx.grad_off = true;
                    if let Some(f) = self.funcs.get_mut(ctx.func) {
                        f.grad_off_anywhere = true;
                    }
                }
            }
            "identifier" => {
                let t = text(n, self.src);
                if t.to_ascii_lowercase().contains("dropout") {
                    self.has_dropout = true;
                }
                if matches!(
                    t,
                    "FullyShardedDataParallel" | "fully_shard" | "deepspeed" | "ZeroRedundancyOptimizer" | "FSDP"
                ) {
                    self.has_sharding = true;
                }
            }
            "assignment" => self.check_assignment(n, ctx, here),
            "augmented_assignment" => self.check_accumulate(n, ctx),
            "call" => self.check_call(n, ctx),
            _ => {}
        }
        // the statements of a loop body, and their expressions
        ctx.body = match (here, n.kind()) {
            (BodyPos::Block, "block") => BodyPos::Statement,
            (BodyPos::Statement, "expression_statement") => BodyPos::Expression,
            _ => BodyPos::Elsewhere,
        };
        let mut cur = n.walk();
        let kids: Vec<Node> = n.children(&mut cur).collect();
        for k in kids {
            self.visit(k, ctx);
        }
    }

    /// `name = []` (a list that may pile up), `total = total + loss` (an
    /// accumulation), or a per-step reset at the top of a loop body.
    fn check_assignment(&mut self, n: Node, ctx: Ctx, here: BodyPos) {
        if let (Some(l), Some(r)) = (n.child_by_field_name("left"), n.child_by_field_name("right")) {
            let name = text(l, self.src).to_string();
            let rt = text(r, self.src).replace(' ', "");
            if rt == "[]" || rt == "list()" {
                let at = n.start_byte();
                let e = self.list_inits.entry(name.clone()).or_insert((at, at));
                e.0 = e.0.min(at);
                e.1 = e.1.max(at);
            }
            // `total = total + loss` accumulates like `+=`
            let self_sum = r.kind() == "binary_operator"
                && r.child_by_field_name("operator").is_some_and(|o| text(o, self.src) == "+")
                && r.child_by_field_name("left").is_some_and(|x| text(x, self.src) == name);
            if self_sum {
                if let Some(rhs) = r.child_by_field_name("right") {
                    self.accumulate(n, ctx, &name, rhs);
                }
            } else if let Some((id, _, _)) = ctx.lp {
                // only an unconditional reset at the top of the loop body makes
                // the name per-step (a reset under an `if` is periodic: the
                // graph still piles up between resets)
                if here == BodyPos::Expression {
                    self.loop_assigned.entry(id).or_default().insert(name);
                }
            }
        }
    }

    /// `for batch in val_loader:` calling a model, with gradients on.
    fn check_eval_loop(&mut self, n: Node) {
        let (Some(it), Some(body)) = (n.child_by_field_name("right"), n.child_by_field_name("body")) else { return };
        let name = text(it, self.src).to_ascii_lowercase();
        let evalish = EVAL_SPLITS.iter().any(|w| name.contains(w)) && DATA_WORDS.iter().any(|w| name.contains(w));
        if !evalish {
            return;
        }
        // a call of a model inside the body, outside any no_grad block in it
        let mut calls_model = false;
        let mut off_inside = false;
        walk_limited(body, WALK_BUDGET, &mut |c| match c.kind() {
            "with_clause" if grad_off_text(text(c, self.src)) => off_inside = true,
            "call" => {
                if let Some(f) = c.child_by_field_name("function") {
                    let callee = text(f, self.src).trim_start_matches("self.").to_ascii_lowercase();
                    if callee.ends_with("model") || callee.ends_with("net") || callee.ends_with("module") {
                        calls_model = true;
                    }
                }
            }
            _ => {}
        });
        if calls_model && !off_inside {
            self.push(
                n,
                "eval-without-no-grad",
                "this loop runs the model over an evaluation split with gradients on: every forward records the autograd graph and saves its activations, as much as a training forward, instead of freeing each layer's output once the next layer has used it",
                Text::Fixed("wrap the loop in `with torch.inference_mode():` (or torch.no_grad()), or decorate the function with @torch.no_grad()"),
            );
        }
    }

    fn check_accumulate(&mut self, n: Node, ctx: Ctx) {
        let (Some(l), Some(op), Some(r)) =
            (n.child_by_field_name("left"), n.child_by_field_name("operator"), n.child_by_field_name("right"))
        else {
            return;
        };
        if text(op, self.src) != "+=" {
            return;
        }
        let target = text(l, self.src).to_string();
        self.accumulate(n, ctx, &target, r);
    }

    /// `target (+= | = target +) rhs` in a loop: a candidate accumulated loss.
    fn accumulate(&mut self, n: Node, ctx: Ctx, target: &str, r: Node) {
        let Some((loop_id, _, _)) = ctx.lp else { return };
        if ctx.grad_off || !self.mentions(r, &["loss"]) || self.is_safe(r) {
            return;
        }
        // pending: decided in finish() once all assignments and .backward() targets are known
        let rhs = atom(r, self.src);
        self.pending_acc.push((n.start_position().row, n.start_position().column, target.to_string(), rhs, loop_id));
    }

    fn check_call(&mut self, n: Node, ctx: Ctx) {
        let Some(f) = n.child_by_field_name("function") else { return };
        let ft = text(f, self.src);
        let last = ft.rsplit('.').next().unwrap_or(ft);
        let receiver = ft.rsplit_once('.').map(|(r, _)| r.to_string());
        match last {
            "checkpoint" | "checkpoint_sequential" => {
                if self.keyword(n, "preserve_rng_state").as_deref() == Some("False") {
                    let p = n.start_position();
                    self.later.push((p.row, p.column, "checkpoint-rng"));
                }
            }
            "DataParallel" => self.push(
                n,
                "data-parallel",
                "nn.DataParallel keeps a full replica of the model on every GPU and gathers all outputs (and the loss) on GPU 0, so GPU 0 holds more than the others; more GPUs never lower memory per card",
                Text::Fixed("use DistributedDataParallel for speed, and FSDP (FULL_SHARD) or DeepSpeed ZeRO-3 to actually split weights, gradients and optimizer state across cards"),
            ),
            "DistributedDataParallel" => {
                let p = n.start_position();
                self.later.push((p.row, p.column, "ddp-replicates"));
            }
            "backward" | "grad" => {
                let is_autograd = last == "backward" || ft.contains("autograd");
                if is_autograd && ctx.lp.is_some() && self.keyword(n, "retain_graph").as_deref() == Some("True") {
                    self.push(
                        n,
                        "retain-graph-in-loop",
                        "retain_graph=True keeps every saved activation of this graph alive after backward; inside a loop each iteration's graph stays until the names holding it are rebound, so memory grows with the iterations",
                        Text::Fixed("drop retain_graph=True (call backward once on the sum of the losses), or detach what carries over between iterations (e.g. hidden = hidden.detach())"),
                    );
                }
                if last == "backward" {
                    if let Some(r) = receiver {
                        self.backward_on.insert(r);
                    }
                }
            }
            "empty_cache" if ctx.lp.is_some() => self.push(
                n,
                "empty-cache-in-loop",
                "torch.cuda.empty_cache() frees no live tensor: it hands cached free blocks back to the driver, so the next step must cudaMalloc them again (a device sync each time); it slows training and cannot prevent an OOM",
                Text::Fixed("remove it from the loop; for fragmentation set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; call it at most between phases (after training, before evaluation in another process)"),
            ),
            "append" if ctx.lp.is_some() && !ctx.grad_off => {
                let Some(r) = receiver else { return };
                let Some(args) = n.child_by_field_name("arguments") else { return };
                let mut cur = args.walk();
                let Some(arg) = args.named_children(&mut cur).next() else { return };
                let Some((_, lstart, lend)) = ctx.lp else { return };
                let outside = self.list_inits.get(&r).is_some_and(|&(first, last)| first < lstart || last >= lend);
                if outside && self.mentions(arg, &TENSORISH) && !self.is_safe(arg) {
                    let a = clip(&atom(arg, self.src));
                    self.push(
                        n,
                        "tensor-list-across-steps",
                        "appending a tensor that is still attached to the autograd graph keeps that step's whole graph (every saved activation) alive for as long as the list lives; memory grows every step",
                        Text::ListFix(clip(&r), a),
                    );
                }
            }
            "eval" if n.child_by_field_name("arguments").is_some_and(|a| a.named_child_count() == 0) => {
                if let (Some(r), false) = (receiver, ctx.grad_off) {
                    let r = r.trim_start_matches("self.").to_string();
                    let p = n.start_position();
                    if let Some(func) = self.funcs.get_mut(ctx.func) {
                        func.evals.push((r, p.row, p.column));
                    }
                }
            }
            _ => {
                if !ctx.grad_off {
                    let callee = ft.trim_start_matches("self.").to_string();
                    if let Some(func) = self.funcs.get_mut(ctx.func) {
                        func.grad_calls.insert(callee);
                    }
                }
            }
        }
    }
}

/// The expression's text, parenthesised unless it is already an atom
/// (so `.item()` can be appended).
fn atom(n: Node, src: &[u8]) -> String {
    let t = text(n, src);
    match n.kind() {
        "identifier" | "attribute" | "call" | "subscript" | "parenthesized_expression" => t.to_string(),
        _ => format!("({t})"),
    }
}

fn grad_off_text(t: &str) -> bool {
    let t = t.replace(' ', "");
    t.contains("no_grad") || t.contains("inference_mode") || t.contains("set_grad_enabled(False)")
}

/// Pre-order over a subtree with an explicit stack (no recursion: a hostile
/// script can nest expressions hundreds of thousands deep).
fn walk<'t>(n: Node<'t>, f: &mut dyn FnMut(Node<'t>)) {
    let mut stack = vec![n];
    while let Some(n) = stack.pop() {
        f(n);
        let mut cur = n.walk();
        let kids: Vec<Node<'t>> = n.children(&mut cur).collect();
        stack.extend(kids.into_iter().rev());
    }
}

/// Like [`walk`], visiting at most `budget` nodes.
fn walk_limited<'t>(n: Node<'t>, budget: usize, f: &mut dyn FnMut(Node<'t>)) {
    let mut stack = vec![n];
    let mut left = budget;
    while let Some(n) = stack.pop() {
        if left == 0 {
            return;
        }
        left -= 1;
        f(n);
        let mut cur = n.walk();
        let kids: Vec<Node<'t>> = n.children(&mut cur).collect();
        stack.extend(kids.into_iter().rev());
    }
}

/// Parse and lint `src` (at most [`MAX_SCRIPT_BYTES`]).
pub fn lint(src: &str) -> Result<LintReport, LintError> {
    if src.len() > MAX_SCRIPT_BYTES {
        return Err(LintError::TooLarge(src.len()));
    }
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_python::LANGUAGE.into()).map_err(|e| LintError::Grammar(e.to_string()))?;
    let tree = parser.parse(src, None).ok_or(LintError::Parse)?;
    let root = tree.root_node();
    let mut l = LintState::new(src);
    l.lint.funcs.push(Func::default()); // module level
    l.run(root);
    let raw = l.finish();
    let findings_total = raw.len();
    let lines = &l.lint.lines;
    let findings = raw
        .iter()
        .take(MAX_FINDINGS)
        .map(|r| Finding {
            rule: r.rule,
            line: r.row + 1,
            column: r.column + 1,
            code: lines.get(r.row).map(|l| l.trim()).unwrap_or("").chars().take(160).collect(),
            why: r.why.render(),
            fix: r.fix.render(),
        })
        .collect();
    Ok(LintReport { lines: lines.len(), error_nodes: l.lint.errors, findings, findings_total })
}

/// Bytes of the input the Python detection parses.
const DETECT_BYTES: usize = 1 << 20;

/// Does `src` parse as Python with few errors and look like a script?
pub fn looks_like_python(src: &str) -> bool {
    let has_marker = src.lines().take(400).any(|l| {
        let t = l.trim_start();
        t.starts_with("import ")
            || t.starts_with("from ") && t.contains(" import ")
            || t.starts_with("def ")
            || t.starts_with("class ")
    });
    if !has_marker {
        return false;
    }
    let mut parser = Parser::new();
    if parser.set_language(&tree_sitter_python::LANGUAGE.into()).is_err() {
        return false;
    }
    // the first MiB decides (a huge log is not parsed whole to say no)
    let mut end = src.len().min(DETECT_BYTES);
    while end > 0 && !src.is_char_boundary(end) {
        end -= 1;
    }
    let Some(tree) = parser.parse(&src[..end], None) else { return false };
    let mut errors = 0usize;
    let mut nodes = 0usize;
    walk(tree.root_node(), &mut |n| {
        nodes += 1;
        if n.is_error() || n.is_missing() {
            errors += 1;
        }
    });
    // a script with a typo still counts; prose or a log does not
    errors * 50 <= nodes.max(1)
}

/// What the parser made of a text, to tell a script with a few syntax
/// errors from something that is not Python at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonEvidence {
    /// statements that only Python code has (imports, definitions, control
    /// flow, assignments, calls) parsed without an error inside them; a bare
    /// literal or name (`{"a": 1}`, `hello`) is not counted
    pub statements: usize,
    /// non-whitespace bytes inside the parser's ERROR nodes
    pub error_bytes: usize,
    /// non-whitespace bytes read (the first MiB)
    pub text_bytes: usize,
}

fn non_ws(b: &[u8]) -> usize {
    b.iter().filter(|c| !c.is_ascii_whitespace()).count()
}

fn is_python_statement(n: Node) -> bool {
    match n.kind() {
        "import_statement"
        | "import_from_statement"
        | "future_import_statement"
        | "function_definition"
        | "class_definition"
        | "decorated_definition"
        | "for_statement"
        | "while_statement"
        | "if_statement"
        | "with_statement"
        | "try_statement"
        | "return_statement"
        | "assert_statement"
        | "global_statement"
        | "nonlocal_statement"
        | "delete_statement"
        | "raise_statement" => true,
        "expression_statement" => n.named_child(0).is_some_and(|c| {
            // `x: T` alone (no value) is how `Label: value` log lines parse
            c.kind() == "assignment" && c.child_by_field_name("right").is_some()
                || matches!(c.kind(), "augmented_assignment" | "await")
                || c.kind() == "call" && c.child_by_field_name("function").is_some()
        }),
        _ => false,
    }
}

/// Parse the first MiB of `src` and measure how much of it is Python.
pub fn python_evidence(src: &str) -> PythonEvidence {
    let mut end = src.len().min(DETECT_BYTES);
    while end > 0 && !src.is_char_boundary(end) {
        end -= 1;
    }
    let src = &src[..end];
    let mut ev = PythonEvidence { statements: 0, error_bytes: 0, text_bytes: non_ws(src.as_bytes()) };
    let mut parser = Parser::new();
    if parser.set_language(&tree_sitter_python::LANGUAGE.into()).is_err() {
        ev.error_bytes = ev.text_bytes;
        return ev;
    }
    let Some(tree) = parser.parse(src, None) else {
        ev.error_bytes = ev.text_bytes;
        return ev;
    };
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.is_error() {
            ev.error_bytes += non_ws(&src.as_bytes()[n.start_byte()..n.end_byte().min(src.len())]);
            continue; // statements recovered inside an error do not count
        }
        if is_python_statement(n) && !n.has_error() {
            ev.statements += 1;
        }
        let mut cur = n.walk();
        stack.extend(n.children(&mut cur));
    }
    ev
}

/// Why a text forced to be a script (`--kind script`) is not one: no
/// Python statement parsed cleanly, or more than a quarter of its text is
/// inside parse errors. A script with a few typos passes.
pub fn not_python_reason(src: &str) -> Option<String> {
    if let Some(why) = traceback_reason(src) {
        return Some(why);
    }
    let ev = python_evidence(src);
    if ev.statements == 0 {
        return Some(format!(
            "not a Python script: no Python statement (import, def, class, assignment, call, loop…) parses \
             ({} of {} non-blank bytes inside parse errors)",
            ev.error_bytes, ev.text_bytes
        ));
    }
    if ev.error_bytes * 4 > ev.text_bytes {
        return Some(format!(
            "not a Python script: {} of {} non-blank bytes ({:.0}%) do not parse as Python",
            ev.error_bytes,
            ev.text_bytes,
            100.0 * ev.error_bytes as f64 / ev.text_bytes.max(1) as f64
        ));
    }
    None
}

/// A pasted traceback whose source lines parse as Python: IPython / Jupyter
/// prints each frame's code with line numbers (`--> 338 x = f()`, `    336 y`)
/// and ends with the exception line (`RuntimeError: …`). A script has
/// neither an arrow-numbered line nor an exception name at the start of a
/// line followed by its message.
fn traceback_reason(src: &str) -> Option<String> {
    let head = &src[..crate::text::floor_boundary(src, 1 << 20)];
    let numbered = head
        .lines()
        .filter(|l| {
            let t = l.trim_start().trim_start_matches('-').trim_start_matches('>').trim_start();
            (l.trim_start().starts_with("-->") || l.starts_with("    "))
                && t.split_once(' ')
                    .is_some_and(|(n, _)| !n.is_empty() && n.len() <= 6 && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    let arrow = head.lines().any(|l| l.trim_start().starts_with("-->") || l.trim_start().starts_with("---->"));
    let exception = head.lines().any(|l| {
        l.split_once(": ").is_some_and(|(name, _)| {
            let last = name.rsplit('.').next().unwrap_or(name);
            !name.contains(' ') && (last.ends_with("Error") || last.ends_with("Exception"))
        })
    });
    (arrow && numbered >= 2 && exception)
        .then(|| "not a Python script: an IPython traceback (numbered source lines, an exception line)".to_string())
}

struct LintState<'a> {
    lint: Lint<'a>,
}

impl<'a> LintState<'a> {
    fn new(src: &'a str) -> Self {
        LintState {
            lint: Lint {
                src: src.as_bytes(),
                lines: src.lines().collect(),
                findings: Vec::new(),
                found: HashSet::new(),
                funcs: Vec::new(),
                list_inits: HashMap::new(),
                loop_assigned: HashMap::new(),
                backward_on: HashSet::new(),
                has_dropout: false,
                has_sharding: false,
                errors: 0,
                pending_acc: Vec::new(),
                later: Vec::new(),
            },
        }
    }
    fn run(&mut self, root: Node) {
        self.lint.visit(root, Ctx::default());
    }
    fn finish(&mut self) -> Vec<Raw> {
        let l = &mut self.lint;
        // accumulations: skip per-step losses (assigned in the loop or backward()-ed)
        let pending = std::mem::take(&mut l.pending_acc);
        for (row, col, target, rhs, loop_id) in pending {
            let per_step =
                l.loop_assigned.get(&loop_id).is_some_and(|v| v.contains(&target)) || l.backward_on.contains(&target);
            if per_step {
                continue;
            }
            l.found.insert(("accumulated-loss", row + 1));
            let target = clip(&target);
            l.findings.push(Raw {
                rule: "accumulated-loss",
                row,
                column: col,
                why: Text::AccWhy(target.clone()),
                fix: Text::AccFix(target, clip(&rhs)),
            });
        }
        let later = std::mem::take(&mut l.later);
        for (row, col, rule) in later {
            match rule {
                "checkpoint-rng" if l.has_dropout => l.push_at(
                    row,
                    col,
                    "checkpoint-rng",
                    Text::Fixed("preserve_rng_state=False saves almost no memory (the RNG state is a few bytes per device) but the recomputation in backward draws new dropout masks, so the gradients no longer match the forward: a silent correctness bug in a model with dropout"),
                    Text::Fixed("drop preserve_rng_state=False (the default True costs no GPU memory worth counting); pass use_reentrant=False"),
                ),
                "ddp-replicates" if !l.has_sharding => l.push_at(
                    row,
                    col,
                    "ddp-replicates",
                    Text::Fixed("plain DistributedDataParallel keeps full weights, gradients and optimizer states on every GPU, plus gradient buckets of about the size of the gradients (unless gradient_as_bucket_view=True); adding GPUs does not lower memory per card"),
                    Text::Fixed("FSDP (FULL_SHARD / SHARD_GRAD_OP) or DeepSpeed ZeRO-2/3 to shard model states; at least gradient_as_bucket_view=True"),
                ),
                _ => {}
            }
        }
        // eval() without no_grad, followed by a call of the same model
        let funcs = std::mem::take(&mut l.funcs);
        for f in &funcs {
            if f.grad_off_anywhere {
                continue;
            }
            for (recv, row, col) in &f.evals {
                if f.grad_calls.contains(recv) {
                    l.push_at(
                        *row,
                        *col,
                        "eval-without-no-grad",
                        Text::Fixed("model.eval() only switches dropout/batch-norm behaviour; without torch.no_grad() the evaluation forward still records the autograd graph and keeps every activation until the outputs are dropped"),
                        Text::Fixed("wrap the evaluation in `with torch.inference_mode():` (or torch.no_grad(), or decorate the function with @torch.no_grad())"),
                    );
                }
            }
        }
        let mut out = std::mem::take(&mut l.findings);
        out.sort_by(|a, b| a.row.cmp(&b.row).then(a.rule.cmp(b.rule)));
        out
    }
}
