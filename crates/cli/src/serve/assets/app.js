// vramfit's page: forms in, the CLI's JSON out. No formula and no decision
// lives here: every figure, verdict and chart comes from /api/* (the CLI's
// own --json and --svg output); this file only lays them out, in English
// or Simplified Chinese, and keeps the form in the URL.
'use strict';

const T = {
  en: {
    tab_estimate: 'Estimate', tab_plan: 'Plan', tab_diagnose: 'Diagnose', tab_mig: 'MIG', tab_check: 'Check',
    estimate_title: 'Will it fit?', plan_title: 'Cheapest way to make it fit', diagnose_title: 'Why did it run out of memory?',
    mig_title: 'Split cards with MIG', check_title: 'Is this the machine you rented?',
    f_model: 'Model', f_paste_config: '…or paste a config.json', f_task: 'Task', f_dtype: 'Weights', f_precision: 'Precision',
    f_batch: 'Batch', f_context: 'Context (tokens)', f_concurrency: 'Concurrency', f_lora_rank: 'LoRA rank',
    f_optimizer: 'Optimizer', f_checkpointing: 'Checkpointing', f_gpus: 'GPUs', f_tp: 'Tensor parallel', f_gpu: 'GPU',
    f_gpu_mem: 'Memory', f_have: 'Your card', f_allow: 'Changes you accept', f_tokens: 'Job size (tokens)', f_hours: '…or hours',
    f_paste_oom: 'Paste the error, a log or memory_summary()', f_upload: '…or upload a file (snapshot pickle, log, script)',
    f_beside: 'Put an estimate beside the failure', f_mig_gpu: 'Card', f_services: 'Services: name = size or model[:ctx=N,conc=N,dtype=D]',
    f_max_gpus: 'Cards available', f_expect: 'What you rented', f_expect_nvlink: 'every GPU pair joined by NVLink',
    task_infer: 'Inference', task_train: 'Full FT', o_default: 'default', o_none: 'none', o_selective: 'selective', o_full: 'full',
    o_no_gpu: '— no card —', o_custom: 'custom size…', o_no_have: '— none —', o_from_message: '— from the message —', o_quant: 'int8/int4, fp8 KV',
    ph_model: 'llama-2-7b or org/name', ph_context: '4096 or 32k', ph_concurrency: '= batch', ph_oom: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …',
    ph_config: '{"model_type": "llama", …}',
    b_choose: 'Choose file', no_file: 'No file chosen',
    b_estimate: 'Estimate', b_plan: 'Plan', b_diagnose: 'Diagnose', b_mig: 'Lay out', b_check: 'Check', b_add_service: '+ add a service',
    hint_estimate: 'Every number comes from the same code as vramfit estimate; open a category to see its formula.',
    hint_plan: 'Prices are the catalogue\'s, in the currency you are billed in; check the live price before renting.',
    hint_diagnose: 'Snapshots are read by vramfit\'s own unpickler: no pickle code runs. Up to 64 MiB here; the CLI takes 512 MiB.',
    hint_mig: 'Exact search: fewest cards, then least wasted memory.',
    hint_check: 'The files are read in this page\'s request only; the server never reads this machine\'s GPUs for it.',
    empty_estimate: 'Pick a model and a card: the bar shows where the memory goes.',
    empty_plan: 'Describe the job: the plan lists software switches, more cards and bigger cards, priced.',
    empty_diagnose: 'Paste what the failed run printed: the verdict names the main cause with its figures, then the fixes, cheapest first.',
    empty_mig: 'Add the services to host: the layout shows each card\'s slices and what is wasted.',
    empty_check: 'Upload or paste what nvidia-smi printed on the rented machine.',
    f_paste_smi: '…or paste what nvidia-smi -q or -q -x printed', need_diagnose: 'Paste an error, a log or memory_summary(), or choose a file, first.',
    need_check: 'Choose a file or paste what nvidia-smi printed, first.',
    footer: 'Runs on this machine; nothing leaves it.',
    working: 'Working…', bad_input: 'Input problem', server_error: 'vramfit failed', too_large: 'Too large',
    v_fits: 'Fits', v_tight: 'Tight', v_no: 'Does not fit', v_needs: 'Needs',
    v_fits_sub: '{need} of {mem} usable · {room} headroom', v_tight_sub: '{need} of {mem} usable: the tensors fit, the allocator\'s {margin} of cached blocks does not — expect OOMs under fragmentation',
    v_no_sub: '{need} of {mem} usable · short by {short}', v_nocard_sub: 'per GPU · pick a card to see whether it fits',
    on: 'on', per_gpu: 'per GPU', categories: 'Where the memory goes', category: 'Category', share: 'Share', bytes: 'Bytes',
    show_formula: 'formula', formula: 'Formula', inputs: 'Inputs', tensor_peak: 'tensor peak (max_memory_allocated)', total: 'total per GPU',
    sweep: 'Around this point', largest: 'Largest that fits', k_context: 'context', k_concurrency: 'concurrency', k_micro_batch: 'micro-batch',
    now: 'now', at_limit: 'the model\'s limit', none_fits: 'none fits', formats: 'Every weight format', methods: 'Every method', cards_hold: 'Catalogue GPUs that hold it',
    no_bf16: 'large enough, but no bf16', no_card_hold: 'none in the catalogue', as_given: 'as given', notes: 'Notes',
    c_weights: 'weights', c_master_weights: 'master weights', c_gradients: 'gradients', c_optimizer_states: 'optimizer states',
    c_activations: 'activations', c_kv_cache: 'KV cache', c_logits: 'logits', c_temporaries: 'temporaries', c_runtime: 'runtime', c_margin: 'margin',
    recommended: 'Recommended', no_plan: 'Nothing in the catalogue fits this job', path1: '1 · Switches on your card', path2: '2 · More cards, sharded',
    path3: '3 · A bigger card', ranked: 'Ranked plans', offer: 'Offer', gpus_col: 'GPUs', setup: 'Setup', memory: 'Per GPU', price: 'Price',
    speed: 'Tokens/s', job_cost: 'Job cost', billed_col: 'Billed for the job', your_card: 'your card', best_rental: 'Best rental',
    one_month: '1 month', n_months: '{n} months', n_hours: '{n} h', prorated: 'prorated {x}', per_month: '/mo', per_hour: '/h', break_even: 'Break-even', downloads: 'Launch configs',
    dl_deepspeed: 'DeepSpeed ds_config.json', dl_accelerate: 'accelerate config', dl_torchrun: 'torchrun + FSDP', dl_mig: 'mig-parted config',
    no_have: 'Name your card to see the switches that make it fit there.', first_fit: 'fits from', single_gpu: 'per GPU on one card',
    dp_only: 'plain data parallel on {n}', fits_on: 'fits on', none_single: 'no single offer holds it unchanged', your_cards: 'your cards',
    be_text: '{machine} vs {single}: costs {low}–{high}× as much, runs {speed}× as fast; {which} per token.',
    be_machine: 'the machine is cheaper', be_single: 'the single card is cheaper', be_unknown: 'neither is clearly cheaper',
    main_cause: 'Main cause', contributors: 'Also holding memory', figures: 'Figures', reasoning: 'Reasoning', fixes: 'Fixes, cheapest first',
    cost_setting: 'setting', cost_housekeeping: 'housekeeping', cost_code: 'code', cost_workload: 'workload', cost_hardware: 'hardware',
    of_card: 'of the card', line: 'line', snapshot: 'Memory snapshot', peak_top: 'Largest live allocations at the peak',
    findings: 'Findings', lint: 'Script lint', no_findings: 'No memory problem found in this script.', summary: 'memory_summary()',
    estimate_beside: 'The estimate beside the failure', culprit: 'largest category', cheapest_switch: 'Cheapest switch that fits',
    layout: 'Layout', instances: 'Instances', service: 'Service', profile: 'Profile', need: 'Need', slice: 'Slice', waste: 'Waste',
    refused: 'Refused', advice: 'Advice', mig_fits: 'Fits on {n} × {card}', mig_no: 'Does not fit: {n} cards needed',
    check_ok: 'Matches what was rented', check_fail: 'Does not match', check_none: 'Read, nothing expected', gpus_found: 'GPUs',
    l_pass: 'pass', l_fail: 'fail', l_warn: 'warn', l_info: 'info', name: 'Name', mig: 'MIG', pcie: 'PCIe', ecc: 'ECC',
    ml_batch: 'batch', ml_seq: 'seq', interconnect: 'Interconnect', vram: 'Memory', wasted: 'wasted', remove: 'remove', svc_name: 'name', svc_spec: 'size or model',
    kind_oom: 'OOM message', kind_summary: 'memory_summary()', kind_snapshot: 'snapshot', kind_script: 'training script',
  },
  zh: {
    tab_estimate: '显存估算', tab_plan: '方案', tab_diagnose: 'OOM 诊断', tab_mig: 'MIG 切分', tab_check: '机器核验',
    estimate_title: '放得下吗？', plan_title: '最省钱的可行方案', diagnose_title: '为什么显存不够？',
    mig_title: '用 MIG 切分显卡', check_title: '这台机器是你租的那台吗？',
    f_model: '模型', f_paste_config: '…或粘贴 config.json', f_task: '任务', f_dtype: '权重格式', f_precision: '训练精度',
    f_batch: '批大小', f_context: '上下文（token）', f_concurrency: '并发数', f_lora_rank: 'LoRA 秩',
    f_optimizer: '优化器', f_checkpointing: '激活检查点', f_gpus: 'GPU 数', f_tp: '张量并行', f_gpu: '显卡',
    f_gpu_mem: '显存', f_have: '你的显卡', f_allow: '可接受的改动', f_tokens: '任务量（token）', f_hours: '…或小时数',
    f_paste_oom: '粘贴报错、日志或 memory_summary()', f_upload: '…或上传文件（快照 pickle、日志、脚本）',
    f_beside: '在故障旁给出估算', f_mig_gpu: '显卡', f_services: '服务：名称 = 大小 或 模型[:ctx=N,conc=N,dtype=D]',
    f_max_gpus: '可用卡数', f_expect: '租的是什么', f_expect_nvlink: '每对 GPU 之间都是 NVLink',
    task_infer: '推理', task_train: '全量微调', o_default: '默认', o_none: '无', o_selective: '选择性', o_full: '完全',
    o_no_gpu: '— 不指定显卡 —', o_custom: '自定义显存…', o_no_have: '— 无 —', o_from_message: '— 取自报错 —', o_quant: 'int8/int4、fp8 KV',
    ph_model: 'llama-2-7b 或 org/name', ph_context: '4096 或 32k', ph_concurrency: '= 批大小', ph_oom: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …',
    ph_config: '{"model_type": "llama", …}',
    b_choose: '选择文件', no_file: '未选择文件',
    b_estimate: '估算', b_plan: '出方案', b_diagnose: '诊断', b_mig: '切分', b_check: '核验', b_add_service: '+ 添加服务',
    hint_estimate: '每个数字都来自与 vramfit estimate 相同的代码；展开类别可查看公式。',
    hint_plan: '价格取自目录，按你的计费币种显示；租用前请核对实时价格。',
    hint_diagnose: '快照由 vramfit 自己的反序列化器读取，不执行任何 pickle 代码。此处上限 64 MiB，命令行为 512 MiB。',
    hint_mig: '精确搜索：先用最少的卡，再浪费最少的显存。',
    hint_check: '文件只在本页请求中读取；服务器不会为此读取本机 GPU。',
    empty_estimate: '选择模型和显卡：条形图显示显存花在哪里。',
    empty_plan: '描述任务：方案列出软件开关、更多卡和更大的卡，并附价格。',
    empty_diagnose: '粘贴失败运行的输出：结论给出主因及数字，再按成本从低到高给出修复办法。',
    empty_mig: '添加要部署的服务：布局显示每张卡的切片和浪费。',
    empty_check: '上传或粘贴在租用机器上 nvidia-smi 的输出。',
    f_paste_smi: '…或粘贴 nvidia-smi -q 或 -q -x 的输出', need_diagnose: '请先粘贴报错、日志或 memory_summary()，或选择文件。',
    need_check: '请先选择文件或粘贴 nvidia-smi 的输出。',
    footer: '在本机运行；数据不会离开本机。',
    working: '计算中…', bad_input: '输入有误', server_error: 'vramfit 出错', too_large: '过大',
    v_fits: '放得下', v_tight: '很紧', v_no: '放不下', v_needs: '需要',
    v_fits_sub: '需要 {need}，可用 {mem} · 剩余 {room}', v_tight_sub: '需要 {need}，可用 {mem}：张量放得下，分配器缓存的 {margin} 放不下——碎片化时很可能 OOM',
    v_no_sub: '需要 {need}，可用 {mem} · 缺 {short}', v_nocard_sub: '每卡 · 选择显卡以判断能否放下',
    on: '', per_gpu: '每卡', categories: '显存去向', category: '类别', share: '占比', bytes: '字节',
    show_formula: '公式', formula: '公式', inputs: '输入', tensor_peak: '张量峰值（max_memory_allocated）', total: '每卡合计',
    sweep: '周边情况', largest: '能放下的最大值', k_context: '上下文', k_concurrency: '并发数', k_micro_batch: '微批大小',
    now: '当前', at_limit: '模型上限', none_fits: '都放不下', formats: '各种权重格式', methods: '各种训练方法', cards_hold: '放得下的目录显卡',
    no_bf16: '显存够，但不支持 bf16', no_card_hold: '目录中没有', as_given: '当前设置', notes: '说明',
    c_weights: '权重', c_master_weights: '主权重', c_gradients: '梯度', c_optimizer_states: '优化器状态',
    c_activations: '激活值', c_kv_cache: 'KV 缓存', c_logits: 'logits', c_temporaries: '临时缓冲', c_runtime: '运行时', c_margin: '缓存预留',
    recommended: '推荐', no_plan: '目录中没有能放下此任务的方案', path1: '1 · 你的卡上的软件开关', path2: '2 · 更多卡，分片',
    path3: '3 · 更大的卡', ranked: '方案排名', offer: '报价', gpus_col: 'GPU', setup: '配置', memory: '每卡', price: '价格',
    speed: 'token/秒', job_cost: '任务成本', billed_col: '任务账单', your_card: '你自己的卡', best_rental: '最佳租用方案',
    one_month: '1 个月', n_months: '{n} 个月', n_hours: '{n} 小时', prorated: '按时折算 {x}', per_month: '/月', per_hour: '/时', break_even: '盈亏平衡', downloads: '启动配置',
    dl_deepspeed: 'DeepSpeed ds_config.json', dl_accelerate: 'accelerate 配置', dl_torchrun: 'torchrun + FSDP', dl_mig: 'mig-parted 配置',
    no_have: '填写你的显卡，即可看到让它放得下的开关。', first_fit: '从此步起放得下', single_gpu: '单卡每卡显存',
    dp_only: '纯数据并行 {n} 卡', fits_on: '可放在', none_single: '没有单卡报价能原样放下', your_cards: '你的卡',
    be_text: '{machine} 对比 {single}：价格是 {low}–{high} 倍，速度是 {speed} 倍；{which}。',
    be_machine: '按 token 计整机更便宜', be_single: '按 token 计单卡更便宜', be_unknown: '两者差不多',
    main_cause: '主因', contributors: '其他占用', figures: '数字', reasoning: '推理', fixes: '修复办法（成本从低到高）',
    cost_setting: '设置', cost_housekeeping: '整理', cost_code: '改代码', cost_workload: '改负载', cost_hardware: '换硬件',
    of_card: '占整卡', line: '行', snapshot: '显存快照', peak_top: '峰值时最大的存活分配',
    findings: '发现', lint: '脚本检查', no_findings: '此脚本未发现显存问题。', summary: 'memory_summary()',
    estimate_beside: '故障旁的估算', culprit: '最大类别', cheapest_switch: '能放下的最便宜开关',
    layout: '布局', instances: '实例', service: '服务', profile: '配置档', need: '需要', slice: '切片', waste: '浪费',
    refused: '无法放置', advice: '建议', mig_fits: '放得下：{n} × {card}', mig_no: '放不下：需要 {n} 张卡',
    check_ok: '与租用的一致', check_fail: '与租用的不符', check_none: '已读取，未给出期望', gpus_found: 'GPU',
    l_pass: '通过', l_fail: '不符', l_warn: '注意', l_info: '信息', name: '名称', mig: 'MIG', pcie: 'PCIe', ecc: 'ECC',
    ml_batch: '批大小', ml_seq: '序列', interconnect: '互联', vram: '显存', wasted: '浪费', remove: '删除', svc_name: '名称', svc_spec: '大小或模型',
    kind_oom: 'OOM 报错', kind_summary: 'memory_summary()', kind_snapshot: '快照', kind_script: '训练脚本',
  },
};

