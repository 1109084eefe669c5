// The pretrained models for Python: the sentence encoder (qkv.Model: encode, tokenize, explain)
// and the decoder LLM (qkv.CausalLM). python/qkv/_models.py checks the arguments and names the
// models; here the work runs without the GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "qkv/explain.h"
#include "qkv/finite.h"
#include "qkv/lines.h"
#include "qkv/model.h"
#include "qkv/model_stores.h"
#include "unlocked.h"

namespace qkv::python {
namespace {

// Unit-length embeddings [n, hidden] of `texts`, `batch_size` texts a forward pass.
//
// SentenceModel fixes its batch size when it is loaded; Python's encode takes it per call, as
// sentence-transformers' does. So the model is loaded with an unlimited batch size and the
// batches are made here the way SentenceModel::embed makes them: every text sorted by its token
// count, longest first (stable), then `batch_size` at a time. embed() of one such batch sorts it
// again (already sorted: unchanged) and runs it as one forward pass, so the result is exactly
// that of a model loaded with this batch size. Between batches, Ctrl-C is heard.
Tensor encode(const SentenceModel& model, const std::vector<std::string>& texts,
              std::size_t batch_size, Unlocked& unlocked) {
  std::vector<std::size_t> lengths(texts.size()), order(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i)
    lengths[i] = model.tokenize(texts[i]).tokens.size();
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return lengths[a] > lengths[b]; });
  const int64_t hidden = model.config().hidden_size;
  Tensor out({static_cast<int64_t>(texts.size()), hidden}, DType::f32);
  for (std::size_t begin = 0; begin < order.size(); begin += batch_size) {
    const std::size_t end = std::min(order.size(), begin + batch_size);
    std::vector<std::string> batch;
    for (std::size_t i = begin; i < end; ++i) batch.push_back(texts[order[i]]);
    const Tensor e = model.embed(batch).contiguous();
    for (std::size_t i = begin; i < end; ++i)
      std::copy_n(e.data<float>() + static_cast<int64_t>(i - begin) * hidden, hidden,
                  out.data<float>() + static_cast<int64_t>(order[i]) * hidden);
    unlocked.check_signals();
  }
  return out;
}

// A tokenization as (text, id) pairs.
std::vector<std::pair<std::string, int32_t>> pairs_of(const Encoding& encoding) {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const Token& t : encoding.tokens) out.emplace_back(t.text, t.id);
  return out;
}

}  // namespace

