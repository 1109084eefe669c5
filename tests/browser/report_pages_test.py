#!/usr/bin/env python3
"""Every kind of HTML page qkv writes, read in headless Chromium as a newcomer would (issue 26).

    report_pages_test.py --qkv build/qkv --out build/tests/browser-artifacts

The pages: a learned encoder (MiniLM, `qkv explain --html`), a decoder (SmolLM2), a transformer and
an RNNsearch trained here for a few steps, the worked example `qkv attend --example phonebook`
(and lsi, whose matrices are written by hand), and a Perceiver. Checks:
- "How to read this page" says what is true of the page's model and nothing that is not (RoPE on a
  decoder, the additive score and keys = values on RNNsearch, no learned matrix in a worked
  example, latents on the Perceiver), and says how positions are counted;
- what does nothing is not shown: the model grid of one layer and head, filters with no token to
  hide, the head switches of one head;
- no number of the step view's vectors is broken across two lines, at four window widths
  (measured on the rendered line boxes);
- the worked example's step view names its numbers (j o oh n m a r; 1st–4th), the names lined up
  over them;
- the Perceiver's page is the one report's, its latents a block of weights only: their heatmap has
  a label a latent, each beside its row, a head menu with the heads' mean, the '#' positions
  marked, 1/L in its colour note and a cell's latent, position, symbol and weight on hover; and the
  page shows the terminal's numbers (p, the uniform look's share, each latent's share and
  × uniform);
- the decoder's 30-layer grid leaves the line and step views within reach.
Screenshots of every page go to --out. A part whose model is not installed prints "skipped: ..."
and the script exits 77 (ctest: skipped); a failed check exits 1.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser  # noqa: E402

from checklist import check, skip, finish  # noqa: E402


def qkv(binary, *args):
    run = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit(f"qkv {' '.join(args)} failed ({run.returncode}): {run.stderr.strip()}")
    return run.stdout


def model_file(*parts):
    home = os.environ.get("QKV_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "qkv")
    return os.path.join(home, "models", *parts)


def open_page(b, path):
    b.navigate("file://" + path)
    try:
        b.wait_for("document.body.dataset.ready", timeout=30)
    except Exception as e:  # a page that never says it is ready: a failure, and the checks go on
        check(False, f"{os.path.basename(path)}: the page says it is ready ({e})")
    check(b.console_errors() == [], f"{os.path.basename(path)}: no console errors ({b.console_errors()})")


def legend(b):
    return b.evaluate("(() => { const l = document.getElementById('legend');"
                      " return l ? [l.dataset.source, l.textContent.replace(/\\s+/g, ' ')] : [null, '']; })()")


def check_legend(b, page, source, says, never):
    got, text = legend(b)
    boxes = b.evaluate("document.querySelectorAll('details.legend').length")
    check(got == source and boxes == 1, f"{page}: one 'How to read this page' box, for a {source} ({got}, {boxes})")
    missing = [s for s in says if s not in text]
    wrong = [s for s in never if s in text]
    check(not missing and not wrong, f"{page}: the box says {says} (missing {missing}) and not {never} (found {wrong})")


def shown(b, selector):
    """Whether the element is laid out (not hidden, nor inside something hidden)."""
    return b.evaluate(f"(() => {{ const e = document.querySelector('{selector}');"
                      " return !!e && e.getClientRects().length > 0; })()")


# The numbers of #q-vec and #out, each measured as a range of text: a number whose range has line
# boxes on two different lines was broken in the middle ("0.7 / 05").
SPLIT_NUMBERS = r"""(() => {
  const bad = [], lines = {};
  for (const id of ['q-vec', 'out']) {
    const el = document.getElementById(id);
    if (!el) continue;
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), nodes = [];
    let text = '';
    for (let n; (n = walk.nextNode());) { nodes.push([n, text.length]); text += n.data; }
    const at = (i) => { let k = nodes.length - 1; while (nodes[k][1] > i) k--; return [nodes[k][0], i - nodes[k][1]]; };
    const tops = new Set();
    for (const m of text.matchAll(/[−-]?[0-9]+(\.[0-9]+)?/g)) {
      const r = document.createRange(), end = at(m.index + m[0].length - 1);
      r.setStart(...at(m.index));
      r.setEnd(end[0], end[1] + 1);
      const rows = new Set(Array.from(r.getClientRects(), (x) => Math.round(x.top)));
      rows.forEach((t) => tops.add(t));
      if (rows.size > 1) bad.push(`${id}: "${m[0]}"`);
    }
    lines[id] = tops.size;
  }
  return [bad, lines];
})()"""


def check_numbers_unbroken(b, page, queries):
    """At four window widths and for several queries: no number split across lines."""
    bad, most = [], 0
    for width in (1280, 1000, 800, 640):
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        for q in queries:
            b.evaluate(f"qkv.select({{q: {q}}})")
            split, lines = b.evaluate(SPLIT_NUMBERS)
            bad += [f"{width}px, query {q}, {s}" for s in split]
            most = max([most] + list(lines.values()))
    b.call("Emulation.clearDeviceMetricsOverride")
    check(not bad, f"{page}: no number of q or the output is broken across lines "
          f"(vectors up to {most} lines; broken: {bad[:4]})")
    return most


def test_encoder(b, binary, out, work):
    if not os.path.isdir(model_file("all-MiniLM-L6-v2")):
        skip("the encoder's page: all-MiniLM-L6-v2 is missing")
        return
    page = os.path.join(work, "encoder.html")
    qkv(binary, "explain", "--html", page)
    open_page(b, page)
    check_legend(b, "encoder", "encoder", ["v = WVx", "√dk", "count from 0", "a head in the grid"],
                 ["RoPE", "additive", "no model"])
    check(shown(b, "#grid") and shown(b, "#hide-special") and shown(b, "#head-toggles"),
          "encoder: 6 layers × 12 heads: the grid, the filters and the head switches are shown")
    check_numbers_unbroken(b, "encoder", [0, 5])
    b.screenshot(os.path.join(out, "pages-encoder.png"))


def test_decoder(b, binary, out, work):
    path = model_file("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(path):
        skip(f"the decoder's page: {path} is missing (scripts/fetch_model smollm2 fetches it)")
        return
    page = os.path.join(work, "decoder.html")
    qkv(binary, "explain", "--model", "smollm2", "The animal didn't cross the street because it was too tired",
        "--html", page)
    open_page(b, page)
    check_legend(b, "decoder", "decoder", ["RoPE", "Causal", "v = WVx", "count from 0"], ["additive", "no model"])
    steps = b.evaluate("document.getElementById('steps').textContent")
    check("after RoPE" in steps and "positions count from 0" in steps,
          "decoder: the step view says q and k are shown after RoPE, and how positions count")
    # The 30 × 9 grid scrolls in its own box: the line and step views start within the first two
    # screens (they were ~1,700 px down), and the chosen head is in sight inside the box.
    tops = b.evaluate("['grid-h', 'lines-h', 'steps-h'].map(id => document.getElementById(id)"
                      ".getBoundingClientRect().top + scrollY)")
    grid_height = b.evaluate("document.getElementById('grid').closest('section').getBoundingClientRect().height")
    check(tops[1] - tops[0] < 600 and tops[2] - tops[0] < 600 and grid_height < 560,
          f"decoder: the model view takes {grid_height:.0f} px; the line and step views start "
          f"{tops[1] - tops[0]:.0f} and {tops[2] - tops[0]:.0f} px below its heading")
    for layer in (29, 0, 17):
        b.evaluate(f"qkv.select({{l: {layer}, h: 4}})")
        seen = b.evaluate("""(() => { const box = (document.getElementById('grid-scroll') || document.getElementById('grid')).getBoundingClientRect();
            const on = document.querySelector('#grid button[aria-pressed="true"]').getBoundingClientRect();
            const head = document.querySelector('#grid .label.head').getBoundingClientRect();
            return on.top >= head.bottom - 1 && on.bottom <= box.bottom + 1; })()""")
        check(seen, f"decoder: choosing layer {layer}, head 4 scrolls the grid's box to it, below the head labels")
    most = check_numbers_unbroken(b, "decoder", [3, 11])
    check(most > 2, f"decoder: the 64-number vectors do wrap ({most} lines), so the check above means something")
    b.evaluate("window.scrollTo(0, 0)")
    b.screenshot(os.path.join(out, "pages-decoder-top.png"))
    b.evaluate("window.scrollTo(0, document.getElementById('lines-h').getBoundingClientRect().top + scrollY - 10)")
    b.screenshot(os.path.join(out, "pages-decoder-steps.png"))


def test_trained(b, binary, out, work):
    reverse = os.path.join(work, "reverse.safetensors")
    # d_k 32: q and the output wrap at the narrower widths, so the numbers check below bites.
    qkv(binary, "train", "--task", "reverse", "--steps", "20", "--layers", "2", "--heads", "2",
        "--d-model", "64", "--test-examples", "10", "--threads", "1", "--out", reverse)
    page = os.path.join(work, "reverse.html")
    qkv(binary, "explain", "--model", reverse, "--input", "abcdefgh", "--html", page)
    open_page(b, page)
    check_legend(b, "reverse", "seq2seq", ["sinusoidal", "cross-attention", "v = WVx", "count from 0"],
                 ["RoPE", "additive", "no model"])
    most = check_numbers_unbroken(b, "reverse", [0, 3])
    check(most > 1, f"reverse: its 32-number vectors do wrap ({most} lines)")
    b.screenshot(os.path.join(out, "pages-reverse.png"))

    lookup = os.path.join(work, "lookup-rnnsearch.safetensors")
    qkv(binary, "train", "--task", "lookup", "--model", "rnnsearch", "--steps", "20", "--d-model", "16",
        "--batch", "16", "--test-examples", "10", "--threads", "1", "--out", lookup)
    page = os.path.join(work, "lookup-rnnsearch.html")
    qkv(binary, "explain", "--model", lookup, "--input", "? b a3 b7 c1", "--html", page)
    open_page(b, page)
    check_legend(b, "RNNsearch", "rnnsearch",
                 ["additive", "the values are the same vectors", "there is no WV", "nothing is divided by √dk",
                  "count from 0", "count from 1"],
                 ["v = WVx", "divide by √d", "learned matrices make", "a head in the grid", "RoPE"])
    check(not shown(b, "#grid") and not shown(b, "#head-toggles"),
          "RNNsearch: one layer, one head: no model grid, no head switches")
    steps = b.evaluate("document.getElementById('steps').textContent")
    check("no WV" in steps and "additive score" in steps and "positions count from 0" in steps,
          "RNNsearch: the step view names the additive score and the values (no W_V), and how it counts")
    # The phonebook reading is on the page, and this model's numbers have no names to show.
    texts = b.evaluate("document.getElementById('texts').textContent")
    check("SELECT number FROM book WHERE name = 'b'" in texts and
          b.evaluate("document.querySelectorAll('#steps .fn, #steps .fnames').length") == 0,
          "RNNsearch phonebook: the reading's lines are on the page; its learned numbers carry no names")
    check_numbers_unbroken(b, "RNNsearch", [0, 1])
    b.screenshot(os.path.join(out, "pages-rnnsearch.png"))


def test_worked_examples(b, binary, out, work):
    page = os.path.join(work, "phonebook.html")
    qkv(binary, "attend", "--example", "phonebook", "--html", page)
    open_page(b, page)
    check_legend(b, "phonebook", "given", ["no model", "no learned matrix made them", "names the numbers"],
                 ["v = WVx", "learned matrices", "a head in the grid", "RoPE", "written by hand"])
    hidden = [s for s in ("#grid", "#hide-special", "#hide-punct", "#head-toggles") if shown(b, s)]
    check(not hidden, f"phonebook: one head and no special or punctuation token: nothing that does nothing is "
          f"shown (shown: {hidden})")
    names = b.evaluate("""(() => {
        const texts = (sel) => Array.from(document.querySelectorAll(sel), x => x.textContent.trim());
        const ths = Array.from(document.querySelectorAll('#steps th'));
        const under = (label) => { const th = ths.find(t => t.firstChild && t.firstChild.textContent === label);
                                   return th ? texts('#steps th:nth-child(' + (ths.indexOf(th) + 1) + ') .fnames .cell') : []; };
        return {q: texts('#q-vec .fn'), out: texts('#out .fn'), k: under('k'), prod: under('q∘k'), wv: under('weight·v')};
    })()""")
    features, parts = ["j", "o", "oh", "n", "m", "a", "r"], ["1st", "2nd", "3rd", "4th"]
    check(names == {"q": features, "out": parts, "k": features, "prod": features, "wv": parts},
          f"phonebook: the step view names q's and k's numbers j o oh n m a r and v's 1st–4th ({names})")
    # Each name's right edge over its number's, in every row of the table.
    misaligned = b.evaluate("""(() => {
        const bad = [];
        for (const col of ['k', 'prod', 'wv']) {
          const td = document.querySelector('#steps tbody tr td.' + col);
          const th = document.querySelectorAll('#steps th')[td.cellIndex];
          const heads = Array.from(th.querySelectorAll('.cell'), x => x.getBoundingClientRect().right);
          document.querySelectorAll('#steps tbody td.' + col).forEach((cell) => {
            Array.from(cell.querySelectorAll('.cell'), x => x.getBoundingClientRect().right)
              .forEach((r, i) => { if (Math.abs(r - heads[i]) > 1) bad.push(col + ' ' + i); });
          });
        }
        return bad;
    })()""")
    check(not misaligned, f"phonebook: each name stands over its column of numbers (off: {misaligned[:5]})")
    b.screenshot(os.path.join(out, "pages-phonebook.png"))

    page = os.path.join(work, "lsi.html")
    qkv(binary, "attend", "--example", "lsi", "--html", page)
    open_page(b, page)
    check_legend(b, "lsi", "given", ["no model", "written by hand"], ["v = WVx", "RoPE"])


def test_perceiver(b, binary, out, work):
    model = os.path.join(work, "count.safetensors")
    qkv(binary, "train", "--model", "perceiver", "--task", "count", "--length", "32", "--latents", "4",
        "--steps", "20", "--layers", "1", "--heads", "2", "--d-model", "16", "--batch", "8",
        "--test-examples", "20", "--threads", "1", "--out", model)
    page = os.path.join(work, "count.html")
    source = "abc#efghijklmnopqrstuvw#yzabcd#f"
    terminal = qkv(binary, "explain", "--model", model, "--input", source, "--html", page)
    open_page(b, page)
    check_legend(b, "Perceiver", "perceiver", ["latents", "1/L", "c/L", "× uniform", "count from 0"],
                 ["RoPE", "additive", "no model"])
    # The one report's page, its latents a block of weights only: their heatmap, not the views of
    # q and k.
    check(shown(b, "#wmap") and not shown(b, "#heat") and not shown(b, "#steps"),
          "Perceiver: the latents' heatmap is shown, the heatmap and step view of q and k are not")
    # A label a latent, each beside its own row of the heatmap.
    rows = b.evaluate("""(() => { const map = document.getElementById('wmap').getBoundingClientRect();
        const labels = Array.from(document.querySelectorAll('#wmap-rows span'));
        return labels.map((x, n) => { const r = x.getBoundingClientRect(), mid = (r.top + r.bottom) / 2;
          const top = map.top + n * map.height / labels.length, bottom = top + map.height / labels.length;
          return [x.textContent, mid >= top && mid <= bottom && r.right <= map.left]; }); })()""")
    check([r[0] for r in rows] == [f"latent {n}" for n in range(4)] and all(r[1] for r in rows),
          f"Perceiver: the heatmap's rows are labelled latent 0–3, each beside its row ({rows})")
    # The terminal's numbers, the same on the page.
    p = re.search(r"\(p = ([0-9.]+)\)", terminal).group(1)
    uniform = re.search(r"uniform look's ([0-9.]+)", terminal).group(1)
    want = [m.groups() for m in re.finditer(r"\n  (latent \d+) +([0-9.]+) +([0-9.]+×|—)", terminal)]
    summary = b.evaluate("(document.getElementById('texts') || {}).textContent || ''")
    body = b.evaluate("document.body.textContent")
    got = b.evaluate("""Array.from(document.querySelectorAll('table.numbers tr'), tr =>
        Array.from(tr.children, c => c.textContent.trim()))""")
    header, cells = (got or [[]])[0], [tuple(r[:3]) for r in got[1:]]
    check(f"(p = {p})" in summary and f"uniform look's {uniform}" in body,
          f"Perceiver: the page's p = {p} and uniform share {uniform} are the terminal's ({summary!r})")
    check("× uniform" in header and cells == want and len(want) == 4,
          f"Perceiver: the table has the terminal's latents, shares and × uniform ({cells} vs {want})")
    # The heads' mean or one head; the '#' positions marked above; 1/L in the colour note; a
    # cell's weight on hover, named by latent, position and symbol.
    heads = b.evaluate("Array.from(document.querySelectorAll('#wmap-head option'), o => o.textContent)")
    check(heads == ["mean of heads", "head 0", "head 1"], f"Perceiver: the head menu ({heads})")
    marked = b.evaluate("""(() => { const c = document.getElementById('wmap-marks'), g = c.getContext('2d');
        const at = [], cell = c.width / 32;
        for (let l = 0; l < 32; l++) if (g.getImageData(Math.floor((l + 0.5) * cell), 7, 1, 1).data[3]) at.push(l);
        return at; })()""")
    check(marked == [i for i, x in enumerate(source) if x == "#"],
          f"Perceiver: the '#' positions are marked above the heatmap ({marked})")
    scale = b.evaluate("document.getElementById('wmap-scale').textContent")
    check("1/L = 1/32 = 0.03125" in scale, f"Perceiver: the colour note gives 1/L ({scale!r})")
    box = b.evaluate("(() => { const c = document.getElementById('wmap'); c.scrollIntoView();"
                     " const r = c.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    b.mouse_move(box[0] + (23.5 / 32) * box[2], box[1] + (2.5 / 4) * box[3])  # latent 2, '#' at 23
    hover = b.evaluate("document.getElementById('wmap-hover').textContent")
    mean = b.evaluate("(() => { const w = qkv.layer(0, 0).w; return w[2 * 32 + 23] / 2 + w[(4 + 2) * 32 + 23] / 2; })()")
    check(hover == f"latent 2, position 23 '#': weight {mean:.5f}",
          f"Perceiver: hovering a cell reads its latent, position, symbol and the heads' mean weight "
          f"{mean:.5f} ({hover!r})")
    b.mouse_move(1, 1)  # off the heatmap: no cell
    b.evaluate("document.getElementById('wmap').focus()")
    for key in ["ArrowDown", "ArrowRight", "ArrowRight"]:  # the first key lands on latent 0, 0
        b.key(key)
    keyed = b.evaluate("document.getElementById('wmap-hover').textContent")
    check(keyed.startswith(f"latent 0, position 2 '{source[2]}': weight 0."),
          f"Perceiver: arrow keys move the readout ({keyed!r})")
    b.screenshot(os.path.join(out, "pages-perceiver.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qkv", required=True, help="the qkv binary")
    parser.add_argument("--out", required=True, help="where the screenshots go")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="qkv-pages-")
    with Browser() as b:
        test_worked_examples(b, args.qkv, args.out, work)
        test_trained(b, args.qkv, args.out, work)
        test_perceiver(b, args.qkv, args.out, work)
        test_encoder(b, args.qkv, args.out, work)
        test_decoder(b, args.qkv, args.out, work)
    print(f"screenshots in {args.out}")
    finish()


if __name__ == "__main__":
    main()
