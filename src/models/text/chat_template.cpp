// ChatTemplate (models/text/chat_template.h): a Jinja chat template's family and what it inserts,
// read from its markers and string literals; prompts written as Hugging Face's
// apply_chat_template writes them for one system and one user message. The families and their
// order of detection were learned from llama.cpp's llm_chat_detect_template (src/llama-chat.cpp);
// each framing follows the family's own template (tests/golden/chat_templates/).
#include "models/text/chat_template.h"

#include <ctime>

#include "qkv/tensor.h"

namespace qkv {
namespace {

constexpr std::string_view kImStart = "<|im_start|>", kImEnd = "<|im_end|>";
constexpr std::string_view kSystemOpen = "<|im_start|>system\n";

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const std::string_view p : parts) out += p;
  return out;
}

// A backslash escape of a Jinja string literal, as Python reads it; an unknown one stays as
// written (backslash and character), as Python keeps it.
std::string unescape(char c) {
  switch (c) {
    case 'n':
      return "\n";
    case 't':
      return "\t";
    case 'r':
      return "\r";
    case '\\':
      return "\\";
    case '\'':
      return "'";
    case '"':
      return "\"";
    default:
      return std::string{'\\', c};
  }
}

// The code point of the UTF-8 sequence at text[i] and its length; a byte that starts no valid
// sequence of 2 or 3 bytes (where every whitespace above 0x7f lies) is kNotSpace, length 1.
constexpr char32_t kNotSpace = 0x110000;
std::pair<char32_t, std::size_t> code_point_at(std::string_view text, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  const auto continuation = [&](std::size_t k) { return k < text.size() && (b(k) & 0xc0) == 0x80; };
  if (c >= 0xc2 && c <= 0xdf && continuation(i + 1))
    return {static_cast<char32_t>((c & 0x1f) << 6 | (b(i + 1) & 0x3f)), 2};
  if (c >= 0xe0 && c <= 0xef && continuation(i + 1) && continuation(i + 2))
    return {static_cast<char32_t>((c & 0x0f) << 12 | (b(i + 1) & 0x3f) << 6 | (b(i + 2) & 0x3f)),
            3};
  return {c < 0x80 ? c : kNotSpace, 1};
}

// Python's str.isspace(): the Unicode White_Space characters and the ASCII separators
// U+001C…U+001F (what CPython's _PyUnicode_IsWhitespace lists).
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

// The last code point that ends at text[end - 1]: back over continuation bytes to its lead.
std::pair<char32_t, std::size_t> code_point_before(std::string_view text, std::size_t end) {
  for (std::size_t len = 1; len <= 3 && len <= end; ++len) {
    if ((static_cast<unsigned char>(text[end - len]) & 0xc0) == 0x80) continue;  // not a lead
    const auto [c, n] = code_point_at(text, end - len);
    return n == len ? std::pair{c, len} : std::pair{kNotSpace, std::size_t{1}};
  }
  return {kNotSpace, 1};
}

// The first literal that is `marker` with spaces around it, as written (" [INST] ", "[INST]").
std::optional<std::string> spaced_literal(const std::vector<std::string>& literals,
                                          std::string_view marker) {
  for (const std::string& l : literals) {
    const std::size_t first = l.find_first_not_of(' ');
    if (first != std::string::npos &&
        l.compare(first, l.find_last_not_of(' ') + 1 - first, marker) == 0)
      return l;
  }
  return std::nullopt;
}

bool is_date(std::string_view s) {  // "26 Jul 2024": strftime's "%d %b %Y"
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return s.size() == 11 && digit(s[0]) && digit(s[1]) && s[2] == ' ' && s[6] == ' ' &&
         digit(s[7]) && digit(s[8]) && digit(s[9]) && digit(s[10]);
}

// Today's date as transformers' strftime_now("%d %b %Y") writes it: local time, and English
// month names (the C locale, which a program has until it calls setlocale).
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char out[32];
  return std::string(out, std::strftime(out, sizeof out, "%d %b %Y", &local));
}

ChatTemplate::Family detect_family(std::string_view jinja) {
  using F = ChatTemplate::Family;
  // Phi-4 frames ChatML's markers with <|im_sep|>, a turn qkv does not write.
  if (has(jinja, kImStart) && has(jinja, kImEnd))
    return has(jinja, "<|im_sep|>") ? F::other : F::chatml;
  if (has(jinja, "<|start_header_id|>") && has(jinja, "<|end_header_id|>") &&
      has(jinja, "<|eot_id|>"))
    return F::llama3;
  if (has(jinja, "<start_of_turn>") && has(jinja, "<end_of_turn>")) return F::gemma;
  if (has(jinja, "[INST]") && has(jinja, "[/INST]")) {
    if (has(jinja, "<<SYS>>")) return F::llama2;
    // Mistral's v7 templates put a default system prompt of their own in [SYSTEM_PROMPT].
    return has(jinja, "[SYSTEM_PROMPT]") ? F::other : F::mistral;
  }
  if (has(jinja, "<|user|>") && has(jinja, "<|assistant|>") && has(jinja, "<|end|>"))
    return F::phi3;
  return F::other;
}

}  // namespace

