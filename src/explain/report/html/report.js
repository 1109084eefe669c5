'use strict';
// The qkv report: decodes the data embedded in the page, keeps one selection (block, layer, head,
// query token) and draws every view from it. No network, no libraries.
const D = JSON.parse(document.getElementById('data').textContent);
const $ = (id) => document.getElementById(id);
// A token without flags travels as its text alone (html.cpp): every view reads {t, sp, p, s}.
for (const B of D.blocks)
  for (const side of ['queries', 'keys'])
    B[side] = B[side].map((t) => (typeof t === 'string' ? { t, sp: false, p: false, s: 0 } : t));
// cell: the heatmap's [query, key] under the mouse (or the arrow keys), for the readout below it.
const S = { b: 0, l: D.layer, h: D.head, q: D.focus, k: -1, cell: null, hover: null, on: [], all: false };

// ---- the numbers: base64 → typed arrays --------------------------------------------------------
function bytes(b64) {
  const s = atob(b64), a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
  return a;
}
const floats = (b64) => new Float32Array(bytes(b64).buffer);
function halves(b64) {  // IEEE 754 binary16 → float
  const u = new Uint16Array(bytes(b64).buffer), out = new Float32Array(u.length);
  for (let i = 0; i < u.length; i++) {
    const h = u[i], s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
    out[i] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity)
                     : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return out;
}

// One layer of one block, decoded and (when the data has no logits) computed on first use:
// z = scale·q·k (−∞ where masked), w = softmax(z) row by row.
const cache = new Map();
function layer(b, l) {
  const key = b + ':' + l;
  if (cache.has(key)) return cache.get(key);
  const B = D.blocks[b], raw = B.layers[l], n = B.queries.length, m = B.keys.length;
  if (B.wo) {  // a block of weights only: no q, k, v or logits to show
    const L = { n, m, w: floats(raw.weights) };
    cache.set(key, L);
    return L;
  }
  const L = { n, m, q: floats(raw.q), k: floats(raw.k), v: raw.v32 ? floats(raw.v32) : halves(raw.v) };
  if (raw.vn) L.vn = floats(raw.vn);  // ‖W_O^h v_j‖ [H, m]: the value-weighted view
  if (raw.logits) {
    L.z = floats(raw.logits);
    L.w = floats(raw.weights);
  } else {
    attend(B, L);
  }
  cache.set(key, L);
  return L;
}
function attend(B, L) {
  const { H, Hk, d, scale } = B, { n, m, q, k } = L;
  L.z = new Float32Array(H * n * m);
  L.w = new Float32Array(H * n * m);
  for (let h = 0; h < H; h++) {
    const kh = Math.floor(h * Hk / H);
    for (let i = 0; i < n; i++) {
      const qo = (h * n + i) * d, row = (h * n + i) * m;
      let max = -Infinity;
      for (let j = 0; j < m; j++) {
        let z = -Infinity;
        if (!(B.causal && j > i)) {
          const ko = (kh * m + j) * d;
          let s = 0;
          for (let t = 0; t < d; t++) s += q[qo + t] * k[ko + t];
          z = s * scale;
        }
        L.z[row + j] = z;
        if (z > max) max = z;
      }
      let sum = 0;
      for (let j = 0; j < m; j++) sum += (L.w[row + j] = Math.exp(L.z[row + j] - max));
      for (let j = 0; j < m; j++) L.w[row + j] /= sum;
    }
  }
}
const block = () => D.blocks[S.b];
const weight = (L, h, i, j) => L.w[(h * L.n + i) * L.m + j];

// ---- what the values carried (Kobayashi et al. 2020): the heatmap's switch ---------------------
// A block with value norms (BERT, a decoder: html.cpp's vn) can show, instead of α_ij, what head h
// moved from key j to query i: α_ij·‖W_O^h v_j‖, each row scaled to sum 1 so that it reads on the
// weights' scale. A head whose weight sits on a key with a tiny value (a sink) shows it gone.
const valueWeighted = (L) => !!L.vn && $('heat-what').value === 'vw';
function movedRow(L, h, i) {
  L.moved ||= new Map();
  const key = h * L.n + i;
  if (!L.moved.has(key)) {
    const row = new Float64Array(L.m);
    let sum = 0;
    for (let j = 0; j < L.m; j++) sum += (row[j] = weight(L, h, i, j) * L.vn[h * L.m + j]);
    if (sum > 0) for (let j = 0; j < L.m; j++) row[j] /= sum;
    L.moved.set(key, row);
  }
  return L.moved.get(key);
}
const cellValue = (L, h, i, j) => (valueWeighted(L) ? movedRow(L, h, i)[j] : weight(L, h, i, j));
const movedText = (L, h, i, j) => (L.vn ? `, ‖W_O v‖ ${fmt(L.vn[h * L.m + j], 2)}, value-weighted ${fmt(movedRow(L, h, i)[j], 4)}` : '');

// ---- filters: which queries and keys are on screen ---------------------------------------------
function shown(tokens, side) {
  const pair = $('pair').value, hideSpecial = $('hide-special').checked;
  const hidePunct = $('hide-punct').checked, out = [];
  tokens.forEach((t, i) => {
    if (hideSpecial && t.sp) return;
    if (hidePunct && t.p) return;
    if (block().same && pair !== 'all' && t.s !== (pair[side] === 'A' ? 0 : 1)) return;
    out.push(i);
  });
  return out;
}
const queries = () => shown(block().queries, 0);
const keys = () => shown(block().keys, 1);

