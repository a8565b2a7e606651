/* tmath in the reader's browser: one contract, and the page's widgets built on it.
 *
 *   window.tmathRun(argv, files) -> Promise<{stdout, stderr, exitCode}>
 *
 * runs tmath's command line (`python -m tmath ...argv`) in Pyodide, in a Web Worker, after
 * writing `files` (name -> text) into a fresh folder. The worker, Pyodide and tmath are
 * fetched from this site on the first call, never before. Everything below only builds
 * argv, moves strings and draws the page: no number is computed in JavaScript, and nothing
 * a config, a URL or a cell returns is ever inserted as HTML (textContent only).
 */
(function () {
  "use strict";
  const SCRIPT = document.currentScript;
  const BASE = new URL(".", SCRIPT.src).href; // .../_static/tmath/
  let worker = null;
  let nextId = 1;
  const pending = new Map();

  function call(op, args) {
    if (location.protocol === "file:") {
      return Promise.reject(new Error(
        "从本地文件（file://）打开的网页不能启动 Web Worker，也不能读取运行时：请用任意静态服务器打开本书，" +
        "例如在 _build/html 里运行 python3 -m http.server，再访问 http://localhost:8000/"));
    }
    if (!worker) {
      // a new worker has a new Python: nothing the page's cells defined is there any more
      ran = new Set();
      worker = new Worker(new URL("tmath-worker.js", BASE).href, { type: "module" });
      const mine = worker;
      worker.onmessage = (event) => {
        const { id, ok, value, error, fatal } = event.data;
        const p = pending.get(id);
        if (!p) return;
        pending.delete(id);
        if (ok) p.resolve(value);
        else p.reject(Object.assign(new Error(error), { fatal: Boolean(fatal) }));
        if (fatal && worker === mine) { mine.terminate(); worker = null; }
      };
      worker.onerror = (event) => {
        for (const p of pending.values()) p.reject(new Error(event.message || "Web Worker 出错"));
        pending.clear();
        worker = null;
      };
    }
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, op, args });
    });
  }

  // Stop whatever runs (a cell in an endless loop): the worker and its Python go, every
  // pending call is answered with `why`, and the next call starts a new worker.
  function stopWorker(why) {
    if (worker) worker.terminate();
    worker = null;
    for (const p of pending.values()) p.reject(new Error(why));
    pending.clear();
    ran = new Set();
  }

  window.tmathRun = async function (argv, files) {
    const text = await call("cli", { argv: Array.from(argv, String), files: files || {} });
    return JSON.parse(text);
  };

  // ---------------------------------------------------------------------------------------
  const PAGE = (() => {
    const el = document.getElementById("tmath-page");
    return el ? JSON.parse(el.textContent) : { cells: {}, options: {} };
  })();

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c) node.append(c);
    return node;
  }

  function seconds(t0) {
    return ((performance.now() - t0) / 1000).toFixed(2) + " s";
  }

  // --- widgets: a form for one command of the command line (ledger, plan, serve) ------------
  // The fields are the command's own flags, as its argparse parser declares them (the build
  // writes tmath.web.describe(kind) into the page): a flag added to the command line appears
  // here without a change to this file. BASIC are shown at once, the rest under 更多设置.
  const BASIC = {
    ledger: ["--seq-len", "--batch", "--dtype", "--tp", "--gpu"],
    plan: ["--dp", "--tp", "--pp", "--ep", "--cp", "--zero", "--micro-batch", "--global-batch",
      "--seq-len", "--gpu", "--recompute", "--recipe", "--stage-layers", "--schedule",
      "--virtual-stages", "--tokens"],
    serve: ["--gpu", "--tp", "--prompt-len", "--output-len", "--batch", "--weight-dtype", "--kv-dtype",
      "--gpu-hour-price"],
  };
  // Where a form starts when its page says nothing (data-args): otherwise the parser's defaults.
  const START = {
    plan: { "--dp": "8", "--tp": "8", "--pp": "4", "--zero": "1", "--seq-len": "4096" },
  };
  const DEFAULT_PRESET = { ledger: "llama3-70b", plan: "llama3-70b", serve: "llama3-70b" };
  const OPTION_WORDS = {
    none: "none（不重算）", selective: "selective（只重算注意力）", full: "full（整层重算）",
  };
  const CONFIG_NAME = "config.json";
  let widgetCount = 0;

  // The largest TP (at most `cap`) with which the preset's ledger computes (the build tried them).
  function workingTp(preset, cap) {
    const ok = ((PAGE.options || {}).tp_ok || {})[preset];
    if (!ok || !ok.length) return null;
    return String(ok.filter((t) => t <= cap).pop() || ok[0]);
  }

  // The text the command line printed, drawn so that it reads on a phone: each line
  // "label   value" becomes a row whose value wraps under its label on a narrow screen. The
  // text itself is unchanged (textContent is stdout byte for byte); the spaces between label
  // and value, and the line end, are hidden there, not removed.
  function showText(pre, text) {
    pre.replaceChildren();
    const lines = text.split("\n");
    lines.forEach((line, i) => {
      const end = i < lines.length - 1 ? "\n" : "";
      const m = /^(\s*\S.*?)(\s{2,})(\S.*)$/.exec(line);
      if (!m || line.length > 200) {
        const cls = /^(部署|可行|不可行)/.test(line) ? "tmath-verdict" : "";
        pre.append(cls ? el("span", { class: cls, text: line + end }) : document.createTextNode(line + end));
        return;
      }
      const row = el("span", { class: "tmath-row" },
        el("span", { class: "tmath-k", text: m[1] }), el("span", { class: "tmath-gap", text: m[2] }),
        el("span", { class: "tmath-v", text: m[3] }));
      if (end) row.append(el("span", { class: "tmath-nl", text: end }));
      pre.append(row);
    });
  }

  function widget(root) {
    const kind = root.dataset.kind;
    const options = PAGE.options || {};
    const described = (options.flags || {})[kind];
    if (!described) return;
    const n = ++widgetCount;
    const uid = (root.id || `tmath-widget-${n}`);
    // the page may start the form elsewhere (data-args: flag -> value)
    const starts = { ...(START[kind] || {}), ...(root.dataset.args ? JSON.parse(root.dataset.args) : {}) };
    const basic = BASIC[kind] || described.slice(0, 8).map((f) => f.flag);
    const fields = described.map((f) => ({
      ...f, basic: basic.includes(f.flag),
      start: f.flag in starts ? String(starts[f.flag]) : (f.type === "switch" ? "" : f.default),
    }));
    const presetSelect = el("select", { name: "preset", id: `${uid}-preset` });
    for (const name of options.presets || []) presetSelect.append(el("option", { value: name, text: name }));
    presetSelect.value = root.dataset.preset || DEFAULT_PRESET[kind] || (options.presets || [])[0];
    const configText = el("textarea", {
      name: "config", rows: "3", spellcheck: "false", "aria-label": "config.json 的内容（可选）",
      placeholder: "粘贴一个 config.json 的内容，或把文件（或模型文件夹）拖到这里；空着就用上面的预设",
    });
    const upload = el("input", { type: "file", accept: ".json,application/json", hidden: "", tabindex: "-1" });
    const uploadButton = el("button", { type: "button", class: "tmath-upload", text: "上传 config.json…" });
    uploadButton.onclick = () => upload.click();
    const inputs = {};
    const hints = {};
    const grid = el("div", { class: "tmath-fields" });
    const more = el("div", { class: "tmath-fields" });
    const extraCount = fields.filter((f) => !f.basic).length;
    const details = el("details", { class: "tmath-more" },
      el("summary", { text: `更多设置（${extraCount} 项：全部命令行参数）` }), more);
    for (const f of fields) {
      let input;
      const id = `${uid}${f.flag.replace(/^-+/, "-")}`;
      if (f.type === "switch") {
        input = el("input", { type: "checkbox", name: f.flag, id });
      } else if (f.choices) {
        input = el("select", { name: f.flag, id });
        if (f.default === "") input.append(el("option", { value: "", text: "默认" }));
        for (const o of f.choices) input.append(el("option", { value: o, text: OPTION_WORDS[o] || o }));
      } else {
        const numeric = f.type === "int" || f.type === "float";
        input = el("input", { type: "text", name: f.flag, id, autocomplete: "off", spellcheck: "false",
          inputmode: numeric ? (f.type === "int" ? "numeric" : "decimal") : "text",
          placeholder: f.default === "" ? "空着：默认" : "" });
      }
      setValue(input, f.start);
      inputs[f.flag] = input;
      const hint = el("small", { class: "tmath-hint", id: `${id}-hint`, text: f.help });
      hints[f.flag] = hint;
      input.setAttribute("aria-describedby", hint.id);
      const label = el("label", { class: f.type === "switch" ? "tmath-switch" : "", for: id },
        el("span", { text: f.label + " " }, el("code", { text: f.flag })));
      // The hint shows once its field is focused, and stays: hidden again on blur, it moved the
      // 计算 button up between the press and the release of the click that blurred the field,
      // and that click was lost (type a value, click 计算: nothing happened).
      input.addEventListener("focus", () => hint.classList.add("tmath-shown"));
      const box = el("div", { class: "tmath-field" }, label, input, hint);
      (f.basic ? grid : more).append(box);
    }
    if (extraCount === 0) details.hidden = true;
    // the calculator's TP starts on a degree the preset's heads split into, and says which work;
    // the serve form's on the smallest whose H100s hold the preset's bf16 weights (the build
    // tried them: serve_tp_ok), and when none does it keeps the TP and the result says why
    function fitTp(mode) { // "start": choose; "fix": change a TP that cannot work; "hint": say only
      if (!["ledger", "serve"].includes(kind) || !inputs["--tp"] || configText.value.trim()) return;
      const name = presetSelect.value;
      const ok = ((kind === "serve" ? options.serve_tp_ok : options.tp_ok) || {})[name] || null;
      if (!ok) return;
      const v = inputs["--tp"].value.trim();
      if (kind === "serve") {
        if (ok.length && (mode === "start" || (mode === "fix" && !ok.map(String).includes(v)))) {
          inputs["--tp"].value = String(ok[0]);
        }
        hints["--tp"].textContent = ok.length
          ? `${name} 在 H100 上放得下 bf16 权重的 TP：${ok.join("、")}（头数也要能平均分到各卡）`
          : `${name} 的 bf16 权重在 8 张 H100 上也放不下：试 fp8 或 int4 权重、显存更大的 GPU`;
        return;
      }
      if (mode === "start" || (mode === "fix" && v !== "" && !ok.map(String).includes(v))) {
        inputs["--tp"].value = workingTp(name, mode === "start" ? 8 : Number(v) || 8);
      }
      hints["--tp"].textContent = `${name} 可取 TP = ${ok.join("、")}（头数要能平均分到各卡）`;
    }
    fitTp("--tp" in starts ? "hint" : "start");
    const runButton = el("button", { type: "button", class: "tmath-run", text: "计算" });
    const linkButton = el("button", { type: "button", text: "复制本设置的链接" });
    const saveButton = el("button", { type: "button", text: "下载 JSON" });
    const command = el("code", { class: "tmath-command" });
    const status = el("span", { class: "tmath-status", role: "status", "aria-live": "polite" });
    const out = el("pre", { class: "tmath-output" });
    root.append(
      el("div", { class: "tmath-source" },
        el("label", { for: presetSelect.id }, el("span", { text: "预设模型" })), presetSelect,
        el("span", { class: "tmath-or", text: "或" }), uploadButton, upload),
      configText, grid, details,
      el("div", { class: "tmath-buttons" }, runButton, linkButton, saveButton, status),
      out,
      el("div", { class: "tmath-command-line" }, el("span", { text: "等价的命令：" }), command));

    function argv(json) {
      const a = [kind];
      const flag = (name, v) => (v.startsWith("-") ? [`${name}=${v}`] : [name, v]);
      if (configText.value.trim()) a.push(CONFIG_NAME);
      else a.push(...flag("--preset", presetSelect.value));
      for (const f of fields) {
        const input = inputs[f.flag];
        if (f.type === "switch") { if (input.checked) a.push(f.flag); continue; }
        const v = input.value.trim();
        if (v !== "" && (f.basic || f.flag in starts || v !== f.default)) a.push(...flag(f.flag, v));
      }
      if (json) a.push("--json");
      return a;
    }
    function files() {
      return configText.value.trim() ? { [CONFIG_NAME]: configText.value } : {};
    }
    function showCommand() {
      command.textContent = "python -m tmath " + argv(false).map(
        (s) => /^[\w.\/=:,*-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'").join(" ");
    }
    let started = false;
    let busy = Promise.resolve();
    let last = Promise.resolve(); // the latest computation, drawn (tests and scripts await it)
    function run() {
      last = compute();
      return last;
    }
    async function compute() {
      started = true;
      showCommand();
      const t0 = performance.now();
      status.classList.remove("tmath-error");
      status.textContent = worker ? "计算中……" : "第一次计算：正在从本站载入浏览器里的 Python 和 tmath（只载一次）……";
      root.classList.add("tmath-busy");
      const job = busy.then(() => window.tmathRun(argv(false), files()));
      busy = job.catch(() => {});
      try {
        const r = await job;
        showText(out, r.exitCode === 0 ? r.stdout : (r.stderr || r.stdout));
        out.classList.toggle("tmath-error", r.exitCode !== 0);
        status.classList.toggle("tmath-error", r.exitCode !== 0);
        status.textContent = (r.exitCode === 0 ? "算完" : `出错（退出码 ${r.exitCode}），原因见下方`) + `，用时 ${seconds(t0)}`;
      } catch (e) {
        out.textContent = String(e.message || e);
        out.classList.add("tmath-error");
        status.classList.add("tmath-error");
        status.textContent = "没能运行，原因见下方";
      } finally {
        root.classList.remove("tmath-busy");
      }
      // the reader looks at the button: the answer's first lines must be in view
      if (out.getBoundingClientRect().top > window.innerHeight - 80) {
        out.scrollIntoView({ block: "nearest" });
      }
    }
    function permalink() {
      const q = new URLSearchParams();
      q.set("tmath", kind);
      if (configText.value.trim()) q.set("config", configText.value.trim());
      else q.set("preset", presetSelect.value);
      for (const f of fields) { // every flag, the emptied ones too
        const input = inputs[f.flag];
        q.set(f.flag.slice(2), f.type === "switch" ? (input.checked ? "1" : "") : input.value.trim());
      }
      return location.origin + location.pathname + "?" + q.toString() + "#" + (root.id || "");
    }
    linkButton.onclick = async () => {
      const url = permalink();
      history.replaceState(null, "", url);
      try { await navigator.clipboard.writeText(url); status.textContent = "链接已复制，也已写进地址栏"; }
      catch (e) { status.textContent = "链接已写进地址栏，请从那里复制"; }
    };
    saveButton.onclick = async () => {
      const r = await window.tmathRun(argv(true), files());
      const blob = new Blob([r.stdout], { type: "application/json" });
      const a = el("a", { href: URL.createObjectURL(blob), download: `tmath-${kind}.json` });
      document.body.append(a);
      a.click();
      a.remove();
    };
    runButton.onclick = run;
    presetSelect.addEventListener("change", () => fitTp("fix"));
    for (const input of [presetSelect, ...Object.values(inputs)]) {
      input.addEventListener("change", () => { if (started) run(); else showCommand(); });
    }
    configText.addEventListener("change", () => { if (started) run(); else showCommand(); });
    upload.addEventListener("change", async () => {
      if (upload.files[0]) { configText.value = await upload.files[0].text(); run(); }
    });
    root.addEventListener("dragover", (e) => { e.preventDefault(); root.classList.add("tmath-drop"); });
    root.addEventListener("dragleave", () => root.classList.remove("tmath-drop"));
    root.addEventListener("drop", async (e) => {
      e.preventDefault();
      root.classList.remove("tmath-drop");
      const text = await droppedConfig(e.dataTransfer);
      if (text === null) { status.textContent = "拖进来的东西里没有 config.json"; return; }
      configText.value = text;
      run();
    });

    // A permalink: fill the form from the URL (values only; nothing in it is run as code)
    const q = new URLSearchParams(location.search);
    if (q.get("tmath") === kind) {
      if (q.get("config")) configText.value = q.get("config");
      if (q.get("preset")) setValue(presetSelect, q.get("preset"));
      for (const f of fields) { // the link is the whole setting: a flag it lacks takes its default
        const v = q.get(f.flag.slice(2));
        setValue(inputs[f.flag], v !== null ? v : f.default);
      }
      fitTp("hint");
      run();
    } else {
      showCommand();
    }
    // a flag set away from its default is in view
    if (fields.some((f) => !f.basic && (inputs[f.flag].type === "checkbox" ? inputs[f.flag].checked
      : inputs[f.flag].value.trim() !== f.default))) details.open = true;
    root.tmath = { run, argv, files, permalink, done: () => last };
  }

  // A value from a link goes into the form as it is, even one a list does not offer: the
  // command line then names the field and the fix, as it would in a terminal.
  function setValue(input, value) {
    if (input.type === "checkbox") { input.checked = value !== "" && value !== "0"; return; }
    if (input.tagName === "SELECT" && !Array.from(input.options).some((o) => o.value === value)) {
      input.append(el("option", { value, text: value }));
    }
    input.value = value;
  }

  async function droppedConfig(transfer) {
    const items = Array.from(transfer.items || []);
    for (const item of items) {
      const entry = item.webkitGetAsEntry && item.webkitGetAsEntry();
      if (entry && entry.isDirectory) {
        const file = await new Promise((resolve) => entry.getFile
          ? resolve(null)
          : entry.createReader().readEntries((list) => resolve(list.find((x) => x.name === "config.json") || null)));
        if (file) return await new Promise((resolve, reject) => file.file((f) => f.text().then(resolve), reject));
      }
    }
    const file = Array.from(transfer.files || []).find((f) => f.name.endsWith(".json"));
    return file ? await file.text() : null;
  }

  // --- answer boxes ------------------------------------------------------------------------
  function answerBox(box) {
    const input = box.querySelector("input");
    const button = box.querySelector("button");
    const output = box.querySelector("output");
    async function check() {
      if (!input.value.trim()) { output.textContent = "先填一个数"; return; }
      const t0 = performance.now();
      const first = !worker;
      // what the reader waits, said as it is: the keys are hashed slowly on purpose (so that
      // trying numbers is costly), and a busy computer makes it slower still
      const say = () => {
        const s = Math.round((performance.now() - t0) / 1000);
        output.textContent = (first ? "第一次检查：正在载入浏览器里的 Python 和 tmath，再核对……"
          : "检查中……核对用的哈希故意算得慢（免得有人逐个试数）：通常要几秒，错的答案比对的慢约一倍，电脑忙时可达十几秒")
          + (s >= 1 ? `（已 ${s} 秒）` : "");
      };
      say();
      const tick = setInterval(say, 1000);
      box.classList.remove("tmath-right", "tmath-wrong");
      box.setAttribute("aria-busy", "true");
      try {
        const r = JSON.parse(await call("check", { label: box.dataset.label, text: input.value }));
        output.textContent = r.message + `（用时 ${seconds(t0)}）`;
        box.classList.add(r.correct ? "tmath-right" : "tmath-wrong");
      } catch (e) {
        output.textContent = String(e.message || e);
      } finally {
        clearInterval(tick);
        box.removeAttribute("aria-busy");
      }
    }
    button.onclick = check;
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") check(); });
  }

  // --- cells the reader runs in the page --------------------------------------------------
  const CELLS = Object.entries(PAGE.cells || {}).map(([i, c]) => ({ index: Number(i), ...c }))
    .sort((a, b) => a.index - b.index);
  let ran = new Set();

  // A cell's Markdown as the notebook shows it: pipe tables become tables, other lines
  // paragraphs; every piece of text goes in as text ($…$ becomes \(…\) for MathJax).
  function inlineMath(text) {
    return text.replace(/\$([^$]+)\$/g, "\\($1\\)");
  }
  function markdownBlock(markdown) {
    const box = el("div", { class: "tmath-markdown" });
    const lines = markdown.split("\n");
    const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line.trim().startsWith("|") && i + 1 < lines.length && /^\s*\|[\s:|-]+\|\s*$/.test(lines[i + 1])) {
        const table = el("table", { class: "table" });
        const head = el("tr");
        for (const c of cells(line)) head.append(el("th", { text: inlineMath(c) }));
        table.append(el("thead", {}, head));
        const body = el("tbody");
        for (i += 2; i < lines.length && lines[i].trim().startsWith("|"); i++) {
          const row = el("tr");
          for (const c of cells(lines[i])) row.append(el("td", { text: inlineMath(c) }));
          body.append(row);
        }
        i--;
        table.append(body);
        box.append(table);
      } else if (line.trim()) {
        box.append(el("p", { text: inlineMath(line) }));
      }
    }
    return box;
  }

  function renderOutputs(area, result) {
    area.replaceChildren();
    const typeset = [];
    for (const o of result.outputs) {
      if (o.stream) {
        area.append(el("pre", { class: o.stream === "stderr" ? "tmath-error" : "", text: o.text }));
      } else if (o.data && o.data["text/latex"]) {
        const tex = o.data["text/latex"].replace(/^\$(\\displaystyle)?\s*/, "").replace(/\$$/, "");
        const div = el("div", { class: "tmath-math", text: "\\[" + tex + "\\]" });
        area.append(div);
        typeset.push(div);
      } else if (o.data && o.data["text/markdown"]) {
        const block = markdownBlock(o.data["text/markdown"]);
        area.append(block);
        typeset.push(block);
      } else if (o.data) {
        area.append(el("pre", { text: o.data["text/plain"] }));
      }
    }
    if (result.error) area.append(el("pre", { class: "tmath-error", text: result.traceback || result.error }));
    if (typeset.length && window.MathJax && MathJax.typesetPromise) {
      return MathJax.typesetPromise(typeset).catch(() => {});
    }
    return Promise.resolve();
  }

  async function runCellAt(cell, source) {
    if (!worker) ran = new Set(); // a new Python (after a crash or 停止): the earlier cells again
    // the page's earlier runnable cells (and the statements they need) run first, once
    for (const c of CELLS) {
      if (c.index >= cell.index) break;
      if (ran.has(c.index)) continue;
      if (c.prelude.length) await call("prelude", { page: PAGE.page, statements: c.prelude });
      await call("cell", { page: PAGE.page, source: c.editor ? c.editor.value : c.source });
      ran.add(c.index);
    }
    if (!ran.has(cell.index) && cell.prelude.length) {
      await call("prelude", { page: PAGE.page, statements: cell.prelude });
    }
    ran.add(cell.index);
    return JSON.parse(await call("cell", { page: PAGE.page, source }));
  }

  function runnableCell(container, cell) {
    const input = container.querySelector(".cell_input");
    if (!input) return;
    const bar = el("div", { class: "tmath-cell-bar" });
    const start = el("button", { type: "button", text: "在浏览器里运行" });
    bar.append(start);
    input.after(bar);
    start.onclick = async () => {
      if (!cell.editor) {
        cell.editor = el("textarea", { class: "tmath-editor", spellcheck: "false",
          "aria-label": `单元格 ${cell.index} 的代码（可以改动后再运行）` });
        cell.editor.value = cell.source;
        cell.editor.rows = Math.min(40, cell.source.split("\n").length + 1);
        input.style.display = "none";
        input.after(cell.editor);
        const stop = el("button", { type: "button", text: "停止", class: "tmath-stop" });
        stop.onclick = () => {
          stopWorker("已停止：网页里的 Python 重新开始，本页的变量已清空");
          cell.status.textContent = "已停止，本页的变量已清空";
        };
        cell.stop = stop;
        const reset = el("button", { type: "button", text: "重新开始" });
        reset.onclick = async () => {
          await call("reset", { page: PAGE.page });
          ran = new Set();
          cell.status.textContent = "本页的变量已清空";
        };
        cell.status = el("span", { class: "tmath-status", role: "status", "aria-live": "polite" });
        cell.area = el("div", { class: "tmath-cell-output" });
        start.textContent = "运行";
        bar.append(stop, reset, cell.status);
        bar.after(cell.area);
      }
      const t0 = performance.now();
      cell.status.textContent = worker ? "运行中……" : "正在载入浏览器里的 Python、tmath 和 SymPy，并先运行本页前面的单元格……";
      cell.area.replaceChildren(); // what an earlier run showed is not this run's
      container.dataset.tmathRan = "running";
      try {
        const r = await runCellAt(cell, cell.editor.value);
        await renderOutputs(cell.area, r);
        // what the notebook saved gives way to what ran here
        const saved = container.querySelector(".cell_output");
        if (saved) saved.style.display = "none";
        cell.status.textContent = `用时 ${seconds(t0)}`;
        container.dataset.tmathRan = r.error ? "error" : "ok";
      } catch (e) {
        const why = String(e.message || e);
        const text = e.fatal
          ? `网页里的 Python 崩溃了（${why}）。已换一个新的 Python：再按“运行”，会先重跑本页前面的单元格。`
          : why;
        cell.area.replaceChildren(el("pre", { class: "tmath-error", text }));
        cell.status.textContent = e.fatal ? "崩溃，已重新开始" : "没能运行";
        container.dataset.tmathRan = "crash";
      }
    };
    cell.container = container;
  }

  // tests and readers' own scripts can run a cell by its notebook index
  window.tmathCells = {
    list: () => CELLS.map((c) => c.index),
    run: async (index, source) => {
      const cell = CELLS.find((c) => c.index === index);
      return runCellAt(cell, source === undefined ? cell.source : source);
    },
    reset: async () => { await call("reset", { page: PAGE.page }); ran = new Set(); },
    stop: () => stopWorker("已停止"),
    markdown: markdownBlock,
  };
  window.tmathCall = call;

  function init() {
    document.querySelectorAll(".tmath-widget").forEach(widget);
    document.querySelectorAll(".tmath-answer").forEach(answerBox);
    for (const cell of CELLS) {
      const container = document.querySelector(".tmath-cell-" + cell.index);
      if (container) runnableCell(container, cell);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
