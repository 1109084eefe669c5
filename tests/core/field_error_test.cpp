// FieldError: a message about named fields that each front end spells its own way.
#include "qkv/field_error.h"

#include <gtest/gtest.h>

#include <string>

namespace qkv {
namespace {

std::string flag(std::string_view field, std::string_view value) {
  return "--" + std::string(field) + (value.empty() ? "" : " " + std::string(value));
}

TEST(FieldError, WhatNamesTheFieldsAndMessageTheCallersSpelling) {
  const FieldError e("d_model", "{d_model} 30 is not divisible by {heads} 4; expected {model=x}");
  EXPECT_EQ(e.field(), "d_model");
  EXPECT_STREQ(e.what(), "d_model 30 is not divisible by heads 4; expected model x");
  EXPECT_EQ(e.message(flag), "--d_model 30 is not divisible by --heads 4; expected --model x");
  EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
  // Still a qkv::Error, so every front end that catches those reports it.
  EXPECT_THROW(throw FieldError("lr", "{lr} bad", Error::Kind::runtime), Error);
}

TEST(FieldError, BracesThatNameNoFieldStayAsTheyAre) {
  const FieldError e("task", "{task} {Odd} is unknown: {a b} { and s_{i-1}");
  EXPECT_STREQ(e.what(), "task {Odd} is unknown: {a b} { and s_{i-1}");
  EXPECT_EQ(e.message(flag), "--task {Odd} is unknown: {a b} { and s_{i-1}");
}

// A path or a value as the user typed it may hold braces: literal() keeps them from naming a field.
TEST(FieldError, LiteralTextIsNeverAField) {
  for (const std::string typed : {"{steps}.npy", "{", "{{", "a{b}c", "}{x}{", "{{steps}}"}) {
    const FieldError e("query", "{query} " + FieldError::literal(typed) + " is missing");
    EXPECT_EQ(e.what(), "query " + typed + " is missing") << typed;
    EXPECT_EQ(e.message(flag), "--query " + typed + " is missing") << typed;
  }
  EXPECT_EQ(FieldError::render("{{lr} and {lr}", flag), "{lr} and --lr");
}

}  // namespace
}  // namespace qkv
