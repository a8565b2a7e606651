"""``tmath serve`` in the page (issue 37): ``window.tmathRun(argv, files)`` runs the command
line in Pyodide and prints what ``python -m tmath serve`` prints, byte for byte, with its exit
status: several presets and settings (dense, GQA, MLA, MoE; quantized; speculative; priced),
infeasible deployments and bad input.  The page, its server and its Chromium are
tests/test_site_compute.py's fixtures (one Pyodide load for this module).
"""

from __future__ import annotations

import test_site_compute as site
from test_site_compute import cli, run_many, wait_status

# the module's fixtures: its page, on its server, of its site
compute_site, server, page = site.compute_site, site.server, site.page

SERVE_JOBS = [
    ["--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--prompt-len", "1000",
     "--output-len", "500", "--batch", "16"],
    ["--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--batch", "4", "--draft",
     "llama3-8b", "--draft-len", "4", "--acceptance", "0.8", "--gpu-hour-price", "2", "--json"],
    ["--preset", "deepseek-v3", "--gpu", "H800", "--tp", "8", "--weight-dtype", "fp8"],
    ["--preset", "deepseek-v2-lite", "--gpu", "A100", "--kv-dtype", "fp8", "--batch", "32"],
    ["--preset", "mixtral-8x7b", "--gpu", "H200", "--tp", "2", "--weight-dtype", "int4",
     "--block-size", "32", "--gpu-hour-price", "3.5"],
    ["--preset", "mistral-7b", "--prompt-len", "8000", "--output-len", "2000", "--json"],
    ["--preset", "gpt2", "--gpu", "TPUv5e", "--prompt-len", "10", "--output-len", "1"],
    ["--preset", "qwen3-30b-a3b", "--gpu", "B200", "--batch", "256", "--json"],
    ["--preset", "llama3-8b", "--batch", "100000"],  # does not fit: said so
    # bad input: every one refused in Chinese, naming the flag
    ["--preset", "llama3-70b", "--tp", "3"],
    ["--preset", "llama3-70b", "--prompt-len", "9000", "--json"],
    ["--preset", "llama3-70b", "--weight-dtype", "fp4"],
    ["--preset", "llama3-70b", "--draft", "gpt2", "--draft-len", "2", "--acceptance", "0.5"],
    ["--preset", "llama3-70b", "--acceptance", "nan", "--json"],
    ["--preset", "llama3-70b", "--gpu-hour-price", "-3"],
    ["--preset", "llama3-70b", "--batch", "9" * 400],
    ["--preset", "no-such-model", "--json"],
    ["--gpu", "H100"],
]


def test_the_page_serves_what_the_command_line_serves(page):
    jobs = [(["serve", *argv], {}) for argv in SERVE_JOBS]
    got = run_many(page, jobs)
    want = [cli(argv, files) for argv, files in jobs]
    differ = [(a, g, w) for (a, _), g, w in zip(jobs, got, want, strict=True) if g != w]
    assert not differ, "\n".join(f"{a}:\n page {g}\n cli  {w}"[:2000] for a, g, w in differ[:3])
    codes = [g["exitCode"] for g in got]
    assert codes.count(0) >= 9 and codes.count(2) >= 8, codes
    assert all("Traceback" not in g["stderr"] for g in got)
    assert any(g["stdout"].startswith("部署：不可行") for g in got)


def test_a_config_file_serves_in_the_page(page):
    text = (site.HF_CONFIGS / "llama3-8b.json").read_text(encoding="utf-8")
    jobs = [(["serve", "config.json", "--batch", "8", "--gpu-hour-price", "2"], {"config.json": text}),
            (["serve", "config.json", "--json"], {"config.json": "{not json"})]
    got = run_many(page, jobs)
    assert got == [cli(a, f) for a, f in jobs]
    assert got[0]["exitCode"] == 0 and got[1]["exitCode"] == 2


def test_the_serve_form_computes_what_the_command_line_prints(page):
    """A reader fills the serve form (its fields are the command line's flags): Mixtral 8x7B on
    two H200s, int4 weights, 32 requests, a price; then a draft model under 更多设置. The page
    prints what ``python -m tmath serve`` prints for that argv, byte for byte, and shows it."""
    form = page.locator("#serve")
    form.locator("select[name='preset']").select_option("mixtral-8x7b")
    form.locator("select[name='--gpu']").select_option("H200")
    form.locator("input[name='--tp']").fill("2")
    form.locator("input[name='--batch']").fill("32")
    form.locator("select[name='--weight-dtype']").select_option("int4")
    form.locator("input[name='--gpu-hour-price']").fill("3.5")
    form.locator("button.tmath-run").click()
    wait_status(page, "#serve", "用时")
    argv = ["serve", "--preset", "mixtral-8x7b", "--gpu", "H200", "--tp", "2", "--prompt-len",
            "1024", "--output-len", "256", "--batch", "32", "--weight-dtype", "int4", "--kv-dtype",
            "bf16", "--gpu-hour-price", "3.5"]
    want = cli(argv)
    assert want["exitCode"] == 0 and "每百万" in want["stdout"]
    assert form.locator(".tmath-status").text_content().startswith("算完")
    assert form.locator("pre.tmath-output").text_content() == want["stdout"]
    assert form.locator("code.tmath-command").text_content() == "python -m tmath " + " ".join(argv)
    # speculative decoding, from the flags beyond the first eight
    form.locator("select[name='preset']").select_option("llama3-70b")
    form.locator("select[name='--gpu']").select_option("H100")
    form.locator("input[name='--tp']").fill("8")
    form.locator("select[name='--weight-dtype']").select_option("bf16")
    form.locator("details.tmath-more summary").click()
    for name, value in (("--draft", "llama3-8b"), ("--draft-len", "4"), ("--acceptance", "0.8"),
                        ("--block-size", "32")):
        form.locator(f"input[name='{name}']").fill(value)
    page.evaluate("document.querySelector('#serve').tmath.run()")
    got = page.evaluate("document.querySelector('#serve').tmath.argv(false)")
    assert got == ["serve", "--preset", "llama3-70b", "--gpu", "H100", "--tp", "8", "--prompt-len",
                   "1024", "--output-len", "256", "--batch", "32", "--weight-dtype", "bf16",
                   "--kv-dtype", "bf16", "--block-size", "32", "--draft", "llama3-8b",
                   "--draft-len", "4", "--acceptance", "0.8", "--gpu-hour-price", "3.5"]
    want = cli(got)
    assert want["exitCode"] == 0 and "草稿" in want["stdout"]
    assert form.locator("pre.tmath-output").text_content() == want["stdout"]
    assert not page.errors