const VIEWS = ['estimate', 'plan', 'diagnose', 'mig', 'check'];
const CATS = ['weights', 'master_weights', 'gradients', 'optimizer_states', 'activations', 'kv_cache', 'logits', 'temporaries', 'runtime', 'margin'];
const S = { view: 'estimate', lang: 'en', catalog: null, seq: {}, timers: {} };

const $ = (s, r = document) => r.querySelector(s);
const $$ = (s, r = document) => Array.from(r.querySelectorAll(s));
function t(k, vars) {
  let s = (T[S.lang] && T[S.lang][k]) || T.en[k] || k;
  if (vars) for (const [a, b] of Object.entries(vars)) s = s.split('{' + a + '}').join(b);
  return s;
}

// An element: el('div.class', {attr}, child, 'text', …)
function el(spec, attrs, ...kids) {
  const [tag, ...cls] = spec.split('.');
  const e = document.createElement(tag || 'div');
  if (cls.length) e.className = cls.join(' ');
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) { kids.unshift(attrs); attrs = null; }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') e.textContent = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}

// `x` with `d` decimals as Rust's `{:.d}` writes it: an exact tie rounds
// to the even digit (3.125 → "3.12"), where toFixed would round up.
function fixed(x, d) {
  const long = x.toFixed(d + 25);
  const cut = long.indexOf('.') + d + (d ? 1 : 0);
  if (!/^50*$/.test(long.slice(cut + (d ? 0 : 1)))) return x.toFixed(d);
  const head = long.slice(0, cut);
  const last = Number(head.replace('.', '').slice(-1));
  return last % 2 === 0 ? head : (x + 0.5 * Math.pow(10, -d)).toFixed(d);
}

