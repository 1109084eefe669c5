"""Writes tests/golden/smollm2/lens.json: the causal lens of include/qkv/explain_lens.h computed by
Hugging Face transformers' own Llama on the same SmolLM2-135M-Instruct Q4_1 GGUF (its GGUF loader
dequantizes to float32; eager attention), with hooks — an implementation independent of qkv's.
tests/explain/lens_golden_test.cpp compares qkv's Lens with it.

Where the hooks sit (the definitions are explain_lens.h's):
  o_proj's input         a head's output o_h is its slice [h·d, (h + 1)·d) of W_O's input: read for
                         direct logit attribution, set to 0 / its mean over the prompt's positions
                         (ablation), copied from the clean run (patching)
  the attention scores   eager_attention_forward wrapped: in a layer with knocked-out edges the
                         additive mask is rebuilt per head, −∞ at each blocked edge i → j and at
                         each causally masked one (transformers' own mask uses finfo.min there, so
                         a row with every visible key blocked would average the future); a row
                         left with nothing to attend to gives 0, as qkv's convention says
                         (docs/CONVENTIONS.md §1.4), where a bare softmax gives NaN
  a decoder layer        its input (the stream entering it: patched at one position) and output
                         (the logit lens)
  self_attn, mlp, embed  their outputs at the last position (direct logit attribution per layer)
  the final norm         its input at the clean run: the frozen scale 1/rms of attribution
Every measure is on the last position: the target's logit, its log-probability (log-softmax over
the vocabulary, in float64 from the float32 logits) and the metric, logit(target) − logit(versus).

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_smollm2_lens_goldens.py

Needs torch, transformers and gguf in a venv outside the repository (bench/setup_torch_venv.sh);
`make test` never runs it. The model comes from scripts/fetch_model (QKV_HOME, default
~/.cache/qkv). It runs every head's zero ablation and patching (a batch row per intervention) to
pick the twelve heads it keeps — the largest effects by zero ablation, attribution and patching,
then a spread over the layers — prints the largest, and keeps those two tables for every head
("every_head", for reading: the test does not rerun them). About 3 to 8 minutes on two shared
cores, nearly all of it those two tables.
"""
import json
import math
import os
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.llama import modeling_llama

HOME = os.environ.get("QKV_HOME", os.path.expanduser("~/.cache/qkv"))
DIR = os.path.join(HOME, "models/SmolLM2-135M-Instruct")
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2/lens.json")
# focus: the token whose edges the knockouts block (the country; the indirect object).
PAIRS = [
    {"name": "capital", "clean": "The capital of France is", "corrupted": "The capital of Italy is",
     "target": " Paris", "versus": " Rome", "focus": " France"},
    {"name": "ioi", "clean": "When Mary and John went to the store, John gave a drink to",
     "corrupted": "When Mary and John went to the store, Mary gave a drink to",
     "target": " Mary", "versus": " John", "focus": " Mary"},
]
# Heads kept besides the largest effects: a spread over the layers.
SPREAD = [(0, 0), (4, 3), (8, 6), (12, 1), (16, 4), (20, 7), (24, 2), (27, 5), (29, 8)]

# What the next run changes, one spec per batch row: per layer, a function on the heads' outputs
# o [n, H, d] (in place), knocked-out edges as a bool [H, n, n] (True: blocked), a function on the
# stream entering it [n, hidden] (in place). A batch of the same prompt runs many interventions
# at once; the rows do not mix.
SPECS = []
SEEN = {}  # what the last run's hooks read, float32 [B, ...]
# What the golden keeps, few enough that qkv's test of it runs in seconds: the stream patched
# entering these layers; heads compared per pair; of them, those patched at each position too.
STREAM_LAYERS = [0, 6, 12, 18, 24, 29]
HEADS_KEPT = 12
PATCHED_AT_EACH_POSITION = 2


def g9(x):
    """A float kept to 9 significant digits: float32's, with the JSON short."""
    return float(f"{x:.9g}")


