"""Every public function of the package against wrong types, invalid strings and paths that are
not what they should be (issue 26): each is refused with one line that names the argument (or
the path) and what was expected — never nanobind's multi-line "incompatible function arguments"
dump, a raw OSError about a temporary file, or a silent success. Every function that writes a
file reports a failed write as an OSError that names the path."""

import os
import stat

import numpy as np
import pytest

import qkv

DUMP = "incompatible function arguments"


def one_line(e):
    message = str(e.value)
    assert message and "\n" not in message and DUMP not in message, repr(message)
    return message


def refused(call, error, start):
    """call() raises `error` with a one-line message that starts with `start`."""
    with pytest.raises(error) as e:
        call()
    message = one_line(e)
    assert message.startswith(start), (start, message)
    return message


@pytest.fixture(scope="module")
def model():
    return qkv.Model()


@pytest.fixture(scope="module")
def explained(model):
    return model.explain("I sat on the river bank")


# ---- strings the extension cannot take --------------------------------------------------------

SURROGATE = "bank \ud800"  # a lone surrogate: a str, but not text UTF-8 can encode


def test_a_lone_surrogate_is_refused_naming_the_argument_and_the_character(model, explained):
    cases = [
        (lambda: model.encode(["fine", SURROGATE]), "sentences[1]"),
        (lambda: model.encode(SURROGATE), "sentences"),
        (lambda: model.tokenize(SURROGATE), "text"),
        (lambda: model.tokenize("fine", SURROGATE), "text_b"),
        (lambda: model.token_ids(SURROGATE), "text"),
        (lambda: model.explain(SURROGATE), "text"),
        (lambda: model.explain("fine", SURROGATE), "text_b"),
        (lambda: explained.token_index(SURROGATE), "token"),
        (lambda: explained.html(token=SURROGATE), "token"),
        (lambda: qkv.train(SURROGATE), "task"),
        (lambda: qkv.experiment(SURROGATE), "name"),
        (lambda: qkv.attention(*[np.zeros((2, 3))] * 3, score=SURROGATE), "score"),
        (lambda: qkv.attention(*[np.zeros((2, 3))] * 3, normalize=SURROGATE), "normalize"),
        (lambda: qkv.attention(*[np.zeros((2, 3))] * 3, path=SURROGATE), "path"),
    ]
    for call, name in cases:
        assert refused(call, ValueError, f"{name}: a lone surrogate U+D800 at character 5; "
                       "expected text that UTF-8 can encode")


def test_a_path_with_a_lone_surrogate_is_refused_naming_the_argument(explained):
    """A lone surrogate outside U+DC80–U+DCFF (what os.fsdecode makes of undecodable bytes) has
    no bytes on disk: it was UnicodeEncodeError "surrogates not allowed" from deep inside."""
    expected = ("a lone surrogate U+D800 at character 5; expected a path the file system can "
                "name")
    cases = [
        (lambda: qkv.Model(SURROGATE), "name_or_path"),
        (lambda: qkv.CausalLM(SURROGATE), "name_or_path"),
        (lambda: explained.html(SURROGATE), "path"),
        (lambda: qkv.train("copy", save=SURROGATE), "save"),
        (lambda: qkv.train("count", model="perceiver", save=SURROGATE), "save"),
    ]
    for call, name in cases:
        refused(call, ValueError, f"{name}: {expected}")
    # The surrogates os.fsdecode makes of bytes that are not UTF-8 stay paths (b"\xff").
    refused(lambda: qkv.Model("bank \udcff"), FileNotFoundError, "bank \udcff: no such model")


# ---- wrong types --------------------------------------------------------------------------------