// ---- colours, from the page's colour scheme ----------------------------------------------------
let C = {};
function readColours() {
  const css = getComputedStyle(document.documentElement);
  const rgb = (name) => {
    const probe = document.createElement('span');
    probe.style.color = css.getPropertyValue(name);
    document.body.appendChild(probe);
    const v = getComputedStyle(probe).color.match(/\d+/g).slice(0, 3).map(Number);
    probe.remove();
    return v;
  };
  C = { bg: rgb('--bg'), acc: rgb('--acc'), neg: rgb('--neg'), fg: rgb('--fg'), sel: rgb('--sel') };
  C.dark = C.bg[0] < 128;
}
const mix = (a, b, t) => a.map((x, i) => Math.round(x + (b[i] - x) * t));
const css = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;
// Weights are ≥ 0 after a softmax; without one (--normalize none) a negative weight is blue.
const ramp = (w) => mix(C.bg, w < 0 ? C.neg : C.acc, Math.min(1, Math.abs(w)));
const headColour = (h) => `hsl(${Math.round((h * 360) / block().H)},75%,${C.dark ? 62 : 42}%)`;
const fmt = (x, digits = 3) => (Math.abs(x) === Infinity ? (x < 0 ? '−∞' : '∞') : x.toFixed(digits).replace('-', '−'));
const masked = (z) => z === -Infinity;
// A label cut to `fits` (a test of the text so far) with an ellipsis; code points, not UTF-16 units.
function clip(text, fits) {
  const chars = [...text];
  if (fits(text)) return text;
  while (chars.length > 1 && !fits(chars.join('') + '…')) chars.pop();
  return chars.join('') + '…';
}
const esc = (t) => t.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

// ---- selection ----------------------------------------------------------------------------------
function select(change) {
  const follow = S.on.length && S.on.every((on, h) => on === (h === S.h));
  Object.assign(S, change);
  if (follow && S.on.length === block().H) S.on = S.on.map((_, h) => h === S.h);
  const B = block();
  S.l = Math.min(S.l, B.layers.length - 1);
  S.h = Math.min(S.h, B.H - 1);
  S.q = Math.min(S.q, B.queries.length - 1);
  if (S.k >= B.keys.length) S.k = -1;
  const qs = queries();
  if (qs.length && !qs.includes(S.q)) S.q = qs.find((i) => !B.queries[i].sp) ?? qs[0];
  render();
}

// ---- the views ----------------------------------------------------------------------------------
function header() {
  $('title').textContent = D.title;
  $('texts').innerHTML = D.texts.map(([label, text]) =>
    `<p>${label ? `<span class="mute">${esc(label)}:</span> ` : ''}${esc(text)}</p>`).join('');
  const nav = $('blocks');
  nav.innerHTML = D.blocks.length < 2 ? '' : D.blocks.map((B, b) =>
    `<button data-b="${b}" title="${esc(B.note)}">${esc(B.name)}</button>`).join('');
  nav.querySelectorAll('button').forEach((x) => { x.onclick = () => select({ b: +x.dataset.b, q: 0, k: -1, cell: null, on: [] }); });
  $('pair-wrap').hidden = !D.blocks.some((B) => B.queries.some((t) => t.s === 1));
  // What does nothing on this page is not shown: a filter with no token to hide, the model grid
  // of a single layer and head (then the views name the block alone).
  const any = (flag) => D.blocks.some((B) => B.queries.concat(B.keys).some((t) => t[flag]));
  $('hide-special').parentElement.hidden = !any('sp');
  $('hide-punct').parentElement.hidden = !any('p');
  $('grid-section').hidden = !D.grid;
  for (const id of ['hide-special', 'hide-punct', 'pair']) $(id).onchange = () => select({});
  $('heat-scale').value = D.blocks[0].queries.length > 64 ? 'row' : 'abs';
  $('heat-scale').onchange = heat;
  $('heat-what').onchange = heat;
}

function status() {
  const B = block();
  $('blocks').querySelectorAll('button').forEach((x) => x.setAttribute('aria-pressed', +x.dataset.b === S.b));
  const qt = B.queries[S.q] ? B.queries[S.q].t : '';
  $('sel').textContent = `${B.name}${D.grid ? `, layer ${S.l}, head ${S.h}` : ''}, query ${S.q} "${qt}"`;
  $('block-note').textContent = B.note;  // what the block's tokens do; a decoder's head groups
  const hidden = B.queries.length - queries().length + B.keys.length - keys().length;
  $('filter-note').textContent = hidden ? 'hidden tokens keep their weight; rows need not sum to 1' : '';
}

function tokens() {
  const B = block(), qs = new Set(queries());
  $('tokens').innerHTML = B.queries.map((t, i) =>
    `<button class="tok${qs.has(i) ? '' : ' hidden'}" data-i="${i}" aria-pressed="${i === S.q}"` +
    `${t.s ? ' title="sentence B"' : ''}>${esc(t.t)}</button>`).join('');
  $('tokens').querySelectorAll('button').forEach((x) => { x.onclick = () => select({ q: +x.dataset.i }); });
}