def install(model):
    cfg = model.config
    heads, d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    eager = modeling_llama.eager_attention_forward

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        blocked = [spec.get("blocked", {}).get(module.layer_idx) for spec in SPECS]
        if any(b is not None for b in blocked):
            # transformers' causal mask is additive with finfo.min, not −∞: a row whose every
            # visible key is blocked would then average the future. Every mask here is −∞.
            assert attention_mask is not None and attention_mask.dim() == 4
            causal = attention_mask > torch.finfo(query.dtype).min / 2  # [1, 1, n, n]
            n = query.shape[2]
            keep = torch.stack([causal[0, 0].expand(heads, n, n) & ~b if b is not None
                                else causal[0, 0].expand(heads, n, n) for b in blocked])
            attention_mask = torch.zeros(keep.shape, dtype=query.dtype)
            attention_mask[~keep] = -math.inf
        out, weights = eager(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
        return torch.nan_to_num(out, nan=0.0), weights  # rows with nothing to attend to: 0

    modeling_llama.eager_attention_forward = attention

    def o_proj_input(l):
        def hook(module, args):
            x = args[0]  # [B, n, H·d]
            o = x.reshape(x.shape[0], x.shape[1], heads, d).clone()
            for b, spec in enumerate(SPECS):
                if l in spec.get("heads", {}):
                    spec["heads"][l](o[b])
            SEEN[("o", l)] = o.clone()
            return (o.reshape(x.shape).contiguous(),) + tuple(args[1:])
        return hook

    def layer_input(l):
        def hook(module, args, kwargs):
            h = (args[0] if args else kwargs["hidden_states"]).clone()
            for b, spec in enumerate(SPECS):
                if l in spec.get("stream", {}):
                    spec["stream"][l](h[b])
            SEEN[("in", l)] = h.clone()
            if args:
                return (h,) + tuple(args[1:]), kwargs
            return args, {**kwargs, "hidden_states": h}
        return hook

    def keep(name):
        def hook(module, args, output):
            SEEN[name] = (output[0] if isinstance(output, tuple) else output).clone()
        return hook

    for l, layer in enumerate(model.model.layers):
        layer.self_attn.o_proj.register_forward_pre_hook(o_proj_input(l))
        layer.register_forward_pre_hook(layer_input(l), with_kwargs=True)
        layer.register_forward_hook(keep(("out", l)))
        layer.self_attn.register_forward_hook(keep(("attn", l)))
        layer.mlp.register_forward_hook(keep(("mlp", l)))
    model.model.embed_tokens.register_forward_hook(keep("embed"))
    model.model.norm.register_forward_pre_hook(
        lambda module, args: SEEN.__setitem__("final", args[0].clone()))


def run(model, ids, specs=None, batch=32):
    """The last position's logits [len(specs), vocab] float32: one row per intervention (none:
    [{}], the plain run). SEEN keeps the last batch's reads."""
    specs = specs if specs is not None else [{}]
    rows = []
    for at in range(0, len(specs), batch):
        SPECS[:] = specs[at:at + batch]
        SEEN.clear()
        with torch.no_grad():
            x = torch.tensor([ids] * len(SPECS))
            rows.append(model(x, logits_to_keep=1).logits[:, -1].clone())
    SPECS.clear()
    return torch.cat(rows)


def measure(logits, t, v):
    z = logits.double()
    lse = torch.logsumexp(z, 0).item()
    return {"logit": z[t].item(), "log_prob": z[t].item() - lse, "versus_logit": z[v].item(),
            "metric": z[t].item() - z[v].item()}


def triple(m):
    return [g9(m["logit"]), g9(m["log_prob"]), g9(m["metric"])]


def ablation(l, h, how):
    def change(o):
        if how == "zero":
            o[:, h] = 0
        else:  # its mean over the prompt's positions, summed in float64 as qkv does
            o[:, h] = o[:, h].double().mean(0).float()
    return {"heads": {l: change}}


def copy_heads(l, h, clean_o, at=None):
    def change(o):
        if at is None:
            o[:, h] = clean_o[:, h]
        else:
            o[at, h] = clean_o[at, h]
    return {"heads": {l: change}}


def copy_stream(l, clean_in, at):
    def change(x):
        x[at] = clean_in[at]
    return {"stream": {l: change}}


def attribution(model, t, v, n_layers, heads, d):
    """Direct logit attribution of the clean run (SEEN, batch row 0) at the last position,
    float64."""
    norm = model.model.norm
    final = SEEN["final"][0, -1].double()
    scale = norm.weight.double() / torch.sqrt((final * final).mean() + norm.variance_epsilon)
    w_u = model.lm_head.weight.double()
    u = (w_u[t] - w_u[v]) * scale  # the frozen norm, then the unembedding difference

    def read(part):
        return (part.double() @ u).item()

    out = {"embedding": read(SEEN["embed"][0, -1]), "attention": [], "mlp": [], "heads": []}
    for l in range(n_layers):
        w_o = model.model.layers[l].self_attn.o_proj.weight.double()  # [hidden, H·d]
        o = SEEN[("o", l)][0, -1].double()  # [H, d]
        out["heads"].append([read(w_o[:, h * d:(h + 1) * d] @ o[h]) for h in range(heads)])
        out["attention"].append(read(SEEN[("attn", l)][0, -1]))
        out["mlp"].append(read(SEEN[("mlp", l)][0, -1]))
    total = out["embedding"] + sum(out["attention"]) + sum(out["mlp"])
    return out, total


def logit_lens(model, t, n_layers, top=5):
    rows = []
    for l in range(n_layers):
        with torch.no_grad():
            z = model.lm_head(model.model.norm(SEEN[("out", l)][0, -1:]))[0]
        zd = z.double()
        lse = torch.logsumexp(zd, 0).item()
        ids = torch.topk(z, top).indices.tolist()
        rows.append({"top": ids, "top_log_prob": [g9(zd[i].item() - lse) for i in ids],
                     "rank": int((z > z[t]).sum().item()), "logit": g9(zd[t].item()),
                     "log_prob": g9(zd[t].item() - lse), "scale": g9(zd.abs().max().item())})
    return rows


def one_token(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 1, (text, ids)
    return ids[0]


def pick_heads(zero_all, dla_all, patch_all, heads):
    """The largest effects by zero ablation, attribution and patching, then the spread."""
    keep = []
    for table, k in ((zero_all, 4), (dla_all, 4), (patch_all, 2)):
        order = sorted(range(len(table)), key=lambda i: -abs(table[i]))
        keep += [(i // heads, i % heads) for i in order[:k] if (i // heads, i % heads) not in keep]
    keep += [lh for lh in SPREAD if lh not in keep]
    return keep[:HEADS_KEPT]


def top_list(table, heads, k=6):
    order = sorted(range(len(table)), key=lambda i: -abs(table[i]))[:k]
    return ", ".join(f"L{i // heads}H{i % heads} {table[i]:+.3f}" for i in order)


def say(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Pair:
    """A clean and a corrupted prompt, the target and the alternative, and the clean run's reads."""

    def __init__(self, model, tokenizer, pair):
        cfg = model.config
        self.model, self.pair = model, pair
        self.layers, self.heads = cfg.num_hidden_layers, cfg.num_attention_heads
        enc = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
        self.clean_ids, self.corrupted_ids = enc(pair["clean"]), enc(pair["corrupted"])
        assert len(self.clean_ids) == len(self.corrupted_ids), pair
        self.n = len(self.clean_ids)
        self.last = self.n - 1
        self.t, self.v = one_token(tokenizer, pair["target"]), one_token(tokenizer, pair["versus"])
        self.focus = self.clean_ids.index(one_token(tokenizer, pair["focus"]))
        # Before the first token that differs the two runs are the same: patching there restores
        # 0. Patched at a position: that first token and the last.
        first = next(i for i in range(self.n) if self.clean_ids[i] != self.corrupted_ids[i])
        self.positions = sorted({first, self.last})
        self.corrupted = self.measure(run(model, self.corrupted_ids)[0])
        self.logits = run(model, self.clean_ids)[0]
        self.clean = self.measure(self.logits)
        self.clean_o = {l: SEEN[("o", l)][0] for l in range(self.layers)}
        self.clean_in = {l: SEEN[("in", l)][0] for l in range(self.layers)}
        self.dla, total = attribution(model, self.t, self.v, self.layers, self.heads,
                                      cfg.hidden_size // self.heads)
        assert abs(total - self.clean["metric"]) < 1e-3 * abs(self.clean["metric"]) + 1e-3
        self.lens = logit_lens(model, self.t, self.layers)

    def measure(self, logits):
        return measure(logits, self.t, self.v)

    def share(self, logits):
        """The share of the metric's gap a patched run restores."""
        lo, hi = self.corrupted["metric"], self.clean["metric"]
        return (self.measure(logits)["metric"] - lo) / (hi - lo)

    def every_head(self):
        """Every head zero-ablated (the metric's change) and patched at every position."""
        every = [(l, h) for l in range(self.layers) for h in range(self.heads)]
        zero = run(self.model, self.clean_ids, [ablation(l, h, "zero") for l, h in every])
        patched = run(self.model, self.corrupted_ids,
                      [copy_heads(l, h, self.clean_o[l]) for l, h in every])
        return ([self.measure(z)["metric"] - self.clean["metric"] for z in zero],
                [self.share(z) for z in patched])

    def ablations(self, chosen):
        specs = [ablation(l, h, how) for l, h in chosen for how in ("zero", "mean")]
        m = [triple(self.measure(z)) for z in run(self.model, self.clean_ids, specs)]
        return [{"layer": l, "head": h, "zero": m[2 * i], "mean": m[2 * i + 1]}
                for i, (l, h) in enumerate(chosen)]

    def knockouts(self, layer, head):
        """The last query's edges to the focus token in one head, in every head of its layer and
        of the two layers before; every edge to token 0 in the head (query 0 is left nothing:
        its output is 0)."""
        n, last, focus, heads = self.n, self.last, self.focus, self.heads
        sets = [[[layer, head, last, focus]],
                [[layer, h, last, focus] for h in range(heads)],
                [[layer, head, i, 0] for i in range(n)],
                [[l, h, last, focus] for l in range(max(0, layer - 2), layer + 1)
                 for h in range(heads)]]
        specs = []
        for edges in sets:
            blocked = {}
            for l, h, i, j in edges:
                blocked.setdefault(l, torch.zeros(heads, n, n, dtype=torch.bool))[h, i, j] = True
            specs.append({"blocked": blocked})
        return [{"edges": edges, "measure": triple(self.measure(z))}
                for edges, z in zip(sets, run(self.model, self.clean_ids, specs))]

    def patching(self, chosen, patch_all):
        heads, positions = self.heads, self.positions
        at_each = sorted(chosen, key=lambda lh: -abs(patch_all[lh[0] * heads + lh[1]]))
        at_each = at_each[:PATCHED_AT_EACH_POSITION]
        specs = [copy_heads(l, h, self.clean_o[l], at=p) for l, h in at_each for p in positions]
        one = [g9(self.share(z)) for z in run(self.model, self.corrupted_ids, specs)]
        specs = [copy_stream(l, self.clean_in[l], p) for l in STREAM_LAYERS for p in positions]
        stream = [g9(self.share(z)) for z in run(self.model, self.corrupted_ids, specs)]
        k = len(positions)
        return {"positions": positions, "heads": [[l, h] for l, h in chosen],
                "all_positions": [g9(patch_all[l * heads + h]) for l, h in chosen],
                "at_each_position": [[l, h] for l, h in at_each],
                "one_position": [one[i * k:(i + 1) * k] for i in range(len(at_each))],
                "stream_layers": STREAM_LAYERS,
                "stream": [stream[i * k:(i + 1) * k] for i in range(len(STREAM_LAYERS))]}


def do_pair(model, tokenizer, pair):
    p = Pair(model, tokenizer, pair)
    began = time.time()
    zero_all, patch_all = p.every_head()
    say(f"{pair['name']}: every head ablated and patched in {time.time() - began:.1f} s")
    dla_all = [x for row in p.dla["heads"] for x in row]
    chosen = pick_heads(zero_all, dla_all, patch_all, p.heads)
    say(f"{pair['name']}: clean metric {p.clean['metric']:.4f}, corrupted "
        f"{p.corrupted['metric']:.4f}; top next {tokenizer.decode([int(p.logits.argmax())])!r}")
    say(f"  zero-ablation metric change: {top_list(zero_all, p.heads)}")
    say(f"  direct logit attribution:    {top_list(dla_all, p.heads)}")
    say(f"  patching share (all positions): {top_list(patch_all, p.heads)}")
    return {
        "name": pair["name"], "clean_text": pair["clean"], "corrupted_text": pair["corrupted"],
        "target_text": pair["target"], "versus_text": pair["versus"],
        "clean_ids": p.clean_ids, "corrupted_ids": p.corrupted_ids, "target": p.t,
        "versus": p.v, "focus": p.focus,
        "clean": {k: g9(x) for k, x in p.clean.items()},
        "corrupted": {k: g9(x) for k, x in p.corrupted.items()},
        "ablation": p.ablations(chosen),
        "knockout": p.knockouts(*chosen[0]),
        "patching": p.patching(chosen, patch_all),
        "attribution": {"embedding": g9(p.dla["embedding"]),
                        "attention": [g9(x) for x in p.dla["attention"]],
                        "mlp": [g9(x) for x in p.dla["mlp"]],
                        "heads": [[g9(x) for x in row] for row in p.dla["heads"]]},
        "logit_lens": p.lens,
        "every_head": {"zero_ablation_metric_change": [g9(x) for x in zero_all],
                       "patching": [g9(x) for x in patch_all]},
    }


def main():
    start = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tokenizer = AutoTokenizer.from_pretrained(DIR, gguf_file=FILE)
    model = AutoModelForCausalLM.from_pretrained(DIR, gguf_file=FILE, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    install(model)
    out = {"model": FILE,
           "made_by": f"tests/golden/make_smollm2_lens_goldens.py (transformers "
                      f"{transformers.__version__}, torch {torch.__version__.split('+')[0]})",
           "measure": "[logit, log_prob, metric] of the target at the last position",
           "pairs": [do_pair(model, tokenizer, pair) for pair in PAIRS]}
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} in {time.time() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
