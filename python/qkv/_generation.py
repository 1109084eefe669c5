"""Generation, explained (CausalLM.explain_generation; `qkv generate --explain`): each generated
token with the heads that carried it (direct logit attribution at the last position), where those
heads' last query looked, and the KV cache after the pass that chose it. The numbers are the
library's (explain::explain_generation, qkv/explain_generation.h), read from the same JSON
`qkv generate --explain --json` prints."""
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _number(x: Any) -> float:
    return float(x)  # the JSON writes NaN and ±∞ as "NaN", "Infinity", "-Infinity"


@dataclass(frozen=True)
class Look:
    """A key the last query looked at: its position (0: the prompt's first token), its text
    and the attention weight on it."""
    position: int
    text: str
    weight: float


@dataclass(frozen=True)
class CarryingHead:
    """A head that carried a token: its direct part of the token's logit (its output at the last
    position through W_O^h, the final norm at the clean scale and the token's unembedding row),
    the kv head whose K and V it reads, and where its last query looked, largest weight first."""
    layer: int
    head: int
    kv_head: int
    attribution: float
    looked: Tuple[Look, ...]


@dataclass(frozen=True)
class GenerationStep:
    """One generated token. positions: the prefix it was chosen after (prompt and tokens before
    it), whose K and V the cache holds once the step's pass ran; queries: the queries that pass
    computed a layer and head (the prompt's length at step 0, then 1); cache_bytes: positions ×
    the cache's bytes_per_position. logit, log_prob: the token's; attribution: its direct logit
    attribution's parts {embedding, attention, mlp, total} (total ≈ logit); heads: the largest
    attributions, largest first."""
    step: int
    id: int
    text: str
    positions: int
    queries: int
    cache_bytes: int
    logit: float
    log_prob: float
    attribution: Dict[str, float]
    heads: Tuple[CarryingHead, ...]


def _step(s: Dict[str, Any]) -> GenerationStep:
    heads = tuple(CarryingHead(h["layer"], h["head"], h["kv_head"], _number(h["attribution"]),
                               tuple(Look(k["position"], k["text"], _number(k["weight"]))
                                     for k in h["looked"]))
                  for h in s["heads"])
    return GenerationStep(s["step"], s["id"], s["text"], s["positions"], s["queries"],
                          s["cache_bytes"], _number(s["logit"]), _number(s["log_prob"]),
                          {k: _number(v) for k, v in s["attribution"].items()}, heads)


class ExplainedGeneration:
    """A generation explained token by token (the tokens are plain generation's: text is what
    CausalLM.generate returns for the same arguments).

    cache: {layers, heads, kv_heads, head_dim, group (query heads a kv head serves),
    bytes_per_position, sharing: {kv_head: [query heads]}}; prompt_tokens: the prompt's length;
    ids, tokens: every position's token id and text (the prompt's, then the generated ones);
    steps: one GenerationStep a generated token.

    Arrays, one row a step, read-only:
        positions, cache_bytes   (steps,) int64: the prefix and the KV cache's size after it
        logits, log_probs        (steps,) float64: the chosen token's
        attribution              (steps, 4) float64: embedding, attention, mlp, total
        head_index               (steps, top_heads, 3) int64: layer, head, kv_head
        head_attribution         (steps, top_heads) float64
        looked_positions         (steps, top_heads, top_keys) int64, −1 where fewer keys
        looked_weights           (steps, top_heads, top_keys) float64, NaN where fewer keys
    """

    def __init__(self, document: str, text: str):
        self._json = document
        d = json.loads(document)
        c = d["cache"]
        self.cache: Dict[str, Any] = {k: c[k] for k in ("layers", "heads", "kv_heads", "head_dim",
                                                        "group", "bytes_per_position")}
        self.cache["sharing"] = {s["kv_head"]: list(s["heads"]) for s in c["sharing"]}
        self.prompt_tokens: int = d["prompt_tokens"]
        self.ids: List[int] = [t["id"] for t in d["tokens"]]
        self.tokens: List[str] = [t["text"] for t in d["tokens"]]
        self.steps: List[GenerationStep] = [_step(s) for s in d["steps"]]
        self.text = text
        self._arrays()

    def _arrays(self) -> None:
        steps = self.steps
        self.positions = _frozen(np.array([s.positions for s in steps], dtype=np.int64))
        self.cache_bytes = _frozen(np.array([s.cache_bytes for s in steps], dtype=np.int64))
        self.logits = _frozen(np.array([s.logit for s in steps], dtype=np.float64))
        self.log_probs = _frozen(np.array([s.log_prob for s in steps], dtype=np.float64))
        parts = ("embedding", "attention", "mlp", "total")
        self.attribution = _frozen(np.array([[s.attribution[p] for p in parts] for s in steps],
                                            dtype=np.float64).reshape(len(steps), 4))
        top = max((len(s.heads) for s in steps), default=0)
        keys = max((len(h.looked) for s in steps for h in s.heads), default=0)
        index = np.full((len(steps), top, 3), -1, dtype=np.int64)
        carried = np.full((len(steps), top), np.nan)
        where = np.full((len(steps), top, keys), -1, dtype=np.int64)
        weight = np.full((len(steps), top, keys), np.nan)
        for i, s in enumerate(steps):
            for j, h in enumerate(s.heads):
                index[i, j] = (h.layer, h.head, h.kv_head)
                carried[i, j] = h.attribution
                for k, look in enumerate(h.looked):
                    where[i, j, k], weight[i, j, k] = look.position, look.weight
        self.head_index, self.head_attribution = _frozen(index), _frozen(carried)
        self.looked_positions, self.looked_weights = _frozen(where), _frozen(weight)

    def json(self) -> str:
        """The JSON document of `qkv generate --explain --json`."""
        return self._json

    def __repr__(self) -> str:
        c = self.cache
        size = self.steps[-1].cache_bytes if self.steps else 0
        return (f"<qkv.ExplainedGeneration: {len(self.steps)} tokens after a prompt of "
                f"{self.prompt_tokens}, {self.text!r}; KV cache {size:,} bytes "
                f"({c['layers']} layers × {c['kv_heads']} kv heads × {c['head_dim']})>")