let gridBlock = -1;
function grid() {
  const B = block(), g = $('grid'), size = B.H > 16 ? 26 : 36;
  if (gridBlock !== S.b || g.dataset.dark !== String(C.dark)) {
    gridBlock = S.b;
    g.dataset.dark = C.dark;
    g.style.gridTemplateColumns = `auto repeat(${B.H}, ${size + 4}px)`;
    let html = '';
    // Grouped-query attention: a row above the heads names each shared key/value head over the
    // query heads that read it (head h reads kv ⌊h·Hk/H⌋, as attend() computes).
    const group = B.H / B.Hk, kvRow = B.Hk < B.H && Number.isInteger(group);
    g.classList.toggle('has-kv', kvRow);
    if (kvRow) {
      html += '<span class="corner"></span>';
      for (let g = 0; g < B.Hk; g++)
        html += `<span class="label kv" style="grid-column: span ${group}" title="key/value head ${g}, ` +
                `shared by query heads ${g * group}–${g * group + group - 1}">kv ${g}</span>`;
    }
    html += '<span class="corner head-row"></span>';
    for (let h = 0; h < B.H; h++)
      html += `<span class="label head"${B.Hk < B.H ? ` title="query head ${h}, reads key/value head ` +
              `${Math.floor(h * B.Hk / B.H)}"` : ''}>h${h}</span>`;
    B.layers.forEach((_, l) => {
      html += `<span class="label">layer ${l}</span>`;
      for (let h = 0; h < B.H; h++)
        html += `<button data-l="${l}" data-h="${h}" aria-label="layer ${l}, head ${h}" title="layer ${l}, head ${h}">` +
                `<canvas width="${size}" height="${size}"></canvas></button>`;
    });
    g.innerHTML = html;
    g.querySelectorAll('button').forEach((x) => {
      const l = +x.dataset.l, h = +x.dataset.h, t = B.layers[l].thumb, px = bytes(t.data);
      const img = new ImageData(t.m, t.n), off = document.createElement('canvas');
      for (let i = 0; i < t.n * t.m; i++) {
        const c = ramp(px[h * t.n * t.m + i] / 255);
        img.data.set([c[0], c[1], c[2], 255], 4 * i);
      }
      off.width = t.m;
      off.height = t.n;
      off.getContext('2d').putImageData(img, 0, 0);
      const ctx = x.firstChild.getContext('2d');
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, 0, 0, size, size);
      x.onclick = () => select({ l, h });
      x.onkeydown = (e) => {
        const step = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
        if (!step) return;
        e.preventDefault();
        const nl = (l + step[0] + B.layers.length) % B.layers.length, nh = (h + step[1] + B.H) % B.H;
        select({ l: nl, h: nh });
        g.querySelector(`button[data-l="${nl}"][data-h="${nh}"]`).focus();
      };
    });
  }
  g.querySelectorAll('button').forEach((x) =>
    x.setAttribute('aria-pressed', +x.dataset.l === S.l && +x.dataset.h === S.h));
  // A tall grid (a decoder's 30 layers) scrolls in its own box: keep the chosen head in sight
  // there without moving the page.
  const box = $('grid-scroll'), on = g.querySelector('button[aria-pressed="true"]');
  if (on && box.scrollHeight > box.clientHeight) {
    const top = on.offsetTop, sticky = 2 * on.offsetHeight;  // offsetTop: in the box (relative)
    if (top - sticky < box.scrollTop || top + on.offsetHeight > box.scrollTop + box.clientHeight)
      box.scrollTop = top - box.clientHeight / 2;
  }
}

function heat() {
  const B = block(), L = layer(S.b, S.l), qs = queries(), ks = keys(), c = $('heat');
  $('heat-sel').textContent = (D.grid ? `layer ${S.l}, head ${S.h}` : B.name) +
    (valueWeighted(L) ? ' · value-weighted' : '');
  $('heat-what-wrap').hidden = !L.vn;
  const cell = Math.max(2, Math.min(26, Math.floor(600 / Math.max(qs.length, ks.length, 1))));
  const labels = cell >= 10, pad = labels ? 96 : 8;
  c.width = pad + ks.length * cell + 4;
  c.height = pad + qs.length * cell + 4;
  const x = c.getContext('2d'), img = new ImageData(Math.max(ks.length, 1), Math.max(qs.length, 1));
  const perRow = $('heat-scale').value === 'row';  // long inputs spread thin: scale each row up
  // A masked key (score −∞) is grey, not the colour of weight 0: "may not look" ≠ "did not look".
  const grey = mix(C.bg, C.fg, 0.25), at = (i, j) => (S.h * L.n + i) * L.m + j;
  let anyMasked = false;
  qs.forEach((i, r) => {
    const top = perRow ? Math.max(1e-12, ...ks.map((j) => Math.abs(cellValue(L, S.h, i, j)))) : 1;
    ks.forEach((j, col) => {
      const off = masked(L.z[at(i, j)]);
      anyMasked ||= off;
      const rgb = off ? grey : ramp(cellValue(L, S.h, i, j) / top);
      img.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * (r * ks.length + col));
    });
  });
  $('heat-masked').hidden = !anyMasked;
  $('heat-masked-swatch').style.background = css(grey);
  const off = document.createElement('canvas');
  off.width = img.width;
  off.height = img.height;
  off.getContext('2d').putImageData(img, 0, 0);
  x.imageSmoothingEnabled = false;
  x.drawImage(off, pad, pad, ks.length * cell, qs.length * cell);
  x.fillStyle = css(C.fg);
  x.font = '11px system-ui, sans-serif';
  if (labels) {  // cut to the margin: the hover line below names the pair in full
    const fit = (t) => clip(t, (u) => x.measureText(u).width <= pad - 8);
    qs.forEach((i, r) => {
      x.textAlign = 'right';
      x.fillText(fit(B.queries[i].t), pad - 4, pad + r * cell + cell * 0.72);
    });
    ks.forEach((j, col) => {
      x.save();
      x.translate(pad + col * cell + cell * 0.72, pad - 4);
      x.rotate(-Math.PI / 2);
      x.textAlign = 'left';
      x.fillText(fit(B.keys[j].t), 0, 0);
      x.restore();
    });
  }
  x.strokeStyle = css(C.sel);
  x.lineWidth = 2;
  const r = qs.indexOf(S.q);
  if (r >= 0) x.strokeRect(pad - 1, pad + r * cell - 1, ks.length * cell + 2, cell + 2);
  const kc = ks.indexOf(S.k);
  if (kc >= 0) x.strokeRect(pad + kc * cell - 1, pad - 1, cell + 2, qs.length * cell + 2);
  const cellAt = (e) => {
    const box = c.getBoundingClientRect(), sx = c.width / box.width, sy = c.height / box.height;
    return [Math.floor(((e.clientY - box.top) * sy - pad) / cell), Math.floor(((e.clientX - box.left) * sx - pad) / cell)];
  };
  const describe = (i, j) => `"${B.queries[i].t}" (${i}) → "${B.keys[j].t}" (${j}): ` +
    `weight ${fmt(L.w[at(i, j)], 4)}, score ${fmt(L.z[at(i, j)])}${masked(L.z[at(i, j)]) ? ' (masked)' : ''}` +
    movedText(L, S.h, i, j);
  // The readout follows the redraw (another head, another filter): never the numbers of the last one.
  const readout = () => {
    const [i, j] = S.cell || [], shown = qs.includes(i) && ks.includes(j);
    $('hover').textContent = !qs.length || !ks.length ? 'The filters hide every query or every key.'
                           : shown ? describe(i, j) : ' ';
  };
  readout();
  c.onmousemove = (e) => {
    const [r2, c2] = cellAt(e);
    S.cell = r2 >= 0 && c2 >= 0 && r2 < qs.length && c2 < ks.length ? [qs[r2], ks[c2]] : null;
    readout();
  };
  c.onmouseleave = () => { S.cell = null; readout(); };
  c.onclick = (e) => {
    const [r2] = cellAt(e);
    if (r2 >= 0 && r2 < qs.length) select({ q: qs[r2] });
  };
  c.onkeydown = (e) => {
    const qi = Math.max(0, qs.indexOf(S.q)), ki = Math.max(0, ks.indexOf(S.k));
    const move = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[e.key];
    if (!move || !qs.length || !ks.length) return;
    e.preventDefault();
    const nq = qs[Math.min(qs.length - 1, Math.max(0, qi + move[0]))];
    const nk = ks[Math.min(ks.length - 1, Math.max(0, S.k < 0 ? 0 : ki + move[1]))];
    S.cell = [nq, nk];
    select({ q: nq, k: nk });
  };
}

function headToggles() {
  const B = block();
  if (S.on.length !== B.H) S.on = Array.from({ length: B.H }, (_, h) => h === S.h);
  $('head-toggles').hidden = B.H < 2;  // one head: nothing to switch
  let html = '';
  for (let h = 0; h < B.H; h++)
    html += `<button data-h="${h}" aria-pressed="${S.on[h]}" title="show or hide head ${h}">` +
            `<span class="swatch" style="background:${headColour(h)}"></span>${h}</button>`;
  html += '<button data-all="1">all heads</button><button data-all="0">only the selected head</button>';
  $('head-toggles').innerHTML = html;
  $('head-toggles').querySelectorAll('button').forEach((x) => {
    x.onclick = () => {
      if (x.dataset.all) S.on = S.on.map((_, h) => x.dataset.all === '1' || h === S.h);
      else S.on[+x.dataset.h] = !S.on[+x.dataset.h];
      keepFocus(() => { headToggles(); lines(); });
    };
  });
}

function lines() {
  const B = block(), L = layer(S.b, S.l), qs = queries(), ks = keys(), svg = $('lines');
  $('lines-sel').textContent = B.H > 1 ? `layer ${S.l}, a colour per head` : D.grid ? `layer ${S.l}` : B.name;
  const rows = Math.max(qs.length, ks.length), rh = rows > 64 ? 13 : 18, width = 380, lx = 120, rx = width - 120;
  const threshold = rows > 40 ? 0.05 : 0.01;
  svg.setAttribute('width', width);
  svg.setAttribute('height', rows * rh + 12);
  const y = (r) => r * rh + 10;
  let html = '';
  for (let h = 0; h < B.H; h++) {
    if (!S.on[h]) continue;
    const colour = headColour(h);
    qs.forEach((i, r) => ks.forEach((j, col) => {
      const w = weight(L, h, i, j), a = Math.min(1, Math.abs(w));  // a negative weight: dashed
      if (a >= threshold)
        html += `<line x1="${lx}" y1="${y(r)}" x2="${rx}" y2="${y(col)}" stroke="${colour}" ` +
                `stroke-width="2" stroke-opacity="${a.toFixed(3)}"${w < 0 ? ' stroke-dasharray="4 3"' : ''} ` +
                `data-h="${h}" data-i="${i}" data-j="${j}"/>`;
    }));
  }
  const label = (t, i, side, r) => {  // 16 characters fit beside the lines; the rest is cut
    const cut = clip(t.t, (u) => [...u].length <= 16);
    return `<text x="${side ? rx + 6 : lx - 6}" y="${y(r) + 4}" text-anchor="${side ? 'start' : 'end'}" ` +
           `data-side="${side}" data-i="${i}" tabindex="0"${cut === t.t ? '' : ` aria-label="${esc(t.t)}"`}>` +
           `${esc(cut)}</text>`;
  };
  qs.forEach((i, r) => { html += label(B.queries[i], i, 0, r); });
  ks.forEach((j, r) => { html += label(B.keys[j], j, 1, r); });
  svg.innerHTML = html;
  S.hover = null;
  isolate();
  svg.querySelectorAll('text').forEach((t) => {
    const side = +t.dataset.side, i = +t.dataset.i;
    t.onmouseenter = t.onfocus = () => { S.hover = { side, i }; isolate(); };
    t.onmouseleave = t.onblur = () => { S.hover = null; isolate(); };
    if (side === 0) t.onclick = t.onkeydown = (e) => {
      if (e.type === 'keydown' && e.key !== 'Enter') return;
      select({ q: i });
    };
  });
}
// Hovering (or focusing) a token keeps only its lines: a query's to its keys, a key's from its queries.
function isolate() {
  const svg = $('lines'), hv = S.hover, attr = hv && (hv.side ? 'j' : 'i');
  svg.querySelectorAll('line').forEach((l) => {
    l.style.display = !hv || +l.dataset[attr] === hv.i ? '' : 'none';
  });
  svg.querySelectorAll('text').forEach((t) => {
    const side = +t.dataset.side, i = +t.dataset.i;
    t.classList.toggle('on', hv ? hv.side === side && hv.i === i : side === 0 && i === S.q);
  });
}

// A vector as a strip of cells: orange for positive, blue for negative; its numbers on hover
// (and beside it when it has at most 8, in `cells`: a box each, so lines break between numbers).
function strip(vec, scale, cells = null) {
  const cw = vec.length > 48 ? 2 : 3, c = document.createElement('canvas');
  c.width = vec.length * cw;
  c.height = 12;
  const x = c.getContext('2d');
  vec.forEach((v, t) => {
    x.fillStyle = css(mix(C.bg, v < 0 ? C.neg : C.acc, Math.min(1, Math.abs(v) / scale)));
    x.fillRect(t * cw, 0, cw, 12);
  });
  c.title = '[' + Array.from(vec, (v) => fmt(v)).join(', ') + ']';
  if (!cells || vec.length > 8) return c;
  const span = document.createElement('span');  // short vectors: the numbers too
  span.append(c);
  span.insertAdjacentHTML('beforeend', ' ' + cells(Array.from(vec, short)));
  return span;
}
// A table cell's number: 2 decimals at most ("0.5", "−1.25").
const short = (v) => String(+v.toFixed(2)).replace('-', '−');
// Numbers as boxes of one width per position (`widths` in ch), so that a row of names (a worked
// example's features) lines up above them; without widths, boxes as wide as their text.
const cellsOf = (widths) => (texts) => texts.map((t, i) =>
  `<span class="num cell"${widths ? ` style="width:${widths[i]}ch"` : ''}>${esc(t)}</span>`).join('');
// The width each position needs (ch): its name's and every row's number's, the widest. Letters
// are wider than the digits a ch measures: a name gets 1.2 ch a character.
const widthsOf = (names, rows) => names.map((name, i) =>
  Math.ceil(10 * Math.max(1.2 * [...name].length, ...rows.map((r) => short(r[i]).length))) / 10);
// A whole vector, each number in its own unbreakable box ("j 2.000"), separated by ", ".
const vector = (vec, names) => '[' + Array.from(vec, (x, i) =>
  `<span class="num">${names ? `<span class="fn">${esc(names[i])}</span> ` : ''}${fmt(x)}</span>`).join(', ') + ']';
const maxAbs = (vecs) => Math.max(1e-12, ...vecs.map((v) => Math.max(...Array.from(v, Math.abs))));

function steps() {
  if (!queries().length || !keys().length) {
    $('steps').innerHTML = '<p class="mute">The filters hide every query or every key.</p>';
    return;
  }
  const B = block(), L = layer(S.b, S.l), { d, dv, H, Hk } = B, i = S.q, h = S.h, kh = Math.floor(h * Hk / H);
  const dotScore = B.score === 'scaled_dot' || B.score === 'dot';
  const q = L.q.subarray((h * L.n + i) * d, (h * L.n + i + 1) * d);
  const kOf = (j) => L.k.subarray((kh * L.m + j) * d, (kh * L.m + j + 1) * d);
  const vOf = (j) => L.v.subarray((kh * L.m + j) * dv, (kh * L.m + j + 1) * dv);
  const all = Array.from({ length: L.m }, (_, j) => j);
  const rows = all.map((j) => {
    const k = kOf(j), prod = Array.from(q, (x, t) => x * k[t]);
    const w = weight(L, h, i, j);
    return { j, k, prod, dot: prod.reduce((a, b) => a + b, 0), z: L.z[(h * L.n + i) * L.m + j], w,
             wv: Array.from(vOf(j), (x) => w * x) };
  });
  const out = new Array(dv).fill(0);
  rows.forEach((r) => r.wv.forEach((x, t) => { out[t] += x; }));
  const visible = new Set(keys());
  let list = rows.filter((r) => visible.has(r.j));
  const many = list.length > 24 && !S.all;
  if (many) list = [...list].sort((a, b) => Math.abs(b.w) - Math.abs(a.w)).slice(0, 16);
  // The logits as given (qkv attend, a trained model) may carry a mask: −∞ where a key may not be
  // read (causal, --mask, --key-lengths), or a float --mask added to the scaled score.
  const nMasked = rows.filter((r) => masked(r.z)).length;
  const added = dotScore && rows.some((r) => !masked(r.z) && Math.abs(r.z - B.scale * r.dot) > 1e-4 * Math.max(1, Math.abs(r.z)));
  const scaled = dotScore ? '×scale' : B.scale !== 1 ? 'score×scale' : 'score';
  const maskNote = nMasked === L.m ? ' Every key is masked (−∞): this query has nothing to attend to, so its weights and its output are 0.'
    : B.causal && nMasked ? ' Keys after the query are masked (−∞): a decoder may not look ahead.'
    : nMasked ? ` Keys scored −∞ are masked (${nMasked} of ${L.m}): they get no weight.` : '';
  const kScale = maxAbs([q, ...rows.map((r) => r.k)]), pScale = maxAbs(rows.map((r) => r.prod));
  const vScale = maxAbs(rows.map((r) => r.wv).concat([out]));
  const scoreName = { scaled_dot: 'scaled dot-product', dot: 'dot-product' }[B.score] || B.score;
  const shared = Hk < H ? ` (its keys and values: key/value head ${kh}, shared with ${H / Hk - 1} other query heads)` : '';
  // The names of the numbers, where the data has them (a worked example's features): above the
  // table's columns, each name as wide as the widest number below it.
  const kf = B.kf.length === d ? B.kf : null, vf = B.vf.length === dv ? B.vf : null;
  const kCells = cellsOf(kf && widthsOf(kf, list.map((r) => r.k))), pCells = cellsOf(kf && widthsOf(kf, list.map((r) => r.prod)));
  const vCells = cellsOf(vf && widthsOf(vf, list.map((r) => r.wv)));
  const names = (f, cells, n) => (f && n <= 8 ? `<div class="fnames">${cells(f)}</div>` : '');
  const rnn = D.source === 'rnnsearch', where = D.grid ? `, layer ${S.l}, head ${h}${shared}` : '';
  let html = `<p>Query token <b>"${esc(B.queries[i].t)}"</b> (position ${i}; positions count from 0, as beside each key below), ${esc(B.name)}${where}; ` +
             `score: ${esc(scoreName)}, d<sub>k</sub> = ${d}` +
             (dotScore || B.scale !== 1 ? `, scale ${fmt(B.scale, 4)}${B.score === 'scaled_dot' && Math.abs(B.scale * Math.sqrt(d) - 1) < 1e-6 ? ' = 1/√' + d : ''}` : '') + '.</p>' +
             `<p>1. Its query q (${d} numbers${rnn ? ': s<sub>i−1</sub>, the decoder\'s state before it writes this output' : ''}): <span id="q-strip"></span></p>` +
             `<p class="vec mute"><code id="q-vec">${vector(q, kf)}</code></p>` +
             (D.source === 'decoder' ? '<p class="mute">q and k are shown after RoPE: each pair of their numbers was turned by an angle ' +
              'proportional to the token\'s position, so q·k depends on how far apart the query and the key are.</p>' : '') +
             '<p>2. Every key k answers: ' + (dotScore ? 'multiply q and k element by element (q∘k), add up (q·k), scale'
               : B.score === 'additive' ? 'the additive score e = v<sub>a</sub>·tanh(W<sub>a</sub>q + U<sub>a</sub>k) compares q and k (no dot product, no √d<sub>k</sub>)'
               : 'the score function compares q and k') +
             (B.softmax ? '; 3. softmax turns the scores into weights' : '; 3. the scores are the weights (no softmax)') +
             (rnn ? '; 4. each value v, here the key h<sub>j</sub> itself (no W<sub>V</sub>), is scaled by its weight.' : '; 4. each value v is scaled by its weight.') +
             maskNote + (added ? ' The mask is added to the scaled score (the ' + scaled + ' + mask column).' : '') + '</p>';
  html += '<table class="steps"><thead><tr><th>key</th>' +
          `<th>k${names(kf, kCells, d)}</th>` +
          (dotScore ? `<th>q∘k${names(kf, pCells, d)}</th><th>q·k</th>` : '') + `<th>${scaled}${added ? ' + mask' : ''}</th>` +
          `<th>${B.softmax ? 'softmax' : 'weight'}</th><th></th><th>weight·v${names(vf, vCells, dv)}</th></tr></thead><tbody>`;
  list.forEach((r, n) => {
    html += `<tr data-j="${r.j}"${n === 0 && many ? ' class="top"' : ''}><td>${esc(B.keys[r.j].t)} <span class="mute">${r.j}</span></td>` +
            '<td class="k"></td>' +
            (dotScore ? `<td class="prod"></td><td class="dot" data-v="${r.dot}">${fmt(r.dot)}</td>` : '') +
            `<td class="z" data-v="${r.z}">${fmt(r.z)}</td><td class="w" data-v="${r.w}">${fmt(r.w, 4)}</td>` +
            `<td><span class="bar" style="width:${Math.round(70 * Math.min(1, Math.abs(r.w)))}px` +
            `${r.w < 0 ? ';background:var(--neg)' : ''}"></span></td><td class="wv"></td></tr>`;
  });
  html += '</tbody></table>';
  if (many) {
    const top = new Set(list.map((r) => r.j)), others = rows.filter((r) => visible.has(r.j) && !top.has(r.j));
    const rest = others.length, share = others.reduce((a, r) => a + r.w, 0);
    html += `<p class="mute">The 16 keys with the largest weights; the other ${rest} carry ${fmt(share, 4)} of the weight. ` +
            '<button id="show-all">show every key</button></p>';
  } else if (S.all) {
    html += '<p><button id="show-all">show the top 16 only</button></p>';
  }
  html += `<p>5. The head's output for this token, Σ weight·v (${dv} numbers): <span id="out-strip"></span></p>` +
          `<p class="vec"><code id="out" data-v="${out.join(',')}">${vector(out, vf)}</code></p>`;
  $('steps').innerHTML = html;
  $('q-strip').appendChild(strip(q, kScale));
  $('out-strip').appendChild(strip(out, vScale));
  $('steps').querySelectorAll('tbody tr').forEach((tr) => {
    const r = rows[+tr.dataset.j];
    tr.querySelector('.k').appendChild(strip(r.k, kScale, kCells));
    if (dotScore) tr.querySelector('.prod').appendChild(strip(r.prod, pScale, pCells));
    tr.querySelector('.wv').appendChild(strip(r.wv, vScale, vCells));
  });
  const button = $('show-all');
  if (button) button.onclick = () => { S.all = !S.all; keepFocus(steps); };
}

