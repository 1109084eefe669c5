// The Perceiver's HTML page: the data as JSON, drawn by a small script on a canvas.
#include <nlohmann/json.hpp>
#include <string>

#include "explain/markup.h"
#include "qkv/perceiver_report.h"

namespace qkv::explain {

namespace {

// JSON for inside <script>: no "<" at all ("</script>" would end the element early, "<!--<script"
// would change how the parser reads it); "<" can only sit inside a JSON string, as \u003c.
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:20px}code{background:#f3f3f3;padding:1px 4px}
#map{border:1px solid #ccc;image-rendering:pixelated;width:100%;height:auto;cursor:crosshair}
#ticks{width:100%;height:14px;display:block}
#tip{min-height:1.5em;font-family:monospace}
table{border-collapse:collapse;margin-top:12px}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}
th{background:#fafafa}.bar{display:inline-block;height:10px;background:#c33;vertical-align:middle}
)";

constexpr const char* kScript = R"(
const D=JSON.parse(document.getElementById('data').textContent);
const N=D.latents,L=D.length,H=D.heads,W=D.weights;
const canvas=document.getElementById('map'),ticks=document.getElementById('ticks');
const sel=document.getElementById('head');
function row(h,n){return W.slice((h*N+n)*L,(h*N+n+1)*L);}
function view(){const h=sel.value;const m=[];for(let n=0;n<N;n++){if(h==='mean'){const r=new Array(L).fill(0);
for(let k=0;k<H;k++){const x=row(k,n);for(let l=0;l<L;l++)r[l]+=x[l]/H;}m.push(r);}else m.push(row(+h,n));}return m;}
let M=[];
function draw(){M=view();let mx=0;for(const r of M)for(const w of r)mx=Math.max(mx,w);
const cell=Math.max(1,Math.floor(1100/L)),rh=Math.max(8,Math.floor(240/N));
canvas.width=L*cell;canvas.height=N*rh;const g=canvas.getContext('2d');
for(let n=0;n<N;n++)for(let l=0;l<L;l++){const t=Math.sqrt(M[n][l]/(mx||1));
g.fillStyle=`rgb(${255-Math.round(t*60)},${255-Math.round(t*200)},${255-Math.round(t*200)})`;g.fillRect(l*cell,n*rh,cell,rh);}
ticks.width=L*cell;ticks.height=14;const tg=ticks.getContext('2d');tg.fillStyle='#06c';
for(let l=0;l<L;l++)if(D.input[l]===D.counted)tg.fillRect(l*cell,0,Math.max(2,cell),14);
document.getElementById('scale').textContent='darkest = '+mx.toFixed(4)+' (colour ∝ √weight); uniform would be '+(1/L).toFixed(5);}
canvas.addEventListener('mousemove',ev=>{const r=canvas.getBoundingClientRect();
const l=Math.floor((ev.clientX-r.left)/r.width*L),n=Math.floor((ev.clientY-r.top)/r.height*N);
if(l<0||l>=L||n<0||n>=N)return;document.getElementById('tip').textContent=
`latent ${n}, position ${l} '${D.input[l]}': weight ${M[n][l].toFixed(5)}`;});
sel.addEventListener('change',draw);draw();
)";

}  // namespace

std::string perceiver_html(const PerceiverExplanation& e, const std::string& title) {
  nlohmann::json shares = nlohmann::json::array();
  for (const LatentGather& g : e.gathers) shares.push_back(g.counted_share);
  const nlohmann::json data = {{"input", e.input},   {"counted", std::string(1, e.counted)},
                               {"heads", e.heads},   {"latents", e.latents},
                               {"length", e.length}, {"weights", e.weights},
                               {"shares", shares}};
  const std::string c(1, e.counted);
  std::string h = "<!doctype html><html lang=en><head><meta charset=utf-8><title>" +
                  escape_markup(title) + "</title><style>" + kStyle + "</style></head><body>";
  h += "<h1>" + escape_markup(title) + "</h1>";
  h += "<p>" + std::to_string(e.latents) + " learned latent queries cross-attend to an input of " +
       std::to_string(e.length) + " symbols (keys and values from the input). The input holds <b>" +
       std::to_string(e.count) + "</b> '" + escape_markup(c) + "'; the model says <b>" +
       std::to_string(e.predicted) + "</b> (p = " +
       std::to_string(e.probabilities[static_cast<std::size_t>(e.predicted)]).substr(0, 5) +
       ").</p>";
  h += "<p>Rows: latents; columns: input positions; blue ticks above: the '" + escape_markup(c) +
       "' positions. Head: <select id=head><option value=mean>mean of heads</option>";
  for (int64_t k = 0; k < e.heads; ++k)
    h += "<option value=" + std::to_string(k) + ">head " + std::to_string(k) + "</option>";
  h += "</select> <span id=scale></span></p><canvas id=ticks></canvas><canvas id=map></canvas>"
       "<div id=tip>hover a cell</div>";
  h += "<table><tr><th>latent</th><th>weight on '" + escape_markup(c) + "' (heads' mean)</th>";
  for (int64_t k = 0; k < e.heads; ++k) h += "<th>head " + std::to_string(k) + "</th>";
  h += "<th>effective positions</th><th>top positions</th></tr>";
  for (std::size_t n = 0; n < e.gathers.size(); ++n) {
    const LatentGather& g = e.gathers[n];
    h += "<tr><td>" + std::to_string(n) + "</td><td><span class=bar style='width:" +
         std::to_string(static_cast<int>(120 * g.counted_mean)) + "px'></span> " +
         std::to_string(g.counted_mean).substr(0, 5) + "</td>";
    for (double s : g.counted_share) h += "<td>" + std::to_string(s).substr(0, 5) + "</td>";
    h += "<td>" + std::to_string(static_cast<int64_t>(g.effective_positions + 0.5)) + "</td><td>";
    for (const auto& [l, w] : g.top)
      h += std::to_string(l) + " '" +
           escape_markup(std::string(1, e.input[static_cast<std::size_t>(l)])) + "' ";
    h += "</td></tr>";
  }
  h += "</table><script type=application/json id=data>" + script_safe(data.dump()) +
       "</script><script>" + kScript + "</script></body></html>\n";
  return h;
}

}  // namespace qkv::explain
