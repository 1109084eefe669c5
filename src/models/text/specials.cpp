#include "models/text/specials.h"

namespace qkv {

void split_at_specials(std::string_view text, const std::vector<std::string>& tokens,
                       const std::vector<int32_t>& specials, const bool (&first)[256],
                       const std::function<void(std::string_view)>& plain,
                       const std::function<void(int32_t)>& special) {
  std::size_t done = 0;  // where the text not yet handed on begins
  for (std::size_t i = 0; i < text.size();) {
    int32_t found = -1;
    if (first[static_cast<unsigned char>(text[i])])
      for (const int32_t id : specials)
        if (text.compare(i, tokens[static_cast<std::size_t>(id)].size(),
                         tokens[static_cast<std::size_t>(id)]) == 0) {
          found = id;
          break;
        }
    if (found < 0) {
      ++i;
      continue;
    }
    plain(text.substr(done, i - done));
    special(found);
    i += tokens[static_cast<std::size_t>(found)].size();
    done = i;
  }
  plain(text.substr(done));
}

}  // namespace qkv
