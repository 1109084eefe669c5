#!/usr/bin/env python3
"""The HTML report of `qkv explain --html`, tested in headless Chromium (issue 6).

    report_test.py --qkv build/qkv --out build/tests/browser-artifacts

Writes the report of the default sentence, opens it from file:// and checks, as a reader would use
it: no console error and no request but the page itself; hovering a token in the line view isolates
its lines; choosing a head in the model view (by click and by arrow key) shows that head's numbers
in the heatmap and the step view, compared with `qkv explain --json`; the filters hide tokens; the
page reads in the dark colour scheme too. Then reports at the edges (every token filtered out, HTML
characters in the text, grouped-query heads with a fully masked batch entry, a float mask), a
256-token report: its size (< 10 MB) and how long it takes to become interactive (printed; speed is
measured, not asserted), and a decoder's (SmolLM2-135M): 9 query heads over 3 shared key/value
heads, causal, compared with --json. Screenshots go to --out.

A part whose model is not installed prints "skipped: ..." and is not run; the script then exits
with 77, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed. A failed check exits
with 1 whatever was skipped.
"""

import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser  # noqa: E402

from checklist import check, skip, finish  # noqa: E402


def smollm2_file():
    """Where scripts/fetch_model smollm2 puts the model: $QKV_HOME/models/..., QKV_HOME defaulting to
    ~/.cache/qkv (as `qkv --model smollm2` looks for it)."""
    home = os.environ.get("QKV_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "qkv")
    return os.path.join(home, "models", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))


def qkv(binary, *args):
    run = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit(f"qkv {' '.join(args)} failed ({run.returncode}): {run.stderr.strip()}")
    return run.stdout


def lines_shown(b):
    """The line view's lines as (head, y1, y2) triples."""
    return b.evaluate("Array.from(document.querySelectorAll('#lines line'), "
                      "l => l.style.display === 'none' ? null : "
                      "[+l.dataset.h, +l.getAttribute('y1'), +l.getAttribute('y2')]).filter(x => x)")


def step_rows(b):
    return b.evaluate("""Array.from(document.querySelectorAll('#steps tbody tr'), tr => ({
        j: +tr.dataset.j,
        dot: +tr.querySelector('.dot').dataset.v,
        z: +tr.querySelector('.z').dataset.v,
        w: +tr.querySelector('.w').dataset.v}))""")


def check_head(b, capture, layer, head, query, what):
    """The heatmap (by hovering cells) and the step view show layer/head's numbers for query."""
    l = capture["layers"][layer]
    state = b.evaluate("({l: qkv.state.l, h: qkv.state.h, q: qkv.state.q})")
    check(state == {"l": layer, "h": head, "q": query}, f"{what}: selection is {state}")
    check(b.evaluate("document.getElementById('heat-sel').textContent") ==
          f"layer {layer}, head {head}", f"{what}: the heatmap is titled with the head")
    # Hover three cells of the heatmap; the readout names the pair and its weight.
    n = len(capture["tokens"])
    box = b.evaluate("(() => { const r = document.getElementById('heat').getBoundingClientRect();"
                     " return [r.left, r.top]; })()")
    cell = b.evaluate("(() => { const n = %d; return Math.max(2, Math.min(26, Math.floor(600 / n))); })()" % n)
    pad = 96 if cell >= 10 else 8
    worst = 0.0
    for i, j in [(query, 0), (query, n - 1), (2, 3)]:
        b.evaluate(f"document.getElementById('heat').scrollIntoView({{block: 'center'}})")
        box = b.evaluate("(() => { const r = document.getElementById('heat').getBoundingClientRect();"
                         " return [r.left, r.top]; })()")
        b.mouse_move(box[0] + pad + j * cell + cell / 2, box[1] + pad + i * cell + cell / 2)
        text = b.evaluate("document.getElementById('hover').textContent")
        shown = float(text.split("weight ")[1].split(",")[0].replace("−", "-"))
        expected = l["weights"][head][i][j]
        worst = max(worst, abs(shown - expected))
        check(f"({i}) →" in text and f"({j}):" in text and abs(shown - expected) <= 5e-5,
              f"{what}: heatmap cell ({i}, {j}) reads '{text}', --json weight {expected:.6f}")
    rows = step_rows(b)
    check(len(rows) == n, f"{what}: the step view lists all {n} keys ({len(rows)})")
    err = {"q·k": 0.0, "logit": 0.0, "weight": 0.0}
    for r in rows:
        j = r["j"]
        err["q·k"] = max(err["q·k"], abs(r["dot"] - l["scores"][head][query][j]) / max(1, abs(l["scores"][head][query][j])))
        err["logit"] = max(err["logit"], abs(r["z"] - l["logits"][head][query][j]) / max(1, abs(l["logits"][head][query][j])))
        err["weight"] = max(err["weight"], abs(r["w"] - l["weights"][head][query][j]))
    check(err["q·k"] < 1e-5 and err["logit"] < 1e-5 and err["weight"] < 1e-5,
          f"{what}: step view q·k, ×scale and softmax match --json (max errors {err})")
    out = [float(x) for x in b.evaluate("document.getElementById('out').dataset.v").split(",")]
    expected = l["head_out"][head][query]
    scale = max(abs(x) for x in expected)
    out_err = max(abs(a - e) for a, e in zip(out, expected))
    # v travels as float16 (relative rounding 2^-11), so the sum is good to about 1e-3 of its scale.
    check(len(out) == len(expected) and out_err <= 2e-3 * scale,
          f"{what}: step view output Σ weight·v matches --json head_out (max |Δ| {out_err:.2e}, scale {scale:.2f})")
    return worst


