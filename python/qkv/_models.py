"""qkv.Model (a sentence encoder, sentence-transformers' way), qkv.CausalLM (a decoder LLM) and
qkv.Explanation (one text through a model with every attention layer captured, and its HTML
report). The models run in qkv's C++ (python/src/models.cpp, explain.cpp) without the GIL."""

import html as _html
import json
import math
import os
import warnings
from functools import cached_property
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._generation import ExplainedGeneration
from ._lens import CausalLens
from ._values import ValueArrays

from . import _checks, _qkv

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _kind(path: str) -> str:
    """The registry's word for what `path` holds (qkv/model.h): 'sentence_encoder', 'causal_lm',
    'seq2seq' or 'perceiver'; a GGUF file is known by its first bytes, as the command knows it (an
    Ollama blob has no .gguf name)."""
    return _qkv.model_kind(os.fsencode(path))


def _installed(path: str, kind: str) -> bool:
    """Whether `path` is a built-in name of the registry for an installed model of `kind`."""
    return _qkv.is_builtin_model(os.fsencode(path)) and _kind(path) == kind

PathLike = Union[str, "os.PathLike[str]"]


_text = _checks.text


def _shown(path: str) -> str:
    """A path as text to show: bytes that are not UTF-8 (surrogates, from os.fsdecode) as
    U+FFFD, so that a title made of it reaches the report."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _token(token, name: str = "token") -> str:
    """A token as `qkv explain --token` names it: its text ("it", "it:2"), or its index."""
    if isinstance(token, (int, np.integer)) and not isinstance(token, (bool, np.bool_)):
        return str(int(token))
    if not isinstance(token, str):
        raise TypeError(f"{name}: {type(token).__name__}; expected str (the token's text, "
                        "\"it:2\" for the second) or int (its index)")
    return _text(token, name)


def _positive(x, name: str, low: int = 1, high: Optional[int] = None) -> int:
    """x, an int of at least `low` (and at most `high`): _checks.integer with the range said."""
    if high is None:
        return _checks.integer(x, name, low, float("inf"), f"at least {low}")
    return _checks.integer(x, name, low, high, f"{low} to {high}")


# A count beyond any text or batch means "no limit": the same as the largest the C++ side takes.
_NO_LIMIT = 2**31 - 1


def _index(x, name: str, count: int) -> Optional[int]:
    """x, None or an int from 0 to count − 1, checked here, not only by the extension, whose
    int64 an int of any size would not fit (a multi-line signature dump)."""
    if x is None:
        return None
    n = _checks.integer(x, name, -math.inf, math.inf, "")
    if not 0 <= n < count:
        raise ValueError(f"{name} {n} is out of range; this model has {name}s 0–{count - 1}")
    return n


def _not_blank(text: str, name: str) -> str:
    if not text.strip():
        raise ValueError(f"{name} is empty; expected a sentence, e.g. \"I sat on the river bank\"")
    return text


class Model:
    """A sentence encoder: text → one unit-length vector, as sentence-transformers'
    SentenceTransformer("all-MiniLM-L6-v2") computes it (WordPiece tokens → BERT → mean over the
    tokens → unit length), in qkv's C++ on the CPU; and the attention behind it, explained.

    name_or_path: "all-MiniLM-L6-v2" (the default) is the model scripts/fetch_model installs in
    $QKV_HOME/models (QKV_HOME defaults to ~/.cache/qkv); anything else is a BERT-family model
    directory (config.json, model.safetensors, vocab.txt). max_length: tokens a text is cut to,
    [CLS] and [SEP] included (256, as sentence-transformers). BERT reads at most its positions
    (max_position_embeddings, 512 for all-MiniLM-L6-v2): a larger max_length becomes that, with a
    UserWarning; the max_length property says what applies. precision="bf16" (opt-in) rounds each
    dense layer's inputs and weights, and attention's q, k, v, to bfloat16 before float32 products
    (`qkv embed --precision bf16`); on the bundled sentences the embeddings stay within 1e-2
    cosine distance of fp32's. explain() is unaffected: it shows the model in float32.

    >>> import qkv
    >>> model = qkv.Model()
    >>> e = model.encode(["This is an example sentence", "Each sentence is converted"])
    >>> e.shape, e.dtype
    ((2, 384), dtype('float32'))
    >>> print(f"{e[0] @ e[1]:.2f}")      # cosine similarity: the vectors have unit length
    0.40
    >>> model.tokenize("Attention is all you need")
    ['[CLS]', 'attention', 'is', 'all', 'you', 'need', '[SEP]']
    """

    def __init__(self, name_or_path: PathLike = DEFAULT_MODEL, *, max_length: int = 256,
                 precision: str = "fp32"):
        path = _checks.path(name_or_path, "name_or_path")
        precision = _checks.choice(precision, "precision", ("fp32", "bf16"))
        # Room for [CLS] and [SEP]; the model's positions cut it further (a warning, below).
        asked = _positive(max_length, "max_length", 2)
        max_length = min(asked, _NO_LIMIT)
        if _installed(path, "causal_lm") or (os.path.exists(path) and
                                             _kind(path) == "causal_lm"):
            raise ValueError(f"{path} is a decoder LLM, not a sentence encoder; expected "
                             f"qkv.CausalLM({path!r})")
        if _installed(path, "sentence_encoder"):
            self.name = DEFAULT_MODEL
            path = _qkv.default_model_dir()
            if not os.path.isdir(path):
                raise FileNotFoundError(
                    f"the model {DEFAULT_MODEL} is not installed (looked in {path}); install it "
                    "with scripts/fetch_model from qkv's repository (part of scripts/bootstrap), "
                    "or pass a model directory: qkv.Model('path/to/model')")
        else:
            expected = (f"expected a BERT model directory (config.json, model.safetensors, "
                        f"vocab.txt), or {DEFAULT_MODEL!r} for the one scripts/fetch_model "
                        "installs")
            what = _checks.what_it_is(path)
            if what is None:
                raise FileNotFoundError(f"{path}: no such model directory; {expected}")
            if what != "is a directory":  # a file, a device, a FIFO: say which
                raise NotADirectoryError(f"{path}: {what or 'is a file'}; {expected}")
            self.name = _shown(os.path.basename(os.path.normpath(path)))
        self._folder = path  # as the file system names it (os.fsdecode's str)
        try:
            self._model = _qkv.SentenceModel(os.fsencode(path), max_length, precision)
        except (ValueError, RuntimeError) as e:
            if self.name != DEFAULT_MODEL:
                raise
            # As the command says it (cli/model_args.cpp): the installation is what failed.
            raise RuntimeError(f"{e}; the installed model is damaged: delete {path} and run "
                               "scripts/fetch_model") from None
        if asked > self.max_length:
            # BERT has a position embedding for each of its first max_position_embeddings tokens
            # and none beyond: a longer input cannot be read, so texts are cut to that many, and
            # the caller who asked for more hears it (sentence-transformers would fail on such a
            # text with an index error; transformers' tokenizer warns likewise).
            warnings.warn(f"max_length {asked} is more than the {self.max_length} positions of "
                          f"{self.name}; texts are cut to {self.max_length} tokens ([CLS] and "
                          "[SEP] included)", UserWarning, stacklevel=2)

    @property
    def path(self) -> str:
        """The model directory."""
        return self._model.dir

    @property
    def precision(self) -> str:
        """"fp32" or "bf16": the arithmetic of encode() (the constructor's precision)."""
        return self._model.precision

    @property
    def dim(self) -> int:
        """The embedding's size (384 for all-MiniLM-L6-v2)."""
        return self._model.hidden_size

    def get_sentence_embedding_dimension(self) -> int:
        """The embedding's size, under sentence-transformers' name for it."""
        return self.dim

    @property
    def max_length(self) -> int:
        """Tokens a text is cut to, [CLS] and [SEP] included."""
        return self._model.max_length

    @property
    def layers(self) -> int:
        return self._model.layers

    @property
    def heads(self) -> int:
        return self._model.heads

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    def __repr__(self) -> str:
        return (f"qkv.Model({self.name!r}: {self.layers} layers × {self.heads} heads, "
                f"dim {self.dim}, max_length {self.max_length}, {self.path})")

    def encode(self, sentences: Union[str, Sequence[str]], batch_size: int = 32, *,
               memory_limit: Optional[int] = None) -> np.ndarray:
        """Sentence embeddings, as sentence-transformers' encode: a list of n texts gives a
        float32 array (n, dim), one str a (dim,) vector; each row has unit length, so the dot
        product of two rows is their cosine similarity.

        Texts are sorted by length, longest first, and run batch_size at a time (padding stays
        small); batch_size changes the result only within float32 rounding. The work runs on
        qkv's threads ($QKV_NUM_THREADS) without the GIL, and stops on Ctrl-C between batches.
        memory_limit: bytes the work may take (default: half the machine's memory); past it,
        MemoryError before anything runs.

        >>> import qkv
        >>> qkv.Model().encode("This is an example sentence")[:3].round(4)
        array([0.0677, 0.0635, 0.0487], dtype=float32)
        """
        single = isinstance(sentences, str)
        if single:
            texts = [_text(sentences, "sentences")]
        elif isinstance(sentences, (bytes, bytearray)):
            raise TypeError(f"sentences: {type(sentences).__name__}; expected str or a list "
                            "of str (decode bytes first)")
        else:
            try:
                texts = list(sentences)
            except TypeError:
                raise TypeError(f"sentences: {type(sentences).__name__}; expected str or a "
                                "list of str") from None
            for i, t in enumerate(texts):
                _text(t, f"sentences[{i}]")
        batch_size = min(_positive(batch_size, "batch_size"), _NO_LIMIT)
        # A non-finite embedding is the library's RuntimeError (qkv/finite.h), as in `qkv embed`.
        e = self._model.encode(texts, batch_size, _checks.memory_limit(memory_limit))
        return e[0] if single else e

    def tokenize(self, text: str, text_b: Optional[str] = None) -> List[str]:
        """The tokens the model reads for `text` — [CLS] text [SEP], or the pair
        [CLS] text [SEP] text_b [SEP] — cut to max_length.

        >>> import qkv
        >>> qkv.Model().tokenize("unbelievable")
        ['[CLS]', 'unbelievable', '[SEP]']
        """
        pairs = self._model.tokenize(_text(text, "text"),
                                     None if text_b is None else _text(text_b, "text_b"))
        return [t for t, _ in pairs]

    def token_ids(self, text: str, text_b: Optional[str] = None) -> List[int]:
        """The vocabulary ids of tokenize(text, text_b)."""
        pairs = self._model.tokenize(_text(text, "text"),
                                     None if text_b is None else _text(text_b, "text_b"))
        return [i for _, i in pairs]

    def explain(self, text: str, text_b: Optional[str] = None, *,
                memory_limit: Optional[int] = None) -> "Explanation":
        """`text` through the model with every layer's attention captured (computed on the
        float64 reference path), as `qkv explain` shows it; with `text_b`, the pair
        [CLS] text [SEP] text_b [SEP] as BERT reads it (token types 0, then 1). memory_limit:
        bytes the capture may take (default: half the machine's memory); past it, MemoryError
        before it runs.

        >>> import qkv
        >>> x = qkv.Model().explain("The animal didn't cross the street because it was tired")
        >>> x.weights.shape                  # (layers, heads, tokens, tokens)
        (6, 12, 14, 14)
        >>> x.tokens[x.focus]                # the default focus: the first pronoun
        'it'
        """
        _not_blank(_text(text, "text"), "text")
        if text_b is not None:
            _not_blank(_text(text_b, "text_b"), "text_b")
        return _finite(Explanation(self._model.explain(text, text_b,
                                                       _checks.memory_limit(memory_limit)),
                                   self.name, _files_in(self._folder)))


class CausalLM:
    """A decoder-only language model from a GGUF file, its matrices kept as the file's blocks
    (weights="file", the default: about the file's size in memory) or dequantized at load
    (weights="float32"), the same bits either way wherever a pass runs in float32 (explain):
    "smollm2" (the default) is SmolLM2-135M-Instruct as scripts/fetch_model smollm2 installs it;
    anything else is a .gguf file of a llama (Llama 1-3.x, Mistral 7B, SmolLM), qwen2 (Qwen 2 /
    2.5), qwen3 or gemma3 model, or its name in Ollama ("llama3.2:1b"), LM Studio
    ("PUBLISHER/REPO") or the Hugging Face cache ("ORG/REPO[/FILE.gguf]"; `qkv models` lists
    them). (Its examples are not run as doctests: loading the model takes a second;
    python/tests/test_models.py runs the same.)

    >>> import qkv
    >>> lm = qkv.CausalLM()                                   # doctest: +SKIP
    >>> lm.generate("What is the capital of France?", max_tokens=8)   # doctest: +SKIP
    'The capital of France is Paris.'
    """

    def __init__(self, name_or_path: PathLike = "smollm2", *,
                 memory_limit: Optional[int] = None, weights: str = "file"):
        """memory_limit: bytes the model may take once loaded, as `weights` keeps them (default:
        half the machine's memory); past it, MemoryError before a weight is read. weights:
        "file" (the file's blocks: Q4_K, Q8_0, ...) or "float32" (dequantized at load)."""
        if weights not in ("file", "float32"):
            raise ValueError(f"weights={weights!r}; expected 'file' or 'float32'")
        path = _checks.path(name_or_path, "name_or_path")
        if _installed(path, "causal_lm"):
            path = _qkv.default_causal_lm_path()
            if not os.path.isfile(path):
                raise FileNotFoundError(
                    f"the model SmolLM2-135M-Instruct is not installed (looked for {path}); "
                    "install it with scripts/fetch_model smollm2 from qkv's repository")
            self.name = "SmolLM2-135M-Instruct"
        else:
            expected = ("expected a .gguf model file, or 'smollm2' for the one "
                        "scripts/fetch_model installs")
            shown = None
            if not os.path.lexists(path):  # a name Ollama, LM Studio or Hugging Face keeps it by
                shown = path
                path = os.fsdecode(_qkv.resolve_model(os.fsencode(path)))
            what = _checks.what_it_is(path)
            if what is None:
                raise FileNotFoundError(f"{path}: no such file; {expected}")
            if what == "is a directory":
                raise IsADirectoryError(f"{path}: is a directory; {expected}")
            if what:  # a device, a FIFO: never opened, which could block or read forever
                raise ValueError(f"{path}: {what}; {expected}")
            self.name = (_shown(shown) if shown is not None and path != shown else
                         _shown(os.path.splitext(os.path.basename(path))[0]))
        self._model = _qkv.CausalLM(os.fsencode(path), _checks.memory_limit(memory_limit),
                                    weights == "float32")

    @property
    def weights(self) -> str:
        """How the matrices are kept: "file" (the file's blocks) or "float32"."""
        return self._model.weights

    @property
    def matrix_types(self) -> str:
        """The ggml types of the matrices as the file stores them: "Q4_1 (210 matrices), ..."."""
        return self._model.matrix_types

    @property
    def path(self) -> str:
        return self._model.path

    def __repr__(self) -> str:
        return f"qkv.CausalLM({self.name!r}: {self.path})"

    def token_ids(self, text: str) -> List[int]:
        """The token ids of `text` (no BOS, as the model was trained)."""
        return self._model.tokenize(_text(text, "text"))

    def token_text(self, id: int) -> str:
        """The text token `id` stands for, a leading space included (" world"); a token that
        holds part of a UTF-8 character shows it as U+FFFD."""
        return self._model.token_bytes(_positive(id, "id", 0, _NO_LIMIT)).decode("utf-8",
                                                                                 "replace")

    def tokenize(self, text: str) -> List[str]:
        """The tokens of `text`, each as token_text gives it.

        >>> import qkv
        >>> qkv.CausalLM().tokenize("Hello world")              # doctest: +SKIP
        ['Hello', ' world']
        """
        return [self.token_text(i) for i in self.token_ids(text)]

    def generate(self, prompt: str, max_tokens: int = 64, *, temperature: float = 0.0,
                 seed: Optional[int] = None, chat: bool = True,
                 memory_limit: Optional[int] = None, decode: str = "int8") -> str:
        """The model's continuation of `prompt` (framed as one user message of its chat template
        when `chat`), up to max_tokens new tokens or the end of the text; greedy when
        temperature is 0, else sampled from softmax(logits / temperature) with `seed` (default 1;
        given with temperature 0, where nothing is drawn, it warns as `qkv generate` notes it).
        memory_limit: bytes the model and its KV cache may take (default: half the machine's
        memory); past it, MemoryError before the first token. decode: how each new token's pass
        multiplies matrices kept as blocks, "int8" (x rounded to 8 bits, as llama.cpp: fast) or
        "float32" (the bits of weights="float32")."""
        if decode not in ("int8", "float32"):
            raise ValueError(f"decode={decode!r}; expected 'int8' or 'float32'")
        prompt_ids, max_tokens, temperature, seed = self._generation(prompt, max_tokens,
                                                                     temperature, seed, chat)
        ids = self._model.generate(prompt_ids, max_tokens, temperature, seed,
                                   _checks.memory_limit(memory_limit), decode == "int8")
        return self._generated(prompt_ids, ids, max_tokens)

    def explain_generation(self, prompt: str, max_tokens: int = 16, *,
                           temperature: float = 0.0, seed: Optional[int] = None,
                           chat: bool = True, top_heads: int = 3, top_keys: int = 3,
                           memory_limit: Optional[int] = None) -> ExplainedGeneration:
        """generate(prompt, ...) explained token by token, as `qkv generate --explain --json`
        (chat=False is the command without --chat): the same tokens, and for each the top_heads
        heads that carried it (direct logit attribution at the last position), the top_keys keys
        their last query weighted most, and the KV cache after the pass that chose it.
        Each token costs two more passes over its whole prefix: fine for 64 tokens, slow for
        thousands. memory_limit: bytes the model, its cache and a step's capture may take.

        >>> import qkv
        >>> g = qkv.CausalLM().explain_generation("The capital of France is", 4,
        ...                                       chat=False)               # doctest: +SKIP
        >>> g.text, g.head_index[0, 0], g.cache_bytes                        # doctest: +SKIP
        (' Paris.', array([...]), array([...]))
        """
        prompt_ids, max_tokens, temperature, seed = self._generation(prompt, max_tokens,
                                                                     temperature, seed, chat)
        document = _qkv.explain_generation(
            self._model, prompt_ids, max_tokens, temperature, seed,
            _positive(top_heads, "top_heads", 1, _NO_LIMIT),
            _positive(top_keys, "top_keys", 1, _NO_LIMIT), _checks.memory_limit(memory_limit))
        ids = [t["id"] for t in json.loads(document)["steps"]]
        return ExplainedGeneration(document, self._generated(prompt_ids, ids, max_tokens))

    def _generation(self, prompt: str, max_tokens: int, temperature: float,
                    seed: Optional[int], chat: bool) -> Tuple[List[int], int, float, int]:
        """generate's arguments checked, in the ranges `qkv generate` takes (--max-tokens,
        --temperature): (the prompt's ids, framed by the chat template when `chat`, max_tokens,
        temperature, seed)."""
        _text(prompt, "prompt")
        max_tokens = _positive(max_tokens, "max_tokens", 1, 8192)
        temperature = _checks.number(temperature, "temperature")
        if not (0 <= temperature <= 100):
            raise ValueError(f"temperature {temperature}; expected a number in [0, 100]")
        text = self._model.chat_prompt(prompt) if _checks.flag(chat, "chat") else prompt
        if seed is not None and temperature == 0:
            warnings.warn("seed has no effect at temperature 0 (greedy: each step takes the "
                          "likeliest token); give a temperature above 0 to sample",
                          RuntimeWarning, stacklevel=3)
        return (self._model.tokenize(text), max_tokens, temperature,
                _positive(1 if seed is None else seed, "seed", 0, 2**64 - 1))

    def _generated(self, prompt_ids: List[int], ids: List[int], max_tokens: int) -> str:
        # A stop the caller did not choose is said, as `qkv generate` notes it (issue 26): the
        # prompt and the text filled the model's context.
        context = self._model.context_length
        if len(ids) < max_tokens and len(prompt_ids) + len(ids) >= context:
            warnings.warn(f"stopped after {len(ids)} of {max_tokens} tokens: the prompt "
                          f"({len(prompt_ids)} tokens) and the text generated fill the model's "
                          f"context of {context} positions", RuntimeWarning, stacklevel=3)
        # Control tokens (<|im_start|>, ...) are the model's markup, not text: nothing is shown.
        return self._model.generated_bytes(ids).decode("utf-8", "replace")

    def explain(self, text: str, *, target: Optional[str] = None, versus: Optional[str] = None,
                corrupt: Optional[str] = None, knockout: Optional[str] = None,
                memory_limit: Optional[int] = None) -> "Explanation":
        """`text` through the model with every layer's attention captured (causal; each shared
        key/value head repeated for the query heads that read it), and the next-token guess.
        memory_limit: bytes the capture may take (tokens² a layer and head; default: half the
        machine's memory); past it, MemoryError before it runs.

        The causal lens (`qkv explain --target`), when any of these is given: target, the token
        measured at the last position (one token, " Paris"; "" or None with another option: the
        model's most likely); versus, a token whose logit is subtracted; corrupt, a prompt of
        equal token length to patch into; knockout, edges "LAYER.HEAD:QUERY>KEY" (* for all)
        blocked. The result's .lens holds every head's ablation and attribution as arrays.

        >>> import qkv
        >>> x = qkv.CausalLM().explain("The capital of France is", target=" Paris")  # doctest: +SKIP
        >>> x.lens.top_heads("ablation", 1)                                         # doctest: +SKIP
        [(23, 4, -3.93...)]
        """
        request = _qkv.LensRequest()
        for name, value in (("target", target), ("versus", versus), ("corrupt", corrupt),
                            ("knockout", knockout)):
            if value is not None:
                setattr(request, name, _text(value, name))
        wanted = any(v is not None for v in (target, versus, corrupt, knockout))
        return _finite(Explanation(self._model.explain(_not_blank(_text(text, "text"), "text"),
                                                       _checks.memory_limit(memory_limit),
                                                       request, wanted),
                                   self.name, [self.path]))


def _finite(x: "Explanation") -> "Explanation":
    """x, if every number it captured is finite; else the RuntimeError `qkv explain` exits 1
    with (NaN weights were returned as a result, issue 26's last sweep): the library's one check
    of a run, explain::require_finite."""
    x._e.require_finite()
    return x


def _files_in(folder: str) -> List[str]:
    """The files of a model directory: what html() may not write over."""
    try:
        return [os.path.join(folder, f) for f in os.listdir(folder)]
    except OSError:
        return []


def _stacked(name: str, doc: str) -> cached_property:
    """An Explanation's array `name`: every layer's (heads, n, ·) capture stacked, once."""

    def get(self) -> np.ndarray:
        a = np.stack([self._e.layer(l)[name] for l in range(self.layers)])
        a.flags.writeable = False  # a record of what the model computed
        return a

    get.__doc__ = doc
    return cached_property(get)


class Explanation(ValueArrays):
    """One text through a model with every attention layer captured: what `qkv explain` shows.

    tokens: the n tokens (tokens[i] is query row i and key column j = i); token_info: each
    token's id, surface text, word index, segment (0: A, 1: B of a pair), special, punctuation.

    Arrays, one entry per layer and head, each of shape (layers, heads, n, ·), read-only:

        q, k, v     (…, n, head_dim)  the heads' queries, keys and values
        scores      (…, n, n)         q_i·k_j, before the scale
        logits      (…, n, n)         scale·scores (causal models: −∞ above the diagonal)
        weights     (…, n, n)         softmax(logits) over the keys: each row sums to 1
        head_out    (…, n, head_dim)  Σ_j weights_ij·v_j, each head's output before W_O

    So for any layer l and head h, weights[l, h] == softmax(q[l, h] @ k[l, h].T * scale).
    A decoder's k and v repeat each of its kv_heads shared heads for the heads that read it.
    hidden_states (layers + 1, n, dim): the embeddings, then each layer's output (encoders, and
    decoders on at most 512 tokens);
    embedding (dim,): the sentence embedding (encoders; Model.encode's vector).

    What the values carried (BERT and decoders; float64, read-only; qkv/_values.py):
        value_norms     (layers, heads, n)     ‖W_O^h v^h_j‖ (Kobayashi et al. 2020)
        value_weighted  (layers, heads, n, n)  weights · value_norms: ‖α^h_ij W_O^h v^h_j‖
        mixing          (layers, n, n)         residual-and-norm mixing (Kobayashi et al. 2021)
        rollout         (layers, n, n)         attention rollout (Abnar & Zuidema 2020)
        mixing_rollout  (layers, n, n)         the product of the layers' mixing
    and sinks, the attention sinks with their value norms (qkv.Sink).

    html() writes the self-contained report of `qkv explain --html`, json() is `--json`'s
    document and terminal() what `qkv explain` prints; in Jupyter the Explanation shows the
    report inline.
    """

    def __init__(self, explained: Any, title: str, model_files: Sequence[str] = ()):
        self._e = explained
        self.model = title
        self._model_files = list(model_files)  # html() may not write over them

    text = property(lambda self: self._e.text, doc="The text (A of a pair).")
    text_b = property(lambda self: self._e.text_b, doc="B of a pair, else None.")
    layers = property(lambda self: self._e.layers, doc="Attention layers.")
    heads = property(lambda self: self._e.heads, doc="Query heads per layer.")
    kv_heads = property(lambda self: self._e.kv_heads, doc="Key/value heads per layer.")
    head_dim = property(lambda self: self._e.head_dim, doc="Dimensions of a head's q, k, v.")
    scale = property(lambda self: self._e.scale, doc="The logits' scale, 1/√head_dim.")
    causal = property(lambda self: self._e.causal, doc="Whether a token sees only those before.")
    truncated = property(lambda self: self._e.truncated, doc="Tokens were cut to max_length.")

    @cached_property
    def token_info(self) -> List[Dict[str, Any]]:
        return self._e.tokens

    @cached_property
    def tokens(self) -> List[str]:
        return [t["text"] for t in self.token_info]

    @property
    def token_ids(self) -> List[int]:
        return [t["id"] for t in self.token_info]

    @cached_property
    def focus(self) -> int:
        """The token `qkv explain` looks from first: the first pronoun, else the last word."""
        return self._e.focus(None)

    def token_index(self, token: Union[str, int]) -> int:
        """The index of a token named as `qkv explain --token` names it: its text ("it", "it:2"
        for the second, "##ing"), or its index."""
        return self._e.focus(_token(token))

    q = _stacked("q", "Queries, (layers, heads, n, head_dim).")
    k = _stacked("k", "Keys, (layers, heads, n, head_dim).")
    v = _stacked("v", "Values, (layers, heads, n, head_dim).")
    scores = _stacked("scores", "q·k before the scale, (layers, heads, n, n).")
    logits = _stacked("logits", "scale·scores (+ the causal mask), (layers, heads, n, n).")
    weights = _stacked("weights", "softmax(logits) over the keys, (layers, heads, n, n).")
    head_out = _stacked("head_out", "weights·v per head, (layers, heads, n, head_dim).")

    @cached_property
    def hidden_states(self) -> Optional[np.ndarray]:
        first = self._e.embeddings
        if first is None:
            return None
        a = np.stack([first] + [self._e.layer(l)["hidden"] for l in range(self.layers)])
        a.flags.writeable = False
        return a

    @property
    def embedding(self) -> Optional[np.ndarray]:
        return self._e.embedding

    @property
    def next_tokens(self) -> List[Tuple[str, float]]:
        """A decoder's five most likely next tokens with their probabilities."""
        return self._e.next_tokens

    @cached_property
    def lens(self) -> Optional["CausalLens"]:
        """A decoder's causal lens (explain(text, target=...)): qkv.CausalLens, else None."""
        text = self._e.lens_json()
        if not text or '"lens"' not in text:
            return None
        return CausalLens(text)

    @property
    def induction(self) -> Optional[np.ndarray]:
        """A decoder's (layers, heads) induction scores (Olsson et al. 2022), else None."""
        return self._e.induction

    def __repr__(self) -> str:
        pair = "" if self.text_b is None else f" + {self.text_b!r}"
        return (f"<qkv.Explanation of {self.text!r}{pair}: {len(self.tokens)} tokens, "
                f"{self.layers} layers × {self.heads} heads ({self.model})>")

    def html(self, path: Optional[PathLike] = None, *, token: Union[str, int, None] = None,
             layer: Optional[int] = None, head: Optional[int] = None) -> Optional[str]:
        """The report of `qkv explain --html`: one self-contained HTML page (its style, script
        and data inline; it works offline) with every layer and head. token, layer and head pick
        what it shows first (as --token, --layer, --head); by default the focus token and the
        head `qkv explain` suggests. Returns the page when path is None; else writes it to
        path, all or nothing (a temporary file renamed into place), and returns None; a path
        that cannot be written (a directory, a full disk, /dev/full) raises an OSError naming
        it."""
        layer, head = _index(layer, "layer", self.layers), _index(head, "head", self.heads)
        destination = None if path is None else _checks.output_path(path, "path", prefix="")
        if destination is not None:
            # As `qkv explain --html` refuses an output that is a file of its --model: the report
            # written over vocab.txt or the .gguf destroyed the model it came from.
            for source in self._model_files:
                if os.path.exists(destination) and os.path.samefile(destination, source):
                    raise ValueError(f"path: {destination} is a file of the model this explains "
                                     f"({source}); expected a path other than the model's files")
        page = self._e.html(self.model, None if token is None else _token(token), layer, head)
        if destination is None:
            return page
        # As `qkv explain --html` writes it: a temporary beside it renamed into place, with the
        # permissions any new file gets; /dev/full and a FIFO written in place, never replaced.
        _checks.write_file(destination, page.encode("utf-8"), prefix="")
        return None

    def json(self, *, token: Union[str, int, None] = None, layer: Optional[int] = None) -> str:
        """The JSON document of `qkv explain --json`: the tokens and, per layer, every q, k, v,
        score, logit, weight, head output and hidden state (NaN as "NaN", ±∞ as "Infinity" and
        "-Infinity"); token picks the focus it names (as --token). layer (as --layer) keeps that
        layer alone, with what a recomputation of its values needs: w_o, mixing_gain (a post-LN
        model's LayerNorm gain, else null) and stream_in (the stream the layer reads)."""
        layer = _index(layer, "layer", self.layers)
        return self._e.json(None if token is None else _token(token), layer)

    def terminal(self, *, token: Union[str, int, None] = None, layer: Optional[int] = None,
                 head: Optional[int] = None, color: bool = False) -> str:
        """What `qkv explain` prints: the tokens, then where the focus token looks in every
        layer and head, or one head zoomed in with layer and head (both, as --layer and --head);
        a decoder's heads and next tokens. color: ANSI colours."""
        if (layer is None) != (head is None):
            raise ValueError("layer and head go together; expected both or neither")
        layer, head = _index(layer, "layer", self.layers), _index(head, "head", self.heads)
        return self._e.terminal(None if token is None else _token(token), layer, head,
                                bool(color))

    def _repr_html_(self) -> str:
        # The report is a whole HTML document with its own <style> and <script>. Put into the
        # notebook's page as it is, its CSS would restyle the notebook, its element ids would
        # clash with a second report's, and JupyterLab does not run scripts of untrusted output.
        # An iframe's srcdoc makes it a document of its own, still with no file and no server;
        # sandbox="allow-scripts" lets its script run but not reach the notebook.
        return (f'<iframe srcdoc="{_html.escape(self.html(), quote=True)}" '
                'sandbox="allow-scripts" style="width:100%;height:820px;border:none"></iframe>')