void bind_models(nb::module_& m) {
  nb::class_<explain::LensRequest>(m, "LensRequest", "explain::LensRequest")
      .def(nb::init<>())
      .def_rw("target", &explain::LensRequest::target)
      .def_rw("versus", &explain::LensRequest::versus)
      .def_rw("corrupt", &explain::LensRequest::corrupt)
      .def_rw("knockout", &explain::LensRequest::knockout);
  m.def("default_model_dir", &default_model_dir,
        "Where scripts/fetch_model installs all-MiniLM-L6-v2 ($QKV_HOME/models/...).");
  m.def("default_causal_lm_path", &default_causal_lm_path,
        "Where scripts/fetch_model smollm2 installs SmolLM2-135M-Instruct's GGUF file.");
  m.def(
      "model_kind",
      [](const nb::bytes& path) -> std::string {
        switch (model_kind(path_of(path))) {
          case ModelKind::causal_lm:
            return "causal_lm";
          case ModelKind::seq2seq:
            return "seq2seq";
          case ModelKind::perceiver:
            return "perceiver";
          case ModelKind::sentence_encoder:
            break;
        }
        return "sentence_encoder";
      },
      nb::arg("path"),
      "qkv::model_kind (the registry): 'causal_lm' for 'smollm2' or a GGUF file (by its first "
      "bytes, whatever its name) or *.gguf, 'perceiver' for a *.safetensors file a Perceiver was "
      "saved to, 'seq2seq' for any other *.safetensors, else 'sentence_encoder'. Never waits on a "
      "FIFO.");

  m.def(
      "resolve_model",
      [](const nb::bytes& name) {
        const std::string path = resolve_model(path_of(name));
        return nb::bytes(path.data(), path.size());
      },
      nb::arg("name"),
      "qkv::resolve_model (qkv/model_stores.h): the file a name of Ollama's, LM Studio's or the "
      "Hugging Face cache's means ('llama3.2:1b'); a built-in name or a path as it is. ValueError "
      "for a name no store holds (saying where it looked) or that two files answer to.");
  m.def(
      "is_builtin_model", [](const nb::bytes& name) { return is_builtin_model(path_of(name)); },
      nb::arg("name"),
      "qkv::is_builtin_model: whether `name` names an installed model of the registry "
      "('minilm', 'all-MiniLM-L6-v2', 'smollm2', ...) rather than a path.");

  nb::class_<SentenceModel>(m, "SentenceModel",
                            "qkv::SentenceModel: a BERT-family sentence encoder. Use qkv.Model.")
      .def(
          "__init__",
          [](SentenceModel* self, const nb::bytes& dir, std::size_t max_length,
             const std::string& precision) {
            // batch_size: see encode() above; texts are batched per call.
            const std::optional<Precision> p = parse_precision(precision);
            if (!p) throw Error("precision '" + precision + "'; expected fp32 or bf16");
            const SentenceModelOptions options{
                .max_length = max_length, .batch_size = INT_MAX, .precision = *p};
            const std::string folder = path_of(dir);
            nb::gil_scoped_release release;
            new (self) SentenceModel(SentenceModel::load(folder, options));
          },
          nb::arg("dir"), nb::arg("max_length"), nb::arg("precision"))
      .def_prop_ro("dir", &SentenceModel::dir)
      .def_prop_ro(
          "precision",
          [](const SentenceModel& s) { return std::string(to_string(s.options().precision)); })
      .def_prop_ro("hidden_size", [](const SentenceModel& s) { return s.config().hidden_size; })
      .def_prop_ro("layers", [](const SentenceModel& s) { return s.config().num_layers; })
      .def_prop_ro("heads", [](const SentenceModel& s) { return s.config().num_heads; })
      .def_prop_ro("vocab_size", [](const SentenceModel& s) { return s.config().vocab_size; })
      .def_prop_ro("max_length", [](const SentenceModel& s) { return s.options().max_length; })
      .def(
          "tokenize",
          [](const SentenceModel& s, const std::string& text,
             const std::optional<std::string>& text_b) {
            return pairs_of(text_b ? s.tokenize_pair(text, *text_b) : s.tokenize(text));
          },
          nb::arg("text"), nb::arg("text_b").none(),
          "[(token, id)] as the model reads the text (or the pair [CLS] A [SEP] B [SEP]).")
      .def(
          "encode",
          [](const SentenceModel& s, const std::vector<std::string>& texts, std::size_t batch_size,
             int64_t memory_limit) {
            const int64_t bytes = texts_bytes(texts), n = static_cast<int64_t>(texts.size());
            check_memory_limit(
                s.embed_bytes(n, bytes, longest_text(texts), static_cast<int64_t>(batch_size)) +
                    bytes,
                memory_limit, "encoding " + grouped(n) + " texts", "fewer texts a call");
            Unlocked unlocked;
            const Tensor e = unlocked.run([&] { return encode(s, texts, batch_size, unlocked); });
            // As `qkv embed` refuses it: weights that overflow float32 made NaN embeddings,
            // returned as if they were a result (issue 26's last sweep).
            require_finite_rows(e,
                                [](int64_t i) { return "sentences[" + std::to_string(i) + "]"; });
            return array_of(e);
          },
          nb::arg("texts"), nb::arg("batch_size"), nb::arg("memory_limit"),
          "Unit-length float32 embeddings [len(texts), hidden].")
      .def(
          "explain",
          [](const SentenceModel& s, const std::string& text,
             const std::optional<std::string>& text_b, int64_t memory_limit) {
            nb::gil_scoped_release release;
            const int64_t tokens = static_cast<int64_t>(
                (text_b ? s.tokenize_pair(text, *text_b) : s.tokenize(text)).tokens.size());
            check_memory_limit(s.capture_bytes(tokens), memory_limit,
                               "explaining " + grouped(tokens) +
                                   " tokens (every layer's scores, logits and weights kept)",
                               "a shorter text");
            return explain::capture(
                s, text, text_b ? std::optional<std::string_view>(*text_b) : std::nullopt);
          },
          nb::arg("text"), nb::arg("text_b").none(), nb::arg("memory_limit"),
          "explain::capture: the text (or pair) with every layer's attention captured.");

  nb::class_<CausalLM>(m, "CausalLM", "qkv::CausalLM: a decoder LLM (GGUF). Use qkv.CausalLM.")
      .def(
          "__init__",
          [](CausalLM* self, const nb::bytes& path, int64_t memory_limit, bool float32) {
            const std::string file = path_of(path);
            nb::gil_scoped_release release;
            // The header first: the model is sized, and refused past the limit, before a weight
            // is read.
            CausalLM lm = CausalLM::open(file);
            lm.set_weight_format(float32 ? WeightFormat::float32 : WeightFormat::file);
            check_memory_limit(lm.load_bytes(), memory_limit,
                               "loading " + lm.path() +
                                   (float32 ? " (its weights in float32)"
                                            : " (its weights as the file's blocks)"),
                               "a smaller model or a higher memory_limit");
            lm.load_weights();
            new (self) CausalLM(std::move(lm));
          },
          nb::arg("path"), nb::arg("memory_limit"), nb::arg("float32"))
      .def_prop_ro("weights",
                   [](const CausalLM& lm) {
                     return lm.weight_format() == WeightFormat::file ? "file" : "float32";
                   })
      .def_prop_ro("matrix_types", &CausalLM::matrix_types)
      .def_prop_ro("path", &CausalLM::path)
      .def_prop_ro("context_length", &CausalLM::context_length)
      .def(
          "tokenize", [](const CausalLM& lm, const std::string& text) { return lm.tokenize(text); },
          nb::arg("text"), "Token ids of the text (no BOS).")
      .def(
          "token_bytes",
          [](const CausalLM& lm, int32_t id) {
            // bytes, not str: a byte-level BPE token may hold part of a UTF-8 character.
            const std::string b = lm.token_text(id);
            return nb::bytes(b.data(), b.size());
          },
          nb::arg("id"), "The bytes a token stands for.")
      .def(
          "generated_bytes",
          [](const CausalLM& lm, const std::vector<int32_t>& ids) {
            std::string b;
            for (const int32_t id : ids) b += lm.generated_text(id);
            return nb::bytes(b.data(), b.size());
          },
          nb::arg("ids"), "The text generated ids stand for: control tokens stand for nothing.")
      .def(
          "chat_prompt",
          [](const CausalLM& lm, const std::string& user) { return lm.chat_prompt(user); },
          nb::arg("user"))
      .def(
          "generate",
          [](const CausalLM& lm, const std::vector<int32_t>& prompt, int64_t max_tokens,
             double temperature, uint64_t seed, int64_t memory_limit, bool int8) {
            check_memory_limit(
                lm.generate_bytes(static_cast<int64_t>(prompt.size()) + max_tokens), memory_limit,
                "generating " + grouped(max_tokens) + " tokens after a prompt of " +
                    grouped(static_cast<int64_t>(prompt.size())) + " (the model and its KV cache)",
                "a shorter prompt or max_tokens");
            Unlocked unlocked;
            return unlocked.run([&] {
              return lm.generate(prompt,
                                 {.max_tokens = max_tokens,
                                  .temperature = temperature,
                                  .seed = seed,
                                  .product = int8 ? DecodeProduct::int8 : DecodeProduct::float32},
                                 [&](int32_t) { unlocked.check_signals(); });
            });
          },
          nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("temperature"), nb::arg("seed"),
          nb::arg("memory_limit"), nb::arg("int8"),
          "The new token ids after `prompt` (greedy when temperature is 0).")
      .def(
          "explain",
          [](const CausalLM& lm, const std::string& text, int64_t memory_limit,
             const explain::LensRequest& lens, bool lensed) {
            const int64_t tokens = static_cast<int64_t>(lm.tokenize(text).size());
            check_memory_limit(lm.capture_bytes(tokens), memory_limit,
                               "explaining " + grouped(tokens) +
                                   " tokens (every layer's scores, logits and weights kept)",
                               "a shorter text");
            Unlocked unlocked;
            return unlocked.run([&] {
              explain::Run run = explain::capture(lm, text);
              if (lensed)
                run.lens = explain::read_causal(lm.residual(), lm.tokenize(text), lens,
                                                [&](int64_t, int64_t) { unlocked.check_signals(); });
              return run;
            });
          },
          nb::arg("text"), nb::arg("memory_limit"), nb::arg("lens"), nb::arg("lensed"),
          "explain::capture: the text with every layer's attention captured; with a lens "
          "request, explain::read_causal's interventions too.");
}

}  // namespace qkv::python
