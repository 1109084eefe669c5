// libFuzzer target: chat templates (models/text/chat_template.h) on arbitrary bytes as the Jinja
// source a GGUF file's tokenizer.chat_template may hold: a family and a prompt, or a qkv::Error,
// never a crash or an out-of-bounds read. The same bytes go through python_strip (a substring of
// its input, stripped once for all) and, as a message, through a real template of each framing.
// The corpus holds real templates (copies of tests/golden/chat_templates/) and a few broken ones.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "models/text/chat_template.h"
#include "qkv/tensor.h"

namespace {

void format_all_ways(const qkv::ChatTemplate& t, std::string_view message) {
  for (const std::string_view system : {std::string_view{}, std::string_view{" sys "}}) {
    try {
      const std::string prompt = t.format(message, system, system.empty() ? "" : "01 Jan 2030");
      // Each family writes the message whole or trimmed: its stripped text is in the prompt.
      if (prompt.find(qkv::python_strip(message)) == std::string::npos) __builtin_trap();
    } catch (const qkv::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string_view stripped = qkv::python_strip(bytes);
  if (stripped.data() < bytes.data() || stripped.data() + stripped.size() > bytes.data() + size)
    __builtin_trap();
  if (qkv::python_strip(stripped) != stripped) __builtin_trap();
  (void)qkv::jinja_string_literals(bytes);
  format_all_ways(qkv::ChatTemplate::parse(bytes), "hi");
  // The bytes as the message of each family's framing.
  for (const char* jinja :
       {"{{ '<|im_start|>system\\nDefault<|im_end|>\\n' }}",
        "{{ '<|start_header_id|>' }}"
        "{{ '<|end_header_id|><|eot_id|>' }}{{ 'Cutting Knowledge Date: x\\n' }}",
        "{{ '<start_of_turn>' + '<end_of_turn>' }}{{ first_user_prefix }}",
        "{{ '[INST] <<SYS>>' + ' [/INST]' }}", "{{ ' [INST] ' + ' [/INST]' }}{{ system_message }}",
        "{{ '<|system|>' + '<|user|>' + '<|end|>' + '<|assistant|>' }}"})
    format_all_ways(qkv::ChatTemplate::parse(jinja), bytes);
  return 0;
}