def test_default_sentence(b, binary, out):
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "report.html")
    qkv(binary, "explain", "--html", page)
    capture = json.loads(qkv(binary, "explain", "--json"))
    n = len(capture["tokens"])
    url = "file://" + page
    b.navigate(url)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [], f"no console errors ({b.console_errors()})")
    check(b.requests() == [url], f"no request but the page itself ({b.requests()})")
    b.screenshot(os.path.join(out, "report-top.png"))

    # The page opens on the focus token ("it") and the head the terminal suggests zooming into.
    focus = capture["focus"]
    zoom = qkv(binary, "explain").split("qkv explain --layer ")[1].split()
    check_head(b, capture, int(zoom[0]), int(zoom[2]), focus, "at load")

    # Line view: hovering a query token isolates its lines.
    b.evaluate("document.querySelector('#head-toggles button[data-all=\"1\"]').click()")
    before = lines_shown(b)
    b.mouse_move(*b.center('#lines text[data-side="0"][data-i="2"]'))
    after = lines_shown(b)
    y2 = b.evaluate("+document.querySelector('#lines text[data-side=\"0\"][data-i=\"2\"]').getAttribute('y') - 4")
    check(len(before) > len(after) > 0 and all(y1 == y2 for _, y1, _ in after),
          f"hovering 'animal' leaves only its lines ({len(before)} → {len(after)}, all from its row)")
    heads = {h for h, _, _ in after}
    check(len(heads) > 1, f"lines of several heads, a colour each ({len(heads)} heads)")
    b.screenshot(os.path.join(out, "report-lines-hover.png"))
    b.mouse_move(5, 5)
    check(len(lines_shown(b)) == len(before), "leaving the token shows every line again")
    # Heads on and off.
    b.evaluate("document.querySelector('#head-toggles button[data-h=\"3\"]').click()")
    check(3 not in {h for h, _, _ in lines_shown(b)}, "head 3 switched off leaves no line of head 3")

    # Model view: click layer 3, head 7, then press → for head 8.
    b.click(*b.center('#grid button[data-l="3"][data-h="7"]'))
    check_head(b, capture, 3, 7, focus, "clicked layer 3, head 7")
    b.key("ArrowRight")
    check_head(b, capture, 3, 8, focus, "→ from there")
    b.screenshot(os.path.join(out, "report-grid-l3h8.png"))

    # A token chosen by keyboard: focus the token strip, Enter on "animal" (2).
    b.evaluate("document.querySelector('#tokens button[data-i=\"2\"]').focus()")
    b.key("Enter")
    check_head(b, capture, 3, 8, 2, "Enter on the token 'animal'")
    b.evaluate("document.getElementById('heat').focus()")
    b.key("ArrowDown")
    check(b.evaluate("qkv.state.q") == 3, "ArrowDown in the heatmap moves to the next query")
    b.evaluate("window.scrollTo(0, document.getElementById('steps-h').offsetTop - 20)")
    b.screenshot(os.path.join(out, "report-steps.png"))

    # Filters: hide [CLS]/[SEP] and punctuation.
    rows_before = len(step_rows(b))
    b.click(*b.center("#hide-special"))
    b.click(*b.center("#hide-punct"))
    shown = b.evaluate("Array.from(document.querySelectorAll('#lines text[data-side=\"1\"]'), t => t.textContent)")
    check("[CLS]" not in shown and "[SEP]" not in shown and "'" not in shown and len(shown) == n - 3,
          f"the filters hide [CLS], [SEP] and the apostrophe ({len(shown)} of {n} keys shown)")
    check(len(step_rows(b)) == rows_before - 3, "the step view hides them too")

    # Dark colour scheme.
    b.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    bg = b.evaluate("getComputedStyle(document.body).backgroundColor")
    rgb = [int(x) for x in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3]]
    check(sum(rgb) < 3 * 80, f"dark scheme: a dark background ({bg})")
    b.evaluate("window.scrollTo(0, 0)")
    b.screenshot(os.path.join(out, "report-dark.png"))
    b.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    check(b.console_errors() == [], f"still no console errors after all that ({b.console_errors()})")
    check(b.requests() == [url], f"still no request but the page ({b.requests()})")


