"""qkv.train and qkv.experiment: `qkv train` and `qkv experiment` as functions that return their
results — a small encoder–decoder transformer trained on a toy task, and design questions about
attention answered by training variants side by side. Training runs in qkv's C++
(python/src/train.cpp) without the GIL; a progress callable and Ctrl-C are heard every step."""

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

from . import _checks, _qkv

# `qkv train`'s defaults (cli/train.cpp), which reach the tasks' targets on a 2-core machine.
_DEFAULT_STEPS = {"dates": 6000, "lookup": 6000}  # the others: 4000


def tasks() -> Dict[str, str]:
    """The tasks qkv trains on, each with what it asks.

    >>> import qkv
    >>> qkv.tasks()["reverse"]
    'reverse a sequence (lengths 8–16, 20 symbols)'
    """
    return {name: _qkv.task_description(name) for name in _qkv.task_names()}


def experiment_names() -> List[str]:
    """The experiments qkv.experiment runs.

    >>> import qkv
    >>> qkv.experiment_names()
    ['tie-qk', 'no-wv', 'scale', 'heads', 'scores']
    """
    return list(_qkv.experiment_names())


class TrainProgress(NamedTuple):
    """What qkv.train's progress callable hears after every step."""
    step: int  # steps done
    steps: int  # steps at most
    loss: float  # this step's mean cross-entropy (label smoothing 0.1)
    token_accuracy: float  # this step's target tokens predicted right (argmax)
    eval_accuracy: Optional[float]  # the latest held-out exact-sequence accuracy, if any yet
    seconds: float  # since training began
    evaluated: bool  # a held-out evaluation ran after this step


@dataclass(frozen=True)
class TrainSummary:
    """What qkv.train returns: `qkv train --json`'s summary."""
    task: str
    steps: int  # steps run (fewer than asked when it stopped early)
    test_accuracy: float  # exact-sequence accuracy of greedy decoding on held-out examples
    test_examples: int
    final_loss: float  # mean training loss since the last evaluation
    reached_target: Optional[int]  # the first step whose evaluation reached the target
    stopped_early: bool  # an evaluation showed the target beyond doubt
    parameters: int
    seconds: float  # wall time: steps, evaluations and the final test
    train_seconds: float  # the training steps alone
    tokens: int  # source + target tokens trained on (no padding)
    tokens_per_second: float
    history: List[Dict[str, float]]  # each evaluation: step, accuracy, loss, seconds
    mistakes: List[Dict[str, str]]  # a few wrong test outputs: source, target, output
    config: Dict[str, int]  # layers, heads, d_model, ffn_hidden, vocab
    seed: int
    path: Optional[str]  # where the model was saved, if it was


@dataclass(frozen=True)
class ExperimentResult:
    """What qkv.experiment returns: `qkv experiment --json`'s table and its reading."""
    name: str
    question: str
    setup: str
    columns: List[str]
    rows: List[Dict[str, str]]  # one dict per row: column → the cell, formatted ("97.3%")
    reading: str  # what the table says
    seconds: float

    def __str__(self) -> str:
        """The table as `qkv experiment` prints it: first column left, the others right."""
        cells = [self.columns] + [[r.get(c, "") for c in self.columns] for r in self.rows]
        widths = [max(len(row[c]) for row in cells) for c in range(len(self.columns))]
        lines = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                           for c, (cell, w) in enumerate(zip(row, widths))) for row in cells]
        return "\n".join([self.question, "", *lines, "", self.reading])


_int, _number = _checks.integer, _checks.number


