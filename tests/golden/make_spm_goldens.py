#!/usr/bin/env python3
"""Writes tests/golden/spm/: two small SentencePiece BPE vocabularies as GGUF files, and the ids of
~45 texts under each (token_ids.json), for src/models/text/spm.cpp (tokenizer.ggml.model "llama").

    /root/.cache/qkv/torch-venv/bin/python tests/golden/make_spm_goldens.py

It needs sentencepiece (`pip install sentencepiece` into bench/setup_torch_venv.sh's venv; 0.2.x),
gguf, transformers and tokenizers. `make test` only reads the committed files.

The vocabularies are trained here by SentencePiece itself (SentencePieceTrainer, model_type=bpe,
byte_fallback=True: the 256 <0xXX> byte tokens) on the small corpus below, with Llama 2's settings
(identity normalization, extra white space kept, digits split, white-space-only pieces), two control
tokens (<start_of_turn>, <end_of_turn>) and one user-defined (<tool>), then written as llama.cpp's
convert_hf_to_gguf.py writes a SentencePiece model (tokens, scores, token types, the special ids,
add_bos/add_eos/add_space_prefix):
  llama.gguf  general.architecture "llama", add_space_prefix true (SentencePiece's add_dummy_prefix),
              <unk> 0, <s> 1, </s> 2; add_bos_token true, add_eos_token false (Llama 2, Mistral);
  gemma.gguf  general.architecture "gemma3", add_space_prefix false, <pad> 0, <eos> 1, <bos> 2,
              <unk> 3; add_bos_token true, add_eos_token true (to try both).

The ids, "ids": what llama.cpp's tokenizer gives with add_special and parse_special
(llama-vocab.cpp, llm_tokenizer_spm and tokenizer_st_partition): the text is cut at the tokens typed
control, user-defined or unknown written in it (leftmost, the longest where several start at the same
byte), each stretch between them is encoded by SentencePiece itself (`sp.encode`, which adds the "▁"
prefix to each stretch when the model has add_dummy_prefix, as llama.cpp does after every special
token), and BOS / EOS go around as the file says. SentencePiece is the golden for the merges and the
byte fallback; the cutting rule is llama.cpp's, written out here.

transformers' tokenizer built from the same file (AutoTokenizer.from_pretrained(dir, gguf_file=...))
is the second golden: its ids are recorded as "transformers_ids" where they differ, with why. They
differ in two known ways, both on the Llama-style file only: (1) text starting with a space — its
Metaspace(prepend_scheme="first") prepends no "▁" to text that already starts with one ("  two" is
▁▁two, SentencePiece and llama.cpp ▁▁▁two); (2) text right after a special token gets no "▁" prefix
in transformers (prepend "first": only the text's first stretch), one in SentencePiece's own
per-stretch encoding and in llama.cpp.
"""

import io
import json
import os

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as spm_pb

CORPUS = """The quick brown fox jumps over the lazy dog. Attention is all you need.
Hello world! Hello there, how are you doing today? I am fine, thank you.
def attention(query, key, value):
    scores = query @ key.T / sqrt(d)
    return softmax(scores) @ value
Numbers like 12345 and 3.14159 and 2024 appear here, and 007 too.
Café, naïve, résumé: accents in words. The model reads the text and writes the answer.
    indented line with four spaces
\tand a tab, then some more words: attention heads, queries, keys and values.
Transformers compute attention weights from the queries and the keys of the tokens.
""".splitlines()

CONTROL = ["<start_of_turn>", "<end_of_turn>"]
USER_DEFINED = ["<tool>"]

CHAT = "<start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\n"

TEXTS = [
    # plain text
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "attention weights from the queries",
    "Transformers",
    "QUERY KEY VALUE",
    # spaces at the start and the end, and runs of them
    " leading space",
    "  two leading spaces",
    "   three",
    "trailing space ",
    "a  b   c    d",
    "runs of     five and        eight",
    " ",
    "  ",
    # newlines and tabs: not in the vocabulary, so byte tokens
    "\n",
    "line one\nline two\n\nline four",
    "\t\ttabs",
    "mixed \t\n whitespace",
    "def attention(query, key, value):\n    return softmax(query @ key.T) @ value",
    "    indented",
    # digits
    "12345",
    "3.14159 and 2024",
    "007",
    "9876543210",
    # accents, composed and decomposed
    "Café naïve résumé",
    "e\u0301 decomposed",
    # CJK and emoji: not in the vocabulary, so byte fallback
    "日本語",
    "你好，世界",
    "한국어 text",
    "😀",
    "family 👨\u200d👩\u200d👧 emoji",
    # other characters
    "\u00a0no-break space",
    "zero\u200bwidth",
    "ctrl\x01\x7f bytes",
    "\u2581 the meta symbol itself",
    # the special tokens written in the text
    CHAT,
    "<start_of_turn>",
    "<start_of_turn><end_of_turn>",
    "text <end_of_turn> more",
    "x<tool>y",
    "<tool><tool>",
    "<s>inside</s>",
    "<unk> and <bos>",
    "<start_of_tur",
    # the smallest text
    "",
    "a",
]