// Binary units, as the CLI prints them (report::format::bytes).
function gib(b) {
  const GiB = 1073741824, MiB = 1048576;
  const n = Math.abs(Number(b));
  const s = n >= GiB ? fixed(n / GiB, 2) + ' GiB' : n >= MiB ? fixed(n / MiB, 1) + ' MiB' : n >= 1024 ? fixed(n / 1024, 1) + ' KiB' : n + ' B';
  return (Number(b) < 0 ? '-' : '') + s;
}
const num = (x, d = 0) => Number(x).toLocaleString(S.lang === 'zh' ? 'zh-CN' : 'en-US', { maximumFractionDigits: d, minimumFractionDigits: 0 });
const pct = (x) => fixed(Number(x) * 100, 1) + '%';
const CUR = { CNY: '¥', USD: '$', EUR: '€' };
function money(r, cur, per) {
  if (!r) return '—';
  const c = CUR[cur] || (cur + ' ');
  const f = (x) => c + num(x, x < 10 ? 2 : 0);
  return (Math.abs(r.high - r.low) < 1e-9 ? f(r.low) : f(r.low) + '–' + f(r.high)) + (per || '');
}

// ------------------------------------------------------------------ API
async function api(ep, body, opts = {}) {
  const init = { method: 'POST', headers: {} };
  let url = '/api/' + ep;
  // the sentences of a JSON answer come back in the page's language (the CLI's catalogue, vramfit_report::i18n)
  const lang = S.lang !== 'en' && ep !== 'fleet' ? { lang: S.lang } : {};
  if (opts.query !== undefined) opts = Object.assign({}, opts, { query: Object.assign({}, opts.query, lang) });
  else body = Object.assign({}, body, lang);
  if (opts.query !== undefined) {
    url += '?' + new URLSearchParams(opts.query).toString();
    init.body = body;
    init.headers['content-type'] = 'application/octet-stream';
  } else {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  const r = await fetch(url, init);
  const text = await r.text();
  if (!r.ok) {
    let e = { error: text, field: null, status: r.status };
    try { e = JSON.parse(text); } catch (_) { /* keep the text */ }
    return { ok: false, status: r.status, error: e };
  }
  const type = r.headers.get('content-type') || '';
  return { ok: true, exit: Number(r.headers.get('x-vramfit-exit') || 0), text, json: type.startsWith('application/json') ? JSON.parse(text) : null };
}

// An SVG chart from the server (the CLI's --svg renderer), inlined: it is
// our own markup with escaped text and presentation attributes only.
function chart(svgText) {
  const doc = new DOMParser().parseFromString(svgText, 'image/svg+xml');
  const svg = doc.documentElement;
  if (!svg || svg.nodeName !== 'svg') return el('div');
  // the page shows the chart's headline in its own verdict band
  const head = svg.querySelector('g.vf-head');
  const vb = (svg.getAttribute('viewBox') || '').split(' ').map(Number);
  if (head && vb.length === 4) {
    const h = Number(head.getAttribute('data-height')) || 0;
    head.remove();
    svg.setAttribute('viewBox', [vb[0], vb[1] + h, vb[2], vb[3] - h].join(' '));
  }
  svg.removeAttribute('width');
  svg.removeAttribute('height');
  return el('div.chart', document.importNode(svg, true));
}

function errorBox(e) {
  const title = e.status === 413 ? t('too_large') : e.status >= 500 ? t('server_error') : t('bad_input');
  return el('div.error', { role: 'alert' }, el('strong', { text: title }), el('span.msg', { text: e.error }));
}

// The API names the field an error is about (the request's own key); most
// inputs carry that name, these do not.
const FIELD_INPUT = { service: 'svc_spec' };

function markField(form, e) {
  $$('.invalid', form).forEach((x) => x.classList.remove('invalid'));
  $$('.field-error', form).forEach((x) => x.remove());
  if (!e || !e.field) return;
  const input = form.elements[FIELD_INPUT[e.field] || e.field];
  const node = input && (input.length !== undefined && !input.tagName ? input[0] : input);
  if (!node) return;
  const host = node.closest('.field') || node.parentElement;
  host.classList.add('invalid');
  host.append(el('div.field-error', { text: e.error }));
}

// ------------------------------------------------------------------ forms and the URL
function task(form) {
  const r = form.elements.task;
  return r ? (r.value || 'infer') : 'infer';
}

function applyWhen(form) {
  const tk = task(form);
  $$('[data-when]', form).forEach((n) => {
    const on = n.dataset.when.split(' ').includes(tk);
    n.hidden = !on;
    $$('input, select, textarea', n).forEach((i) => { i.disabled = !on; });
  });
  $$('[data-when-gpu]', form).forEach((n) => {
    const on = form.elements.gpu && form.elements.gpu.value === '__custom';
    n.hidden = !on;
    $$('input', n).forEach((i) => { i.disabled = !on; });
  });
}

// The form's fields as the API names them: empty fields left out.
function fields(form) {
  const out = {};
  for (const e of form.elements) {
    if (!e.name || e.disabled || e.type === 'file' || e.type === 'submit' || e.type === 'button') continue;
    if (e.type === 'radio' && !e.checked) continue;
    if (e.type === 'checkbox') {
      if (!e.checked) continue;
      if (e.value && e.value !== 'on') { (out[e.name] = out[e.name] || []).push(e.value); continue; }
      out[e.name] = true;
      continue;
    }
    const v = e.value.trim();
    if (v === '' || v === '__custom') continue;
    out[e.name] = v;
  }
  return out;
}

function fill(form, params) {
  if (params.has('gpu_mem') && !params.get('gpu') && form.elements.gpu_mem !== undefined) params.set('gpu', '__custom');
  for (const e of form.elements) {
    if (!e.name || e.type === 'file') continue;
    const has = params.has(e.name);
    if (e.type === 'radio') { if (has) e.checked = params.get(e.name) === e.value; }
    else if (e.type === 'checkbox') e.checked = e.value && e.value !== 'on' ? params.getAll(e.name).includes(e.value) : params.get(e.name) === 'true';
    else if (has) {
      if (e.tagName === 'SELECT' && ![...e.options].some((o) => o.value === params.get(e.name))) {
        if (e.name === 'gpu' && form.elements.gpu_mem !== undefined) { e.value = '__custom'; continue; }
      }
      e.value = params.get(e.name);
      // a number field empties a value it cannot read (`batch=4x`): keep the text, so the
      // request carries it and the answer names the field, never a silent default
      if (e.value === '' && params.get(e.name) !== '') { e.type = 'text'; e.value = params.get(e.name); }
    }
  }
}

// Form state → the URL (shareable, reload-safe); pasted texts stay out.
function toURL(view, obj) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'config_json' || k === 'text') continue;
    if (Array.isArray(v)) v.forEach((x) => p.append(k, x)); else p.set(k, v === true ? 'true' : v);
  }
  if (S.lang !== 'en') p.set('lang', S.lang);
  const hash = '#/' + view + (p.toString() ? '?' + p.toString() : '');
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