def test_wrong_types_to_attention_name_the_argument():
    q = np.zeros((2, 3, 4))
    cases = [
        (dict(is_causal="yes"), TypeError, "is_causal: str; expected True or False"),
        (dict(enable_gqa=np.ones(2)), TypeError, "enable_gqa: ndarray; expected True or False"),
        (dict(scale="big"), TypeError, "scale: str; expected a number"),
        (dict(scale=[0.5]), TypeError, "scale: list; expected a number"),
        (dict(score=5), TypeError, "score: int; expected str"),
        (dict(normalize=None), TypeError, "normalize: NoneType; expected str"),
        (dict(path=1), TypeError, "path: int; expected str"),
        (dict(need_weights="yes"), TypeError, "need_weights: str; expected True or False"),
        (dict(keep_for_backward=1), TypeError, "keep_for_backward: int; expected True or False"),
        (dict(is_causal=True, causal_alignment=None), TypeError,
         "causal_alignment: NoneType; expected str"),
        (dict(params=[np.eye(4)], score="general"), TypeError, "params: list; expected a dict"),
        (dict(params={1: np.eye(4)}, score="general"), TypeError, "params' key: int; expected"),
        (dict(attn_mask=[[True, False], [True]]), TypeError, "attn_mask: list is not an array"),
    ]
    for kwargs, error, start in cases:
        refused(lambda: qkv.attention(q, q, q, **kwargs), error, start)
    refused(lambda: qkv.attention([[1.0, 2.0], [3.0]], q, q), TypeError,
            "query: list is not an array (")
    refused(lambda: qkv.attention_backward(q, q, q, q, is_causal="no"), TypeError,
            "is_causal: str; expected True or False")
    refused(lambda: qkv.attention_backward([[1.0], []], q, q, q), TypeError,
            "grad_out: list is not an array")
    out, saved = qkv.attention(q, q, q, keep_for_backward=True)
    refused(lambda: qkv.attention_backward(q, q, q, q, saved=saved._replace(fingerprint="x")),
            TypeError, "saved.fingerprint: str; expected the one qkv.attention")
    refused(lambda: qkv.attention_backward(q, q, q, q, saved=saved._replace(out=[[1], []])),
            TypeError, "saved.out: list is not an array")


def test_wrong_types_to_the_models_name_the_argument(model, explained):
    refused(lambda: qkv.Model(5), TypeError,
            "name_or_path: int; expected a path (str, bytes or os.PathLike)")
    refused(lambda: qkv.Model("/tmp/a\0b"), ValueError, "name_or_path: '/tmp/a\\x00b' holds a NUL")
    refused(lambda: qkv.Model(""), ValueError, "name_or_path: an empty path")
    refused(lambda: qkv.CausalLM(3.5), TypeError, "name_or_path: float; expected a path")
    refused(lambda: explained.token_index([1]), TypeError,
            "token: list; expected str (the token's text")
    refused(lambda: explained.html(5), TypeError, "path: int; expected a path")
    refused(lambda: explained.html(layer="1"), TypeError, "layer: str; expected an int")
    # An index is a token too, as `qkv explain --token 3` takes it.
    assert explained.token_index(np.int64(3)) == 3 == explained.token_index("3")


def test_wrong_types_to_train_and_experiment_name_the_argument(tmp_path):
    refused(lambda: qkv.train("copy", model=5), TypeError, "model: int; expected str")
    refused(lambda: qkv.train("copy", save=5), TypeError, "save: int; expected a path")
    refused(lambda: qkv.train("copy", save=""), ValueError, "save: an empty path")
    refused(lambda: qkv.train("copy", lr=np.float64("nan")), ValueError, "lr nan is out of range")
    refused(lambda: qkv.experiment("tie-qk", quick=np.ones(3)), TypeError,
            "quick: ndarray; expected True or False")


def test_wrong_types_to_the_decoder_name_the_argument():
    lm = qkv.CausalLM()
    refused(lambda: lm.generate("hi", temperature="hot"), TypeError,
            "temperature: str; expected a number")
    refused(lambda: lm.generate("hi", chat="yes"), TypeError, "chat: str; expected True or False")
    refused(lambda: lm.generate(SURROGATE), ValueError, "prompt: a lone surrogate U+D800")
    refused(lambda: lm.token_ids(SURROGATE), ValueError, "text: a lone surrogate U+D800")
    refused(lambda: lm.generate("hi", temperature=10**400), ValueError,
            "temperature: int beyond a float's range")


