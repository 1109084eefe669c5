// The model's files when they are not regular files: config.json, vocab.txt, model.safetensors and
// a trained model's .safetensors given as a FIFO, a device or a directory are refused at once with
// one line (Kind::invalid_argument) naming the path, never waited on or read until memory runs out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/safetensors.h"
#include "core/scratch_files.h"
#include "models/bert/bert.h"
#include "models/text/tokenizer.h"
#include "qkv/model.h"

namespace qkv {
namespace {

// The message of the qkv::Error that `read` throws, checked to be Kind::invalid_argument.
template <class F>
std::string refusal(F read) {
  try {
    read();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(ModelFileKinds, EachReaderRefusesAFifo) {
  const test::ScratchDir dir;
  const std::string fifo = dir.fifo("f");
  const test::Watchdog watchdog(30);  // the open of a FIFO without a writer blocked forever
  EXPECT_EQ(refusal([&] { read_bert_config(fifo); }),
            fifo + ": is a FIFO (named pipe); expected a regular JSON file");
  EXPECT_EQ(refusal([&] { WordPieceTokenizer::from_vocab_file(fifo); }),
            fifo + ": is a FIFO (named pipe); expected a regular text file");
  EXPECT_EQ(refusal([&] { read_safetensors(fifo); }),
            fifo + ": is a FIFO (named pipe); expected a regular .safetensors file");
}

TEST(ModelFileKinds, DeviceIsRefusedNotReadUntilMemoryRunsOut) {
  const test::Watchdog watchdog(30);
  EXPECT_EQ(refusal([] { WordPieceTokenizer::from_vocab_file("/dev/zero"); }),
            "/dev/zero: is a character device; expected a regular text file");
  EXPECT_EQ(refusal([] { read_bert_config("/dev/zero"); }),
            "/dev/zero: is a character device; expected a regular JSON file");
  EXPECT_EQ(refusal([] { read_safetensors("/dev/zero"); }),
            "/dev/zero: is a character device; expected a regular .safetensors file");
}

TEST(ModelFileKinds, SafetensorsHeaderLengthIsCheckedBeforeTheFileIsMapped) {
  const test::ScratchDir dir;
  std::string bytes(16, '\0');
  bytes[0] = static_cast<char>(200);  // a header of 200 bytes in a file of 16
  const std::string path = dir.write("m.safetensors", bytes);
  EXPECT_EQ(refusal([&] { read_safetensors(path); }),
            path + ": header length 200 runs past the end of the file (8 bytes after the length)");
}

TEST(ModelFileKinds, SentenceModelRefusesAModelFileThatIsNotARegularFileAsBadInput) {
  // A usage error (exit 2), though a model whose files hold bad bytes is a runtime one (exit 1):
  // the path given is wrong, not the model.
  const test::ScratchDir dir;
  dir.write("config.json", "{}");
  dir.write("vocab.txt", "[PAD]\n");
  std::filesystem::create_directory(dir.path("model.safetensors"));
  const test::Watchdog watchdog(30);
  EXPECT_EQ(
      refusal([&] { SentenceModel::load(dir.root().string()); }),
      dir.path("model.safetensors") + ": is a directory; expected a regular .safetensors file");
  std::filesystem::remove(dir.path("model.safetensors"));
  dir.write("model.safetensors", "x");
  std::filesystem::remove(dir.path("vocab.txt"));
  ASSERT_EQ(::symlink("/dev/zero", dir.path("vocab.txt").c_str()), 0);
  EXPECT_EQ(refusal([&] { SentenceModel::load(dir.root().string()); }),
            dir.path("vocab.txt") + ": is a character device; expected a regular text file");
}

}  // namespace
}  // namespace qkv

namespace qkv {
namespace {

// model_kind reads no more than a regular file's first four bytes: a GGUF file is a decoder
// whatever its name (an Ollama blob has none; `explain` said "no config.json" of one while
// `generate` ran it); otherwise the name decides: *.gguf a decoder, *.safetensors a trained model,
// anything else (a model directory, even one named *.safetensors) a sentence encoder's directory.
TEST(ModelFileKinds, ModelKindGoesByTheMagicBytesThenTheName) {
  const test::ScratchDir dir("qkv-model-kind");
  std::filesystem::create_directory(dir.path("folder.safetensors"));
  std::filesystem::create_directory(dir.path("folder.gguf"));
  EXPECT_EQ(model_kind(dir.path("dates.safetensors")), ModelKind::seq2seq);  // not there yet
  EXPECT_EQ(model_kind(dir.write("saved.safetensors", "x")), ModelKind::seq2seq);
  EXPECT_EQ(model_kind(dir.path("folder.safetensors")), ModelKind::sentence_encoder);
  EXPECT_EQ(model_kind(dir.path("")), ModelKind::sentence_encoder);
  EXPECT_EQ(model_kind("model.safetensors.bak"), ModelKind::sentence_encoder);
  EXPECT_EQ(model_kind(".safetensors"), ModelKind::sentence_encoder);
  EXPECT_EQ(model_kind("smollm2"), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.path("missing.gguf")), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.path("folder.gguf")), ModelKind::sentence_encoder);
  const std::string gguf = std::string("GGUF\x03\0\0\0", 8) + std::string(16, '\0');
  EXPECT_EQ(model_kind(dir.write("sha256-4f2a9c", gguf)), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.write("renamed.safetensors", gguf)), ModelKind::causal_lm);
  EXPECT_EQ(model_kind(dir.write("notes.txt", "GGU")), ModelKind::sentence_encoder);
  const test::Watchdog watchdog(30);  // a FIFO's magic is not waited for
  EXPECT_EQ(model_kind(dir.fifo("fifo")), ModelKind::sentence_encoder);
  EXPECT_EQ(model_kind(dir.fifo("fifo.gguf")), ModelKind::causal_lm);
}

}  // namespace
}  // namespace qkv