def test_attend_example(b, binary, out):
    """qkv attend --example laplace --html: a block per run; the Laplace run's step view shows the
    score column and the weights of --json, and its output to float32 precision (v is float32)."""
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "laplace.html")
    qkv(binary, "attend", "--example", "laplace", "--html", page)
    runs = json.loads(qkv(binary, "attend", "--example", "laplace", "--json"))["runs"]
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [], f"attend report: no console errors ({b.console_errors()})")
    names = b.evaluate("Array.from(document.querySelectorAll('#blocks button'), x => x.textContent)")
    check(names == ["run 1", "run 2"], f"attend report: a block per run ({names})")
    for r, run in enumerate(runs):
        b.click(*b.center(f'#blocks button[data-b="{r}"]'))
        headers = b.evaluate("Array.from(document.querySelectorAll('#steps th'), x => x.textContent)")
        rows = b.evaluate("""Array.from(document.querySelectorAll('#steps tbody tr'), tr => ({
            j: +tr.dataset.j, z: +tr.querySelector('.z').dataset.v, w: +tr.querySelector('.w').dataset.v}))""")
        weights = run["weights"][0] if isinstance(run["weights"][0], list) else run["weights"]
        logits = run["logits"][0] if isinstance(run["logits"][0], list) else run["logits"]
        err = max(max(abs(x["w"] - weights[x["j"]]), abs(x["z"] - logits[x["j"]]) / max(1, abs(logits[x["j"]])))
                  for x in rows)
        dot = run["score"] in ("scaled-dot", "dot")
        check(("q·k" in headers) == dot and ("score" in headers) != dot and err < 1e-6,
              f"attend report, run {r + 1} ({run['score']}): columns {headers[2:5]}, logits and weights "
              f"match --json (max error {err:.1e})")
        got = [float(x) for x in b.evaluate("document.getElementById('out').dataset.v").split(",")]
        expected = run["out"][0] if isinstance(run["out"][0], list) else run["out"]
        check(max(abs(a - e) for a, e in zip(got, expected)) < 1e-5,
              f"attend report, run {r + 1}: the output Σ weight·v matches --json")
    b.screenshot(os.path.join(out, "attend-laplace.png"))


def test_trained_model(b, binary, out):
    """qkv explain --model trained.safetensors --input ... --html: three blocks (cross-, encoder
    self-, decoder self-attention); the cross-attention heatmap shows --json's alignment."""
    work = tempfile.mkdtemp(prefix="qkv-report-")
    model = os.path.join(work, "reverse.safetensors")
    page = os.path.join(work, "reverse.html")
    qkv(binary, "train", "--task", "reverse", "--steps", "20", "--layers", "2", "--heads", "2",
        "--d-model", "16", "--test-examples", "10", "--threads", "1", "--out", model)
    source = "abcdef"
    qkv(binary, "explain", "--model", model, "--input", source, "--layer", "1", "--html", page)
    dump = json.loads(qkv(binary, "explain", "--model", model, "--input", source, "--layer", "1", "--json"))
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [], f"trained model: no console errors ({b.console_errors()})")
    names = b.evaluate("Array.from(document.querySelectorAll('#blocks button'), x => x.textContent)")
    check(names == ["cross-attention", "encoder self-attention", "decoder self-attention"],
          f"trained model: three blocks ({names})")
    worst = 0.0
    for h, rows in enumerate(dump["heads"]):
        b.evaluate(f"qkv.select({{b: 0, l: 1, h: {h}, q: 0}})")
        for t, row in enumerate(rows):
            b.evaluate(f"qkv.select({{q: {t}}})")
            shown = {r["j"]: r["w"] for r in b.evaluate(
                "Array.from(document.querySelectorAll('#steps tbody tr'), tr => "
                "({j: +tr.dataset.j, w: +tr.querySelector('.w').dataset.v}))")}
            worst = max(worst, max(abs(shown[j] - w) for j, w in enumerate(row)))
    check(worst < 1e-5, f"trained model: cross-attention weights of layer 1 match --json (max |Δ| {worst:.1e})")
    check(b.evaluate("document.getElementById('heat-what-wrap').hidden") is False,
          "trained model: the weights / value-weighted switch (it keeps each head's value norms)")
    b.click(*b.center('#blocks button[data-b="2"]'))
    upper = b.evaluate("""(() => { const L = qkv.layer(2, 0), n = L.n; let s = 0;
        for (let h = 0; h < 2; h++) for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++)
          s += L.w[(h * n + i) * n + j]; return s; })()""")
    check(upper == 0, f"trained model: decoder self-attention is causal (weight above the diagonal: {upper})")
    b.screenshot(os.path.join(out, "trained-decoder-self.png"))


