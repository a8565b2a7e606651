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
      worker = new Worker(new URL("tmath-worker.js", BASE).href, { type: "module" });
      const mine = worker;
      worker.onmessage = (event) => {
        const { id, ok, value, error, fatal } = event.data;
        const p = pending.get(id);
        if (!p) return;
        pending.delete(id);
        if (ok) p.resolve(value);
        else p.reject(new Error(error));
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

  // --- widgets: the ledger and the plan ---------------------------------------------------
  // Each field is one flag of the command line; `def` is what the form starts with.
  const FIELDS = {
    ledger: [
      { flag: "--seq-len", label: "序列长度 T", type: "number", def: "", hint: "空着：2048 与模型上下文中较小者" },
      { flag: "--batch", label: "批大小 B", type: "number", def: "1" },
      { flag: "--dtype", label: "数据类型", type: "select", options: "dtypes", def: "bf16" },
      { flag: "--tp", label: "张量并行 TP", type: "number", def: "8" },
      { flag: "--gpu", label: "GPU", type: "select", options: "gpus", def: "H100" },
    ],
    plan: [
      { flag: "--dp", label: "数据并行 dp", type: "number", def: "8" },
      { flag: "--tp", label: "张量并行 tp", type: "number", def: "8" },
      { flag: "--pp", label: "流水线 pp", type: "number", def: "4" },
      { flag: "--ep", label: "专家并行 ep", type: "number", def: "1" },
      { flag: "--cp", label: "上下文并行 cp", type: "number", def: "1" },
      { flag: "--zero", label: "ZeRO", type: "select", options: ["0", "1", "2", "3"], def: "1" },
      { flag: "--micro-batch", label: "微批次 b", type: "number", def: "1" },
      { flag: "--global-batch", label: "全局批 G", type: "number", def: "", hint: "空着：dp × b" },
      { flag: "--seq-len", label: "序列长度 T", type: "number", def: "4096" },
      { flag: "--gpu", label: "GPU", type: "select", options: "gpus", def: "H100" },
      { flag: "--recompute", label: "重计算", type: "select", options: ["none", "selective", "full"], def: "none" },
      { flag: "--pp-edge-layers", label: "首末段层数", type: "number", def: "", hint: "空着：平均分" },
      { flag: "--recipe", label: "训练配方", type: "select", options: "recipes", def: "mixed-adam" },
    ],
  };
  const DEFAULT_PRESET = { ledger: "llama3-70b", plan: "llama3-70b" };
  const OPTION_WORDS = {
    none: "none（不重算）", selective: "selective（只重算注意力）", full: "full（整层重算）",
  };
  const CONFIG_NAME = "config.json";

  function widget(root) {
    const kind = root.dataset.kind;
    if (!FIELDS[kind]) return;
    // the page may start the form elsewhere (data-args: flag -> value)
    const starts = root.dataset.args ? JSON.parse(root.dataset.args) : {};
    const fields = FIELDS[kind].map((f) => (f.flag in starts ? { ...f, def: String(starts[f.flag]) } : f));
    const options = PAGE.options || {};
    const presetSelect = el("select", { name: "preset" });
    for (const name of options.presets || []) presetSelect.append(el("option", { value: name, text: name }));
    presetSelect.value = root.dataset.preset || DEFAULT_PRESET[kind];
    const configText = el("textarea", {
      name: "config", rows: "4", spellcheck: "false",
      placeholder: "粘贴一个 config.json 的内容，或把文件（或模型文件夹）拖到这里；空着就用上面的预设",
    });
    const upload = el("input", { type: "file", accept: ".json,application/json", hidden: "" });
    const inputs = {};
    const grid = el("div", { class: "tmath-fields" });
    for (const f of fields) {
      let input;
      if (f.type === "select") {
        input = el("select", { name: f.flag });
        const list = Array.isArray(f.options) ? f.options : options[f.options] || [];
        for (const o of list) input.append(el("option", { value: o, text: OPTION_WORDS[o] || o }));
      } else {
        input = el("input", { type: "text", inputmode: "numeric", name: f.flag, placeholder: f.hint || "" });
      }
      input.value = f.def;
      inputs[f.flag] = input;
      grid.append(el("label", {}, el("span", { text: f.label }), input));
    }
    const runButton = el("button", { type: "button", class: "tmath-run", text: "计算" });
    const linkButton = el("button", { type: "button", text: "复制本设置的链接" });
    const saveButton = el("button", { type: "button", text: "下载 JSON" });
    const command = el("code", { class: "tmath-command" });
    const status = el("div", { class: "tmath-status", "aria-live": "polite" });
    const out = el("pre", { class: "tmath-output" });
    root.append(
      el("div", { class: "tmath-source" },
        el("label", {}, el("span", { text: "预设模型" }), presetSelect),
        el("label", { class: "tmath-upload" }, el("span", { text: "或" }),
          el("span", { class: "tmath-button", text: "上传 config.json…" }), upload)),
      configText, grid,
      el("div", { class: "tmath-buttons" }, runButton, linkButton, saveButton),
      el("div", {}, el("span", { text: "等价的命令：" }), command),
      status, out);

    function argv(json) {
      const a = [kind];
      const flag = (name, v) => (v.startsWith("-") ? [`${name}=${v}`] : [name, v]);
      if (configText.value.trim()) a.push(CONFIG_NAME);
      else a.push(...flag("--preset", presetSelect.value));
      for (const f of fields) {
        const v = inputs[f.flag].value.trim();
        if (v !== "") a.push(...flag(f.flag, v));
      }
      if (json) a.push("--json");
      return a;
    }
    function files() {
      return configText.value.trim() ? { [CONFIG_NAME]: configText.value } : {};
    }
    function showCommand() {
      command.textContent = "python -m tmath " + argv(false).map(
        (s) => /^[\w.\/=:-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'").join(" ");
    }
    let started = false;
    let busy = Promise.resolve();
    async function run() {
      started = true;
      showCommand();
      const t0 = performance.now();
      status.textContent = worker ? "计算中……" : "第一次计算：正在从本站载入浏览器里的 Python 和 tmath（只载一次）……";
      root.classList.add("tmath-busy");
      const job = busy.then(() => window.tmathRun(argv(false), files()));
      busy = job.catch(() => {});
      try {
        const r = await job;
        out.textContent = r.exitCode === 0 ? r.stdout : (r.stderr || r.stdout);
        out.classList.toggle("tmath-error", r.exitCode !== 0);
        status.textContent = (r.exitCode === 0 ? "算完" : `出错（退出码 ${r.exitCode}）`) + `，用时 ${seconds(t0)}`;
      } catch (e) {
        out.textContent = String(e.message || e);
        out.classList.add("tmath-error");
        status.textContent = "没能运行";
      } finally {
        root.classList.remove("tmath-busy");
      }
    }
    function permalink() {
      const q = new URLSearchParams();
      q.set("tmath", kind);
      if (configText.value.trim()) q.set("config", configText.value.trim());
      else q.set("preset", presetSelect.value);
      for (const f of fields) q.set(f.flag.slice(2), inputs[f.flag].value.trim()); // empty ones too
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
      for (const f of fields) {
        const v = q.get(f.flag.slice(2));
        if (v !== null) setValue(inputs[f.flag], v);
      }
      run();
    } else {
      showCommand();
    }
    root.tmath = { run, argv, files, permalink };
  }

  // A value from a link goes into the form as it is, even one a list does not offer: the
  // command line then names the field and the fix, as it would in a terminal.
  function setValue(input, value) {
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
      output.textContent = worker ? "检查中……（核对用的哈希故意算得慢：对的答案约 1 秒，错的要几秒）" : "第一次检查：正在载入浏览器里的 Python 和 tmath……";
      box.classList.remove("tmath-right", "tmath-wrong");
      try {
        const r = JSON.parse(await call("check", { label: box.dataset.label, text: input.value }));
        output.textContent = r.message;
        box.classList.add(r.correct ? "tmath-right" : "tmath-wrong");
      } catch (e) {
        output.textContent = String(e.message || e);
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
    if (result.error) area.append(el("pre", { class: "tmath-error", text: result.error }));
    if (typeset.length && window.MathJax && MathJax.typesetPromise) {
      return MathJax.typesetPromise(typeset).catch(() => {});
    }
    return Promise.resolve();
  }

  async function runCellAt(cell, source) {
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
        cell.editor = el("textarea", { class: "tmath-editor", spellcheck: "false" });
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
        cell.status = el("span", { class: "tmath-status" });
        cell.area = el("div", { class: "tmath-cell-output" });
        start.textContent = "运行";
        bar.append(stop, reset, cell.status);
        bar.after(cell.area);
      }
      const t0 = performance.now();
      cell.status.textContent = worker ? "运行中……" : "第一次运行：正在载入浏览器里的 Python、tmath 和 SymPy……";
      try {
        const r = await runCellAt(cell, cell.editor.value);
        await renderOutputs(cell.area, r);
        // what the notebook saved gives way to what ran here
        const saved = container.querySelector(".cell_output");
        if (saved) saved.style.display = "none";
        cell.status.textContent = `用时 ${seconds(t0)}`;
        container.dataset.tmathRan = r.error ? "error" : "ok";
      } catch (e) {
        cell.status.textContent = String(e.message || e);
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