// ---- a block of weights only (a Perceiver's latents over up to 65,536 symbols) -----------------
// Rows: its queries, a label each beside its row; columns: its keys, pooled by their largest
// weight where more than MAP_COLUMNS would not fit (the readout names the key that weight is on);
// above them, a mark where a key's text is D.mark (the counted symbol). One head or the heads'
// mean; colour ∝ √weight against the largest on screen, so a thin spread still shows.
const MAP_COLUMNS = 1100;
const tiny = (w) => (w !== 0 && Math.abs(w) < 1e-3 ? w.toPrecision(3) : w.toFixed(5));
let mapBlock = -1;
function weightsView() {
  const B = block(), L = layer(S.b, S.l), { n, m } = L, menu = $('wmap-head');
  if (mapBlock !== S.b) {
    mapBlock = S.b;
    menu.innerHTML = (B.H > 1 ? '<option value="mean">mean of heads</option>' : '') +
      Array.from({ length: B.H }, (_, h) => `<option value="${h}">head ${h}</option>`).join('');
    menu.onchange = () => keepFocus(weightsView);
    $('wmap-rows').innerHTML = B.queries.map((t) => `<span>${esc(t.t)}</span>`).join('');
    S.mapCell = null;
  }
  $('wmap-head-wrap').hidden = B.H < 2;
  $('wmap-sel').textContent = B.name;
  const h = menu.value;
  let M = L.w.subarray(+h * n * m, (+h + 1) * n * m);
  if (h === 'mean') {
    M = new Float64Array(n * m);
    for (let k = 0; k < B.H; k++)
      for (let i = 0; i < n * m; i++) M[i] += L.w[k * n * m + i] / B.H;
  }
  // Column c holds keys [c·per, (c + 1)·per): its cell shows their largest weight, at[·] its key.
  const per = Math.max(1, Math.ceil(m / MAP_COLUMNS)), cols = Math.ceil(m / per);
  const cell = Math.max(1, Math.floor(MAP_COLUMNS / Math.max(cols, 1)));
  const rh = n * 8 > 16384 ? Math.max(1, Math.floor(16384 / n)) : Math.max(8, Math.floor(240 / n));
  const top = new Float64Array(n * cols), at = new Int32Array(n * cols);
  let most = 0;
  for (let i = 0; i < n; i++)
    for (let c = 0; c < cols; c++) {
      let best = -Infinity, where = c * per;
      for (let j = c * per; j < Math.min(m, (c + 1) * per); j++)
        if (M[i * m + j] > best) { best = M[i * m + j]; where = j; }
      top[i * cols + c] = best;
      at[i * cols + c] = where;
      if (best > most) most = best;
    }
  const c = $('wmap'), img = new ImageData(Math.max(cols, 1), Math.max(n, 1));
  for (let i = 0; i < n * cols; i++) {
    const rgb = mix(C.bg, C.acc, top[i] > 0 && most > 0 ? Math.sqrt(Math.min(1, top[i] / most)) : 0);
    img.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * i);
  }
  c.width = cols * cell;
  c.height = n * rh;
  const off = document.createElement('canvas');
  off.width = img.width;
  off.height = img.height;
  off.getContext('2d').putImageData(img, 0, 0);
  const x = c.getContext('2d');
  x.imageSmoothingEnabled = false;
  x.drawImage(off, 0, 0, c.width, c.height);
  const marks = $('wmap-marks'), mx = marks.getContext('2d');
  marks.width = c.width;
  marks.height = 14;
  mx.clearRect(0, 0, marks.width, 14);
  mx.fillStyle = css(C.sel);
  for (let j = 0; j < m; j++)
    if (D.mark && B.keys[j].t === D.mark) mx.fillRect(Math.floor(j / per) * cell, 0, Math.max(2, cell), 14);
  $('wmap-marked').textContent = D.mark ? ` · marked above: the '${D.mark}' positions` : '';
  $('wmap-scale').textContent = `colour ∝ √weight, darkest = ${tiny(most)}` +
    (per > 1 ? `, a column the largest of ${per} positions` : '') +
    `; a uniform look gives each position 1/L = 1/${m} = ${+(1 / m).toPrecision(4)}`;
  const readout = () => {
    if (!S.mapCell) { $('wmap-hover').textContent = 'hover a cell'; return; }
    const [i, col] = S.mapCell, j = at[i * cols + col], w = M[i * m + j];
    $('wmap-hover').textContent = `${B.queries[i].t}, position ${j} '${B.keys[j].t}': weight ${tiny(w)}` +
      (per > 1 ? ` (the largest of positions ${col * per}–${Math.min(m, (col + 1) * per) - 1})` : '');
  };
  readout();
  c.onmousemove = (e) => {
    const box = c.getBoundingClientRect();
    const i = Math.floor(((e.clientY - box.top) / box.height) * n), col = Math.floor(((e.clientX - box.left) / box.width) * cols);
    S.mapCell = i >= 0 && i < n && col >= 0 && col < cols ? [i, col] : null;
    readout();
  };
  c.onmouseleave = () => { S.mapCell = null; readout(); };
  c.tabIndex = 0;
  c.onkeydown = (e) => {
    const move = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[e.key];
    if (!move) return;
    e.preventDefault();
    const [i, col] = S.mapCell || [0, 0], to = (v, size) => Math.min(size - 1, Math.max(0, v));
    S.mapCell = S.mapCell ? [to(i + move[0], n), to(col + move[1], cols)] : [0, 0];
    readout();
  };
}