def test_sentence_pair(b, binary, out):
    """Two texts: the pair filter shows A→B as A's tokens asking and B's answering."""
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "pair.html")
    a, bb = "The animal didn't cross the street.", "It was too tired."
    qkv(binary, "explain", a, bb, "--html", page)
    tokens = json.loads(qkv(binary, "explain", a, bb, "--json"))["tokens"]
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [], f"pair report: no console errors ({b.console_errors()})")
    check(not b.evaluate("document.getElementById('pair-wrap').hidden"), "pair report: the pair filter is shown")
    for mode, qs, ks in [("AB", 0, 1), ("BA", 1, 0), ("BB", 1, 1)]:
        b.evaluate(f"(() => {{ const s = document.getElementById('pair'); s.value = '{mode}';"
                   " s.dispatchEvent(new Event('change')); })()")
        left = b.evaluate("Array.from(document.querySelectorAll('#lines text[data-side=\"0\"]'), t => +t.dataset.i)")
        right = b.evaluate("Array.from(document.querySelectorAll('#lines text[data-side=\"1\"]'), t => +t.dataset.i)")
        want_left = [t["index"] for t in tokens if t["segment"] == qs]
        want_right = [t["index"] for t in tokens if t["segment"] == ks]
        check(left == want_left and right == want_right,
              f"pair report, {mode[0]}→{mode[1]}: queries {left}, keys {right} (segments from --json)")
    b.screenshot(os.path.join(out, "pair-B-to-B.png"))