std::vector<std::string> jinja_string_literals(std::string_view jinja) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    const std::size_t open = jinja.find('{', i);
    if (open == std::string_view::npos || open + 1 >= jinja.size()) return out;
    const char kind = jinja[open + 1];
    if (kind == '#') {  // a comment: its quotes are prose, not literals
      const std::size_t end = jinja.find("#}", open + 2);
      if (end == std::string_view::npos) return out;
      i = end + 2;
      continue;
    }
    if (kind != '{' && kind != '%') {  // a brace in the template's plain text
      i = open + 1;
      continue;
    }
    // Inside a tag until "}}" or "%}" outside a literal.
    const char closing = kind == '{' ? '}' : '%';
    std::size_t j = open + 2;
    bool closed = false;
    while (j < jinja.size() && !closed) {
      const char c = jinja[j];
      if (c == '\'' || c == '"') {
        std::string literal;
        std::size_t k = j + 1;
        while (k < jinja.size() && jinja[k] != c) {
          if (jinja[k] == '\\' && k + 1 < jinja.size()) {
            literal += unescape(jinja[k + 1]);
            k += 2;
          } else {
            literal += jinja[k++];
          }
        }
        if (k >= jinja.size()) return out;  // unterminated
        out.push_back(std::move(literal));
        j = k + 1;
      } else if (c == closing && j + 1 < jinja.size() && jinja[j + 1] == '}') {
        closed = true;
        j += 2;
      } else {
        ++j;
      }
    }
    if (!closed) return out;
    i = j;
  }
}

std::string_view python_strip(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end) {
    const auto [c, n] = code_point_at(text, begin);
    if (!python_space(c)) break;
    begin += n;
  }
  while (end > begin) {
    const auto [c, n] = code_point_before(text, end);
    if (!python_space(c)) break;
    end -= n;
  }
  return text.substr(begin, end - begin);
}

const char* chat_family_name(ChatTemplate::Family family) {
  switch (family) {
    case ChatTemplate::Family::chatml:
      return "ChatML";
    case ChatTemplate::Family::llama3:
      return "Llama 3";
    case ChatTemplate::Family::gemma:
      return "Gemma";
    case ChatTemplate::Family::llama2:
      return "Llama 2";
    case ChatTemplate::Family::mistral:
      return "Mistral";
    case ChatTemplate::Family::phi3:
      return "Phi-3";
    case ChatTemplate::Family::none:
      return "none";
    case ChatTemplate::Family::other:
      break;
  }
  return "other";
}

ChatTemplate ChatTemplate::parse(std::string_view jinja) {
  ChatTemplate t;
  t.bytes_ = jinja.size();
  if (jinja.empty() || jinja.size() > kMaxTemplateBytes) return t;  // none: format says which
  t.family_ = detect_family(jinja);
  t.writes_bos_ = has(jinja, "bos_token");
  const std::vector<std::string> literals = jinja_string_literals(jinja);
  switch (t.family_) {
    case Family::chatml:
      // The default system message is a whole system turn written as one literal; a literal that
      // opens the system turn and then stops (the template appends messages[0]['content']) frames
      // the caller's own system message instead.
      for (const std::string& literal : literals) {
        const std::size_t open = literal.find(kSystemOpen);
        if (open == std::string::npos) continue;
        const std::size_t begin = open + kSystemOpen.size();
        const std::size_t end = literal.find(kImEnd, begin);
        if (end == std::string::npos) continue;
        t.default_system_ = literal.substr(begin, end - begin);
        break;
      }
      break;
    case Family::llama3:
      for (const std::string& literal : literals) {
        if (literal.starts_with("Cutting Knowledge Date:") && t.knowledge_line_.empty())
          t.knowledge_line_ = literal;
        if (is_date(literal) && t.fixed_date_.empty()) t.fixed_date_ = literal;
      }
      t.date_is_today_ = has(jinja, "strftime_now");
      break;
    case Family::gemma:  // Gemma 3 writes the system message into the first user turn
      t.takes_system_ = has(jinja, "first_user_prefix");
      break;
    case Family::mistral:
      t.inst_open_ = spaced_literal(literals, "[INST]").value_or("[INST] ");
      t.inst_close_ = spaced_literal(literals, "[/INST]").value_or(" [/INST]");
      t.takes_system_ = has(jinja, "system_message");
      break;
    case Family::phi3:
      t.takes_system_ = has(jinja, "<|system|>");
      break;
    default:
      break;
  }
  return t;
}

