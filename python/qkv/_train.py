"""qkv.train and qkv.experiment: `qkv train` and `qkv experiment` as functions that return their
results — a small encoder–decoder model (or the Perceiver) trained on a toy task, and design
questions about attention answered by training variants side by side. Training runs in qkv's C++
(python/src/train.cpp) without the GIL; a progress callable and Ctrl-C are heard every step."""

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

from . import _checks, _qkv


def tasks() -> Dict[str, str]:
    """The tasks qkv trains on, each with what it asks: the encoder–decoder models'
    (model="transformer" or "rnnsearch"), then the Perceiver's (model="perceiver").

    >>> import qkv
    >>> qkv.tasks()["reverse"]
    'reverse a sequence (lengths 8–16, 20 symbols)'
    >>> qkv.tasks()["count"].split(": ")[0], qkv.tasks()["count"].endswith("(model='perceiver')")
    ("count the '#' among 1,024 letters a–z", True)
    """
    return {t["name"]: t["description"] + ("" if "transformer" in t["models"] else
                                           f" (model={t['models'][0]!r})")
            for t in _qkv.tasks()}


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
    token_accuracy: float  # this step's target tokens predicted right (the Perceiver: inputs)
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
    tokens: int  # source + target tokens trained on (no padding; the Perceiver: input symbols)
    tokens_per_second: float
    history: List[Dict[str, float]]  # each evaluation: step, accuracy, loss, seconds
    mistakes: List[Dict[str, str]]  # a few wrong test outputs: source, target, output (seq2seq)
    config: Dict[str, Any]  # architecture, layers, heads, d_model, ...: the model's sizes
    seed: int
    path: Optional[str]  # where the model was saved, if it was
    chance: Optional[float] = None  # the Perceiver's: the best accuracy without reading the input


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
    text: str = field(default="", repr=False, compare=False)  # the library's experiment_text

    def __str__(self) -> str:
        """The result as `qkv experiment` prints it: the question, the setup, the table (first
        column left, the others right, by display width), the reading and the time."""
        return self.text


def _int(x, name: str) -> Optional[int]:
    """None, or x as an int (NumPy's too, never a bool): its range is the library's to check."""
    return None if x is None else _checks.integer(x, name, -2**63, 2**63 - 1, "a 64-bit integer")


def train(task: str = "reverse", *, model: str = "transformer", steps: Optional[int] = None,
          layers: Optional[int] = None, heads: Optional[int] = None, d_model: Optional[int] = None,
          batch_size: int = 64, lr: float = 1e-3,
          seed: int = 1, target: float = 0.99, eval_every: Optional[int] = None,
          test_examples: int = 1000, save: Union[str, "os.PathLike[str]", None] = None,
          progress: Optional[Callable[[TrainProgress], Any]] = None,
          memory_limit: Optional[int] = None, length: Optional[int] = None,
          latents: Optional[int] = None) -> TrainSummary:
    """Trains a small model on `task` (see qkv.tasks()) as `qkv train` does, and returns its
    TrainSummary.

    model="transformer": `layers` (default 2) encoder and as many decoder blocks, pre-norm,
    `heads` (default 4) heads of width d_model / heads, character embeddings, sinusoidal
    positions. model="rnnsearch": Bahdanau et al. 2014's bidirectional GRU encoder (d_model/2
    units a direction) and GRU decoder (d_model) with additive attention, whose query is the
    decoder state s_{i−1} and whose keys and values are the annotations h_j.
    model="perceiver" (Jaegle et al. 2021; its task is "count", which the other two do not
    train): `latents` (default 16) learned queries cross-attend to an input of `length`
    (default 1024) symbols, then `layers` (default 2; 0 to 64) latent self-attention blocks of
    `heads` heads; it classifies how many '#' the input holds. (length and latents are the
    Perceiver's alone.)

    Training: AdamW at peak `lr`
    with warmup and cosine decay, gradient clipping at 1, label smoothing 0.1, batch_size
    examples a step, for `steps` steps (default: the task's, qkv.tasks()), stopping
    early once a held-out evaluation (every eval_every steps; default min(100, steps / 10), the
    Perceiver's 100) shows accuracy − 2 standard errors ≥ target (> 1: never). The summary's
    test_accuracy is greedy decoding's exact-sequence accuracy (the Perceiver's: the right
    count's) on test_examples held-out examples (sources training never sees, whatever the
    seed). The same seed and thread count ($QKV_NUM_THREADS) give the same numbers. save: a
    .safetensors path for the model (`qkv explain --model PATH`), checked before training (an
    OSError when it cannot be written) and written all or nothing. progress: called with a
    TrainProgress after every step. memory_limit: bytes training may take (parameters, AdamW's
    moments, a batch's activations; default: half the machine's memory); past it, MemoryError
    before the model is made.

    >>> import qkv
    >>> s = qkv.train("copy", steps=40, layers=1, d_model=32, test_examples=50)
    >>> s.steps, len(s.history), s.config["d_model"]
    (40, 4, 32)
    """
    _checks.text(task, "task")
    _checks.text(model, "model")
    # Before minutes of training, not after: a directory, a missing or read-only folder.
    path = None if save is None else _checks.output_path(save, "save", prefix="save: ")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress: {type(progress).__name__}; expected a callable")
    hear = None if progress is None else (lambda p: progress(TrainProgress(**p)))
    # The library checks every value (its messages name these arguments) and holds the defaults.
    s = _qkv.train(task, model, _int(steps, "steps"), _int(layers, "layers"), _int(heads, "heads"),
                   _int(d_model, "d_model"), _int(length, "length"), _int(latents, "latents"),
                   _int(batch_size, "batch_size"), _checks.number(lr, "lr"),
                   _checks.integer(seed, "seed", 0, 2**64 - 1, "0 to 2^64 − 1"),
                   _checks.number(target, "target"), _int(eval_every, "eval_every"),
                   _int(test_examples, "test_examples"), b"" if path is None else os.fsencode(path),
                   hear, _checks.memory_limit(memory_limit))
    return TrainSummary(task=s["task"], steps=s["steps"], test_accuracy=s["test_accuracy"],
                        test_examples=s["test_examples"], final_loss=s["final_loss"],
                        reached_target=s["reached_target"], stopped_early=s["stopped_early"],
                        parameters=s["parameters"], seconds=s["wall_seconds"],
                        train_seconds=s["train_seconds"], tokens=s["tokens"],
                        tokens_per_second=s["tokens_per_second"], history=s["history"],
                        mistakes=s["mistakes"], config=s["config"], seed=seed, path=path,
                        chance=s["chance"])


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
                            reading=r["reading"], seconds=r["seconds"], text=r["text"])