def train(task: str = "reverse", *, model: str = "transformer", steps: Optional[int] = None,
          layers: Optional[int] = None, heads: Optional[int] = None, d_model: int = 64,
          batch_size: int = 64, lr: float = 1e-3,
          seed: int = 1, target: float = 0.99, eval_every: Optional[int] = None,
          test_examples: int = 1000, save: Union[str, "os.PathLike[str]", None] = None,
          progress: Optional[Callable[[TrainProgress], Any]] = None,
          memory_limit: Optional[int] = None) -> TrainSummary:
    """Trains a small encoder–decoder transformer on `task` (see qkv.tasks()) as `qkv train`
    does, and returns its TrainSummary.

    model="transformer": `layers` (default 2) encoder and as many decoder blocks, pre-norm,
    `heads` (default 4) heads of width d_model / heads, character embeddings, sinusoidal
    positions. model="rnnsearch": Bahdanau et al. 2014's bidirectional GRU encoder (d_model/2
    units a direction) and GRU decoder (d_model) with additive attention, whose query is the
    decoder state s_{i−1} and whose keys and values are the annotations h_j. Training: AdamW at peak `lr`
    with warmup and cosine decay, gradient clipping at 1, label smoothing 0.1, batch_size
    examples a step, for `steps` steps (default 4000; dates and lookup 6000), stopping early
    once a held-out evaluation (every eval_every steps; default min(100, steps / 10)) shows
    accuracy − 2 standard errors ≥ target (> 1: never). The summary's test_accuracy is greedy
    decoding's exact-sequence accuracy on test_examples held-out examples (sources training
    never sees, whatever the seed). The same seed and thread count ($QKV_NUM_THREADS) give the
    same numbers. save: a .safetensors path for the model (`qkv explain --model PATH`), checked
    before training (an OSError when it cannot be written) and written all or nothing.
    progress: called with a TrainProgress after every step. memory_limit: bytes training may
    take (parameters, AdamW's moments, a batch's activations; default: half the machine's
    memory); past it, MemoryError before the model is made.

    >>> import qkv
    >>> s = qkv.train("copy", steps=40, layers=1, d_model=32, test_examples=50)
    >>> s.steps, len(s.history), s.config["d_model"]
    (40, 4, 32)
    """
    if not isinstance(task, str):
        raise TypeError(f"task: {type(task).__name__}; expected str, one of "
                        f"{', '.join(_qkv.task_names())}")
    if _checks.text(task, "task") not in _qkv.task_names():
        _qkv.task_description(task)  # qkv's ValueError: "unknown task 'x'; expected one of ..."
    steps = _int(_DEFAULT_STEPS.get(task, 4000) if steps is None else steps, "steps", 1,
                 10**8, "1 to 10^8")
    if not isinstance(model, str):
        raise TypeError(f"model: {type(model).__name__}; expected str, 'transformer' or "
                        "'rnnsearch'")
    if model not in ("transformer", "rnnsearch"):
        raise ValueError(f"model {model!r} is not a model qkv trains; expected 'transformer' or "
                         "'rnnsearch'")
    d_model = _int(d_model, "d_model", 1, 4096, "1 to 4096")
    if model == "rnnsearch":
        for name, value in (("layers", layers), ("heads", heads)):
            if value is not None:
                raise ValueError(f"{name} does not apply to model='rnnsearch' (one bidirectional "
                                 "GRU encoder, one GRU decoder, one additive attention); expected "
                                 "only d_model to size it")
        if d_model % 2:
            raise ValueError(f"d_model {d_model} is odd; expected an even width (rnnsearch's "
                             "annotations are d_model/2 a direction)")
    layers = _int(2 if layers is None else layers, "layers", 1, 64, "1 to 64")
    heads = _int(4 if heads is None else heads, "heads", 1, 256, "1 to 256")
    if model == "rnnsearch":
        layers = heads = 1
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}; expected "
                         f"d_model = heads · d_k, e.g. d_model={(d_model // heads + 1) * heads}")
    batch_size = _int(batch_size, "batch_size", 1, 65536, "1 to 65536")
    lr = _number(lr, "lr")
    if not 0 < lr < 10:
        raise ValueError(f"lr {lr:g} is out of range; expected 0 < lr < 10")
    seed = _int(seed, "seed", 0, 2**64 - 1, "0 to 2^64 − 1")
    target = _number(target, "target")
    if not (math.isfinite(target) and 0 <= target <= 10):
        raise ValueError(f"target {target:g} is out of range; expected 0 to 10 (> 1: never stop "
                         "early)")
    eval_every = 0 if eval_every is None else _int(eval_every, "eval_every", 1, 10**8,
                                                   "1 to 10^8")
    test_examples = _int(test_examples, "test_examples", 0, 10**6, "0 to 10^6")
    # Before minutes of training, not after: a directory, a missing or read-only folder.
    path = None if save is None else _checks.output_path(save, "save", prefix="save: ")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: {type(progress).__name__}; expected a callable")
    hear = None if progress is None else (lambda p: progress(TrainProgress(**p)))
    limit = 0 if memory_limit is None else _int(memory_limit, "memory_limit", 1, 2**62,
                                                "1 to 2^62 bytes")
    s = _qkv.train(task, model, steps, layers, heads, d_model, batch_size, lr, seed, target,
                   eval_every, test_examples, b"" if path is None else os.fsencode(path), hear,
                   limit)
    return TrainSummary(task=s["task"], steps=s["steps"], test_accuracy=s["test_accuracy"],
                        test_examples=s["test_examples"], final_loss=s["final_loss"],
                        reached_target=s["reached_target"], stopped_early=s["stopped_early"],
                        parameters=s["parameters"], seconds=s["wall_seconds"],
                        train_seconds=s["train_seconds"], tokens=s["tokens"],
                        tokens_per_second=s["tokens_per_second"], history=s["history"],
                        mistakes=s["mistakes"], config=s["config"], seed=seed, path=path)


def experiment(name: str, *, quick: bool = False,
               progress: Optional[Callable[[str], Any]] = None) -> ExperimentResult:
    """Runs `qkv experiment NAME`: small models trained side by side with fixed seeds, one per
    variant of attention, and returns the table. The experiments (qkv.experiment_names()):

        tie-qk   W_Q = W_K (a symmetric QKᵀ) against separate projections, on reverse and
                 on follow (a previous-token relation)
        no-wv    identity W_V and no W_O against learned ones
        scale    softmax(QKᵀ/√d_k) against softmax(QKᵀ) as d_k grows
        heads    1, 2, 4, 8 heads at the same d_model
        scores   scaled-dot, additive, general, laplace, cosine on one task

    quick: shorter sequences, fewer steps and fewer variants (a few minutes); each quick run
    reads the same direction as its full run (tests/golden/experiments), and "·" marks what it
    left untrained. progress: called with a line naming each training run as it starts.

    (The doctest skips this example, which trains for seconds; python/tests/test_models.py runs
    the same.)

    >>> import qkv
    >>> r = qkv.experiment("tie-qk", quick=True)        # doctest: +SKIP
    >>> r.columns                                      # doctest: +SKIP
    ['task', 'projections', 'test accuracy', 'steps to 99%', 'weight on i−1 / i+1', 'seconds']
    >>> [row["test accuracy"] for row in r.rows]       # doctest: +SKIP
    ['74.3%', '27.7%', '72.7%', '99.7%']
    """
    if not isinstance(name, str):
        raise TypeError(f"name: {type(name).__name__}; expected str, one of "
                        f"{', '.join(_qkv.experiment_names())}")
    _checks.text(name, "name")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: {type(progress).__name__}; expected a callable")
    r = _qkv.experiment(name, _checks.flag(quick, "quick"), progress)
    return ExperimentResult(name=r["name"], question=r["question"], setup=r["setup"],
                            columns=list(r["columns"]),
                            rows=[dict(zip(r["columns"], row)) for row in r["rows"]],
                            reading=r["reading"], seconds=r["seconds"])