def train(add_dummy_prefix, specials):
    """A SentencePiece BPE model trained on CORPUS: (processor, model proto)."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20), model_writer=out, model_type="bpe", vocab_size=420,
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=add_dummy_prefix, split_digits=True,
        allow_whitespace_only_pieces=True, num_threads=1, control_symbols=CONTROL,
        user_defined_symbols=USER_DEFINED, minloglevel=2, **specials)
    proto = spm_pb.ModelProto()
    proto.ParseFromString(out.getvalue())
    return spm.SentencePieceProcessor(model_proto=out.getvalue()), proto


def write_gguf(path, arch, sp, proto, add_space_prefix, add_eos):
    """As llama.cpp's convert_hf_to_gguf.py (_create_vocab_sentencepiece) writes a SentencePiece
    model; the proto's piece types (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
    6 byte) are llama.cpp's token types."""
    n = sp.get_piece_size()
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model("llama")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types([int(p.type) for p in proto.pieces])
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    if sp.pad_id() >= 0:
        w.add_pad_token_id(sp.pad_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(add_eos)
    w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_cpp_ids(sp, proto, text, add_eos):
    """The ids llama.cpp gives (see the docstring): special tokens cut out, SentencePiece on the rest."""
    specials = [p.piece for p in proto.pieces if p.type in (2, 3, 4)]
    ids, plain, i = [sp.bos_id()], 0, 0
    while i < len(text):
        found = max((s for s in specials if text.startswith(s, i)), key=len, default=None)
        if found is None:
            i += 1
            continue
        ids += sp.encode(text[plain:i]) if i > plain else []
        ids.append(sp.piece_to_id(found))
        i += len(found)
        plain = i
    ids += sp.encode(text[plain:]) if plain < len(text) else []
    return ids + ([sp.eos_id()] if add_eos else [])


def main():
    from transformers import AutoTokenizer
    import tokenizers
    import transformers

    assert len(set(TEXTS)) == len(TEXTS)
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spm")
    os.makedirs(out_dir, exist_ok=True)
    models = {
        "llama": dict(arch="llama", prefix=True, add_eos=False, specials={}),
        "gemma": dict(arch="gemma3", prefix=False, add_eos=True,
                      specials=dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
                                    eos_piece="<eos>", bos_piece="<bos>")),
    }
    cases = [{"text": t} for t in TEXTS]
    differ = {}
    for name, m in models.items():
        sp, proto = train(m["prefix"], m["specials"])
        write_gguf(os.path.join(out_dir, name + ".gguf"), m["arch"], sp, proto, m["prefix"],
                   m["add_eos"])
        hf = AutoTokenizer.from_pretrained(out_dir, gguf_file=name + ".gguf")
        differ[name] = 0
        for case in cases:
            text = case["text"]
            ids = llama_cpp_ids(sp, proto, text, m["add_eos"])
            # SentencePiece decodes the ids back to the text (its prefix space dropped), where no
            # special token is written in it (a "▁" written in the text reads as a space).
            if not any(p.piece in text for p in proto.pieces if p.type in (2, 3, 4)) and (
                    "\u2581" not in text):
                assert sp.decode(ids) == text, (name, text, sp.decode(ids))
            entry = {"ids": ids}
            hf_ids = hf.encode(text)
            if hf_ids != ids:
                entry["transformers_ids"] = hf_ids
                differ[name] += 1
            case[name] = entry
    golden = {
        "made_by": f"tests/golden/make_spm_goldens.py (sentencepiece {spm.__version__}, "
                   f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
                   f"gguf {getattr(gguf, '__version__', '?')})",
        "vocabularies": {name: name + ".gguf" for name in models},
        "cases": cases,
    }
    path = os.path.join(out_dir, "token_ids.json")
    head = json.dumps({k: v for k, v in golden.items() if k != "cases"}, ensure_ascii=False,
                      indent=1)
    lines = [json.dumps(case, ensure_ascii=False) for case in cases]
    with open(path, "w", encoding="utf-8") as f:
        f.write(head[:-2] + ',\n "cases": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == golden
    print(f"wrote {path}: {len(cases)} texts; transformers differs on {differ}")


if __name__ == "__main__":
    main()