function parseHash() {
  const h = location.hash.replace(/^#\/?/, '');
  const [view, q] = h.split('?');
  return { view: VIEWS.includes(view) ? view : 'estimate', params: new URLSearchParams(q || '') };
}

// Run a request for a view; only the latest answer is shown.
async function run(view, fn) {
  const out = $('#out-' + view);
  const seq = (S.seq[view] = (S.seq[view] || 0) + 1);
  out.classList.add('busy');
  try {
    const node = await fn();
    if (seq !== S.seq[view]) return;
    out.replaceChildren(node);
  } catch (err) {
    if (seq !== S.seq[view]) return;
    out.replaceChildren(errorBox({ error: String(err && err.message || err), status: 0 }));
  } finally {
    if (seq === S.seq[view]) out.classList.remove('busy');
  }
}

// ------------------------------------------------------------------ estimate
function verdictBand(fit, total, marginBytes) {
  if (!fit) {
    return el('div.band.neutral', el('div.big', t('v_needs') + ' ' + gib(total)), el('div.sub', { text: t('v_nocard_sub') }));
  }
  const v = fit.verdict;
  const cls = v === 'fits' ? 'ok' : v === 'tight' ? 'tight' : 'no';
  const head = (v === 'fits' ? t('v_fits') : v === 'tight' ? t('v_tight') : t('v_no')) + (S.lang === 'zh' ? '：' : ' ' + t('on') + ' ') + fit.gpu;
  const vars = { need: gib(fit.required_bytes), mem: gib(fit.usable_bytes), room: gib(fit.headroom_bytes), short: gib(-fit.headroom_bytes), margin: gib(marginBytes) };
  const sub = v === 'fits' ? t('v_fits_sub', vars) : v === 'tight' ? t('v_tight_sub', vars) : t('v_no_sub', vars);
  return el('div.band.' + cls, { 'data-verdict': v }, el('div.big', { text: head }), el('div.sub', { text: sub }));
}

function explainNode(x) {
  return el('div.explain',
    el('div.formula', el('span.k', { text: t('formula') }), el('code', { text: x.formula })),
    x.terms.length ? el('table.terms', x.terms.map((tm) => el('tr', el('td', { text: tm.name }), el('td.num', { text: typeof tm.value === 'number' && Number.isInteger(tm.value) ? num(tm.value) : String(tm.value) })))) : null,
    x.note ? el('div.note', { text: x.note }) : null);
}

function categoryTable(r) {
  const total = r.per_gpu.total_bytes || 1;
  const rows = [];
  for (const c of CATS) {
    const b = r.per_gpu.categories[c] || 0;
    if (!b) continue;
    const entries = r.per_gpu.entries.filter((e) => e.category === c);
    const detail = el('tr.detail', { hidden: true }, el('td', { colspan: 4 },
      entries.map((e) => el('div.entry', el('div.entry-head', el('span', { text: e.label }), el('span.num', { text: gib(e.bytes) })), explainNode(e.explain)))));
    const toggle = el('button.link', { type: 'button', 'aria-expanded': 'false', text: t('show_formula') });
    const row = el('tr.cat', { 'data-category': c },
      el('td', el('span.swatch.c-' + c), t('c_' + c)),
      el('td.num', { text: gib(b) }),
      el('td.num', { text: pct(b / total) }),
      el('td.num', toggle));
    const flip = () => { detail.hidden = !detail.hidden; toggle.setAttribute('aria-expanded', String(!detail.hidden)); row.classList.toggle('open', !detail.hidden); };
    toggle.addEventListener('click', (ev) => { ev.stopPropagation(); flip(); });
    row.addEventListener('click', flip);
    rows.push(row, detail);
  }
  rows.push(el('tr.sum', el('td', { text: t('tensor_peak') }), el('td.num', { text: gib(r.per_gpu.tensor_peak_bytes) }), el('td'), el('td')));
  rows.push(el('tr.sum.total', el('td', { text: t('total') }), el('td.num', { text: gib(r.per_gpu.total_bytes) }), el('td.num', { text: '100%' }), el('td')));
  return el('div.card',
    el('h3', { text: t('categories') }),
    el('div.scroll', el('table.cats', { id: 'category-table' }, el('thead', el('tr', el('th', { text: t('category') }), el('th.num', { text: t('per_gpu') }), el('th.num', { text: t('share') }), el('th'))), el('tbody', rows))));
}

function sweepCards(r) {
  const s = r.sweep;
  if (!s) return null;
  const cards = [];
  if (s.largest.length) {
    cards.push(el('div.card.mini', el('h3', { text: t('largest') }),
      el('div.stats', s.largest.map((l) => el('div.stat', { 'data-knob': l.knob },
        el('div.label', { text: t('k_' + l.knob) }),
        el('div.value', { text: l.value === null ? t('none_fits') : num(l.value) }),
        el('div.sub', { text: (l.at_limit ? t('at_limit') + ' · ' : '') + t('now') + ' ' + num(l.current) }))))));
  }
  const rows = s.variants.map((v) => el('tr' + (v.current ? '.current' : ''), { 'data-value': v.value },
    el('td', el('code', { text: v.value }), el('div.muted.small', { text: v.error ? v.error : v.label + (v.current ? ' · ' + t('as_given') : '') })),
    el('td.num', { text: v.total_bytes === null ? '—' : gib(v.total_bytes) }),
    el('td.num', v.error ? el('span.pill.no', { text: '×' }) : v.fits === null ? '' : el('span.pill.' + (v.fits ? 'ok' : 'no'), { text: v.fits ? t('v_fits') : t('v_no') }))));
  const isTrain = r.workload.task !== 'infer';
  const formats = el('div.card.mini', el('h3', { text: isTrain ? t('methods') : t('formats') }), el('table.variants', { id: 'variants' }, el('tbody', rows)));
  const hold = s.cards.filter((c) => c.holds);
  const noBf16 = s.cards.filter((c) => c.fits && c.lacks_bf16);
  const holdCard = el('div.card.mini', el('h3', { text: t('cards_hold') }),
    el('div.chips', { id: 'cards-hold' }, hold.length ? hold.map((c) => el('span.chip.ok', { title: gib(c.memory_bytes) + ' · ' + gib(c.headroom_bytes), text: c.name })) : el('span.muted', { text: t('no_card_hold') })),
    noBf16.length ? el('div.label', { text: t('no_bf16') }) : null,
    noBf16.length ? el('div.chips', noBf16.map((c) => el('span.chip.warn', { text: c.name }))) : null);
  return el('div.sweep', el('h3.section', { text: t('sweep') }), el('div.sweep-grid', cards.concat([formats, holdCard])));
}

function notesCard(notes) {
  if (!notes || !notes.length) return null;
  return el('details.card.notes', el('summary', { text: t('notes') + ' (' + notes.length + ')' }), el('ul', notes.map((n) => el('li', { text: n }))));
}

async function estimate(form) {
  const body = fields(form);
  toURL('estimate', body);
  if (!body.model && !body.config_json) return el('div.empty', { text: t('empty_estimate') });
  body.sweep = true;
  const [j, g] = await Promise.all([api('estimate', body), api('estimate', Object.assign({}, body, { sweep: false, svg: true, svg_lang: S.lang }))]);
  markField(form, j.ok ? null : j.error);
  if (!j.ok) return errorBox(j.error);
  const r = j.json;
  return el('div.stack', { id: 'estimate-result' },
    verdictBand(r.fit, r.per_gpu.total_bytes, r.per_gpu.categories.margin || 0),
    g.ok ? el('div.card.chart-card', { id: 'memory-bar' }, chart(g.text)) : null,
    el('div.model-line', el('strong', { text: r.model.name }), ' · ' + fixed(r.model.params_total / 1e9, 2) + 'B · ' + r.model.family + ' · ' + r.model.attention + ' · ' + (r.workload.task === 'infer' ? t('task_infer').toLowerCase() : r.workload.task === 'train' ? t('task_train') : r.workload.task.toUpperCase().replace('QLORA', 'QLoRA').replace('LORA', 'LoRA')) + ' ' + r.workload.dtype + ' · ' + t('ml_batch') + ' ' + r.workload.batch + ' · ' + t('ml_seq') + ' ' + r.workload.seq + ' · ' + r.gpus + ' GPU'),
    categoryTable(r),
    sweepCards(r),
    notesCard(r.model.notes.concat(r.notes)));
}

// ------------------------------------------------------------------ plan
function setupWords(su) {
  const w = [su.method];
  if (su.precision) w.push(su.precision);
  if (su.weights) w.push(su.weights);
  if (su.optimizer && su.optimizer !== 'adamw') w.push(su.optimizer);
  if (su.checkpointing && su.checkpointing !== 'none') w.push('ckpt ' + su.checkpointing);
  if (su.sharding !== 'none') w.push(su.sharding);
  if (su.tp > 1) w.push('TP' + su.tp);
  if (su.pp > 1) w.push('PP' + su.pp);
  if (su.offload_optimizer !== 'none') w.push('offload ' + su.offload_optimizer);
  w.push('mb ' + su.micro_batch + (su.grad_accum > 1 ? '×' + su.grad_accum : ''));
  return w.join(' · ');
}

// One price per plan: what the rental bills for the job (`billed`, the
// figure the plans are ranked by), primary; the rate and, for a rental
// billed in whole months, the prorated cost (`job_cost`) beside it. Your
// own card (`own_card`, unpriced) says so instead of empty price slots.
function isOwn(row, d) {
  return !!(d && d.own_card && row.offer_id === d.own_card.offer_id && row.gpus === d.own_card.gpus);
}

function priceOf(row, d) {
  if (isOwn(row, d)) return t('your_card');
  if (row.billed) {
    const span = row.billing === 'monthly'
      ? (row.months_billed === 1 || row.months_billed === null ? t('one_month') : t('n_months', { n: row.months_billed }))
      : t('n_hours', { n: num(row.job_hours || 0) });
    return money(row.billed, row.currency) + ' (' + span + ')';
  }
  if (row.monthly) return money(row.monthly, row.currency, t('per_month'));
  if (row.hourly) return money(row.hourly, row.currency, t('per_hour'));
  return '—';
}

function priceNote(row, d) {
  if (isOwn(row, d) || !row.billed) return '';
  const rate = row.monthly ? money(row.monthly, row.currency, t('per_month')) : row.hourly ? money(row.hourly, row.currency, t('per_hour')) : '';
  const pro = row.billing === 'monthly' && row.job_cost && (row.job_cost.low !== row.billed.low || row.job_cost.high !== row.billed.high)
    ? t('prorated', { x: money(row.job_cost, row.currency) }) : '';
  return [rate, pro].filter(Boolean).join(' · ');
}

function planRowCard(title, row, extra, d) {
  if (!row) return el('div.card.mini', el('h3', { text: title }), extra || el('div.muted', { text: '—' }));
  const note = priceNote(row, d);
  return el('div.card.mini', el('h3', { text: title }),
    el('div.offer', el('strong', { text: row.gpus + ' × ' + row.gpu_name }), el('span.muted', { text: ' · ' + row.offer_name })),
    el('div.price', { text: priceOf(row, d) }),
    note ? el('div.muted.small.price-note', { text: note }) : null,
    el('div.muted', { text: gib(row.per_gpu_bytes) + ' / ' + gib(row.gpu_memory_bytes) + ' · ' + setupWords(row.setup) }),
    row.switches.length ? el('div.chips', row.switches.map((s) => el('span.chip', { text: s }))) : null,
    extra || null);
}

async function download(body, kind, filename) {
  const r = await api('plan', Object.assign({}, body, { emit: kind }));
  if (!r.ok) { alert(r.error.error); return; }
  saveText(r.text, filename);
}

function saveText(text, filename) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  const a = el('a', { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function plan(form) {
  const body = fields(form);
  toURL('plan', body);
  if (!body.model && !body.config_json) return el('div.empty', { text: t('empty_plan') });
  const reqs = [api('plan', body)];
  if (body.have) reqs.push(api('plan', Object.assign({}, body, { svg: true, svg_lang: S.lang })));
  const [j, g] = await Promise.all(reqs);
  markField(form, j.ok ? null : j.error);
  if (!j.ok) return errorBox(j.error);
  const d = j.json;
  const rec = d.recommended;
  const band = rec
    ? el('div.band.ok', { id: 'plan-recommended' }, el('div.big', { text: t('recommended') + ': ' + rec.gpus + ' × ' + rec.gpu_name + ' — ' + priceOf(rec, d) }), el('div.sub', { text: (priceNote(rec, d) ? priceNote(rec, d) + ' · ' : '') + rec.offer_name + ' · ' + d.reason }),
      isOwn(rec, d) && d.best_rental ? el('div.sub', { id: 'plan-best-rental', text: t('best_rental') + ': ' + d.best_rental.gpus + ' × ' + d.best_rental.gpu_name + ' — ' + priceOf(d.best_rental, d) + (priceNote(d.best_rental, d) ? ' · ' + priceNote(d.best_rental, d) : '') }) : null)
    : el('div.band.no', el('div.big', { text: t('no_plan') }), el('div.sub', { text: d.reason }));
  const sw = d.software;
  const path1 = el('div.card', el('h3', { text: t('path1') }),
    sw ? (g && g.ok ? el('div', { id: 'ladder-chart' }, chart(g.text)) : null) : el('div.muted', { text: t('no_have') }));
  const mc = d.more_cards;
  const bc = d.bigger_card;
  const path2 = planRowCard(t('path2'), mc.best, el('div.muted', { text: (mc.single_bytes ? t('single_gpu') + ' ' + gib(mc.single_bytes) + ' · ' : '') + (mc.dp_only_bytes ? t('dp_only', { n: mc.dp_gpus }) + ': ' + gib(mc.dp_only_bytes) : '') }), d);
  const path3 = planRowCard(t('path3'), bc.best, bc.best ? null : el('div.muted', { text: t('none_single') + (bc.gpus_that_fit.length ? ' · ' + t('fits_on') + ' ' + bc.gpus_that_fit.join(', ') : '') }), d);
  const ranked = el('div.card', el('h3', { text: t('ranked') }), el('div.scroll', el('table.ranked', { id: 'ranked-table' },
    // the bill the plans are ranked by comes second, where a phone shows it without scrolling
    el('thead', el('tr', [t('offer'), t('billed_col'), t('gpus_col'), t('setup'), t('memory'), t('speed')].map((h, i) => el(i === 1 || i >= 4 ? 'th.num' : 'th', { text: h })))),
    el('tbody', d.ranked.map((row) => el('tr' + (rec && row.offer_id === rec.offer_id && row.gpus === rec.gpus ? '.current' : ''),
      el('td', el('div', { text: row.offer_name }), el('div.muted', { text: row.provider + (row.flags.length ? ' · ' + row.flags[0] : '') })),
      el('td.num.price-cell', el('div', { text: priceOf(row, d) }), priceNote(row, d) ? el('div.muted.small', { text: priceNote(row, d) }) : null),
      el('td', { text: row.gpus + ' × ' + row.gpu_id }),
      el('td.small', { text: setupWords(row.setup) }),
      el('td.num', { text: gib(row.per_gpu_bytes) }),
      el('td.num', { text: num(row.tokens_per_s) })))))));
  const be = d.break_even;
  const beCard = be ? el('div.card.mini', el('h3', { text: t('break_even') }), el('p', { text: t('be_text', {
    machine: be.machine.gpus + ' × ' + be.machine.gpu_name, single: be.single.gpu_name,
    low: be.price_ratio ? be.price_ratio.low.toFixed(1) : '?', high: be.price_ratio ? be.price_ratio.high.toFixed(1) : '?', speed: be.speed_ratio.toFixed(1),
    which: be.machine_cheaper_per_token === true ? t('be_machine') : be.machine_cheaper_per_token === false ? t('be_single') : t('be_unknown') }) })) : null;
  const train = d.task === 'train';
  const dl = rec && train ? el('div.card.mini', el('h3', { text: t('downloads') }), el('div.buttons',
    el('button.ghost', { type: 'button', 'data-emit': 'deepspeed', text: t('dl_deepspeed'), onclick: () => download(body, 'deepspeed', 'ds_config.json') }),
    el('button.ghost', { type: 'button', 'data-emit': 'accelerate', text: t('dl_accelerate'), onclick: () => download(body, 'accelerate', 'accelerate_config.yaml') }),
    el('button.ghost', { type: 'button', 'data-emit': 'torchrun', text: t('dl_torchrun'), onclick: () => download(body, 'torchrun', 'launch_fsdp.sh') }))) : null;
  return el('div.stack', { id: 'plan-result' }, band, path1, el('div.grid3', path2, path3, beCard || dl), beCard ? dl : null, ranked, notesCard(d.notes));
}

// ------------------------------------------------------------------ diagnose
function sizeText(s) { return s ? s.text : '—'; }

function verdictCard(v, ev) {
  const cls = { 'genuine-shortage': 'no', 'request-exceeds-card': 'no', fragmentation: 'tight', 'other-process': 'tight', budget: 'tight' }[v.class] || 'neutral';
  const m = v.main_cause;
  const cause = (c) => el('div.cause', el('span.pill.' + cls, { text: c.class }), el('span', { text: ' ' + c.what + (c.bytes !== null ? ' · ' + gib(c.bytes) : '') + (c.share !== null ? ' · ' + pct(c.share) + ' ' + t('of_card') : '') }));
  return el('div.stack.oom', { 'data-class': v.class },
    el('div.band.' + cls, el('div.big', { text: v.headline }), ev ? el('div.sub', { text: (ev.exception || '') + (ev.line ? ' · ' + t('line') + ' ' + ev.line : '') + (ev.occurrences > 1 ? ' · ×' + ev.occurrences : '') }) : null),
    el('div.grid2',
      el('div.card.mini', el('h3', { text: t('main_cause') }), m ? cause(m) : null, v.contributors.length ? el('div', el('div.label', { text: t('contributors') }), v.contributors.map(cause)) : null,
        v.figures.length ? el('table.terms', v.figures.map((f) => el('tr', el('td', { text: f.name }), el('td.num', { text: gib(f.bytes) })))) : null),
      el('div.card.mini', el('h3', { text: t('fixes') }), el('ol.fixes', v.fixes.map((f) => el('li', el('span.pill.cost', { text: t('cost_' + f.cost) }), el('strong', { text: ' ' + f.action }), el('div.muted', { text: f.why })))))),
    el('details.card.notes', { open: true }, el('summary', { text: t('reasoning') }), el('ul', v.reasoning.map((x) => el('li', { text: x })))));
}

function estimateBeside(e) {
  if (!e) return null;
  return el('div.card', el('h3', { text: t('estimate_beside') }),
    el('p', { text: gib(e.estimate_bytes) + ' / ' + gib(e.card_bytes) + (e.culprit ? ' · ' + t('culprit') + ': ' + t('c_' + e.culprit) + ' ' + gib(e.culprit_bytes) : '') }),
    e.cheapest_switch ? el('p', el('strong', { text: t('cheapest_switch') + ': ' }), e.cheapest_switch.name + ' → ' + gib(e.cheapest_switch.per_gpu_bytes)) : null,
    el('ul', e.reasoning.map((x) => el('li', { text: x }))));
}

// A field's own message, where the API has none to give (nothing entered).
function needInput(form, field, key) {
  markField(form, { field, error: t(key) });
  const input = form.elements[field];
  if (input) input.focus();
}

async function diagnose(form, file, explicit) {
  const f = fields(form);
  const text = f.text;
  delete f.text;
  const model = f.model;
  const q = {};
  for (const [k, v] of Object.entries(f)) if (model || !['task', 'batch', 'context', 'gpu'].includes(k)) q[k] = v;
  toURL('diagnose', q);
  let body;
  if (file) { body = await file.arrayBuffer(); q.name = file.name; } else if (text) { body = text; q.name = 'pasted text'; } else {
    if (explicit) needInput(form, 'text', 'need_diagnose'); else markField(form, null);
    return el('div.empty', { text: t('empty_diagnose') });
  }
  const j = await api('diagnose', body, { query: q });
  markField(form, j.ok ? null : j.error);
  if (!j.ok) return errorBox(j.error);
  const r = j.json;
  const d = r.diagnosis;
  const parts = [el('div.model-line', el('strong', { text: t('kind_' + r.kind) }), ' · ' + r.input.name + ' · ' + gib(r.input.size_bytes))];
  if (d.kind === 'oom' || d.kind === 'summary') {
    if (d.kind === 'summary') {
      parts.push(el('div.card', el('h3', { text: t('summary') }), el('ul', d.verdict.findings.map((x) => el('li', { text: x }))), el('ol.fixes', d.verdict.fixes.map((x) => el('li', { text: x })))));
    }
    d.ooms.forEach((o) => parts.push(verdictCard(o.verdict, o.event)));
  } else if (d.kind === 'snapshot') {
    const g = await api('diagnose', body, { query: Object.assign({}, q, { svg: 'true', svg_lang: S.lang }) });
    parts.push(el('div.card.chart-card', { id: 'snapshot-chart' }, el('h3', { text: t('snapshot') }), g.ok ? chart(g.text) : errorBox(g.error)));
    d.report.devices.forEach((dev) => {
      parts.push(el('div.card', el('h3', { text: 'GPU ' + dev.device + ' · ' + t('peak_top') }), el('table.terms', dev.peak_top.map((a) => el('tr', el('td', el('div', { text: a.group }), el('div.muted.small', { text: a.frames.slice(0, 2).join(' ← ') })), el('td.num', { text: gib(a.size_bytes) }))))));
      dev.ooms.forEach((o) => parts.push(el('div.band.no', el('div.big', { text: 'OOM · ' + gib(o.requested_bytes) + ' · ' + o.class }), el('div.sub', { text: o.reasoning }))));
      if (dev.notes.length) parts.push(notesCard(dev.notes));
    });
  } else if (d.kind === 'script') {
    const fs = d.report.findings;
    parts.push(el('div.card', el('h3', { text: t('lint') }), fs.length ? el('ol.fixes', fs.map((x) => el('li', el('span.pill.cost', { text: x.rule }), el('strong', { text: ' ' + t('line') + ' ' + x.line + ': ' }), el('code', { text: x.code }), el('div', { text: x.why }), el('div.muted', { text: x.fix })))) : el('p', { text: t('no_findings') })));
  }
  parts.push(estimateBeside(r.estimate));
  return el('div.stack', { id: 'diagnose-result' }, parts);
}

// ------------------------------------------------------------------ mig
function serviceRow(name, spec) {
  const row = el('div.svc',
    el('input', { name: 'svc_name', value: name || '', placeholder: t('svc_name'), spellcheck: 'false' }),
    el('span.eq', { text: '=' }),
    el('input.grow', { name: 'svc_spec', value: spec || '', placeholder: t('svc_spec'), spellcheck: 'false' }),
    el('button.icon', { type: 'button', title: t('remove'), 'aria-label': t('remove'), text: '×', onclick: () => { row.remove(); submit('mig'); } }));
  return row;
}

function migServices(form) {
  return $$('.svc', form).map((r) => [$('[name=svc_name]', r).value.trim(), $('[name=svc_spec]', r).value.trim()]).filter(([a, b]) => a || b).map(([a, b]) => a + '=' + b);
}

async function mig(form) {
  const body = { gpu: form.elements.gpu.value, service: migServices(form) };
  if (form.elements.max_gpus.value) body.max_gpus = form.elements.max_gpus.value;
  toURL('mig', body);
  if (!body.service.length) return el('div.empty', { text: t('empty_mig') });
  const [j, g] = await Promise.all([api('mig', body), api('mig', Object.assign({}, body, { svg: true, svg_lang: S.lang }))]);
  if (!j.ok) return errorBox(j.error);
  const r = j.json;
  const band = r.fits ? el('div.band.ok', el('div.big', { text: t('mig_fits', { n: r.gpus_needed, card: r.gpu.name }) }), el('div.sub', { text: gib(r.total_need_bytes) + ' / ' + gib(r.total_slice_bytes) + ' · ' + t('wasted') + ' ' + gib(r.total_waste_bytes) }))
    : el('div.band.no', el('div.big', { text: t('mig_no', { n: r.gpus_needed }) }));
  const inst = [];
  r.layouts.forEach((l) => l.instances.forEach((i) => inst.push(el('tr', el('td', { text: 'GPU ' + l.gpu }), el('td', { text: i.service }), el('td', el('code', { text: i.profile })), el('td.num', { text: gib(i.need_bytes) }), el('td.num', { text: gib(i.slice_bytes) }), el('td.num', { text: gib(i.waste_bytes) }), el('td.num', { text: pct(i.compute_share) })))));
  const dl = r.fits ? el('button.ghost', { type: 'button', text: t('dl_mig'), onclick: async () => {
    const e = await api('mig', Object.assign({}, body, { emit: 'mig-parted' }));
    if (e.ok) saveText(e.text, 'mig-parted.yaml'); else alert(e.error.error);
  } }) : null;
  return el('div.stack', { id: 'mig-result' }, band,
    g.ok ? el('div.card.chart-card', { id: 'mig-chart' }, chart(g.text)) : null,
    el('div.card', el('h3', { text: t('instances') }), el('div.scroll', el('table.ranked', el('thead', el('tr', ['GPU', t('service'), t('profile'), t('need'), t('slice'), t('waste'), 'SM'].map((h, i) => el(i >= 3 ? 'th.num' : 'th', { text: h })))), el('tbody', inst))), dl ? el('div.buttons', dl) : null),
    r.refused.length ? el('div.card', el('h3', { text: t('refused') }), el('ul', r.refused.map((x) => el('li', { text: x.service + ': ' + x.reason })))) : null,
    r.advice.length ? notesCard(r.advice.map((a) => a.text)) : null);
}

// ------------------------------------------------------------------ check
async function check(form, explicit) {
  const body = fields(form);
  const pasted = body.paste;
  delete body.paste;
  toURL('check', body);
  const files = {};
  for (const k of ['xml', 'text', 'topo', 'list']) {
    const f = form.elements[k].files[0];
    if (f) files[k] = { name: f.name, text: await f.text() };
  }
  // pasted output: `-q -x` is XML (it starts with the declaration or the root element), else `-q`
  if (pasted) {
    const k = /^\s*(<\?xml|<nvidia_smi_log)/.test(pasted) ? 'xml' : 'text';
    if (!files[k]) files[k] = { name: 'pasted', text: pasted };
  }
  if (!Object.keys(files).length) {
    if (explicit) needInput(form, 'paste', 'need_check'); else markField(form, null);
    return el('div.empty', { text: t('empty_check') });
  }
  body.files = files;
  const j = await api('check', body);
  markField(form, j.ok ? null : j.error);
  if (!j.ok) return errorBox(j.error);
  const r = j.json;
  const fails = r.findings.filter((f) => f.level === 'fail');
  const band = r.expectation
    ? el('div.band.' + (r.ok ? 'ok' : 'no'), el('div.big', { text: r.ok ? t('check_ok') : t('check_fail') }), el('div.sub', { text: r.models.map((m) => m.count + ' × ' + m.name).join(', ') + (fails.length ? ' · ' + fails.map((f) => f.message).join('; ') : '') }))
    : el('div.band.' + (r.ok ? 'neutral' : 'no'), el('div.big', { text: r.models.map((m) => m.count + ' × ' + m.name).join(', ') || t('check_none') }), el('div.sub', { text: (r.driver_version ? 'driver ' + r.driver_version : '') + (r.cuda_version ? ' · CUDA ' + r.cuda_version : '') }));
  const findings = el('div.card', el('h3', { text: t('findings') }), el('ul.findings', r.findings.map((f) => el('li', el('span.pill.l-' + f.level, { text: t('l_' + f.level) }), el('span', { text: ' ' + f.message })))));
  const gpus = el('div.card', el('h3', { text: t('gpus_found') }), el('div.scroll', el('table.ranked', el('thead', el('tr', ['#', t('name'), t('vram'), t('mig'), t('pcie'), t('ecc')].map((h) => el('th', { text: h })))),
    el('tbody', r.gpus.map((g) => el('tr', el('td', { text: g.index }), el('td', el('div', { text: g.name }), el('div.muted.small', { text: g.memory_matches || '' })), el('td', { text: g.memory_total_bytes !== null ? gib(g.memory_total_bytes) : (g.memory_total_unreadable || '—') }), el('td', { text: g.mig_current + (g.mig_devices.length ? ' · ' + g.mig_devices.map((m) => m.profile || '?').join(', ') : '') }), el('td', { text: g.pcie_gen_current ? 'Gen' + g.pcie_gen_current + ' x' + g.pcie_width_current : '—' }), el('td', { text: g.ecc_current === null ? '—' : g.ecc_current ? 'on' : 'off' })))))));
  const ic = r.interconnect && r.interconnect.pairs.length ? el('div.card', el('h3', { text: t('interconnect') }), el('div.chips', r.interconnect.pairs.map((p) => el('span.chip.' + (p.nvlink ? 'ok' : 'warn'), { title: p.meaning, text: 'GPU' + p.a + '–GPU' + p.b + ' ' + p.link })))) : null;
  return el('div.stack', { id: 'check-result' }, band, findings, gpus, ic);
}

// ------------------------------------------------------------------ wiring
const RUNNERS = { estimate, plan, diagnose, mig, check };

// `explicit`: the person pressed the button (an empty form then says what it needs).
function submit(view, explicit) {
  clearTimeout(S.timers[view]);
  const form = $('#form-' + view);
  if (view === 'diagnose') {
    const file = form.elements.upload.files[0] || null;
    return run(view, () => diagnose(form, file, !!explicit));
  }
  return run(view, () => RUNNERS[view](form, !!explicit));
}

// The URL edited in this tab (or Back/Forward between hashes): the view,
// the language and the form follow it. A tab's bare link (`#/plan`) only
// switches the view, keeping its form.
function followURL() {
  const { view, params } = parseHash();
  const lang = params.get('lang');
  const relang = lang !== null && lang !== S.lang;
  if (relang) setLang(lang);
  if (view !== S.view) show(view);
  if (![...params.keys()].some((k) => k !== 'lang')) { if (relang) submit(view); return; }
  const form = $('#form-' + view);
  if (view === 'estimate' || view === 'plan' || view === 'mig') form.reset();
  if (view === 'mig' && params.getAll('service').length) {
    $('#services').replaceChildren(...params.getAll('service').map((x) => { const i = x.indexOf('='); return serviceRow(x.slice(0, i), x.slice(i + 1)); }));
  }
  fill(form, params);
  applyWhen(form);
  submit(view);
}

function setLang(lang) {
  S.lang = T[lang] ? lang : 'en';
  document.documentElement.lang = S.lang === 'zh' ? 'zh-CN' : 'en';
  $$('[data-i18n]').forEach((n) => { n.textContent = t(n.dataset.i18n); });
  $$('[data-i18n-ph]').forEach((n) => { n.placeholder = t(n.dataset.i18nPh); });
  $$('.lang button').forEach((b) => b.classList.toggle('on', b.dataset.lang === S.lang));
  $$('.gpu-select option[value="__custom"]').forEach((o) => { o.textContent = t('o_custom'); });
  $$('[name=svc_name]').forEach((n) => { n.placeholder = t('svc_name'); });
  $$('[name=svc_spec]').forEach((n) => { n.placeholder = t('svc_spec'); });
}

function show(view) {
  S.view = view;
  VIEWS.forEach((v) => { $('#view-' + v).hidden = v !== view; });
  $$('#tabs a').forEach((a) => a.classList.toggle('on', a.dataset.view === view));
}

function fillCatalog(c) {
  $('#presets').replaceChildren(...c.presets.flatMap((p) => [p.name].concat(p.hub_ids).map((v) => el('option', { value: v, label: p.name + ' · ' + (p.params_total / 1e9).toFixed(1) + 'B' }))));
  const gpus = c.gpus.slice().sort((a, b) => a.memory_bytes - b.memory_bytes);
  $$('.gpu-select').forEach((s) => {
    const first = s.options[0];
    const opts = gpus.map((g) => el('option', { value: g.id, text: g.name + ' · ' + gib(g.memory_bytes) }));
    if (s.name === 'gpu' && s.form.elements.gpu_mem !== undefined) opts.push(el('option', { value: '__custom', text: t('o_custom') }));
    s.replaceChildren(first, ...opts);
  });
  $('#mig-gpu').replaceChildren(...c.mig_gpus.map((g) => el('option', { value: g.id, text: g.name })));
  $('#version').textContent = 'vramfit ' + c.version;
}

// Whether a CJK font draws 中: its pixels differ from those of a
// character no font has (the empty box). Without one, the language
// switch reads "ZH" instead of two empty boxes.
function hasCJK() {
  try {
    const c = document.createElement('canvas');
    c.width = 32; c.height = 32;
    const g = c.getContext('2d');
    const px = (ch) => { g.clearRect(0, 0, 32, 32); g.font = '24px sans-serif'; g.fillText(ch, 0, 26); return g.getImageData(0, 0, 32, 32).data.join(','); };
    return px('\u4e2d') !== px('\u{10fffd}');
  } catch (_) { return true; }
}

async function init() {
  document.documentElement.classList.toggle('no-cjk', !hasCJK());
  const { view, params } = parseHash();
  setLang(params.get('lang') || ((navigator.language || '').startsWith('zh') ? 'zh' : 'en'));
  const c = await fetch('/api/catalog').then((r) => r.json());
  S.catalog = c;
  fillCatalog(c);
  // MIG: start with two rows from the URL or an example
  const svc = $('#services');
  const given = params.getAll('service');
  (view === 'mig' && given.length ? given : ['chat=llama-2-7b:ctx=4096', 'embed=6GiB']).forEach((s) => { const i = s.indexOf('='); svc.append(serviceRow(s.slice(0, i), s.slice(i + 1))); });
  $('#add-service').addEventListener('click', () => svc.append(serviceRow('', '')));

  for (const v of VIEWS) {
    const form = $('#form-' + v);
    if (v === view) fill(form, params);
    applyWhen(form);
    form.addEventListener('submit', (e) => { e.preventDefault(); submit(v, true); });
    const later = () => { clearTimeout(S.timers[v]); S.timers[v] = setTimeout(() => submit(v), 350); };
    form.addEventListener('change', (e) => { applyWhen(form); if (v !== 'diagnose' && v !== 'check') later(); else if (e.target.type === 'file') submit(v); });
    if (v === 'estimate' || v === 'plan') form.addEventListener('input', (e) => { if (e.target.tagName === 'INPUT' && e.target.type !== 'radio') later(); });
  }
  $$('.lang button').forEach((b) => b.addEventListener('click', () => { setLang(b.dataset.lang); submit(S.view); }));
  // file pickers: the chosen file's name beside the button
  $$('.filepick input[type=file]').forEach((i) => i.addEventListener('change', () => {
    const n = $('.fname', i.parentElement);
    const f = i.files[0];
    if (f) { n.removeAttribute('data-i18n'); n.textContent = f.name; n.classList.add('chosen'); } else { n.dataset.i18n = 'no_file'; n.textContent = t('no_file'); n.classList.remove('chosen'); }
  }));
  window.addEventListener('hashchange', followURL);
  show(view);
  if ([...params.keys()].some((k) => k !== 'lang') || view === 'mig') submit(view);
  document.body.dataset.ready = '1';
}

document.addEventListener('DOMContentLoaded', () => { init().catch((e) => { document.body.append(errorBox({ error: String(e), status: 0 })); }); });

// ------------------------------------------------------------------ fleet
// `check --fleet` on a chosen folder: one row per node, one column per
// check; the odd cells coloured; a cell opens its findings and files.
Object.assign(T.en, {
  tab_fleet: 'Fleet', fleet_title: 'Is the cluster what you rented?', f_fleet_dir: 'Fleet folder (one sub-folder per node)',
  b_choose_dir: 'Choose folder', f_expect_fleet: 'What you rented', f_expect_fabric: 'Fabric per node',
  hint_fleet: 'Run the collection script (vramfit check --collect-script) on every node, gather the folders under one, and choose it here. Files are read in this page\'s request only.',
  empty_fleet: 'Choose a folder with one sub-folder per node: each node becomes a row, each check a column.',
  fleet_ok: 'The nodes are alike', fleet_ok_expected: 'The cluster is what was rented', fleet_fail: 'Not uniform: {n} failed check(s)',
  fleet_nodes: '{n} node(s)', node: 'Node', evidence: 'Evidence', runs: 'Multi-node runs', fleet_findings: 'Fleet findings',
});
Object.assign(T.zh, {
  tab_fleet: '集群核验', fleet_title: '这个集群是你租的吗？', f_fleet_dir: '集群文件夹（每个节点一个子文件夹）',
  b_choose_dir: '选择文件夹', f_expect_fleet: '租用的配置', f_expect_fabric: '每节点网络',
  hint_fleet: '在每个节点上运行采集脚本（vramfit check --collect-script），把各节点文件夹放在同一目录下后在此选择。文件只在本页请求中读取。',
  empty_fleet: '选择一个每节点一个子文件夹的目录：每个节点一行，每项检查一列。',
  fleet_ok: '各节点一致', fleet_ok_expected: '集群与租用的一致', fleet_fail: '不一致：{n} 项检查未通过',
  fleet_nodes: '{n} 个节点', node: '节点', evidence: '依据', runs: '多节点测试', fleet_findings: '集群发现',
});
VIEWS.push('fleet');
S.fleetFiles = {};

async function fleet(form) {
  const body = fields(form);
  toURL('fleet', body);
  const chosen = Array.from(form.elements.fleet.files || []);
  if (!chosen.length) return el('div.empty', { text: t('empty_fleet') });
  const files = [];
  S.fleetFiles = {};
  for (const f of chosen) {
    const path = f.webkitRelativePath || f.name;
    const text = await f.text();
    files.push({ path, text });
    S.fleetFiles[path.split('/').slice(-2).join('/')] = text;
    S.fleetFiles[path.split('/').pop()] = S.fleetFiles[path.split('/').pop()] || text;
  }
  body.files = files;
  const root = (chosen[0].webkitRelativePath || '').split('/')[0];
  const fname = $('.fname', form);
  if (fname && root) { fname.removeAttribute('data-i18n'); fname.textContent = root + ' (' + chosen.length + ')'; }
  const j = await api('fleet', body);
  markField(form, j.ok ? null : j.error);
  if (!j.ok) return errorBox(j.error);
  return fleetView(j.json);
}

function fleetView(r) {
  const fails = r.findings.filter((f) => f.level === 'fail');
  const band = el('div.band.' + (r.ok ? 'ok' : 'no'),
    el('div.big', { text: r.ok ? (r.expectation ? t('fleet_ok_expected') : t('fleet_ok')) : t('fleet_fail', { n: fails.length }) }),
    el('div.sub', { text: t('fleet_nodes', { n: r.node_count }) + (fails.length ? ' · ' + fails.map((f) => f.message).join('; ') : '') }));
  const detail = el('div.card.evidence', { id: 'fleet-evidence', hidden: true });
  const open = (row, cell, td) => {
    $$('#fleet-grid td.sel').forEach((x) => x.classList.remove('sel'));
    td.classList.add('sel');
    const col = r.grid.columns.find((c) => c.id === cell.column);
    const msgs = cell.findings.map((i) => r.findings[i]);
    detail.hidden = false;
    detail.replaceChildren(
      el('h3', { text: row.node + ' · ' + (col ? col.label : cell.column) + (cell.value ? ' · ' + cell.value : '') }),
      msgs.length ? el('ul.findings', msgs.map((f) => el('li', el('span.pill.l-' + f.level, { text: t('l_' + f.level) }), el('span', { text: ' ' + f.message })))) : null,
      el('h3', { text: t('evidence') }),
      ...(cell.evidence.length ? cell.evidence.map((p) => el('div', el('code', { text: p }), el('pre', { text: (S.fleetFiles[p] || '').slice(0, 20000) }))) : [el('div.muted.small', { text: '—' })]));
  };
  const head = el('tr', el('th', { text: t('node') }), r.grid.columns.map((c) => el('th', { text: c.label })));
  const rows = r.grid.rows.map((row) => el('tr', { 'data-node': row.node }, el('th', { text: row.node }),
    row.cells.map((cell) => {
      const td = el('td.cell.s-' + cell.state, { 'data-column': cell.column, tabindex: cell.state === 'absent' ? null : '0', title: cell.value || '', text: cell.value || (cell.state === 'absent' ? '–' : '?') });
      if (cell.state !== 'absent') {
        td.addEventListener('click', () => open(row, cell, td));
        td.addEventListener('keydown', (e) => { if (e.key === 'Enter') open(row, cell, td); });
      }
      return td;
    })));
  const grid = el('div.card', el('div.scroll', el('table.grid', { id: 'fleet-grid' }, el('thead', head), el('tbody', rows))));
  const fleetWide = r.findings.filter((f) => f.node === null && f.level !== 'pass');
  const runs = r.runs.length ? el('div.card', el('h3', { text: t('runs') }), el('ul', r.runs.map((x) => el('li', { text: x.file + ': ' + (x.test || 'nccl-tests') + ', ' + x.ranks + ' ranks on ' + x.hosts.length + ' nodes, peak ' + (x.peak_busbw_bytes_per_s / 1e9).toFixed(2) + ' GB/s' + (x.share_of_bound !== null ? ' (' + Math.round(x.share_of_bound * 100) + '% of the ' + x.bounds[0].kind.replace(/_/g, '-') + ' bound)' : '') })))) : null;
  const fw = fleetWide.length ? el('div.card', el('h3', { text: t('fleet_findings') }), el('ul.findings', fleetWide.map((f) => el('li', el('span.pill.l-' + f.level, { text: t('l_' + f.level) }), el('span', { text: ' ' + f.message }))))) : null;
  return el('div.stack', { id: 'fleet-result' }, band, grid, detail, runs, fw);
}
RUNNERS.fleet = fleet;