// The views redraw their buttons and labels; the one that had the keyboard focus gets it back
// (found by its id or data-* attributes), so Enter on a token does not send Tab back to the top.
function keepFocus(draw) {
  const a = document.activeElement, home = a && a.parentElement && a.parentElement.closest('[id]');
  const again = home && (a.id ? '#' + a.id : Object.keys(a.dataset).length ?
    a.tagName.toLowerCase() + Object.entries(a.dataset).map(([k, v]) => `[data-${k}="${v}"]`).join('') : null);
  draw();
  if (again && !a.isConnected && home.isConnected) home.querySelector(again)?.focus();
}

function render() {
  keepFocus(() => {
    readColours();
    status();
    // A block of weights only has its own view; the views of q and k have nothing to show.
    $('qk-views').hidden = !!block().wo;
    $('wmap-section').hidden = !block().wo;
    if (block().wo) {
      weightsView();
      return;
    }
    tokens();
    grid();
    heat();
    headToggles();
    lines();
    steps();
  });
}

// ---- the causal lens (qkv explain --target): a layers × heads grid coloured by an effect --------
function lensView() {
  const L = D.lens;
  $('lens-section').hidden = !L;
  if (!L) return;
  for (const id of ['lens-intro', 'lens-measure', 'lens-grid', 'lens-table'])
    $(id).closest('p, div, table').hidden = !L.heads;
  $('lens-section').querySelector('h3').hidden = !L.heads;
  if (!L.heads) $('lens-h').textContent = 'Circuits from the weights';
  if (L.heads) lensHeads(L);
  if (L.circuit) circuitTables(L.circuit);
}

