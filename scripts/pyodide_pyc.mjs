// Byte-compile the website's SymPy and mpmath wheels for the Pyodide that runs them.
//
//   node scripts/pyodide_pyc.mjs PYODIDE_DIR OUT_DIR WHEEL...
//
// The wheels from PyPI hold .py files only: in the page, `import sympy` then compiles every
// module it loads, which took 3.0-3.5 s of the reader's first cell (Pyodide 314 in Chromium on
// a quiet machine); from bytecode it takes about 0.4 s. Bytecode is specific to the Python
// version, and Pyodide's is not the machine's, so Pyodide itself compiles it here, under Node.js,
// once per download (the Makefile's wheels stamp). Each OUT_DIR/NAME.whl holds the same package
// as the wheel it came from, with each module as its .pyc (the hash-based, unchecked kind: it
// does not depend on file times), its test suites (`tests` folders) left out, and every other
// file as it was; the archive is written byte for byte the same each time.
import { loadPyodide } from "pyodide";
import fs from "node:fs";
import path from "node:path";

const [pyodideDir, outDir, ...wheels] = process.argv.slice(2);
if (!pyodideDir || !outDir || !wheels.length) {
  console.error("usage: node scripts/pyodide_pyc.mjs PYODIDE_DIR OUT_DIR WHEEL...");
  process.exit(2);
}
const py = await loadPyodide({ indexURL: path.resolve(pyodideDir) + "/" });
py.runPython(`
import compileall, os, py_compile, shutil, warnings, zipfile

def compile_wheel(source: str, target: str) -> None:
    root = "/tmp/wheel"
    shutil.rmtree(root, ignore_errors=True)
    with zipfile.ZipFile(source) as z:
        z.extractall(root)
    for folder, subdirs, _ in os.walk(root):
        for name in [s for s in subdirs if s == "tests"]:
            shutil.rmtree(os.path.join(folder, name))
            subdirs.remove(name)
    with warnings.catch_warnings():  # SyntaxWarnings of the packages' own code: not ours to fix
        warnings.simplefilter("ignore")
        if not compileall.compile_dir(root, quiet=2, legacy=True,
                                      invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH):
            raise RuntimeError(f"a module of {source} did not compile")
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    compiled = {rel for rel in files if rel.endswith(".pyc")}
    with zipfile.ZipFile(target, "w") as z:
        for rel in files:
            if rel.endswith(".py") and rel + "c" in compiled:
                continue  # its bytecode replaces it
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            with open(os.path.join(root, rel), "rb") as fh:
                z.writestr(info, fh.read())
`);
const compile = py.globals.get("compile_wheel");
fs.mkdirSync(outDir, { recursive: true });
for (const wheel of wheels) {
  py.FS.writeFile("/tmp/in.whl", new Uint8Array(fs.readFileSync(wheel)));
  try {
    compile("/tmp/in.whl", "/tmp/out.whl");
  } catch (e) {  // Python's message, not the whole of Pyodide's minified source
    console.error(`${wheel}: ${e.message}`);
    process.exit(1);
  }
  const bytes = py.FS.readFile("/tmp/out.whl");
  const target = path.join(outDir, path.basename(wheel));
  fs.writeFileSync(target + ".part", bytes);
  fs.renameSync(target + ".part", target);
  console.log(`${path.basename(wheel)}: ${fs.statSync(wheel).size} -> ${bytes.length} bytes, compiled`);
}
