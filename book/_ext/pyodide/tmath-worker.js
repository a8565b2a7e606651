/* The Web Worker (a module worker) of the book's website: Pyodide running tmath (book/_ext/pyodide_site.py).
 *
 * It answers messages {id, op, args} from tmath.js with {id, ok, value | error}. Every op
 * calls one function of tmath.web (Python) and returns its JSON text unchanged: no number is
 * computed here. Nothing is fetched before the first message; everything comes from the
 * site itself (indexURL is the site's _static/pyodide/).
 */
import { loadPyodide } from "../pyodide/pyodide.mjs";

const BASE = new URL(".", self.location.href).href; // .../_static/tmath/
let ready = null; // Promise<pyodide>
let sympyReady = null;

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return await response.arrayBuffer();
}

async function start() {
  const pyodide = await loadPyodide({ indexURL: new URL("../pyodide/", BASE).href, packages: [] });
  const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
  pyodide.unpackArchive(await fetchBytes(new URL("tmath.zip", BASE).href), "zip",
                        { extractDir: sitePackages });
  pyodide.runPython("import tmath.web");
  return pyodide;
}

async function withSympy(pyodide) {
  if (!sympyReady) {
    sympyReady = (async () => {
      const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
      const manifest = await (await fetch(new URL("wheels.json", BASE).href)).json();
      for (const name of manifest.wheels) {
        pyodide.unpackArchive(await fetchBytes(new URL(name, BASE).href), "wheel",
                              { extractDir: sitePackages });
      }
    })();
  }
  await sympyReady;
}

const OPS = {
  cli: (py, a) => py.globals.get("tmath").web.run_cli(JSON.stringify(a.argv), JSON.stringify(a.files || {})),
  cell: (py, a) => py.globals.get("tmath").web.run_cell(a.page, a.source),
  prelude: (py, a) => py.globals.get("tmath").web.run_prelude(a.page, JSON.stringify(a.statements)),
  check: (py, a) => py.globals.get("tmath").web.check_answer(a.label, a.text),
  reset: (py, a) => py.globals.get("tmath").web.reset_cells(a.page),
};

self.onmessage = async (event) => {
  const { id, op, args } = event.data;
  try {
    if (!ready) ready = start();
    const pyodide = await ready;
    if (op === "cell" || op === "prelude") await withSympy(pyodide);
    if (!(op in OPS)) throw new Error(`unknown op ${op}`);
    let value = OPS[op](pyodide, args || {});
    if (value && typeof value.then === "function") value = await value;
    self.postMessage({ id, ok: true, value: value === undefined ? null : value });
  } catch (e) {
    // A JavaScript error (a stack overflow, Pyodide's own fatal error) may leave Pyodide
    // unusable: the page then starts a new worker for the next computation.
    const fatal = !(e && e.constructor && e.constructor.name === "PythonError");
    self.postMessage({ id, ok: false, fatal, error: String(e && e.message || e) });
  }
};