def write_npy(path, shape, values):
    """A float32 .npy file (format 1.0, C order) without numpy."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{n}, " for n in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # the data starts on a multiple of 64
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


def text_of(b, *ids):
    return b.evaluate("[%s].map(id => document.getElementById(id).textContent).join(' | ')" %
                      ", ".join(f"'{i}'" for i in ids))


def no_bad_numbers(text):
    """−∞ is how a masked score reads; NaN, undefined, null or Infinity never should."""
    return not any(word in text for word in ("NaN", "undefined", "null", "Infinity"))


def test_edge_cases(b, binary, out):
    """Reports at the edges, each case a way the page once broke or misled."""
    work = tempfile.mkdtemp(prefix="qkv-report-")

    # One token between [CLS] and [SEP], and it is punctuation: both filters on hide every query.
    page = os.path.join(work, "dot.html")
    qkv(binary, "explain", ".", "--html", page)
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    b.click(*b.center("#hide-special"))
    b.click(*b.center("#hide-punct"))
    b.evaluate("document.getElementById('heat').focus()")
    for key in ("ArrowDown", "ArrowRight"):
        b.key(key)
    check(b.console_errors() == [] and "hide every query" in text_of(b, "steps"),
          f"'.' with every token filtered out: the step view says so, arrow keys throw nothing "
          f"({b.console_errors()})")
    b.click(*b.center("#hide-punct"))
    check(len(step_rows(b)) == 1 and b.evaluate("qkv.state.q") == 1,
          "'.' with punctuation shown again: its query and key are back")

    # HTML characters and non-ASCII text are shown as text; Enter on a token keeps the focus there.
    text = '<b>"x" & y</b> naïve 東京'
    page = os.path.join(work, "chars.html")
    qkv(binary, "explain", text, "--html", page)
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [] and b.evaluate("document.querySelector('#texts b, #tokens b') === null")
          and text_of(b, "texts") == "text: " + text,
          f"HTML characters are text, not markup ({text_of(b, 'texts')!r})")
    b.evaluate("document.querySelector('#tokens button[data-i=\"2\"]').focus()")
    b.key("Enter")
    focus = b.evaluate("document.activeElement.dataset.i")
    b.key("Tab")
    check(b.evaluate("qkv.state.q") == 2 and focus == "2" and b.evaluate("document.activeElement.dataset.i") == "3",
          f"Enter on a token keeps the focus on it; Tab goes on to the next (focus on {focus})")

    # Grouped-query heads (4 query heads read 2 key heads), Dq 8 ≠ Dv 3, L 3 ≠ S 5, a bottom-right
    # causal mask, and batch entry 1 with no valid key (--key-lengths 4,0): fully masked rows.
    rng = random.Random(7)

    def tensor(name, *shape):
        path = os.path.join(work, name + ".npy")
        write_npy(path, shape, [rng.gauss(0, 1) for _ in range(math.prod(shape))])
        return path

    args = ["attend", "--query", tensor("q", 2, 4, 3, 8), "--keys", tensor("k", 2, 2, 5, 8),
            "--values", tensor("v", 2, 2, 5, 3), "--causal", "bottom-right", "--key-lengths", "4,0",
            "--query-labels", "a query label longer than sixteen characters,q1,q2"]
    page = os.path.join(work, "gqa.html")
    qkv(binary, *args, "--html", page)
    ref = json.loads(qkv(binary, *args, "--json"))
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(not text_of(b, "texts").startswith(":"), f"an unlabelled text has no stray colon ({text_of(b, 'texts')!r})")
    worst, bad = 0.0, []
    for batch in range(2):
        for h in range(4):
            for i in range(3):
                b.evaluate(f"qkv.select({{b: {batch}, h: {h}, q: {i}}})")
                got = [float(x) for x in b.evaluate("document.getElementById('out').dataset.v").split(",")]
                rows = b.evaluate("Array.from(document.querySelectorAll('#steps tbody tr'), tr => "
                                  "+tr.querySelector('.w').dataset.v)")
                worst = max([worst] + [abs(a - e) for a, e in zip(got, ref["out"][batch][h][i])] +
                            [abs(a - e) for a, e in zip(rows, ref["weights"][batch][h][i])])
                shown = text_of(b, "sel", "steps", "hover", "lines")
                if not no_bad_numbers(shown):
                    bad.append((batch, h, i))
    check(worst < 1e-5 and not bad, f"grouped-query heads, Dq ≠ Dv, masks: every step view matches --json "
          f"(max |Δ| {worst:.1e}); no NaN/undefined shown (in {bad})")
    check("Every key is masked" in text_of(b, "steps") and not b.evaluate("document.getElementById('heat-masked').hidden"),
          "a fully masked row: the step view says it attends to nothing; the heatmap's legend shows masked cells")
    check(b.evaluate("document.documentElement.scrollWidth <= innerWidth"),
          "a wide step table (8 numbers per vector) scrolls inside the step view, not the page")
    label = b.evaluate("(() => { const t = document.querySelector('#lines text[data-side=\"0\"][data-i=\"0\"]');"
                       " return [t.textContent, t.getAttribute('aria-label')]; })()")
    check(label[0].endswith("…") and len(label[0]) == 16 and label[1].startswith("a query label longer"),
          f"a long label is cut in the line view, in full in its aria-label ({label})")
    # Block switching: a key chosen in batch 0 means nothing in batch 1, nor does the hovered cell.
    b.evaluate("qkv.select({b: 0, h: 0, q: 2})")
    b.evaluate("document.getElementById('heat').focus()")
    b.key("ArrowRight")
    b.key("ArrowRight")
    hover = text_of(b, "hover")
    check(b.evaluate("qkv.state.k") == 1 and "(2) →" in hover and "(1):" in hover,
          f"arrow keys in the heatmap choose a key and read it out ({hover!r})")
    b.click(*b.center('#blocks button[data-b="1"]'))
    state = b.evaluate("({b: qkv.state.b, q: qkv.state.q, k: qkv.state.k})")
    check(state == {"b": 1, "q": 0, "k": -1} and text_of(b, "hover").strip() == "",
          f"switching blocks resets the query, the key and the readout ({state})")
    b.evaluate("document.getElementById('heat').focus()")
    b.key("ArrowRight")
    check("weight 0.0000, score −∞ (masked)" in text_of(b, "hover"),
          f"a masked cell reads as masked ({text_of(b, 'hover')!r})")
    check(b.console_errors() == [], f"grouped-query report: no console errors ({b.console_errors()})")
    b.screenshot(os.path.join(out, "attend-fully-masked.png"))

    # A float mask is added to the scaled score: the column says so.
    write_npy(os.path.join(work, "mask.npy"), (3, 5), [0.5, 0, 0, 0, float("-inf")] + [0] * 10)
    page = os.path.join(work, "mask.html")
    qkv(binary, "attend", "--query", tensor("q2", 3, 4), "--keys", tensor("k2", 5, 4), "--values",
        tensor("v2", 5, 4), "--mask", os.path.join(work, "mask.npy"), "--html", page)
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    headers = b.evaluate("Array.from(document.querySelectorAll('#steps th'), x => x.textContent)")
    check("×scale + mask" in headers and "(1 of 5)" in text_of(b, "steps") and b.console_errors() == [],
          f"a float mask: the column is named '×scale + mask', the −∞ key counted ({headers})")


def test_256_tokens(b, binary, out):
    sentence = ("The animal did not cross the street because it was too tired, "
                "and the river bank was wet after the rain. ")
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "report256.html")
    qkv(binary, "explain", sentence * 20, "--html", page)
    size = os.path.getsize(page)
    check(size < 10_000_000, f"a 256-token report is under 10 MB ({size / 1e6:.2f} MB)")
    times = []
    for _ in range(3):
        start = time.monotonic()
        b.navigate("file://" + page)
        b.wait_for("document.body.dataset.ready", timeout=30)
        times.append(time.monotonic() - start)
    n = b.evaluate("qkv.state && document.querySelectorAll('#tokens button').length")
    check(n == 256, f"the long report has 256 tokens ({n})")
    check(b.console_errors() == [], f"no console errors ({b.console_errors()})")
    times.sort()
    print(f"note  256 tokens: {size / 1e6:.2f} MB, interactive after {times[1]:.2f} s "
          f"(median of 3: navigation to first render; target < 2 s)")
    b.screenshot(os.path.join(out, "report-256.png"))


def test_decoder(b, binary, out):
    """qkv explain --model smollm2 --html: a decoder's report. The model view has 9 query heads a
    layer and names the 3 key/value heads they share; the heatmap is causal; a head chosen in the
    grid shows --json's scores, logits and weights for every query, computed in the page from q and
    the shared k (the data holds 3 key heads, not 9)."""
    model = smollm2_file()
    if not os.path.isfile(model):
        skip(f"the decoder's report: {model} is missing (scripts/fetch_model smollm2 fetches it)")
        return
    text = "The animal didn't cross the street because it was too tired"
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "smollm2.html")
    qkv(binary, "explain", "--model", "smollm2", text, "--html", page)
    dump = json.loads(qkv(binary, "explain", "--model", "smollm2", text, "--json"))
    heads, kv_heads, n = dump["model"]["heads"], dump["model"]["kv_heads"], len(dump["tokens"])
    check((heads, kv_heads, dump["model"]["layers"], dump["causal"]) == (9, 3, 30, True),
          f"decoder: --json describes 30 layers of 9 query heads over 3 key/value heads, causal "
          f"({dump['model']})")
    url = "file://" + page
    b.navigate(url)
    b.wait_for("document.body.dataset.ready", timeout=20)
    check(b.console_errors() == [], f"decoder: no console errors ({b.console_errors()})")
    check(b.requests() == [url], f"decoder: no request but the page itself ({b.requests()})")

    # Model view: 9 query heads a layer, and above them the 3 key/value heads, each over the
    # query heads that read it (h0–h2 read kv 0, ...).
    grid = b.evaluate("""(() => {
        const box = (x) => { const r = x.getBoundingClientRect(); return [r.left, r.right]; };
        return {layers: new Set(Array.from(document.querySelectorAll('#grid button'), x => x.dataset.l)).size,
                heads: Array.from(document.querySelectorAll('#grid button[data-l="0"]'), x => +x.dataset.h),
                labels: Array.from(document.querySelectorAll('#grid .label.head'), x => x.textContent),
                cols: Array.from(document.querySelectorAll('#grid button[data-l="0"]'), box),
                kv: Array.from(document.querySelectorAll('#grid .label.kv'), x => [x.textContent, ...box(x)])};
        })()""")
    check(grid["layers"] == 30 and grid["heads"] == list(range(9)) and
          grid["labels"] == [f"h{h}" for h in range(9)],
          f"decoder: the model view has 30 layers × 9 query heads ({grid['layers']} × {grid['labels']})")
    group = heads // kv_heads
    spans = [kv[0] == f"kv {g}" and kv[1] <= grid["cols"][g * group][0] + 1 and
             kv[2] >= grid["cols"][g * group + group - 1][1] - 1 and
             (g + 1 == kv_heads or kv[2] <= grid["cols"][(g + 1) * group][0] + 1)
             for g, kv in enumerate(grid["kv"])]
    check(len(spans) == kv_heads and all(spans),
          f"decoder: the model view names the 3 shared key/value heads over their query heads "
          f"({[kv[0] for kv in grid['kv']]})")
    note = b.evaluate("(() => { const e = document.getElementById('block-note');"
                      " return !e || e.offsetParent === null ? '' : e.textContent; })()")
    check("the 9 query heads of a layer share 3 key/value heads" in note and "h3–h5 read kv 1" in note,
          f"decoder: the page says how the heads are grouped ({note!r})")

    # Causal: in every layer and head, no weight above the diagonal and the scores there −∞.
    above = b.evaluate("""(() => { let w = 0, finite = 0;
        for (let l = 0; l < 30; l++) { const L = qkv.layer(0, l), n = L.n;
          for (let h = 0; h < 9; h++) for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
            w += L.w[(h * n + i) * n + j]; finite += L.z[(h * n + i) * n + j] !== -Infinity; } }
        return [w, finite]; })()""")
    check(above == [0, 0], f"decoder: every head is causal (weight above the diagonal {above[0]}, "
          f"finite scores there {above[1]})")

    # A head chosen in the grid: layer 14, head 4, which reads key/value head 1.
    layer, head = 14, 4
    b.evaluate(f"document.querySelector('#grid button[data-l=\"{layer}\"][data-h=\"{head}\"]')"
               ".scrollIntoView({block: 'center'})")
    b.click(*b.center(f'#grid button[data-l="{layer}"][data-h="{head}"]'))
    state = b.evaluate("({l: qkv.state.l, h: qkv.state.h})")
    check(state == {"l": layer, "h": head} and
          b.evaluate("document.getElementById('heat-sel').textContent") == f"layer {layer}, head {head}",
          f"decoder: a click in the model view chooses layer {layer}, head {head} ({state})")
    steps = b.evaluate("document.getElementById('steps').textContent")
    check(f"key/value head {head // group}" in steps,
          f"decoder: the step view names the key/value head that head {head} reads")
    L = dump["layers"][layer]
    err = {"q·k": 0.0, "logit": 0.0, "weight": 0.0}
    mask_ok, out_err = True, 0.0
    for i in range(n):
        b.evaluate(f"qkv.select({{q: {i}}})")
        rows = b.evaluate("""Array.from(document.querySelectorAll('#steps tbody tr'), tr => ({
            j: +tr.dataset.j, dot: +tr.querySelector('.dot').dataset.v,
            z: tr.querySelector('.z').dataset.v, w: +tr.querySelector('.w').dataset.v}))""")
        if [r["j"] for r in rows] != list(range(n)):
            mask_ok = False
            continue
        for r in rows:
            j, z, want_z = r["j"], float(r["z"]), float(L["logits"][head][i][r["j"]])
            err["q·k"] = max(err["q·k"], abs(r["dot"] - L["scores"][head][i][j]) / max(1, abs(L["scores"][head][i][j])))
            if j > i:  # masked: −∞ and no weight, in the page as in --json
                mask_ok = mask_ok and z == want_z == -math.inf and r["w"] == L["weights"][head][i][j] == 0
            else:
                err["logit"] = max(err["logit"], abs(z - want_z) / max(1, abs(want_z)))
                err["weight"] = max(err["weight"], abs(r["w"] - L["weights"][head][i][j]))
        got = [float(x) for x in b.evaluate("document.getElementById('out').dataset.v").split(",")]
        want = L["head_out"][head][i]
        out_err = max(out_err, max(abs(a - e) for a, e in zip(got, want)) / max(abs(x) for x in want))
    check(mask_ok, "decoder: the step view lists every key, those after the query masked (−∞, weight 0)")
    check(max(err.values()) < 1e-6,
          f"decoder: layer {layer}, head {head}, every query: q·k, ×scale and softmax match --json "
          f"(max relative errors {err})")
    # v travels as float16 (relative rounding 2^-11): the sum is good to about 1e-3 of its scale.
    check(out_err <= 2e-3, f"decoder: the output Σ weight·v matches --json head_out (max |Δ| / scale {out_err:.1e})")

    # The heatmap reads the same numbers: a cell on the diagonal, and one above it (masked).
    b.evaluate("qkv.select({q: 8})")
    b.evaluate("document.getElementById('heat').scrollIntoView({block: 'center'})")
    box = b.evaluate("(() => { const r = document.getElementById('heat').getBoundingClientRect();"
                     " return [r.left, r.top]; })()")
    cell, pad = min(26, 600 // n), 96
    readouts = []
    for i, j in [(8, 8), (8, 0), (2, 9)]:
        b.mouse_move(box[0] + pad + j * cell + cell / 2, box[1] + pad + i * cell + cell / 2)
        readouts.append(b.evaluate("document.getElementById('hover').textContent"))
    w88 = L["weights"][head][8][8]
    check(f"weight {w88:.4f}" in readouts[0] and f"weight {L['weights'][head][8][0]:.4f}" in readouts[1]
          and "weight 0.0000, score −∞ (masked)" in readouts[2],
          f"decoder: the heatmap reads --json's weights, and a key after the query as masked ({readouts})")
    b.screenshot(os.path.join(out, "decoder-l14h4.png"))
    check(b.console_errors() == [], f"decoder: still no console errors ({b.console_errors()})")


def heat_pixel(b, i, j, n):
    """The heatmap's colour (r, g, b) at the centre of cell (query i, key j) of n × n cells."""
    return b.evaluate("""(() => { const c = document.getElementById('heat'), n = %d;
        const cell = Math.max(2, Math.min(26, Math.floor(600 / n))), pad = cell >= 10 ? 96 : 8;
        const d = c.getContext('2d').getImageData(pad + %d * cell + cell / 2, pad + %d * cell + cell / 2, 1, 1).data;
        return [d[0], d[1], d[2]]; })()""" % (n, j, i))