function lensHeads(L) {
  const T = L.lens, q = (t) => `"${esc(t)}"`;
  $('lens-target').innerHTML = q(T.target.token);
  const versus = T.versus ? ` less ${q(T.versus.token)}'s` : '';
  // A lens layer by name ("L23", "L1 cross"), and the block and layer of the page that show it
  // (a seq2seq step's: its decoder's self- or cross-attention, at the step's row).
  const name = (l) => T.layers[l];
  const where = (l) => ({ b: T.captured_at[l][0], l: T.captured_at[l][1], ...(T.step ? { q: T.step - 1 } : {}) });
  const at = T.step ? `at output step ${T.step}` : 'at the last position';
  $('lens-intro').innerHTML = `The target's logit${versus} ${at} is ` +
    `${fmt(T.clean.metric, 2)} (p = ${fmt(Math.exp(T.clean.log_prob), 3)}). Ablation sets a head's output ` +
    `(its slice of W_O's input) to zero, or to its mean over the positions, and reruns the layers from ` +
    `there; direct logit attribution reads the head's output at the last position through W_O and the ` +
    `final norm (its scale frozen) on the target's unembedding${versus ? ' less the alternative\'s' : ''}.`;
  const measures = [['ablation_metric_change', 'zero-ablated − clean'],
    ['mean_ablation_metric_change', 'mean-ablated − clean'],
    ['direct_logit_attribution', 'direct logit attribution']];
  if (L.heads[0].patching_restored !== undefined)
    measures.push(['patching_restored', 'share restored by patching (from the text into the corrupted prompt)']);
  const pick = $('lens-measure');
  pick.innerHTML = measures.map(([k, t]) => `<option value="${k}">${t}</option>`).join('');
  const H = Math.max(...L.heads.map((e) => e.head)) + 1, layers = L.heads.length / H;
  const draw = () => {
    const key = pick.value, top = Math.max(1e-9, ...L.heads.map((e) => Math.abs(e[key])));
    // An ablation that lowers the target means the head helped: coloured as its help.
    const sign = key.includes('ablation') ? -1 : 1;
    let html = '<span></span>';
    for (let h = 0; h < H; h++) html += `<span class="label">h${h}</span>`;
    for (let l = 0; l < layers; l++) {
      html += `<span class="label">${esc(name(l))}</span>`;
      for (let h = 0; h < H; h++) {
        const e = L.heads[l * H + h], x = e[key];
        html += `<button data-l="${l}" data-h="${h}" aria-pressed="${where(l).b === S.b && where(l).l === S.l && h === S.h}" ` +
          `style="background:${css(ramp(sign * x / top))}" title="${esc(name(l))}, head ${h}: ${fmt(x, 3)}">` +
          `${fmt(x, 2)}</button>`;
      }
    }
    const g = $('lens-grid');
    g.style.gridTemplateColumns = `auto repeat(${H}, 56px)`;
    g.innerHTML = html;
    g.querySelectorAll('button').forEach((b) => {
      const l = +b.dataset.l, h = +b.dataset.h, e = L.heads[l * H + h];
      b.onclick = () => { select({ ...where(l), h }); draw(); $('heat').scrollIntoView({ block: 'center' }); };
      b.onmouseenter = () => { $('lens-hover').textContent = `${name(l)}, head ${h}: zeroed ` +
        `${fmt(e.ablation_metric_change, 3)}, mean-ablated ${fmt(e.mean_ablation_metric_change, 3)}, ` +
        `DLA ${fmt(e.direct_logit_attribution, 3)}`; };
    });
  };
  pick.onchange = draw;
  draw();
  $('lens-table').innerHTML = '<tr><th>layer</th><th style="text-align:left">most likely there</th><th>target rank</th><th>target p</th></tr>' +
    T.logit_lens.map((r) => `<tr><th scope=row>${esc(name(r.layer))}</th><td style="text-align:left">` +
      r.top.slice(0, 5).map((t) => `${q(t.token)} ${fmt(t.p, 2)}`).join(' · ') +
      `</td><td>${r.target_rank + 1}</td><td>${fmt(Math.exp(r.target_log_prob), 3)}</td></tr>`).join('');
}

