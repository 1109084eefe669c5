// cli/fields.h — the library's fields as the command spells them. The library's errors name the
// fields of its arguments (qkv::FieldError: key_lengths, input); the command shows each as its
// option: --key-lengths, and {score=general} as "--score general". qkv train renames a few of its
// options (flag_of in train/train.h: batch_size is --batch); every other command names an option
// after its field.
#pragma once

#include <string>
#include <string_view>

namespace qkv::cli {

// "--" and the field with '_' as '-', then " value" when the message says a setting to use.
std::string option_of(std::string_view field, std::string_view value = {});

}  // namespace qkv::cli