std::vector<std::string> ChatTemplate::markers() const {
  switch (family_) {
    case Family::chatml:
      return {"<|im_start|>", "<|im_end|>"};
    case Family::llama3:
      return {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
    case Family::gemma:
      return {"<start_of_turn>", "<end_of_turn>"};
    case Family::phi3:
      return takes_system_
                 ? std::vector<std::string>{"<|system|>", "<|user|>", "<|end|>", "<|assistant|>"}
                 : std::vector<std::string>{"<|user|>", "<|end|>", "<|assistant|>"};
    default:  // Mistral's and Llama 2's [INST] are text to some vocabularies (Llama 2's)
      return {};
  }
}

void ChatTemplate::refuse_unformattable(std::string_view system) const {
  if (family_ == Family::none && bytes_ > kMaxTemplateBytes)
    throw Error("its chat template (tokenizer.chat_template) is " + std::to_string(bytes_) +
                    " bytes; expected at most " + std::to_string(kMaxTemplateBytes) +
                    " (real ones are under 20 KB)",
                Error::Kind::runtime);
  if (family_ == Family::none)
    throw Error(
        "it has no chat template (tokenizer.chat_template); expected one of the families qkv "
        "writes (ChatML, Llama 3, Gemma, Mistral, Llama 2, Phi-3)",
        Error::Kind::runtime);
  if (family_ == Family::other)
    throw Error(
        "its chat template is not one of: ChatML (<|im_start|>), Llama 3 (<|start_header_id|>), "
        "Gemma (<start_of_turn>), Mistral ([INST]), Llama 2 ([INST] <<SYS>>), Phi-3 (<|user|> … "
        "<|end|>); qkv writes only those families",
        Error::Kind::runtime);
  if (!system.empty() && !takes_system_)
    throw Error(std::string("its chat template (") + chat_family_name(family_) +
                    ") takes no system message (" +
                    (family_ == Family::phi3 ? "Hugging Face's drops it unsaid"
                                             : "Hugging Face's raises an error on one") +
                    "); expected the user's message alone",
                Error::Kind::runtime);
}

std::string ChatTemplate::format_llama3(std::string_view user, std::string_view system,
                                        std::string_view date) const {
  const auto turn = [](std::string_view role, std::string_view content) {
    return cat({"<|start_header_id|>", role, "<|end_header_id|>\n\n", content, "<|eot_id|>"});
  };
  std::string prompt;
  if (!knowledge_line_.empty()) {  // 3.1+: the system turn is always there
    const std::string day = !date.empty()          ? std::string(date)
                            : date_is_today_       ? today()
                            : !fixed_date_.empty() ? fixed_date_
                                                   : "26 Jul 2024";
    prompt =
        turn("system", cat({knowledge_line_, "Today Date: ", day, "\n\n", python_strip(system)}));
  } else if (!system.empty()) {
    prompt = turn("system", python_strip(system));
  }
  return prompt + turn("user", python_strip(user)) +
         "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string ChatTemplate::format(std::string_view user, std::string_view system,
                                 std::string_view date) const {
  refuse_unformattable(system);
  switch (family_) {
    case Family::chatml: {
      const auto turn = [](std::string_view role, std::string_view content) {
        return cat({kImStart, role, "\n", content, kImEnd, "\n"});
      };
      std::string prompt;
      if (!system.empty()) {
        prompt = turn("system", system);
      } else if (default_system_) {
        prompt = turn("system", *default_system_);
      }
      return prompt + turn("user", user) + std::string(kImStart) + "assistant\n";
    }
    case Family::llama3:
      return format_llama3(user, system, date);
    case Family::gemma:
      return cat({"<start_of_turn>user\n", system, system.empty() ? "" : "\n\n", python_strip(user),
                  "<end_of_turn>\n<start_of_turn>model\n"});
    case Family::llama2: {
      const std::string content =
          system.empty() ? std::string(user) : cat({"<<SYS>>\n", system, "\n<</SYS>>\n\n", user});
      return cat({"[INST] ", python_strip(content), " [/INST]"});
    }
    case Family::mistral:
      return cat({inst_open_, system, system.empty() ? "" : "\n\n", user, inst_close_});
    case Family::phi3:
      return cat({system.empty() ? "" : "<|system|>\n", system, system.empty() ? "" : "<|end|>\n",
                  "<|user|>\n", user, "<|end|>\n<|assistant|>\n"});
    default:
      return {};  // refused above
  }
}

}  // namespace qkv
