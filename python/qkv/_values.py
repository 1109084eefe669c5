"""What the values carried, as NumPy arrays (issue 28): the part of qkv.Explanation that reads a
captured run's value norms, value-weighted attention, residual-and-norm mixing, rollouts and
attention sinks (qkv/explain_readings.h; python/src/values.cpp). The numbers are the library's,
the same `qkv explain --json` prints under ov_norms, mixing, rollout, mixing_rollout and
values.sinks."""
from dataclasses import dataclass
from functools import cached_property
from typing import Any, List, Optional

import numpy as np


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # a record of what the model computed
    return a


def _stacked(arrays: List[Optional[np.ndarray]]) -> Optional[np.ndarray]:
    """Every layer's array stacked on a new first axis; None where the run has none."""
    if not arrays or arrays[0] is None:
        return None
    return _frozen(np.stack(arrays))


@dataclass(frozen=True)
class Sink:
    """An attention sink (a head whose mean weight on token 0 over the queries i ≥ 1 is above
    one half) explained with its values, f^h(x_j) = W_O^h v^h_j what head h writes into the
    stream for key j (Kobayashi et al. 2020): a head that puts 0.9 of its weight on token 0
    whose value there is tiny moves little. Means over queries take every i ≥ 1, up to 128 of
    them spread evenly.

    weight: mean over queries i ≥ 1 of α_i0; first_norm: ‖f^h(x_0)‖; others_norm: mean over
    keys j ≥ 1 of ‖f^h(x_j)‖; value_share: mean of token 0's value-weighted share
    α_i0‖f_0‖ / Σ_j α_ij‖f_j‖; moved: mean of Σ_j α_ij‖f_j‖, the most the head writes into a
    query's stream."""
    layer: int
    head: int
    weight: float
    first_norm: float
    others_norm: float
    value_share: float
    moved: float


class ValueArrays:
    """Explanation's arrays of what the values carried (a mixin: self._e is the captured run,
    self.layers its layer count). Every array is float64 and read-only; n is the tokens."""

    _e: Any
    layers: int

    @cached_property
    def value_norms(self) -> Optional[np.ndarray]:
        """(layers, heads, n): ‖f^h(x_j)‖ = ‖W_O^h v^h_j‖, the norm of the vector head h writes
        into the residual stream for key j (W_O^h the columns of W_O that take head h; v^h_j the
        value as captured, BERT's bias b_V included) — Kobayashi et al. 2020, "Attention is not
        only a weight: Analyzing Transformers with Vector Norms". None for a run without them."""
        return _stacked([self._e.value_norms(l) for l in range(self.layers)])

    @cached_property
    def value_weighted(self) -> Optional[np.ndarray]:
        """(layers, heads, n, n): the value-weighted attention ‖α^h_ij f^h(x_j)‖ =
        α^h_ij·‖f^h(x_j)‖, weights times value_norms over the keys (Kobayashi et al. 2020): how
        much head h moves from key j into query i, rather than how much it looks. None for a run
        without value norms."""
        return _stacked([self._e.value_weighted(l) for l in range(self.layers)])

    @cached_property
    def mixing(self) -> Optional[np.ndarray]:
        """(layers, n, n): the residual-and-norm mixing (Kobayashi et al. 2021, "Incorporating
        Residual and Normalization Layers into Analysis of Masked Language Models"): how much of
        token i's new vector after the layer's attention came from token j. Token j's part is
        c_ij = [i = j]·x_i + Σ_h α^h_ij f^h(x_j) (the residual belongs to i; a post-LN model's
        parts centred and scaled by the LayerNorm's gain, its biases given to no token); the
        entry is ‖c_ij‖ / Σ_k ‖c_ik‖, so each row sums to 1. None for a run longer than 512
        tokens (qkv keeps the Grams it is computed from only up to there)."""
        return _stacked([self._e.mixing(l) for l in range(self.layers)])

    @cached_property
    def _rollouts(self) -> Any:
        return self._e.rollouts()

    @cached_property
    def rollout(self) -> Optional[np.ndarray]:
        """(layers, n, n): attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow
        in Transformers"): Ã_l = ½·mean_h A_l + ½·I with its rows renormalised, R_0 = Ã_0 and
        R_l = Ã_l·R_{l−1}. Row i of rollout[l]: which input tokens token i's vector after layer
        l came from. None for a run longer than 512 tokens, or without value norms."""
        return _stacked(self._rollouts["rollout"] or [])

    @cached_property
    def mixing_rollout(self) -> Optional[np.ndarray]:
        """(layers, n, n): the same product over the layers' mixing matrices, R_l = M_l·R_{l−1}
        with no identity added (the mixing counts the residual already), as GlobEnc (Modarressi
        et al. 2022) takes it. None where mixing is None."""
        return _stacked(self._rollouts["mixing_rollout"] or [])

    @cached_property
    def sinks(self) -> List[Sink]:
        """The attention sinks, strongest first, each explained with its value norms (Sink);
        [] for a run without value norms."""
        return [Sink(**s) for s in self._e.sinks()]
