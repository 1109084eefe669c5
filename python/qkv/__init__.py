"""qkv: attention — queries, keys and values — exact, fast and explained, from Python.

    >>> import numpy as np, qkv
    >>> q = np.random.default_rng(0).standard_normal((8, 128, 64), dtype=np.float32)
    >>> out = qkv.attention(q, q, q, is_causal=True)   # PyTorch's SDPA conventions
    >>> out.shape
    (8, 128, 64)

qkv.attention and qkv.attention_backward take NumPy arrays (read in place, no copy) with
torch.nn.functional.scaled_dot_product_attention's arguments, and every classic score beside it.
qkv.Model encodes sentences as sentence-transformers does (all-MiniLM-L6-v2) and explains its
attention (Model.explain → Explanation: every layer's q, k, v and weights, and the HTML report);
qkv.CausalLM runs and explains a decoder LLM (SmolLM2). qkv.train and qkv.experiment train small
transformers on toy tasks and return their results. `python -m qkv` is the qkv command.
"""

from ._attention import AttentionGrads, SavedForward, attention, attention_backward
from ._generation import CarryingHead, ExplainedGeneration, GenerationStep, Look
from ._lens import CausalLens
from ._models import CausalLM, Explanation, Model
from ._values import Sink
from ._train import (ExperimentResult, TrainProgress, TrainSummary, experiment,
                     experiment_names, tasks, train)

__version__ = "0.1.0"
__all__ = ["attention", "attention_backward", "AttentionGrads", "SavedForward", "Model",
           "CausalLM", "CausalLens", "Explanation", "train", "TrainSummary", "TrainProgress", "tasks",
           "experiment", "ExperimentResult", "experiment_names", "Sink", "ExplainedGeneration",
           "GenerationStep", "CarryingHead", "Look"]
