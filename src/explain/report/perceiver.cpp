// The Perceiver's HTML page: the data as JSON, drawn by a small script on a canvas. It wears the
// report's style and "How to read this page" box (explain/report/), its data is made script-safe
// as the report's is (html.cpp), and its numbers are latent_table's, the ones the terminal shows.
#include <nlohmann/json.hpp>
#include <string>

#include "explain/markup.h"
#include "explain/report/html.h"
#include "explain/report/html/assets.h"
#include "explain/report/legend.h"
#include "qkv/explain.h"

namespace qkv::explain {

namespace {

// Beside the report's style: the heatmap with a label a latent on its left (the labels' column
// is as tall as the canvas, a row a latent), the counted symbol's ticks above it.
constexpr const char* kStyle = R"(
#map-wrap{display:grid;grid-template-columns:auto 1fr;column-gap:6px;margin:6px 0}
#rows{display:flex;flex-direction:column;font-size:11px;color:var(--mute);text-align:right}
#rows span{flex:1 1 0;display:flex;align-items:center;justify-content:flex-end;min-height:0;line-height:1}
#map{border:1px solid var(--line);image-rendering:pixelated;width:100%;height:auto;cursor:crosshair;display:block}
#ticks{width:100%;height:14px;display:block}
#tip{min-height:1.5em;font-variant-numeric:tabular-nums}
table.latents{border-collapse:collapse;margin-top:12px;font-variant-numeric:tabular-nums}
table.latents td,table.latents th{padding:2px 10px;text-align:right;border-bottom:1px solid var(--line)}
table.latents th{background:var(--panel)}
)";

constexpr const char* kScript = R"(
const D=JSON.parse(document.getElementById('data').textContent);
const N=D.latents,L=D.length,H=D.heads,W=D.weights;
const canvas=document.getElementById('map'),ticks=document.getElementById('ticks');
const sel=document.getElementById('head');
function rgb(name){const p=document.createElement('span');p.style.color=getComputedStyle(document.documentElement).getPropertyValue(name);
document.body.appendChild(p);const v=getComputedStyle(p).color.match(/\d+/g).slice(0,3).map(Number);p.remove();return v;}
function row(h,n){return W.slice((h*N+n)*L,(h*N+n+1)*L);}
function view(){const h=sel.value;const m=[];for(let n=0;n<N;n++){if(h==='mean'){const r=new Array(L).fill(0);
for(let k=0;k<H;k++){const x=row(k,n);for(let l=0;l<L;l++)r[l]+=x[l]/H;}m.push(r);}else m.push(row(+h,n));}return m;}
let M=[];
function draw(){M=view();let mx=0;for(const r of M)for(const w of r)mx=Math.max(mx,w);
const bg=rgb('--bg'),acc=rgb('--acc'),sel2=rgb('--sel');
const cell=Math.max(1,Math.floor(1100/L)),rh=Math.max(8,Math.floor(240/N));
canvas.width=L*cell;canvas.height=N*rh;const g=canvas.getContext('2d');
for(let n=0;n<N;n++)for(let l=0;l<L;l++){const t=Math.sqrt(M[n][l]/(mx||1));
g.fillStyle=`rgb(${bg.map((x,i)=>Math.round(x+(acc[i]-x)*t)).join(',')})`;g.fillRect(l*cell,n*rh,cell,rh);}
ticks.width=L*cell;ticks.height=14;const tg=ticks.getContext('2d');tg.clearRect(0,0,ticks.width,14);
tg.fillStyle=`rgb(${sel2.join(',')})`;
for(let l=0;l<L;l++)if(D.input[l]===D.counted)tg.fillRect(l*cell,0,Math.max(2,cell),14);
document.getElementById('scale').textContent='darkest = '+mx.toFixed(4)+' (colour ∝ √weight); a uniform look gives each position '+D.uniform_weight;}
canvas.addEventListener('mousemove',ev=>{const r=canvas.getBoundingClientRect();
const l=Math.floor((ev.clientX-r.left)/r.width*L),n=Math.floor((ev.clientY-r.top)/r.height*N);
if(l<0||l>=L||n<0||n>=N)return;document.getElementById('tip').textContent=
`latent ${n}, position ${l} '${D.input[l]}': weight ${M[n][l].toFixed(5)}`;});
sel.addEventListener('change',draw);matchMedia('(prefers-color-scheme: dark)').addEventListener('change',draw);draw();
document.body.dataset.ready='1';
)";

}  // namespace