def test_value_weighted(b, binary, out):
    """The heatmap's switch weights / value-weighted (Kobayashi et al. 2020): in the value-weighted
    view a cell is α_ij·‖W_O^h v_j‖ with its row scaled to sum 1, the norms those of --json; MiniLM's
    layer 2, head 5 puts half of "it"'s weight on [CLS], whose value is tiny: the switch shows it
    gone. The readout names both numbers; a screenshot of each view."""
    work = tempfile.mkdtemp(prefix="qkv-report-")
    page = os.path.join(work, "values.html")
    layer, head = 2, 5
    qkv(binary, "explain", "--html", page)
    dump = json.loads(qkv(binary, "explain", "--json", "--layer", str(layer), "--head", str(head)))
    L, n, focus = dump["layers"][0], len(dump["tokens"]), dump["focus"]
    check(L["layer"] == layer and "w_o" in L, f"values: --json --layer {layer} keeps that layer and its W_O")
    b.navigate("file://" + page)
    b.wait_for("document.body.dataset.ready", timeout=20)
    b.evaluate(f"qkv.select({{l: {layer}, h: {head}, q: {focus}}})")
    check(b.evaluate("document.getElementById('heat-what-wrap').hidden") is False,
          "values: the page offers the switch weights / value-weighted")
    weights_pixel = heat_pixel(b, focus, 0, n)
    b.evaluate("(() => { const s = document.getElementById('heat-what'); s.value = 'vw';"
               " s.dispatchEvent(new Event('change')); })()")
    check(b.evaluate("document.getElementById('heat-sel').textContent") ==
          f"layer {layer}, head {head} · value-weighted", "values: the heatmap says it is value-weighted")
    moved = [L["weights"][head][focus][j] * L["ov_norms"][head][j] for j in range(n)]
    want = [x / sum(moved) for x in moved]
    b.evaluate("document.getElementById('heat').scrollIntoView({block: 'center'})")
    box = b.evaluate("(() => { const r = document.getElementById('heat').getBoundingClientRect();"
                     " return [r.left, r.top]; })()")
    cell = max(2, min(26, 600 // n))
    pad = 96 if cell >= 10 else 8
    worst = 0.0
    for j in range(n):
        b.mouse_move(box[0] + pad + j * cell + cell / 2, box[1] + pad + focus * cell + cell / 2)
        text = b.evaluate("document.getElementById('hover').textContent")
        shown = float(text.split("value-weighted ")[1].replace("−", "-"))
        norm = float(text.split("‖W_O v‖ ")[1].split(",")[0])
        worst = max(worst, abs(shown - want[j]))
        check(abs(norm - L["ov_norms"][head][j]) <= 0.006,
              f"values: cell ({focus}, {j}) reads ‖W_O v‖ {norm} (--json {L['ov_norms'][head][j]:.4f})")
    # The readout rounds to 4 decimals; vn travels as float32.
    check(worst <= 6e-5, f"values: every value-weighted cell of the focus row is --json's "
          f"α·‖W_O v‖ / Σ (max |Δ| {worst:.1e})")
    w0 = L["weights"][head][focus][0]
    check(w0 > 0.4 and want[0] < 0.05,
          f"values: [CLS] holds {w0:.2f} of the weight but {want[0]:.3f} of what the head moves")
    vw_pixel = heat_pixel(b, focus, 0, n)
    check(vw_pixel != weights_pixel, f"values: the [CLS] cell changes colour ({weights_pixel} → {vw_pixel})")
    b.screenshot(os.path.join(out, "report-value-weighted.png"))
    b.evaluate("(() => { const s = document.getElementById('heat-what'); s.value = 'w';"
               " s.dispatchEvent(new Event('change')); })()")
    check(heat_pixel(b, focus, 0, n) == weights_pixel, "values: switched back, the weights' colours")
    b.screenshot(os.path.join(out, "report-weights-l2h5.png"))
    check(b.console_errors() == [], f"values: no console errors ({b.console_errors()})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qkv", required=True, help="the qkv binary")
    parser.add_argument("--out", required=True, help="where the screenshots go")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with Browser() as b:
        test_default_sentence(b, args.qkv, args.out)
        test_value_weighted(b, args.qkv, args.out)
        test_sentence_pair(b, args.qkv, args.out)
        test_attend_example(b, args.qkv, args.out)
        test_trained_model(b, args.qkv, args.out)
        test_edge_cases(b, args.qkv, args.out)
        test_256_tokens(b, args.qkv, args.out)
        test_decoder(b, args.qkv, args.out)
    print(f"screenshots in {args.out}")
    finish()


if __name__ == "__main__":
    main()
