#include "explain/html.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace qkv::explain {
namespace {

// A number in at most 4 significant digits (the report's data stays small).
void put(std::ostringstream& s, double x) {
  if (!std::isfinite(x)) {
    s << (std::isnan(x) ? "null" : x > 0 ? "1e308" : "-1e308");
    return;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", x);
  s << buffer;
}

// t: [1, H, n, m] → [[[...]]] per head.
void put_heads(std::ostringstream& s, const Tensor& t) {
  const Tensor c = t.contiguous();
  const int64_t heads = c.dim(1), n = c.dim(2), m = c.dim(3);
  s << '[';
  for (int64_t h = 0; h < heads; ++h) {
    s << (h ? ",[" : "[");
    for (int64_t i = 0; i < n; ++i) {
      s << (i ? ",[" : "[");
      for (int64_t j = 0; j < m; ++j) {
        if (j) s << ',';
        put(s, c.value((h * n + i) * m + j));
      }
      s << ']';
    }
    s << ']';
  }
  s << ']';
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '<') {
      out += "\\u003c";  // never close the <script> element early
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string data_json(const Explained& e, int64_t focus) {
  std::ostringstream s;
  s << "{\"text\":" << json_string(e.text) << ",\"focus\":" << focus
    << ",\"headDim\":" << e.head_dim << ",\"scale\":";
  put(s, e.scale);
  s << ",\"tokens\":[";
  for (int64_t i = 0; i < e.size(); ++i) {
    const TokenInfo& t = e.tokens[static_cast<std::size_t>(i)];
    s << (i ? "," : "") << "{\"t\":" << json_string(t.text) << ",\"sp\":" << (t.special ? 1 : 0)
      << ",\"p\":" << (t.punctuation ? 1 : 0) << "}";
  }
  s << "],\"layers\":[";
  for (std::size_t l = 0; l < e.capture.layers.size(); ++l) {
    const BertLayerCapture& c = e.capture.layers[l];
    s << (l ? "," : "") << "{\"w\":";
    put_heads(s, c.weights);
    s << ",\"q\":";
    put_heads(s, c.q);
    s << ",\"k\":";
    put_heads(s, c.k);
    s << ",\"v\":";
    put_heads(s, c.v);
    s << ",\"o\":";
    put_heads(s, c.head_out);
    s << "}";
  }
  s << "]}";
  return s.str();
}

constexpr const char* kStyle = R"CSS(
:root{--bg:#fff;--fg:#1b1f24;--mute:#667;--line:#dde;--acc:#c60}
@media (prefers-color-scheme:dark){:root{--bg:#16181d;--fg:#e6e6e6;--mute:#99a;--line:#334;--acc:#fa4}}
body{background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,sans-serif;margin:1.2em auto;max-width:1240px;padding:0 1em}
h1{font-size:1.3em}h2{font-size:1.05em;margin:1.4em 0 .4em}.mute{color:var(--mute)}
.legend{border-left:3px solid var(--acc);padding:.2em .8em;margin:.8em 0}
#grid{display:grid;grid-template-columns:repeat(12,auto);gap:3px;justify-content:start}
#grid canvas{border:2px solid transparent;cursor:pointer}#grid canvas.sel{border-color:var(--acc)}
.row{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}
table.steps{border-collapse:collapse;font-variant-numeric:tabular-nums}
table.steps td,table.steps th{padding:1px 8px;text-align:right;border-bottom:1px solid var(--line)}
table.steps td:first-child,table.steps th:first-child{text-align:left}
.tok{cursor:pointer;padding:0 3px}.tok.sel{background:var(--acc);color:#fff}
.bar{display:inline-block;height:.8em;background:var(--acc)}
button{font:inherit}
)CSS";

constexpr const char* kScript = R"JS(
const D=JSON.parse(document.getElementById('data').textContent);
const N=D.tokens.length,L=D.layers.length,H=D.layers[0].w.length;
let S={l:0,h:0,q:D.focus};
const $=id=>document.getElementById(id);
const fmt=(x,d=2)=>x.toFixed(d);
function color(w){const a=Math.min(1,Math.max(0,w));return `rgba(204,102,0,${a})`;}
function grid(){const g=$('grid');g.innerHTML='';
 for(let l=0;l<L;l++)for(let h=0;h<H;h++){const c=document.createElement('canvas');c.width=c.height=48;
  c.title=`layer ${l}, head ${h}`;c.tabIndex=0;const x=c.getContext('2d'),s=48/N,w=D.layers[l].w[h];
  for(let i=0;i<N;i++)for(let j=0;j<N;j++){x.fillStyle=color(w[i][j]);x.fillRect(j*s,i*s,Math.ceil(s),Math.ceil(s));}
  if(l==S.l&&h==S.h)c.className='sel';
  c.onclick=c.onkeydown=e=>{if(e.type=='keydown'&&e.key!='Enter')return;S.l=l;S.h=h;render();};g.appendChild(c);}}
function heat(){const c=$('heat'),cell=Math.max(6,Math.min(28,Math.floor(560/N))),pad=90;
 c.width=pad+N*cell;c.height=pad+N*cell;const x=c.getContext('2d'),w=D.layers[S.l].w[S.h];
 x.clearRect(0,0,c.width,c.height);x.font='11px sans-serif';x.fillStyle=getComputedStyle(document.body).color;
 for(let i=0;i<N;i++){x.textAlign='right';x.fillText(D.tokens[i].t,pad-4,pad+i*cell+cell*0.7);
  x.save();x.translate(pad+i*cell+cell*0.7,pad-4);x.rotate(-Math.PI/2);x.textAlign='left';x.fillText(D.tokens[i].t,0,0);x.restore();}
 for(let i=0;i<N;i++)for(let j=0;j<N;j++){x.fillStyle=color(w[i][j]);x.fillRect(pad+j*cell,pad+i*cell,cell-1,cell-1);}
 x.strokeStyle='#08f';x.strokeRect(pad,pad+S.q*cell,N*cell,cell);
 c.onmousemove=e=>{const r=c.getBoundingClientRect(),j=Math.floor((e.clientX-r.left-pad)/cell),i=Math.floor((e.clientY-r.top-pad)/cell);
  $('hover').textContent=(i>=0&&j>=0&&i<N&&j<N)?`${D.tokens[i].t} → ${D.tokens[j].t}: ${fmt(w[i][j],3)}`:'';};
 c.onclick=e=>{const r=c.getBoundingClientRect(),i=Math.floor((e.clientY-r.top-pad)/cell);if(i>=0&&i<N){S.q=i;render();}};}
function lines(){const svg=$('lines'),w=D.layers[S.l].w[S.h],rh=18,W=360;svg.setAttribute('height',N*rh+10);
 let s='';for(let i=0;i<N;i++)for(let j=0;j<N;j++){const a=w[i][j];if(a<0.02)continue;
  const op=(S.hover==null||S.hover==i)?a:0.03;s+=`<line x1="110" y1="${i*rh+12}" x2="${W-110}" y2="${j*rh+12}" stroke="#c60" stroke-width="${1+3*a}" stroke-opacity="${op}"/>`;}
 for(let i=0;i<N;i++){s+=`<text x="104" y="${i*rh+16}" text-anchor="end" class="tok" data-i="${i}" fill="currentColor">${esc(D.tokens[i].t)}</text>`;
  s+=`<text x="${W-104}" y="${i*rh+16}" fill="currentColor">${esc(D.tokens[i].t)}</text>`;}
 svg.innerHTML=s;svg.querySelectorAll('text[data-i]').forEach(t=>{t.onmouseenter=()=>{S.hover=+t.dataset.i;lines();};t.onmouseleave=()=>{S.hover=null;lines();};});}
function esc(t){return t.replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));}
function steps(){const Ly=D.layers[S.l],q=Ly.q[S.h][S.q],w=Ly.w[S.h][S.q],d=q.length;
 let h=`<p>Token <b>${esc(D.tokens[S.q].t)}</b>, layer ${S.l}, head ${S.h}. Query q (${d} numbers): <code>[${q.slice(0,8).map(x=>fmt(x)).join(', ')}, …]</code></p>`;
 h+='<table class="steps"><tr><th>key</th><th>q·k</th><th>÷√d_k</th><th>softmax</th><th></th><th>weight·v (first 4)</th></tr>';
 for(let j=0;j<N;j++){const k=Ly.k[S.h][j];let dot=0;for(let t=0;t<d;t++)dot+=q[t]*k[t];
  const v=Ly.v[S.h][j].slice(0,4).map(x=>fmt(w[j]*x)).join(', ');
  h+=`<tr><td>${esc(D.tokens[j].t)}</td><td>${fmt(dot)}</td><td>${fmt(dot*D.scale)}</td><td>${fmt(w[j],3)}</td><td><span class="bar" style="width:${Math.round(80*w[j])}px"></span></td><td><code>${v}</code></td></tr>`;}
 const o=Ly.o[S.h][S.q].slice(0,8).map(x=>fmt(x)).join(', ');
 h+=`</table><p>Output = Σ weight·v = <code>[${o}, …]</code></p>`;$('steps').innerHTML=h;}
function tokens(){$('tokens').innerHTML=D.tokens.map((t,i)=>`<span class="tok${i==S.q?' sel':''}" tabindex="0" data-i="${i}">${esc(t.t)}</span>`).join(' ');
 document.querySelectorAll('#tokens .tok').forEach(t=>{t.onclick=t.onkeydown=e=>{if(e.type=='keydown'&&e.key!='Enter')return;S.q=+t.dataset.i;render();};});}
function render(){$('sel').textContent=`layer ${S.l}, head ${S.h}, query "${D.tokens[S.q].t}"`;grid();heat();lines();steps();tokens();}
render();
)JS";

}  // namespace

std::string html_report(const Explained& e, int64_t focus) {
  std::ostringstream s;
  s << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width\">"
       "<title>qkv explain</title><style>"
    << kStyle << "</style></head><body>\n"
    << "<h1>qkv explain · all-MiniLM-L6-v2</h1>\n<p id=\"text\"></p>\n"
    << "<div class=\"legend\">Every token asks with its <b>query</b> q, answers with its "
       "<b>key</b> k and offers its <b>value</b> v. A head scores q·k for every pair, divides by "
       "√d_k, turns the scores into weights with a softmax, and hands each token the weighted sum "
       "of the values. Click a token, a head or a heatmap row.</div>\n"
    << "<p>Selected: <b id=\"sel\"></b></p><p id=\"tokens\"></p>\n"
    << "<h2>Model view: every layer (rows) × head (columns)</h2><div id=\"grid\"></div>\n"
    << "<div class=\"row\"><div><h2>Heatmap (row: query, column: key)</h2><canvas "
       "id=\"heat\"></canvas><div id=\"hover\" class=\"mute\"></div></div>\n"
    << "<div><h2>Line view</h2><svg id=\"lines\" width=\"360\"></svg></div></div>\n"
    << "<h2>Step view: Attention(Q, K, V) for one token</h2><div id=\"steps\"></div>\n"
    << "<script id=\"data\" type=\"application/json\">" << data_json(e, focus) << "</script>\n"
    << "<script>" << kScript
    << "document.getElementById('text').textContent=D.text;</script>\n</body></html>\n";
  return s.str();
}

}  // namespace qkv::explain