std::string perceiver_html(const Run& run, const Gathers& e, const std::string& title) {
  const LatentTable t = latent_table(run, e);
  const Tensor w = run.blocks.front().layers.front().weights.to(DType::f64).contiguous();
  const nlohmann::json data = {
      {"input", run.text},
      {"counted", std::string(1, run.counted)},
      {"heads", e.heads},
      {"latents", e.latents},
      {"length", e.length},
      {"uniform_weight", t.uniform_weight},
      {"weights", std::vector<double>(w.data<double>(), w.data<double>() + w.numel())}};
  std::string c = "'";  // (not "'" + std::string: GCC 12 warns a false -Wrestrict on it)
  c += escape_markup(std::string(1, run.counted)) + "'";
  std::string h = "<!doctype html><html lang=en><head><meta charset=utf-8><title>" +
                  escape_markup(title) + "</title><style>";
  h += report_css();
  h += kStyle;
  h += "</style></head><body>";
  h += "<h1>" + escape_markup(title) + "</h1>";
  h += legend_html({.source = ReportSource::perceiver});
  h += "<p id=summary>" + std::to_string(e.latents) +
       " learned latent queries cross-attend to an input of " + grouped(e.length) +
       " symbols (keys and values from the input). The input holds <b>" + std::to_string(e.count) +
       "</b> " + c + "; the model says <b>" + std::to_string(run.output.predicted) +
       "</b> (p = " + t.probability + "), " +
       (run.output.predicted == e.count ? "right" : "wrong") + ".</p>";
  h += "<p>Rows: latents; columns: input positions; ticks above: the " + c +
       " positions. Head: <select id=head><option value=mean>mean of heads</option>";
  for (int64_t k = 0; k < e.heads; ++k)
    h += "<option value=" + std::to_string(k) + ">head " + std::to_string(k) + "</option>";
  h += "</select> <span id=scale class=mute></span></p>";
  h += "<div id=map-wrap><span></span><canvas id=ticks></canvas><div id=rows>";
  for (const LatentRow& r : t.rows) h += "<span>" + r.label + "</span>";
  h += "</div><canvas id=map></canvas></div><div id=tip>hover a cell</div>";

  h += "<p>What each latent gathers: its weight on the " + c +
       " (all heads' mean, and how many times a uniform look's " + t.uniform_share +
       "; then per head), how many positions it spreads over (exp entropy), and the positions it "
       "weighs most:</p>";
  h += "<table class=latents><tr><th></th><th>on " + c + "</th><th>× uniform</th><th></th>";
  for (int64_t k = 0; k < e.heads; ++k) h += "<th>head " + std::to_string(k) + "</th>";
  h += "<th>spread</th><th>top</th></tr>";
  for (const LatentRow& r : t.rows) {
    h += "<tr><th scope=row>" + r.label + "</th><td>" + r.counted + "</td><td>" + r.times_uniform +
         "</td><td style='text-align:left'><span class=bar style='width:" +
         std::to_string(static_cast<int>(120 * r.bar)) + "px'></span></td>";
    for (const std::string& s : r.per_head) h += "<td>" + s + "</td>";
    h += "<td>" + r.spread + "</td><td>";
    for (std::size_t i = 0; i < r.top.size(); ++i) {
      if (i > 0) h += ' ';
      h += escape_markup(r.top[i]);
    }
    h += "</td></tr>";
  }
  h += "</table><script type=application/json id=data>" + script_json(data.dump()) +
       "</script><script>" + kScript + "</script></body></html>\n";
  return h;
}

}  // namespace qkv::explain