function circuitTables(C) {
  const q = (t) => `"${esc(t)}"`;
  {
    const table = (title, rows, cols, cell) => `<h3>${title}</h3><div class="scroll-x"><table class="numbers">` +
      `<tr><th></th>${cols.map((c) => `<th>${q(c)}</th>`).join('')}</tr>` +
      rows.map((r, i) => `<tr><th scope=row>${q(r)}</th>${cols.map((_, j) => `<td>${cell(i, j)}</td>`).join('')}</tr>`).join('') +
      '</table></div>';
    const names = C.qk.tokens.map((t) => t.text);
    $('circuit').innerHTML =
      table(`QK circuit of head ${C.qk.layer}.${C.qk.head}: the logit of a query token (row) on a key token (column), ` +
        `the query ${C.qk.offset} after the key`, names, names, (i, j) => fmt(C.qk.logits[i][j], 2)) +
      table(`OV circuit of head ${C.ov.layer}.${C.ov.head}: the logit each token's value (row) gives each output (column)`,
        C.ov.rows.map((r) => r.text), C.ov.outputs.map((o) => o.text), (i, j) => fmt(C.ov.rows[i].outputs[j], 2));
  }
}

header();
select({});
lensView();
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', render);
window.qkv = { state: S, layer, select };
document.body.dataset.ready = String(Math.round(performance.now()));
