"""qkv.Model, Explanation, qkv.train and qkv.experiment: encode against transformers' float64
goldens (tests/golden/minilm, the bound of tests/models/bert_test.cpp), the tokenizer against
BertTokenizer's tokens, explain's arrays against the attention formula computed here in NumPy,
the HTML report, training's summary and its reproducibility, a quick experiment, and bad inputs
as one-line exceptions. all-MiniLM-L6-v2 must be installed (scripts/fetch_model), as for the C++
model tests: a missing model fails here, it is not skipped."""

import html
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import qkv
import tiny_gguf
from conftest import SOURCE_DIR, python_runs_during

GOLDEN = os.path.join(SOURCE_DIR, "tests", "golden", "minilm")


def golden_json(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def model():
    return qkv.Model()


@pytest.fixture(scope="module")
def texts():
    return golden_json("texts.json")


def one_line(e):
    message = str(e.value)
    assert message and "\n" not in message, repr(message)
    return message


# ---- encode ---------------------------------------------------------------------------------

# tests/models/bert_test.cpp's bound for the float32 encoder against transformers' float64 run,
# per text: cosine ≥ 0.99999 and max |difference| ≤ 1e-5 (the worst text measures 2.6e-7 and
# 1.9e-6 there; float32 rounding through 6 layers, far below a wrong weight or index).
def embeddings_mismatch(got, golden):
    """'' when every row of `got` is within the bound of its golden row, else what is not."""
    if got.shape != golden.shape:
        return f"shape {got.shape}, expected {golden.shape}"
    for i, (x, y) in enumerate(zip(got.astype(np.float64), golden)):
        cos = x @ y / (np.linalg.norm(x) * np.linalg.norm(y))
        diff = np.abs(x - y).max()
        if not (cos >= 0.99999 and diff <= 1e-5):
            return f"text {i}: cosine {cos:.8f}, max |diff| {diff:.3g}"
    return ""


def test_encode_matches_the_transformers_float64_goldens(model, texts):
    golden = np.load(os.path.join(GOLDEN, "embeddings_f64.npy"))
    e = model.encode(texts)
    assert e.dtype == np.float32 and e.shape == (55, 384)
    assert embeddings_mismatch(e, golden) == ""


def test_the_golden_check_rejects_a_nudged_value(model, texts):
    golden = np.load(os.path.join(GOLDEN, "embeddings_f64.npy"))
    e = model.encode(texts[:4])
    assert embeddings_mismatch(e, golden[:4]) == ""
    nudged = e.copy()
    nudged[2, 100] = golden[2, 100] + 1.5e-5  # 1.5× the bound, one value of one text
    assert embeddings_mismatch(nudged, golden[:4]).startswith("text 2:")
    assert embeddings_mismatch(e[:3], golden[:4]).startswith("shape")


def test_encode_gives_the_published_values(model):
    # sentence-transformers/all-MiniLM-L6-v2's model card example, as bert_test.cpp checks it.
    e = model.encode("This is an example sentence")
    np.testing.assert_allclose(e[:3], [0.06765693, 0.06349593, 0.04871314], rtol=0, atol=2e-7)


def test_a_str_gives_a_vector_and_a_list_a_matrix_of_unit_rows(model, texts):
    one = model.encode(texts[1])
    assert one.shape == (384,) and one.dtype == np.float32
    rows = model.encode(texts[:6])
    assert rows.shape == (6, 384)
    # The same text alone in its batch either way: the same bits.
    np.testing.assert_array_equal(one, model.encode([texts[1]])[0])
    # Unit length: each of 384 entries rounded to float32 (relative 2^-24) moves the norm by at
    # most 2^-24 relative; 1e-6 leaves room for the normalization's own rounding.
    norms = np.linalg.norm(rows.astype(np.float64), axis=1)
    assert np.abs(norms - 1).max() <= 1e-6, norms
    assert model.encode([]).shape == (0, 384)
    assert model.encode(("a", "b")).shape == (2, 384)  # any sequence of str


def test_batch_size_changes_results_only_by_float_rounding(model, texts):
    a = model.encode(texts[:20], batch_size=32)  # one batch padded to the longest text
    b = model.encode(texts[:20], batch_size=1)  # no padding at all
    c = model.encode(texts[:20], batch_size=7)
    # Padding may change the GEMMs' shapes and so their summation order, nothing else (measured:
    # no change at all on AVX2). Against the float64 goldens the rows are ~1.4e-7 off, float32
    # rounding through 6 layers; another order may move them as much again: 1e-6 allows 7×.
    assert np.abs(a - b).max() <= 1e-6
    assert np.abs(a - c).max() <= 1e-6
    # Each row is where its text was, whatever order the batches ran in.
    np.testing.assert_array_equal(b[5], model.encode(texts[5]))


def test_encode_rejects_what_is_not_text(model):
    with pytest.raises(TypeError) as e:
        model.encode(["fine", 3])
    assert one_line(e) == "sentences[1]: int; expected str"
    with pytest.raises(TypeError) as e:
        model.encode(b"bytes")
    assert "decode bytes first" in one_line(e)
    with pytest.raises(TypeError) as e:
        model.encode(42)
    assert one_line(e) == "sentences: int; expected str or a list of str"
    with pytest.raises(ValueError) as e:
        model.encode("x", batch_size=0)
    assert one_line(e) == "batch_size 0 is out of range; expected at least 1"
    with pytest.raises(TypeError) as e:
        model.encode("x", batch_size=2.5)
    assert one_line(e) == "batch_size: float; expected an int"


def test_the_gil_is_released_while_encoding(model, texts):
    """As test_attention.py's GIL test: a second thread keeps counting while encode runs."""
    batch = texts[:20] * 2  # about 0.3 s
    notes, seconds = python_runs_during(lambda: model.encode(batch))
    assert seconds > 0.03, f"encode took {seconds:.3f} s: too short to tell"
    assert notes >= 10, f"{notes} notes in a call of {seconds:.3f} s"


# ---- the model and its tokenizer --------------------------------------------------------------

def test_tokenize_matches_berts_tokenizer_on_every_golden_text(model):
    for t in golden_json("tokens.json"):
        assert model.tokenize(t["text"]) == t["tokens"], t["text"]
        assert model.token_ids(t["text"]) == t["ids"], t["text"]


def test_a_pair_is_read_as_cls_a_sep_b_sep(model):
    assert model.tokenize("I sat", "on the bank") == \
        ["[CLS]", "i", "sat", "[SEP]", "on", "the", "bank", "[SEP]"]


def test_properties_and_repr(model):
    assert (model.dim, model.layers, model.heads, model.max_length, model.vocab_size) == \
        (384, 6, 12, 256, 30522)
    assert model.get_sentence_embedding_dimension() == 384
    assert model.name == "all-MiniLM-L6-v2"
    assert repr(model).startswith("qkv.Model('all-MiniLM-L6-v2': 6 layers × 12 heads, dim 384")
    short = qkv.Model(model.path, max_length=8)  # a directory works as well as the name
    assert short.name == "all-MiniLM-L6-v2" and short.max_length == 8
    assert len(short.tokenize("a b c d e f g h i j")) == 8
    # Beyond the model's 512 positions, texts are cut to those (no error, no overflow), as a
    # warning says.
    with pytest.warns(UserWarning, match="max_length 1208925819614629174706176 is more than the "
                                         "512 positions"):
        assert qkv.Model(max_length=2**80).max_length == 512


def test_a_missing_model_says_how_to_get_it(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError) as e:
        qkv.Model(tmp_path / "nowhere")
    assert one_line(e).startswith(f"{tmp_path / 'nowhere'}: no such model directory; expected")
    monkeypatch.setenv("QKV_HOME", str(tmp_path))  # where the default model is looked for
    with pytest.raises(FileNotFoundError) as e:
        qkv.Model()
    assert "is not installed" in one_line(e) and "scripts/fetch_model" in str(e.value)
    damaged = tmp_path / "models" / "all-MiniLM-L6-v2"
    damaged.mkdir(parents=True)
    (damaged / "config.json").write_text("{}")  # an installation that stopped half way
    with pytest.raises(RuntimeError) as e:
        qkv.Model()
    assert one_line(e).startswith(f"{damaged} has no model.safetensors; expected")
    assert str(e.value).endswith(f"; the installed model is damaged: delete {damaged} and run "
                                 "scripts/fetch_model")
    with pytest.raises(RuntimeError) as e:
        qkv.Model(tmp_path)  # a directory, but not a model's
    assert one_line(e) == f"{tmp_path} has no config.json; expected a BERT model directory " \
                          "(config.json, model.safetensors, vocab.txt)"
    with pytest.raises(ValueError) as e:
        qkv.Model("smollm2")
    assert "qkv.CausalLM('smollm2')" in one_line(e)
    with pytest.raises(TypeError):
        qkv.Model(42)
    with pytest.raises(ValueError) as e:
        qkv.Model(max_length=1)
    assert one_line(e) == "max_length 1 is out of range; expected at least 2"


def test_a_gguf_file_is_known_by_its_first_bytes_not_its_name(tmp_path):
    # An Ollama blob: a GGUF file named by its hash. It was taken for a missing model directory.
    blob = tmp_path / "sha256-6a0746a1ec1a"
    blob.write_bytes(b"GGUF" + bytes(20))
    with pytest.raises(ValueError) as e:
        qkv.Model(blob)
    assert one_line(e) == (f"{blob} is a decoder LLM, not a sentence encoder; expected "
                           f"qkv.CausalLM({str(blob)!r})")
    # A FIFO is not opened to read its magic (it would block): it is no model directory.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotADirectoryError) as e:
        qkv.Model(fifo)
    assert one_line(e).startswith(f"{fifo}: is a FIFO (named pipe); expected a BERT model")

# ---- explain --------------------------------------------------------------------------------

ANIMAL = "The animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def animal(model):
    return model.explain(ANIMAL)


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def test_explain_tokens_and_shapes(model, animal):
    x = animal
    n = len(x.tokens)
    assert x.tokens == model.tokenize(ANIMAL) and n == 15  # didn ' t
    assert x.token_ids == model.token_ids(ANIMAL)
    assert (x.layers, x.heads, x.head_dim, x.kv_heads) == (6, 12, 32, 12)
    assert x.scale == 1 / np.sqrt(32)
    for name in ("q", "k", "v", "head_out"):
        assert getattr(x, name).shape == (6, 12, n, 32), name
    for name in ("scores", "logits", "weights"):
        assert getattr(x, name).shape == (6, 12, n, n), name
    assert x.hidden_states.shape == (7, n, 384) and x.embedding.shape == (384,)
    assert x.tokens[x.focus] == "it" and x.token_index("street") == 8
    assert not x.causal and x.text_b is None and not x.truncated
    assert x.token_info[3] == {"text": "didn", "surface": "didn", "id": 2134, "word": 2,
                               "segment": 0, "special": False, "punctuation": False}
    assert repr(x) == f"<qkv.Explanation of {ANIMAL!r}: 15 tokens, 6 layers × 12 heads " \
                      "(all-MiniLM-L6-v2)>"
    with pytest.raises(ValueError):
        x.weights[0, 0, 0, 0] = 1  # read-only: a record of the run


def test_explain_weights_are_the_softmax_of_q_k(animal):
    x = animal
    # Each stored weight is the float64 reference's softmax rounded once to float32 (relative
    # 2^-24); recomputed here in float64 from the same float32 q and k, the two differ by that
    # rounding and float64 noise: 2^-23 relative (one float32 ulp) bounds it.
    q, k = x.q.astype(np.float64), x.k.astype(np.float64)
    ref = softmax(q @ k.swapaxes(-1, -2) * x.scale)
    assert np.all(np.abs(x.weights - ref) <= 2.0**-23 * ref + 1e-30)
    # So is one head taken alone, and the scores are q·k before the scale.
    np.testing.assert_allclose(x.weights[3, 7], softmax(q[3, 7] @ k[3, 7].T / np.sqrt(32)),
                               rtol=2.0**-23, atol=0)
    # (A float32 rounding of each, plus float64's own error of a 32-term dot product where the
    # score nearly cancels.)
    dot = q @ k.swapaxes(-1, -2)
    noise = 1e-12 * (abs(q) @ abs(k).swapaxes(-1, -2))
    assert np.all(np.abs(x.scores - dot) <= 2.0**-24 * np.abs(dot) + noise)
    # Rows sum to 1: n = 15 float32 terms, each off by 2^-24 relative.
    assert np.abs(x.weights.astype(np.float64).sum(-1) - 1).max() <= 15 * 2.0**-24
    # head_out is weights·v: the float64 sum rounded to float32 (2^-24 of it), from weights
    # that are themselves 2^-24 off the float64 ones: 2^-23 of Σ|w||v| bounds the difference.
    w, v = x.weights.astype(np.float64), x.v.astype(np.float64)
    assert np.all(np.abs(x.head_out - w @ v) <= 2.0**-23 * (abs(w) @ abs(v)))
    # A wrong head, or the weights without their scale, fails the same check.
    assert not np.allclose(x.weights[3, 7], softmax(q[3, 8] @ k[3, 8].T / np.sqrt(32)))
    assert not np.allclose(x.weights[3, 7], softmax(q[3, 7] @ k[3, 7].T))


def test_explain_matches_transformers_attention_goldens(model, texts):
    # tests/golden/minilm/attentions_1.npy: text 1's eager attention, float64, stored as float32;
    # bert_test.cpp's bound for the capture run against it.
    golden = np.load(os.path.join(GOLDEN, "attentions_1.npy"))
    x = model.explain(texts[1])
    assert golden.shape == x.weights.shape
    assert np.abs(x.weights - golden).max() <= 1e-5
    hidden = np.load(os.path.join(GOLDEN, "hidden_1.npy"))
    assert np.abs(x.hidden_states - hidden).max() <= 1e-5
    # The capture's embedding is encode's (float64 attention there, float32 here).
    assert np.abs(x.embedding - model.encode(texts[1])).max() <= 1e-5


def test_explain_a_pair(model):
    x = model.explain("The dog sat on the river bank.", "It was muddy.")
    assert x.tokens == model.tokenize("The dog sat on the river bank.", "It was muddy.")
    assert x.text_b == "It was muddy."
    assert [t["segment"] for t in x.token_info] == [0] * 10 + [1] * 5
    assert x.tokens[x.focus] == "it"  # the first pronoun, of B here
    assert "+ 'It was muddy.'" in repr(x)


def test_html_writes_the_report_of_qkv_explain(model, tmp_path):
    x = model.explain("I sat on the river bank")
    path = tmp_path / "bank.html"
    assert x.html(path, token="bank", layer=2, head=5) is None
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "river bank" in page
    assert page == x.html(token="bank", layer=2, head=5)
    assert os.listdir(tmp_path) == ["bank.html"]  # no temporary left beside it
    (tmp_path / "plain").write_text("")  # the permissions any new file gets (the umask's)
    assert path.stat().st_mode == (tmp_path / "plain").stat().st_mode
    os.unlink(tmp_path / "plain")
    # Offline: tests/explain/html_test.cpp's checks for network references.
    for reference in ("http", " src=", "<link", "@import", "url("):
        assert reference not in page, reference
    # The same page as the command writes.
    out = tmp_path / "cli.html"
    r = subprocess.run([sys.executable, "-m", "qkv", "explain", "I sat on the river bank",
                        "--token", "bank", "--layer", "2", "--head", "5", "--html", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == page


def test_repr_html_is_the_report_in_an_iframe(model):
    x = model.explain("I sat on the river bank")
    shown = x._repr_html_()
    assert shown.startswith('<iframe srcdoc="') and shown.endswith("></iframe>")
    srcdoc = shown[len('<iframe srcdoc="'):shown.index('" sandbox=')]
    assert '"' not in srcdoc and "<" not in srcdoc  # escaped: the attribute cannot end early
    assert html.unescape(srcdoc) == x.html()


def test_explain_rejects_bad_input(model, animal):
    with pytest.raises(TypeError) as e:
        model.explain(["a list"])
    assert one_line(e) == "text: list; expected str"
    with pytest.raises(ValueError) as e:
        model.explain("   ")
    assert one_line(e).startswith("text is empty; expected a sentence")
    with pytest.raises(ValueError) as e:
        animal.html(layer=6)
    assert one_line(e) == "layer 6 is out of range; this model has layers 0–5"
    with pytest.raises(ValueError) as e:
        animal.html(head=12)
    assert one_line(e) == "head 12 is out of range; this model has heads 0–11"
    with pytest.raises(FileNotFoundError) as e:
        animal.html("/nonexistent-folder/x.html")
    assert one_line(e) == "/nonexistent-folder/x.html: the folder /nonexistent-folder does " \
                          "not exist; expected a path in an existing folder"
    with pytest.raises(ValueError) as e:
        animal.html(token="zebra")
    assert one_line(e).startswith("token 'zebra' is not a token of the text; expected one of: ")


# ---- train ----------------------------------------------------------------------------------

TINY = dict(steps=30, layers=1, heads=2, d_model=16, batch_size=16, eval_every=10,
            test_examples=50, target=2)


def test_train_returns_a_summary_and_a_seed_reproduces_it():
    heard = []
    s = qkv.train("copy", seed=3, progress=heard.append, **TINY)
    assert isinstance(s, qkv.TrainSummary)
    assert (s.task, s.steps, s.test_examples, s.seed, s.path) == ("copy", 30, 50, 3, None)
    assert [h["step"] for h in s.history] == [10, 20, 30]
    assert all(0 <= h["accuracy"] <= 1 and h["loss"] > 0 for h in s.history)
    assert 0 <= s.test_accuracy <= 1 and not s.stopped_early and s.reached_target is None
    assert s.config == {"architecture": "transformer", "layers": 1, "heads": 2, "d_model": 16,
                        "ffn_hidden": 64, "vocab": 23}
    assert s.parameters > 0 and s.tokens > 0 and 0 < s.train_seconds <= s.seconds
    # Wrong outputs are reported with what was expected (an untrained model makes many).
    assert s.mistakes and all(m["output"] != m["target"] for m in s.mistakes)
    # The progress callable heard every step, in order, evaluations where they ran.
    assert [p.step for p in heard] == list(range(1, 31))
    assert [p.step for p in heard if p.evaluated] == [10, 20, 30]
    assert heard[-1].eval_accuracy == s.history[-1]["accuracy"]
    # The same seed, the same numbers; another seed, others.
    def numbers(summary):  # everything but the times
        history = [{k: v for k, v in h.items() if k != "seconds"} for h in summary.history]
        return history, summary.test_accuracy, summary.final_loss, summary.mistakes

    again = qkv.train("copy", seed=3, **TINY)
    assert numbers(again) == numbers(s)
    other = qkv.train("copy", seed=4, **TINY)
    assert other.final_loss != s.final_loss


def test_train_saves_a_model_the_command_explains(tmp_path):
    path = tmp_path / "copy.safetensors"
    s = qkv.train("copy", save=path, **TINY)
    assert s.path == str(path) and path.stat().st_size > 0
    r = subprocess.run([sys.executable, "-m", "qkv", "explain", "--model", str(path), "--input",
                        "abcd", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_an_exception_in_progress_stops_training():
    def stop(p):
        if p.step == 5:
            raise KeyError("enough")

    with pytest.raises(KeyError, match="enough"):
        qkv.train("copy", progress=stop, **TINY)


def test_ctrl_c_stops_training():
    """_thread.interrupt_main() is Ctrl-C as Python sees it: a pending SIGINT, acted on only
    where Python code runs or PyErr_CheckSignals is called. Training checks after every step,
    without a progress callable too. The timer thread itself needs the GIL to fire, so this
    also shows that training runs without it."""
    import _thread
    timer = threading.Timer(0.3, _thread.interrupt_main)
    begin = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        qkv.train("copy", **{**TINY, "steps": 5000})  # about a minute, unless interrupted
    elapsed = time.perf_counter() - begin
    timer.join()
    # Had the interrupt waited for training to end, it would have surfaced only after it.
    assert elapsed < 5, f"stopped after {elapsed:.1f} s"


def test_train_rejects_bad_arguments(tmp_path):
    cases = [
        (dict(task="nope"), ValueError, "unknown task 'nope'; expected one of reverse"),
        (dict(task=3), TypeError, "task: int; expected str"),
        (dict(steps=0), ValueError, "steps 0 is out of range; expected 1 to 10^8"),
        (dict(d_model=30), ValueError, "d_model 30 is not divisible by heads 4; expected "),
        (dict(lr=0), ValueError, "lr 0 is out of range; expected 0 < lr < 10"),
        (dict(lr="fast"), TypeError, "lr: str; expected a number"),
        (dict(layers=True), TypeError, "layers: bool; expected an int"),
        (dict(save=tmp_path / "no" / "m.safetensors"), FileNotFoundError, "save: "),
        (dict(progress=3), TypeError, "progress: int; expected a callable"),
    ]
    for kwargs, error, start in cases:
        with pytest.raises(error) as e:
            qkv.train(**{"task": "copy", **kwargs})
        assert one_line(e).startswith(start), (kwargs, str(e.value))


def test_tasks_and_experiment_names():
    assert list(qkv.tasks()) == ["reverse", "sort", "copy", "dates", "lookup", "follow", "count"]
    assert all(qkv.tasks().values())
    assert qkv.tasks()["count"].endswith("(model='perceiver')")
    assert qkv.experiment_names() == ["tie-qk", "no-wv", "scale", "heads", "scores"]


# ---- the decoder LLM -------------------------------------------------------------------------

SMOL = os.path.join(SOURCE_DIR, "tests", "golden", "smollm2")


@pytest.fixture(scope="module")
def lm():
    return qkv.CausalLM()


def test_causal_lm_tokens_match_the_transformers_goldens(lm):
    with open(os.path.join(SMOL, "token_ids.json"), encoding="utf-8") as f:
        for case in json.load(f)["cases"]:
            assert lm.token_ids(case["text"]) == case["ids"], case["text"]
    assert lm.tokenize("Hello world") == ["Hello", " world"]
    assert repr(lm).startswith("qkv.CausalLM('SmolLM2-135M-Instruct': ")


def test_causal_lm_explain_matches_transformers_attention(lm):
    with open(os.path.join(SMOL, "forward.json"), encoding="utf-8") as f:
        golden = json.load(f)["texts"][0]
    x = lm.explain(golden["text"])
    n = len(golden["ids"])
    assert x.token_ids == golden["ids"] and x.causal
    assert (x.layers, x.heads, x.kv_heads, x.head_dim) == (30, 9, 3, 64)
    assert x.weights.shape == (30, 9, n, n) and x.k.shape == (30, 9, n, 64)
    # tests/models/llama_test.cpp's bound against transformers: 1e-4.
    for layer, heads in golden["attention"].items():
        assert np.abs(x.weights[int(layer)] - np.array(heads)).max() <= 1e-4, layer
    # Causal: a token sees itself and those before it, nothing after.
    above = ~np.tril(np.ones((n, n), bool))
    assert np.all(x.weights[..., above] == 0) and np.all(x.logits[..., above] == -np.inf)
    # Query heads 0-2 share key/value head 0, repeated for each of them.
    np.testing.assert_array_equal(x.k[:, 0], x.k[:, 2])
    assert not np.array_equal(x.k[:, 2], x.k[:, 3])
    q, k = x.q.astype(np.float64), x.k.astype(np.float64)
    ref = softmax(np.where(above, -np.inf, q @ k.swapaxes(-1, -2) * x.scale))
    assert np.all(np.abs(x.weights - ref) <= 2.0**-23 * ref)  # as for the encoder above
    # The next token: transformers' most likely one at the last position.
    best = golden["positions"][-1]["ids"][0]
    assert x.next_tokens[0][0] == lm.token_text(best)
    assert x.induction.shape == (30, 9) and x.embedding is None
    # The residual stream (kept within 512 tokens for the mixing, issue 28): h₀, then each layer's
    # output, the last of which the final norm and the unembedding turn into the next token.
    assert x.hidden_states.shape == (31, n, 576)


def test_causal_lm_generates_greedily(lm):
    # int8's decode (the default) and float32's (the bits of weights="float32") give
    # transformers' greedy answer; the first token is float32's either way (the prompt's pass).
    answer = lm.generate("What is the capital of France?", max_tokens=8)
    assert "Paris" in answer and answer == lm.generate("What is the capital of France?", 8)
    exact = lm.generate("What is the capital of France?", max_tokens=8, decode="float32")
    assert "Paris" in exact
    with pytest.raises(ValueError) as e:
        lm.generate("x", decode="int4")
    assert one_line(e) == "decode='int4'; expected 'int8' or 'float32'"
    with pytest.raises(ValueError) as e:
        lm.generate("x", temperature=-1)
    assert one_line(e) == "temperature -1.0; expected a number in [0, 100]"
    # The command's ranges (max_tokens=10**9 and temperature=101 were accepted, issue 26).
    with pytest.raises(ValueError) as e:
        lm.generate("x", temperature=101)
    assert one_line(e) == "temperature 101.0; expected a number in [0, 100]"
    with pytest.raises(ValueError) as e:
        lm.generate("x", max_tokens=10**9)
    assert "max_tokens" in one_line(e) and "1 to 8192" in one_line(e)


def test_a_missing_gguf_path_is_missing_not_a_decoder(tmp_path):
    # "x.gguf" that does not exist was called a decoder LLM by its name alone (issue 26).
    with pytest.raises(FileNotFoundError) as e:
        qkv.Model(str(tmp_path / "x.gguf"))
    assert "no such model directory" in one_line(e)


# ---- experiments ----------------------------------------------------------------------------

def test_a_quick_experiment_returns_its_table():
    heard = []
    r = qkv.experiment("tie-qk", quick=True, progress=heard.append)
    assert isinstance(r, qkv.ExperimentResult) and r.name == "tie-qk"
    assert r.columns == ["task", "projections", "test accuracy", "steps to 99%",
                         "weight on i−1 / i+1", "seconds"]
    assert [(row["task"], row["projections"]) for row in r.rows] == [
        ("reverse", "separate W_Q, W_K"), ("reverse", "tied W_Q = W_K"),
        ("follow", "separate W_Q, W_K"), ("follow", "tied W_Q = W_K")]
    for row in r.rows:
        assert set(row) == set(r.columns)
        assert 0 <= float(row["test accuracy"].rstrip("%")) <= 100
    assert [row["weight on i−1 / i+1"] == "·" for row in r.rows] == [True, True, False, False]
    assert heard == ["reverse, separate W_Q, W_K (seed 1)", "reverse, tied W_Q = W_K (seed 1)",
                     "follow, separate W_Q, W_K (seed 1)", "follow, tied W_Q = W_K (seed 1)"]
    assert r.question and r.reading and r.seconds > 0
    # str(r) is `qkv experiment`'s text (the library's experiment_text): heading, table, time.
    text = str(r)
    assert text.startswith("qkv experiment tie-qk\n\n" + r.question.split()[0])
    assert "Setup: " in text and text.endswith(" s)\n")
    assert re.search(r"\n   task +projections +test accuracy", text) and "separate W_Q, W_K" in text


def test_an_unknown_experiment_lists_the_known_ones():
    with pytest.raises(ValueError) as e:
        qkv.experiment("nope")
    assert "tie-qk, no-wv, scale, heads, scores" in one_line(e)


# ---- the docstrings -------------------------------------------------------------------------

def test_docstring_examples_run():
    import doctest
    import qkv._models
    import qkv._train
    for module, least in ((qkv._models, 8), (qkv._train, 4)):
        failures, tried = doctest.testmod(module)[:2]
        assert tried >= least and failures == 0, module.__name__


def test_the_type_stub_names_what_the_extension_has():
    """python/qkv/_qkv.pyi is written by hand: every function, class and member of the
    extension must be in it, with the same parameter names, and nothing else."""
    import ast
    import inspect
    with open(os.path.join(SOURCE_DIR, "python", "qkv", "_qkv.pyi"), encoding="utf-8") as f:
        stub = ast.parse(f.read())

    def params(node):
        return [a.arg for a in node.args.args if a.arg != "self"]

    def signature_params(obj):
        # nanobind writes each function's signature into its __doc__'s first line.
        head = obj.__doc__.split("\n", 1)[0]
        inside = head[head.index("(") + 1:head.rindex(") ->")]
        names = [p.split(":")[0].strip() for p in inside.split(", ") if ":" in p]
        return [n for n in names if n != "self"]

    stubbed = {}
    for node in stub.body:
        if isinstance(node, ast.FunctionDef):
            stubbed[node.name] = params(node)
        elif isinstance(node, ast.ClassDef):
            stubbed[node.name] = {m.name: params(m) for m in node.body
                                  if isinstance(m, ast.FunctionDef)}
    ext = qkv._qkv
    public = {n for n in dir(ext) if not n.startswith("__")}
    assert set(stubbed) == public
    for name, entry in stubbed.items():
        obj = getattr(ext, name)
        if isinstance(entry, dict):
            # (nanobind gives a class without a constructor an __init__ that refuses.)
            members = {n for n in vars(obj) if not n.startswith("_")}
            assert set(entry) - {"__init__"} == members, name
            for member, names in entry.items():
                m = getattr(obj, member)
                if not isinstance(m, property):
                    assert names == signature_params(m), f"{name}.{member}"
        else:
            assert entry == signature_params(obj), name
            assert inspect.isbuiltin(obj) or callable(obj)


def test_train_rnnsearch_saves_a_model_whose_attention_the_command_explains(tmp_path):
    path = tmp_path / "rnn.safetensors"
    s = qkv.train("copy", model="rnnsearch", steps=20, d_model=16, batch_size=16,
                  test_examples=20, save=path)
    assert s.config["architecture"] == "rnnsearch"
    assert (s.config["layers"], s.config["heads"], s.config["d_model"]) == (1, 1, 16)
    assert s.steps == 20
    out = subprocess.run([sys.executable, "-m", "qkv", "explain", "--model", str(path),
                          "--input", "abcdef"], capture_output=True, text=True, check=True).stdout
    assert "query   s_{i-1}" in out and "There is no W_V" in out


def test_train_rnnsearch_refuses_transformer_sizes():
    # The library's messages, which name qkv.train's arguments (issue 27: no copy in Python).
    with pytest.raises(ValueError, match="layers does not apply to model='rnnsearch'"):
        qkv.train("copy", model="rnnsearch", layers=2)
    with pytest.raises(ValueError, match="d_model 15 is out of range; expected an even width"):
        qkv.train("copy", model="rnnsearch", d_model=15)
    with pytest.raises(ValueError, match="model lstm is not a model qkv trains"):
        qkv.train("copy", model="lstm")


# ---- the Perceiver: `qkv train --model perceiver --task count`, from Python (issue 26) ----

PERCEIVER = dict(model="perceiver", steps=20, length=16, latents=2, layers=0, heads=2,
                 d_model=16, batch_size=8, eval_every=10, test_examples=20, target=2)


def test_train_perceiver_returns_a_summary_and_saves_a_model_the_command_explains(tmp_path):
    """count was refused as "unknown task", model="perceiver" as "not a model qkv trains",
    although `qkv train --model perceiver --task count` trains it."""
    heard = []
    path = tmp_path / "count.safetensors"
    s = qkv.train("count", seed=5, progress=heard.append, save=path, **PERCEIVER)
    assert (s.task, s.steps, s.test_examples, s.seed, s.path) == ("count", 20, 20, 5, str(path))
    assert s.config == {"architecture": "perceiver", "layers": 0, "heads": 2, "d_model": 16,
                        "latents": 2, "length": 16, "classes": 10, "vocab": 27}
    assert s.chance == 0.1 and 0 <= s.test_accuracy <= 1
    assert [h["step"] for h in s.history] == [10, 20]
    assert s.tokens == 20 * 8 * 16  # steps × batch × input symbols
    assert s.mistakes == [] and s.reached_target is None and not s.stopped_early
    assert [p.step for p in heard] == list(range(1, 21))
    assert [p.step for p in heard if p.evaluated] == [10, 20]
    assert heard[-1].eval_accuracy == s.history[-1]["accuracy"]
    # The same seed, the same numbers.
    again = qkv.train("count", seed=5, **PERCEIVER)
    assert (again.history[-1]["accuracy"], again.final_loss, again.test_accuracy) == (
        s.history[-1]["accuracy"], s.final_loss, s.test_accuracy)
    # The command reads the file as one it saved itself.
    r = subprocess.run([sys.executable, "-m", "qkv", "explain", "--model", str(path), "--input",
                        "abcdefgh#ijklmno"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "latent" in r.stdout


def test_train_says_which_model_a_task_belongs_to():
    cases = [
        (dict(task="count"), "task count is the Perceiver's task, not the transformer's; "
                             "expected model='perceiver' task='count'"),
        (dict(task="copy", model="perceiver"), "task copy is not a Perceiver task; expected "
                                               "count (the other tasks train "
                                               "model='transformer' or rnnsearch)"),
        (dict(task="nope"), "unknown task 'nope'; expected one of reverse, sort, copy, dates, "
                            "lookup, follow, count"),
        (dict(task="copy", length=64), "length applies to model='perceiver' only"),
        (dict(task="copy", model="rnnsearch", latents=4), "latents applies to model='perceiver' "
                                                          "only (its latent queries); "
                                                          "model='rnnsearch' has none"),
        (dict(task="count", model="perceiver", length=8), "length 8 is out of range for the "
                                                          "task count; expected 16 to 65536"),
        (dict(task="count", model="perceiver", latents=0), "latents 0 is out of range"),
        (dict(task="count", model="perceiver", layers=65), "layers 65 is out of range; expected "
                                                           "0 to 64"),
        (dict(task="copy", model="perceivr"), "model perceivr is not a model qkv trains; "
                                              "expected transformer, rnnsearch or perceiver"),
    ]
    for kwargs, start in cases:
        with pytest.raises(ValueError) as e:
            qkv.train(**kwargs)
        assert one_line(e).startswith(start), (kwargs, str(e.value))
    message = expect_memory_error(
        lambda: qkv.train("count", model="perceiver", length=65536, d_model=4096, heads=64,
                          batch_size=4096, memory_limit=1000),
        "training this Perceiver (length 65,536, latents 16, d_model 4,096, batch 4,096) needs "
        "about ")
    assert message.endswith("expected a smaller length, latents, layers, d_model or batch_size")


# ---- max_length beyond the model's positions -------------------------------------------------

def test_a_max_length_beyond_the_positions_warns_and_says_what_applies(model):
    """Model(max_length=10**6) became 512 without a word (BERT has 512 positions)."""
    with pytest.warns(UserWarning) as heard:
        m = qkv.Model(max_length=10**6)
    assert [str(w.message) for w in heard] == [
        "max_length 1000000 is more than the 512 positions of all-MiniLM-L6-v2; texts are cut to "
        "512 tokens ([CLS] and [SEP] included)"]
    assert m.max_length == 512
    assert len(m.tokenize("word " * 1000)) == 512
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the positions: no warning
        assert qkv.Model(max_length=512).max_length == 512


# ---- memory: the work's estimate against memory_limit, before it runs (issue 26) ----

def expect_memory_error(call, work):
    """MemoryError naming the work, its estimate and the limit — never a bare "std::bad_alloc"."""
    with pytest.raises(MemoryError) as e:
        call()
    message = one_line(e)
    assert work in message
    assert " of memory, over the limit of 1000 bytes (memory_limit); expected " in message
    return message


def test_encode_and_explain_refuse_past_memory_limit(model):
    expect_memory_error(lambda: model.encode(["a river bank"] * 50, memory_limit=1000),
                        "encoding 50 texts needs about ")
    expect_memory_error(lambda: model.explain("I sat on the river bank", memory_limit=1000),
                        "explaining 8 tokens (every layer's scores, logits and weights kept) "
                        "needs about ")
    with pytest.raises(ValueError, match="memory_limit 0 is out of range"):
        model.encode("x", memory_limit=0)
    # Within the default limit (half the machine's memory) they run as before.
    assert model.encode("a river bank", memory_limit=2**40).shape == (384,)


def test_train_refuses_past_memory_limit_before_the_model_is_made():
    message = expect_memory_error(
        lambda: qkv.train("reverse", layers=64, d_model=4096, heads=64, batch_size=4096,
                          memory_limit=1000),
        "training this transformer (64 layers, d_model 4,096, batch 4,096) needs about ")
    assert "TiB" in message or "GiB" in message


def test_causal_lm_refuses_past_memory_limit(lm):
    expect_memory_error(lambda: lm.explain("The capital of France is", memory_limit=1000),
                        "explaining 5 tokens (every layer's scores, logits and weights kept)")
    expect_memory_error(lambda: lm.generate("Hi", max_tokens=4, chat=False, memory_limit=1000),
                        "generating 4 tokens after a prompt of 1 (the model and its KV cache)")


# ---- a decoder's file: its header first, its special tokens (issue 26) ----

def test_causal_lm_is_sized_from_its_header_before_a_weight_is_read(tmp_path):
    # SmolLM2 takes 1.1 GiB loaded as float32, ~120 MB as its file's blocks: refused before its
    # weights are read.
    with pytest.raises(MemoryError) as e:
        qkv.CausalLM(memory_limit=200 * 2**20, weights="float32")
    assert "(its weights in float32) needs about 1." in one_line(e)
    assert one_line(e).endswith(" of memory, over the limit of 200 MiB (memory_limit); "
                                "expected a smaller model or a higher memory_limit")
    with pytest.raises(MemoryError) as e:
        qkv.CausalLM(memory_limit=60 * 2**20)
    assert "(its weights as the file's blocks) needs about 1" in one_line(e)
    with pytest.raises(ValueError) as e:
        qkv.CausalLM(weights="q4")
    assert one_line(e) == "weights='q4'; expected 'file' or 'float32'"
    # A 3 GB file that holds only a GGUF header was read whole (3.1 GB resident, 9 s) to say it
    # is no model: now its header alone is, in a process of its own to measure its peak.
    head = tmp_path / "magic.gguf"
    with open(head, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
        f.truncate(3 * 2**30)
    # VmHWM, the peak of this process's own memory: ru_maxrss would start at pytest's (exec
    # keeps it).
    code = ("import sys, qkv\n"
            "try:\n"
            "    qkv.CausalLM(sys.argv[1])\n"
            "except RuntimeError as e:\n"
            "    print(e)\n"
            "status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
            "print(int(status.split()[0]))\n")
    r = subprocess.run([sys.executable, "-c", code, str(head)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    message, peak_kib = r.stdout.splitlines()
    assert message == (f"{head}: no metadata \"general.architecture\"; expected it in this kind "
                       "of model")
    assert int(peak_kib) < 300 * 1024, f"a peak of {int(peak_kib) // 1024} MiB"


def test_control_tokens_are_not_generated_text(tmp_path):
    # Zero weights: greedy picks <|endoftext|> (id 0), which was returned as text three times.
    lm = qkv.CausalLM(tiny_gguf.write_zero_llama(tmp_path / "zero.gguf"))
    assert lm.generate("hello the", 3, chat=False) == ""
    assert lm.tokenize("<|im_start|>hello") == ["<|im_start|>", "hello"]


def test_a_causal_lm_by_its_name_in_a_store(tmp_path, monkeypatch):
    # Ollama's layout: a manifest whose model layer names a blob by its digest (issue 29).
    models = tmp_path / "ollama"
    hex_digest = "ab" * 32
    (models / "blobs").mkdir(parents=True)
    blob = tiny_gguf.write_zero_llama(models / "blobs" / f"sha256-{hex_digest}")
    manifest = models / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "1b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"layers":[{"mediaType":"application/vnd.ollama.image.model",'
                        f'"digest":"sha256:{hex_digest}"}}]}}')
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    monkeypatch.setenv("HOME", str(tmp_path))
    lm = qkv.CausalLM("tiny:1b")
    assert lm.path == str(blob) and lm.name == "tiny:1b"
    assert lm.generate("hello the", 2, chat=False) == ""  # zero weights: <|endoftext|> at once
    with pytest.raises(ValueError) as e:
        qkv.CausalLM("tiny:2b")
    # $HOME written "~": the store is tmp_path/ollama.
    assert one_line(e).startswith('no model "tiny:2b": not a file, not a built-in name, not in '
                                  "Ollama (~/ollama), LM Studio (~/.lmstudio/models")


def test_html_does_not_write_over_the_model_it_explains(model, tmp_path):
    # The report written to vocab.txt replaced the model's vocabulary, and to a decoder's .gguf the
    # model itself; `qkv explain --html` refuses both (issue 26's last sweep).
    folder = tmp_path / "minilm"
    folder.mkdir()
    for name in os.listdir(model.path):
        source = os.path.join(model.path, name)
        if name == "vocab.txt":
            with open(source, "rb") as f, open(folder / name, "wb") as g:
                g.write(f.read())
        else:
            os.symlink(source, folder / name)
    vocab = (folder / "vocab.txt").read_bytes()
    x = qkv.Model(str(folder)).explain("a b")
    with pytest.raises(ValueError) as e:
        x.html(str(folder / "vocab.txt"))
    assert one_line(e).startswith(f"path: {folder / 'vocab.txt'} is a file of the model this "
                                  "explains")
    assert (folder / "vocab.txt").read_bytes() == vocab
    with pytest.raises(ValueError):
        x.html(str(folder / "model.safetensors"))  # a link to the installed file
    assert os.path.islink(folder / "model.safetensors")
    x.html(str(folder / "report.html"))  # beside them is fine
    assert (folder / "report.html").stat().st_size > 10_000

    gguf = tiny_gguf.write_zero_llama(tmp_path / "zero.gguf")
    before = open(gguf, "rb").read()
    with pytest.raises(ValueError):
        qkv.CausalLM(gguf).explain("hello the").html(gguf)
    assert open(gguf, "rb").read() == before


def test_weights_that_overflow_are_an_error_not_nan_arrays(model, tmp_path):
    # Word embeddings of 3e38 overflow float32 in the first layer norm: encode and explain
    # returned NaN arrays where `qkv embed` and `qkv explain` exit 1 (issue 26's last sweep).
    folder = tmp_path / "overflow"
    folder.mkdir()
    for name in os.listdir(model.path):
        if name != "model.safetensors":
            os.symlink(os.path.join(model.path, name), folder / name)
    data = bytearray(open(os.path.join(model.path, "model.safetensors"), "rb").read())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    entry = next(v for k, v in header.items() if k.endswith("word_embeddings.weight"))
    assert entry["dtype"] == "F32"
    begin, end = (8 + n + o for o in entry["data_offsets"])
    data[begin:end] = np.full((end - begin) // 4, 3e38, np.float32).tobytes()
    (folder / "model.safetensors").write_bytes(bytes(data))
    broken = qkv.Model(str(folder))
    with pytest.raises(RuntimeError) as e:
        broken.encode(["one", "two"])
    assert one_line(e).startswith("the embedding of sentences[0] came out ")
    assert "the model computes non-finite numbers" in one_line(e)
    with pytest.raises(RuntimeError) as e:
        broken.explain("The animal was tired")
    assert " came out " in one_line(e) and "non-finite" in one_line(e)
    # The installed model is untouched and finite.
    assert np.isfinite(model.encode(["one"])).all()


def test_generate_says_when_the_context_stopped_it(tmp_path):
    # `qkv generate` notes a stop at the model's context; CausalLM.generate returned the shorter
    # text without a word (issue 26's last sweep). A model that always says "a" (the untied output
    # row of token 3 is the only one that is not 0) fills the tiny model's 32 positions.
    vocab = tiny_gguf.tokens()
    rows = [1.0 if t == "a" else 0.0 for t in vocab]
    gguf = tiny_gguf.write_zero_llama(tmp_path / "a.gguf", output=rows,
                                      fill={"token_embd.weight": 0.5, "output_norm.weight": 1.0})
    lm = qkv.CausalLM(gguf)
    assert lm._model.context_length == 32
    prompt = len(lm._model.tokenize("hello the"))
    with pytest.warns(RuntimeWarning) as caught:
        text = lm.generate("hello the", 40, chat=False)
    assert text == "a" * (32 - prompt)
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"stopped after {32 - prompt} of 40 tokens: the prompt ({prompt} tokens) and the text "
        f"generated fill the model's context of 32 positions")
    # Within the context: the text asked for, and no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lm.generate("hello the", 5, chat=False) == "aaaaa"
        assert lm.generate("hello the", 5, chat=False, seed=7, temperature=0.5) == "aaaaa"
    # A seed at temperature 0 changes nothing: said, as `qkv generate` notes it.
    with pytest.warns(RuntimeWarning, match="seed has no effect at temperature 0"):
        assert lm.generate("hello the", 5, chat=False, seed=7) == "aaaaa"


def test_a_decoder_whose_logits_overflow_is_an_error_not_nan_next_tokens(tmp_path):
    # Token embeddings of 3e38 keep every hidden state and weight finite (the attention and MLP
    # weights are 0), but the tied output layer's logits overflow: next_tokens held NaN
    # probabilities where `qkv explain` exits 1 (issue 26's last sweep).
    gguf = tiny_gguf.write_zero_llama(tmp_path / "big.gguf", fill={"token_embd.weight": 3e38,
                                                                   "output_norm.weight": 1.0})
    with pytest.raises(RuntimeError) as e:
        qkv.CausalLM(gguf).explain("hello the")
    assert one_line(e).startswith("the next-token probabilities came out NaN; ")
    assert "the model computes non-finite numbers" in one_line(e)
    # The same file with ordinary embeddings explains, with probabilities that sum to at most 1.
    fine = tiny_gguf.write_zero_llama(tmp_path / "fine.gguf", fill={"token_embd.weight": 0.5,
                                                                    "output_norm.weight": 1.0})
    p = [q for _, q in qkv.CausalLM(fine).explain("hello the").next_tokens]
    assert len(p) == 5 and all(0 < q <= 1 for q in p) and sum(p) <= 1 + 1e-9
