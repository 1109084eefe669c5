"""The causal lens of a decoder's run (qkv explain --target), as NumPy arrays: which heads carried
the target token at the last position — every head zero- and mean-ablated, its direct logit
attribution, the logit lens, and the knockout and patching asked for. The numbers are the
library's (explain::read_causal), read from the same JSON `qkv explain --json` prints."""
import json
from typing import Any, Dict, List, Optional

import numpy as np


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # a record of what the model computed
    return a


class CausalLens:
    """What the interventions measured, for the target token at the last position.

    target, versus: the token texts ("" versus: none); clean: the clean run's measure
    {logit, log_prob, versus_logit, metric} (metric: the target's logit, less versus's).

    Arrays (layers, heads), read-only, each a change of the metric unless named otherwise:
        ablation                zero-ablated − clean (the head's output, W_O's input slice, 0)
        mean_ablation           mean-ablated − clean (its mean over the prompt's positions)
        ablation_logit          zero-ablated − clean, the target's logit alone
        ablation_log_prob       zero-ablated − clean, the target's log-probability
        direct_logit_attribution  the head's part of the clean metric (W_O, the final norm at
                                the clean scale, the unembedding row); with attention (layers,),
                                mlp (layers,) and embedding, they sum to clean["metric"]
    logit_lens: one dict a layer {layer, top: [(token, p)], target_rank (0: first), target_logit,
    target_log_prob}. patching (with corrupt): {corrupt, clean, corrupted, heads (layers, heads),
    positions (layers, heads, n), stream (layers, n)}: the share of the metric's gap restored.
    knockout: {spec, edges (k, 4) [layer, head, query, key], measure}. circuit: the --circuit
    tables as JSON, or None.
    """

    def __init__(self, text: str):
        d = json.loads(text)
        self.circuit: Optional[Dict[str, Any]] = d.get("circuit")
        heads: List[Dict[str, Any]] = d.get("heads", [])
        lens = d.get("lens")
        if lens is None:
            raise ValueError("this run has no lens; expected explain(text, target=...)")
        layers = len(lens["attribution"]["attention"])
        shape = (layers, len(heads) // max(layers, 1))

        def grid(key: str) -> np.ndarray:
            return _frozen(np.array([e[key] for e in heads], dtype=np.float64).reshape(shape))

        self.target: str = lens["target"]["token"]
        self.target_id: int = lens["target"]["id"]
        self.versus: str = lens["versus"]["token"] if lens["versus"] else ""
        self.clean: Dict[str, float] = lens["clean"]
        self.ablation = grid("ablation_metric_change")
        self.mean_ablation = grid("mean_ablation_metric_change")
        self.ablation_logit = grid("ablation_logit_change")
        self.ablation_log_prob = grid("ablation_log_prob_change")
        self.direct_logit_attribution = grid("direct_logit_attribution")
        a = lens["attribution"]
        self.attention = _frozen(np.array(a["attention"], dtype=np.float64))
        self.mlp = _frozen(np.array(a["mlp"], dtype=np.float64))
        self.embedding: float = a["embedding"]
        self.logit_lens = [{"layer": r["layer"],
                            "top": [(t["token"], t["p"]) for t in r["top"]],
                            "target_rank": r["target_rank"],
                            "target_logit": r["target_logit"],
                            "target_log_prob": r["target_log_prob"]} for r in lens["logit_lens"]]
        p = lens["patching"]
        self.patching = None if p is None else {
            "corrupt": p["corrupt"], "clean": p["clean"], "corrupted": p["corrupted"],
            **{k: _frozen(np.array(p[k], dtype=np.float64)) for k in ("heads", "positions",
                                                                        "stream")}}
        k = lens["knockout"]
        self.knockout = None if k is None else {
            "spec": k["spec"], "edges": _frozen(np.array(k["edges"], dtype=np.int64)),
            "measure": k["measure"]}

    def top_heads(self, by: str = "ablation", count: int = 5) -> List[tuple]:
        """The heads with the largest |by| (an array's name above): [(layer, head, value)]."""
        a = getattr(self, by)
        order = np.argsort(-np.abs(a), axis=None, kind="stable")[:count]
        return [(int(i // a.shape[1]), int(i % a.shape[1]), float(a.flat[i])) for i in order]

    def __repr__(self) -> str:
        (l, h, x), = self.top_heads(count=1)
        return (f"<qkv.CausalLens of {self.target!r}: metric {self.clean['metric']:.3f}; "
                f"largest ablation L{l}h{h} {x:+.3f}>")
