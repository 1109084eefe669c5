// A captured run (explain::Run) for Python: its tokens, every layer's q, k, v, scores,
// logits, weights and outputs as NumPy arrays viewing the capture's own memory, and the HTML
// report of `qkv explain --html`. python/qkv/_models.py's Explanation wraps it.
#include "qkv/explain.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "arrays.h"
#include "bindings.h"

namespace qkv::python {
namespace {

// Text that came from a model's vocabulary as str. A byte-level BPE token (SmolLM2) may be part
// of a UTF-8 character, which Python's str cannot hold: such bytes show as U+FFFD, as
// bytes.decode(errors="replace") shows them.
nb::str text_of(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

const AttentionCapture& layer_of(const explain::Run& e, int64_t layer) {
  if (layer < 0 || layer >= e.model.layers)
    throw Error("layer " + std::to_string(layer) + " is out of range; this model has layers 0–" +
                std::to_string(e.model.layers - 1));
  return e.blocks.front().layers[static_cast<std::size_t>(layer)];
}

// The token a report focuses on first: `token` as `qkv explain --token` reads it (its text,
// "it:2" for the second, or an index), else explain::default_focus.
int64_t focus_of(const explain::Run& e, const std::optional<std::string>& token) {
  try {
    return explain::focus(e, token);
  } catch (const Error& error) {
    throw Error("token " + std::string(error.what()));
  }
}

void check_index(const char* what, const std::optional<int64_t>& index, int64_t count) {
  if (index && (*index < 0 || *index >= count))
    throw Error(std::string(what) + " " + std::to_string(*index) +
                " is out of range; this model has " + what + "s 0–" + std::to_string(count - 1));
}

}  // namespace

void bind_explain(nb::module_& m) {
  nb::class_<explain::Run> run(m, "Run", "explain::Run: one captured run. Use qkv.Explanation.");
  run.def_prop_ro("model", [](const explain::Run& e) { return e.model.name; })
      .def_prop_ro("text", [](const explain::Run& e) { return text_of(e.text); })
      .def_prop_ro("text_b",
                   [](const explain::Run& e) -> nb::object {
                     return e.pair ? nb::object(text_of(e.text_b)) : nb::none();
                   })
      .def_ro("truncated", &explain::Run::truncated)
      .def_prop_ro("layers", [](const explain::Run& e) { return e.model.layers; })
      .def_prop_ro("heads", [](const explain::Run& e) { return e.model.heads; })
      .def_prop_ro("head_dim", [](const explain::Run& e) { return e.model.head_dim; })
      .def_prop_ro("scale", [](const explain::Run& e) { return e.model.scale; })
      .def_prop_ro("causal", [](const explain::Run& e) { return e.causal(); })
      .def_prop_ro("kv_heads",
                   [](const explain::Run& e) {
                     return e.model.kv_heads > 0 ? e.model.kv_heads : e.model.heads;
                   })
      .def_prop_ro("tokens",
                   [](const explain::Run& e) {
                     nb::list out;
                     for (const explain::TokenInfo& t : e.tokens) {
                       nb::dict d;
                       d["text"] = text_of(t.text);
                       d["surface"] = text_of(t.surface);
                       d["id"] = t.id;
                       d["word"] = t.word;
                       d["segment"] = t.segment;
                       d["special"] = t.special;
                       d["punctuation"] = t.punctuation;
                       out.append(d);
                     }
                     return out;
                   })
      .def(
          "layer",
          [](const explain::Run& e, int64_t layer) {
            // [1, H, n, ·] → [H, n, ·]: views of the capture, no copies.
            const AttentionCapture& c = layer_of(e, layer);
            nb::dict d;
            d["q"] = array_of(explain::unbatch(c.q));
            d["k"] = array_of(explain::unbatch(c.k));
            d["v"] = array_of(explain::unbatch(c.v));
            d["scores"] = array_of(explain::unbatch(c.scores));
            d["logits"] = array_of(explain::unbatch(c.logits));
            d["weights"] = array_of(explain::unbatch(c.weights));
            d["head_out"] = array_of(explain::unbatch(c.head_out));
            const auto l = static_cast<std::size_t>(layer);
            d["hidden"] =
                l < e.hidden.size() ? array_of(explain::unbatch(e.hidden[l])) : nb::none();
            return d;
          },
          nb::arg("layer"), "One layer's capture as arrays [heads, n, ·] (hidden: [n, hidden]).")
      .def_prop_ro("embeddings",
                   [](const explain::Run& e) { return array_of(explain::unbatch(e.embeddings)); })
      .def_prop_ro(
          "embedding",
          [](const explain::Run& e) { return array_of(explain::unbatch(e.output.embedding)); })
      .def_prop_ro("induction", [](const explain::Run& e) { return array_of(e.induction); })
      .def(
          "require_finite", [](const explain::Run& e) { explain::require_finite(e); },
          "Raises RuntimeError naming the first number of the run that is not finite "
          "(explain::require_finite), as `qkv explain` exits 1 with.")
      .def_prop_ro("next_tokens",
                   [](const explain::Run& e) {
                     nb::list out;
                     for (const auto& [text, p] : e.output.next_tokens)
                       out.append(nb::make_tuple(text_of(text), p));
                     return out;
                   })
      .def(
          "focus",
          [](const explain::Run& e, const std::optional<std::string>& token) {
            return focus_of(e, token);
          },
          nb::arg("token").none(), "The token index `token` names, else the default focus.")
      .def(
          "html",
          [](const explain::Run& e, const std::string& title,
             const std::optional<std::string>& token, std::optional<int64_t> layer,
             std::optional<int64_t> head) {
            check_index("layer", layer, e.model.layers);
            check_index("head", head, e.model.heads);
            const int64_t focus = focus_of(e, token);
            std::string page;
            {
              nb::gil_scoped_release release;
              // As `qkv explain --html` (cli/explain/): the suggested head unless one is named.
              explain::Report report = explain::report_of(title, e, focus);
              report.layer = layer.value_or(report.layer);
              report.head = head.value_or(report.head);
              page = explain::html_report(report);
            }
            return text_of(page);
          },
          nb::arg("title"), nb::arg("token").none(), nb::arg("layer").none(),
          nb::arg("head").none(), "The self-contained HTML report of `qkv explain --html`.")
      .def(
          "lens_json",
          [](const explain::Run& e) { return text_of(explain::lens_json(e)); },
          "The lens's JSON (explain::lens_json): {heads, lens, circuit}; \"\" without one.")
      .def(
          "json",
          [](const explain::Run& e, const std::optional<std::string>& token,
             std::optional<int64_t> layer) {
            check_index("layer", layer, e.model.layers);
            const int64_t focus = focus_of(e, token);
            std::string text;
            {
              nb::gil_scoped_release release;
              text = explain::json_of(e, {.focus = focus, .layer = layer.value_or(-1)});
            }
            return text_of(text);
          },
          nb::arg("token").none(), nb::arg("layer").none(),
          "The JSON document of `qkv explain --json [--layer L]` (explain::json_of).")
      .def(
          "terminal",
          [](const explain::Run& e, const std::optional<std::string>& token,
             std::optional<int64_t> layer, std::optional<int64_t> head, bool color) {
            check_index("layer", layer, e.model.layers);
            check_index("head", head, e.model.heads);
            const int64_t focus = focus_of(e, token);
            const explain::Style style{.color = color};
            std::string text = explain::render_tokens(e, focus, style);
            if (layer && head)
              text += explain::render_head(e, *layer, *head, focus, style);
            else
              text += explain::render_overview(e, focus, style);
            if (e.causal()) text += explain::render_decoder(e, style);
            text += explain::render_lens(e, style);
            return text_of(text);
          },
          nb::arg("token").none(), nb::arg("layer").none(), nb::arg("head").none(),
          nb::arg("color"), "What `qkv explain` prints (explain::render_*).");
  bind_values(m, run);
}

}  // namespace qkv::python