def test_numbers_beyond_a_float_and_indices_beyond_an_int64_name_the_argument(explained):
    """An int past float64's range was a bare OverflowError ("int too large to convert to
    float"); a layer or head past int64 nanobind's multi-line signature dump."""
    q = np.zeros((2, 3))
    beyond = "int beyond a float's range (±1.8e308); expected a finite number"
    refused(lambda: qkv.attention(q, q, q, scale=10**400), ValueError, f"scale: {beyond}")
    refused(lambda: qkv.attention(q, q, q, scale=-(10**400)), ValueError, f"scale: {beyond}")
    refused(lambda: qkv.train("copy", lr=10**400), ValueError, f"lr: {beyond}")
    refused(lambda: qkv.train("copy", target=10**400), ValueError, f"target: {beyond}")
    refused(lambda: explained.html(head=10**20), ValueError,
            "head 100000000000000000000 is out of range; this model has heads 0–11")
    refused(lambda: explained.html(layer=-(10**20)), ValueError,
            "layer -100000000000000000000 is out of range; this model has layers 0–5")
    assert explained.html(layer=np.int64(5), head=11).startswith("<!doctype html>")


# ---- paths that are not what they should be ---------------------------------------------------

def test_a_model_path_that_exists_but_is_no_folder_says_what_it_is(tmp_path):
    expected = "; expected a BERT model directory (config.json, model.safetensors, vocab.txt)"
    refused(lambda: qkv.Model("/dev/zero"), NotADirectoryError,
            "/dev/zero: is a character device" + expected)
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"x")
    refused(lambda: qkv.Model(file), NotADirectoryError, f"{file}: is a file" + expected)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refused(lambda: qkv.Model(fifo), NotADirectoryError, f"{fifo}: is a FIFO (named pipe)")
    refused(lambda: qkv.CausalLM(tmp_path), IsADirectoryError,
            f"{tmp_path}: is a directory; expected a .gguf model file")
    refused(lambda: qkv.CausalLM("/dev/zero"), ValueError,
            "/dev/zero: is a character device; expected a .gguf model file")
    refused(lambda: qkv.CausalLM(fifo), ValueError, f"{fifo}: is a FIFO (named pipe); expected")


def test_a_model_folder_whose_name_is_not_utf8_loads(model, tmp_path):
    folder = os.path.join(os.fsencode(tmp_path), b"mod\xffel")  # bytes no UTF-8 text has
    os.mkdir(folder)
    for name in os.listdir(model.path):
        os.symlink(os.path.join(model.path, name), os.path.join(folder, os.fsencode(name)))
    odd = qkv.Model(folder)
    assert odd.name == "mod\ufffdel"
    np.testing.assert_array_equal(odd.encode("a river bank"), model.encode("a river bank"))
    assert odd.explain("a river bank").html().startswith("<!doctype html>")


def test_html_to_a_directory_says_so(explained, tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    refused(lambda: explained.html(folder), IsADirectoryError,
            f"{folder}: is a directory; expected a file path")
    assert os.listdir(tmp_path) == ["reports"] and os.listdir(folder) == []


def test_html_reports_a_failed_write_and_never_replaces_a_device(explained, tmp_path):
    # A link to /dev/full rather than /dev/full itself: the old package replaced the path it was
    # given with a regular file, which for the device node itself would have broken the machine's
    # /dev/full for every later test.
    link = tmp_path / "report.html"
    os.symlink("/dev/full", link)
    refused(lambda: explained.html(link), OSError,
            f"{link}: cannot write: No space left on device")
    assert os.path.islink(link) and stat.S_ISCHR(os.stat(link).st_mode)  # still the device
    assert os.listdir(tmp_path) == ["report.html"]  # and no temporary left beside it
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    refused(lambda: explained.html(fifo), OSError,
            f"{fifo}: is a FIFO (named pipe) with no reader; expected a reader, or a file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_train_reports_a_failed_save_as_an_os_error(tmp_path):
    tiny = dict(steps=2, layers=1, heads=1, d_model=8, batch_size=4, test_examples=4)
    refused(lambda: qkv.train("copy", save="/dev/full", **tiny), OSError,
            "save: /dev/full: cannot write: No space left on device")
    refused(lambda: qkv.train("copy", save=tmp_path, **tiny), IsADirectoryError,
            f"save: {tmp_path}: is a directory; expected a file path")
