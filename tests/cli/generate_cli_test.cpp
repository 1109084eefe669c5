// `qkv generate`: SmolLM2-135M continues a prompt. The expected continuation is transformers'
// most likely next token on the same file (tests/golden/smollm2/forward.json, made by
// tests/golden/make_smollm2_goldens.py): " Paris" (id 7042) after "The capital of France is".
// With --chat, the answers are transformers' greedy ones to the same chat prompts
// (tests/golden/smollm2/chat_prompts.json, tests/golden/make_smollm2_chat_goldens.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/smollm2.h"
#include "models/smollm2_copy.h"
#include "models/tiny_llama_gguf.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(GenerateCli, GreedyContinuationIsTransformersMostLikelyToken) {
  const nlohmann::json golden = test::read_golden_json("forward.json", "smollm2");
  const nlohmann::json& last = golden["texts"][0]["positions"].back();
  ASSERT_EQ(golden["texts"][0]["text"], "The capital of France is");
  ASSERT_EQ(last["ids"][0], 7042);  // " Paris" in SmolLM2's vocabulary
  test::smollm2_gguf();             // a missing model fails here, saying how to fetch it
  const CliResult r = run_qkv({"generate", "The capital of France is", "--max-tokens", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "The capital of France is Paris\n");
  const CliResult more = run_qkv({"generate", "The capital of France is", "--max-tokens", "6"});
  ASSERT_EQ(more.exit_code, 0) << more.describe();
  EXPECT_THAT(more.out, StartsWith("The capital of France is Paris"));
}

TEST(GenerateCli, BadInputIsOneLineAndAnExitCode) {
  const CliResult empty = run_qkv({"generate", ""});
  EXPECT_EQ(empty.exit_code, 2) << empty.describe();
  EXPECT_THAT(empty.err, HasSubstr("prompt: the text is empty; expected a text to continue"));
  // A model the user named that cannot be read is bad input (exit 2), as for every command.
  expect_one_line_error(run_qkv({"generate", "hi", "--model", "/dev/zero.gguf"}), 2,
                        "--model /dev/zero.gguf: ");
  expect_one_line_error(run_qkv({"generate", "hi", "--model", "/dev/zero"}), 2,
                        "--model /dev/zero: is a character device; expected a regular .gguf file");
  const CliResult tokens = run_qkv({"generate", "hi", "--max-tokens", "0"});
  EXPECT_EQ(tokens.exit_code, 2) << tokens.describe();
}

// Our logits are within 1e-3 of transformers' relative to each step's largest |logit|
// (models/llama_test.cpp), so where the golden's top two differ by more than twice that, the
// greedy choice cannot differ; the answer is compared up to the first step that is closer.
TEST(GenerateCli, ChatAnswersAsTransformersGreedyRun) {
  const nlohmann::json golden = test::read_golden_json("chat_prompts.json", "smollm2");
  test::smollm2_gguf();
  for (const nlohmann::json& c : golden.at("cases")) {
    const nlohmann::json& messages = c.at("messages");
    const auto answer = c.at("greedy_ids").get<std::vector<int32_t>>();
    const auto margins = c.at("greedy_margins").get<std::vector<double>>();
    std::size_t sure = 0;
    while (sure < margins.size() && margins[sure] > 2e-3) ++sure;
    // sure > answer.size(): the step after the answer, its end (<|im_end|>), is sure too.
    const bool whole = sure > answer.size();
    const std::vector<int32_t> expected(answer.begin(),
                                        answer.begin() + std::min(sure, answer.size()));
    ASSERT_GE(expected.size(), 2u) << c.at("text");
    std::vector<std::string> args = {"generate", "--chat",
                                     messages.back().at("content").get<std::string>()};
    if (messages.size() == 2)
      args.insert(args.end(), {"--system", messages[0].at("content").get<std::string>()});
    args.insert(args.end(), {"--max-tokens", std::to_string(whole ? 8 : expected.size())});
    const CliResult r = run_qkv(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.out, test::smollm2_tokenizer().decode(expected) + "\n") << r.describe();
  }
  // The first answer is whole: "The capital of France is Paris." and the end of the turn.
  EXPECT_EQ(golden["cases"][0]["greedy_text"], "The capital of France is Paris.");
}

TEST(GenerateCli, SystemNeedsChatAndAChatMLTemplate) {
  const CliResult alone = run_qkv({"generate", "hi", "--system", "Be brief."});
  EXPECT_EQ(alone.exit_code, 2) << alone.describe();
  EXPECT_THAT(alone.err, HasSubstr("--system requires --chat"));
  const CliResult empty = run_qkv({"generate", "--chat", "--system", "", "hi"});
  EXPECT_EQ(empty.exit_code, 2) << empty.describe();
  EXPECT_THAT(empty.err, HasSubstr("--system: the text is empty; expected the system message"));
  // A model whose template is of no family qkv writes: --chat is refused, plain text still
  // continues.
  const std::string other = test::smollm2_with_other_template();
  // The model the user named cannot do what was asked of it: bad input, exit 2 (it was 1).
  const CliResult chat = run_qkv({"generate", "--chat", "hi", "--model", other});
  EXPECT_EQ(chat.exit_code, 2) << chat.describe();
  EXPECT_EQ(chat.err, "qkv: error: --model " + other +
                          ": its chat template is not one of: ChatML (<|im_start|>), Llama 3 "
                          "(<|start_header_id|>), Gemma (<start_of_turn>), Mistral ([INST]), "
                          "Llama 2 ([INST] <<SYS>>), Phi-3 (<|user|> … <|end|>); qkv writes only "
                          "those families\n");
  const CliResult plain =
      run_qkv({"generate", "The capital of France is", "--max-tokens", "1", "--model", other});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_EQ(plain.out, "The capital of France is Paris\n");
}

// ---- on a tiny model (tests/models/tiny_llama_gguf.h: 40 tokens, 32 positions) ----

// An Ollama blob is a GGUF file named by its hash: generate ran it, explain said "--model ... has
// no config.json; expected a BERT model directory" (exit 2).
TEST(GenerateCli, AGgufFileIsKnownByItsBytesInGenerateAndExplain) {
  const test::ScratchDir dir("qkv-generate");
  const std::string blob = test::tiny_llama_gguf().write(dir.path("sha256-6a0746a1ec1a"));
  const CliResult generated = run_qkv({"generate", "hello", "--max-tokens", "2", "--model", blob});
  ASSERT_EQ(generated.exit_code, 0) << generated.describe();
  EXPECT_THAT(generated.out, StartsWith("hello"));
  const CliResult explained = run_qkv({"explain", "hello the", "--model", blob});
  ASSERT_EQ(explained.exit_code, 0) << explained.describe();
  EXPECT_THAT(explained.out, HasSubstr("hello"));
  // A sentence encoder's command names what it got.
  expect_one_line_error(run_qkv({"embed", "x", "--model", blob}), 2,
                        "--model " + blob +
                            " is a decoder LLM (a GGUF file); expected a BERT model directory "
                            "(config.json, model.safetensors, vocab.txt); qkv generate and qkv "
                            "explain take decoders");
}

// --seed at --temperature 0 changed nothing without a word (issue 26's last sweep): greedy decoding
// draws nothing. It is said, once, on stderr; the text is the seedless one.
TEST(GenerateCli, ASeedThatCannotMatterIsSaid) {
  const test::ScratchDir dir("qkv-generate");
  const std::string file = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  const CliResult plain = run_qkv({"generate", "hello", "--max-tokens", "3", "--model", file});
  const CliResult seeded =
      run_qkv({"generate", "hello", "--max-tokens", "3", "--model", file, "--seed", "7"});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.describe();
  EXPECT_EQ(seeded.out, plain.out);
  EXPECT_EQ(plain.err, "");
  EXPECT_EQ(seeded.err,
            "qkv: note: --seed has no effect at --temperature 0 (greedy: each step takes the "
            "likeliest token); give a --temperature above 0 to sample\n");
  const CliResult sampled = run_qkv({"generate", "hello", "--max-tokens", "3", "--model", file,
                                     "--seed", "7", "--temperature", "0.7"});
  ASSERT_EQ(sampled.exit_code, 0) << sampled.describe();
  EXPECT_EQ(sampled.err, "");
}

// The tiny vocabulary spells a–z, space, newline and '.': `explain 'hello, Q!'` showed the tokens
// "hello" and " " and generate continued "hello" alone, the rest dropped without a word.
TEST(GenerateCli, ACharacterTheVocabularyCannotSpellIsRefused) {
  const test::ScratchDir dir("qkv-generate");
  const std::string file = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  const std::string refused =
      "qkv: error: the text's character 'Q' (byte 0x51) has no token in this model's vocabulary "
      "(it lacks 227 of the 256 byte tokens); expected only characters the vocabulary can spell\n";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"generate", "hello Q", "--max-tokens", "1", "--model", file},
        std::vector<std::string>{"generate", "--chat", "hello Q", "--max-tokens", "1", "--model",
                                 file},
        std::vector<std::string>{"explain", "hello Q", "--model", file}}) {
    const CliResult r = run_qkv(args);
    expect_one_line_error(r, 2, "");
    EXPECT_EQ(r.err, refused) << r.describe();
  }
}

// A ChatML template over a vocabulary without its markers: --chat split "<|im_start|>" into
// characters and said the prompt was too long for the context; plain text still continues.
TEST(GenerateCli, ChatNeedsTheTemplatesMarkersInTheVocabulary) {
  const test::ScratchDir dir("qkv-generate");
  std::vector<std::string> tokens = test::tiny_llama_tokens();
  tokens[1] = "<|xx_start|>";
  tokens[2] = "<|xx_end|>";
  const std::string file = test::tiny_llama_gguf()
                               .set("tokenizer.ggml.tokens", test::gguf_strings(tokens))
                               .write(dir.path("no-markers.gguf"));
  const CliResult chat = run_qkv({"generate", "--chat", "hello", "--model", file});
  expect_one_line_error(chat, 2, "");
  EXPECT_EQ(chat.err, "qkv: error: --model " + file +
                          ": its chat template uses <|im_start|> but its vocabulary has no such "
                          "token; expected ChatML's markers <|im_start|> and <|im_end|> as control "
                          "tokens of its vocabulary\n");
  const CliResult plain = run_qkv({"generate", "hello", "--max-tokens", "1", "--model", file});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_THAT(plain.out, StartsWith("hello"));
}

// A file whose tensors or tokenizer arrays are not what a Llama decoder holds is bad input, one
// line (exit 2): it ran (an extra tensor, a token type of 99) or leaked a JSON library message.
TEST(GenerateCli, AHostileTokenizerOrTensorTableIsOneLine) {
  const test::ScratchDir dir("qkv-generate");
  test::TinyLlamaGguf extra = test::tiny_llama_gguf();
  extra.tensors.push_back({"zzz.weight", {4}, {}});
  std::vector<int32_t> types(40, 1), ids(40);
  types[0] = types[1] = types[2] = 3;
  types[5] = 99;
  for (int32_t i = 0; i < 40; ++i) ids[static_cast<std::size_t>(i)] = i;
  const std::vector<std::pair<test::TinyLlamaGguf, std::string>> cases = {
      {extra,
       "it holds a tensor \"zzz.weight\" that a llama decoder of 2 layers does not have; expected "
       "only the tensors of its layers (token_embd, blk.0 … blk.1, output_norm, output)"},
      {test::tiny_llama_gguf().set("tokenizer.ggml.token_type", test::gguf_i32s(types)),
       "metadata \"tokenizer.ggml.token_type\" gives token 5 (\"c\") the type 99; expected 0 to "
       "6 (llama.cpp's token types: 0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, "
       "5 unused, 6 byte)"},
      {test::tiny_llama_gguf().set("tokenizer.ggml.tokens", test::gguf_i32s(ids)),
       "metadata \"tokenizer.ggml.tokens\" is an array of 40 integers; expected the vocabulary, "
       "an array of strings"}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string file =
        cases[i].first.write(dir.path("hostile" + std::to_string(i) + ".gguf"));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"generate", "hello", "--max-tokens", "1", "--model", file},
          std::vector<std::string>{"explain", "hello", "--model", file}}) {
      const CliResult r = run_qkv(args);
      expect_one_line_error(r, 2, "");
      EXPECT_EQ(r.err, "qkv: error: --model " + file + ": " + cases[i].second + "\n")
          << r.describe();
    }
  }
}

// Weights that overflow float32 printed "<|endoftext|><|endoftext|><|endoftext|>", exit 0, where
// explain on the same file reported the NaN.
TEST(GenerateCli, NonFiniteLogitsAreAnErrorAsInExplain) {
  const test::ScratchDir dir("qkv-generate");
  test::TinyLlamaGguf g = test::tiny_llama_gguf();
  g.tensor("output_norm.weight").values.assign(16, 3e38f);
  const std::string file = g.write(dir.path("overflow.gguf"));
  const CliResult r = run_qkv({"generate", "hello the", "--max-tokens", "3", "--model", file});
  expect_one_line_error(r, 1, "the next-token logits of the prompt came out ");
  EXPECT_THAT(r.err, HasSubstr("; the model computes non-finite numbers (its weights overflow "
                               "float32 or are corrupt), so there is no next token to choose"));
  EXPECT_THAT(r.err, Not(HasSubstr("endoftext")));
  expect_one_line_error(run_qkv({"explain", "hello the", "--model", file}), 1,
                        "the next-token probabilities came out NaN; the model computes "
                        "non-finite numbers");
}

// A model of zero weights (all finite) gives every token the logit 0, and greedy picks id 0,
// <|endoftext|>: generate printed "hello the<|endoftext|><|endoftext|><|endoftext|>", exit 0. A
// token spelled as an end marker ends the text, as in llama.cpp, whatever id the file names as
// its end of text; any other control token is markup, never printed.
TEST(GenerateCli, ControlTokensAreNotTextAndEndMarkersEndIt) {
  const test::ScratchDir dir("qkv-generate");
  const std::string zero = test::zero_llama_gguf(2, 16, 4, 2, 24).write(dir.path("zero.gguf"));
  const CliResult ended = run_qkv({"generate", "hello the", "--max-tokens", "3", "--model", zero});
  ASSERT_EQ(ended.exit_code, 0) << ended.describe();
  EXPECT_EQ(ended.out, "hello the\n");
  // Every hidden state the same, the output matrix's row 1 alone aligned with it: greedy picks
  // <|im_start|> (id 1, a control token that ends nothing) every time.
  test::TinyLlamaGguf g = test::zero_llama_gguf(2, 16, 4, 2, 24);
  g.tensor("token_embd.weight").values.assign(40 * 16, 1.0f);
  g.tensor("output_norm.weight").values.assign(16, 1.0f);
  std::vector<float> output(40 * 16, 0.0f);
  std::fill_n(output.begin() + 16, 16, 1.0f);
  g.tensors.push_back({"output.weight", {16, 40}, output});
  const std::string start = g.write(dir.path("start.gguf"));
  const CliResult markup =
      run_qkv({"generate", "hello the", "--max-tokens", "3", "--model", start});
  ASSERT_EQ(markup.exit_code, 0) << markup.describe();
  EXPECT_EQ(markup.out, "hello the\n");
  // The same model with row 3 ("a"): a normal token is text.
  std::fill_n(output.begin() + 16, 16, 0.0f);
  std::fill_n(output.begin() + 3 * 16, 16, 1.0f);
  g.tensor("output.weight").values = output;
  const CliResult text = run_qkv(
      {"generate", "hello the", "--max-tokens", "3", "--model", g.write(dir.path("a.gguf"))});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_EQ(text.out, "hello theaaa\n");
}

// --seed -1 and --seed 18446744073709551616 both ran as 2⁶⁴ − 1; "010" as octal 8.
TEST(GenerateCli, ASeedOutsideItsRangeIsRefused) {
  for (const std::string seed : {"-1", "18446744073709551616"})
    expect_one_line_error(run_qkv({"generate", "hi", "--seed", seed}), 2,
                          "--seed: " + seed + " is out of range; expected 0 to 2^64 - 1");
  for (const std::string seed : {"1e3", "0x10", "+5"})
    expect_one_line_error(run_qkv({"generate", "hi", "--seed", seed}), 2,
                          "--seed: " + seed + " is not a decimal integer; expected 0 to 2^64 - 1");
  const test::ScratchDir dir("qkv-generate");
  const std::string file = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  const auto sampled = [&](const std::string& seed) {
    return run_qkv({"generate", "hello", "--temperature", "1", "--max-tokens", "8", "--seed", seed,
                    "--model", file});
  };
  const CliResult top = sampled("18446744073709551615");
  ASSERT_EQ(top.exit_code, 0) << top.describe();
  // Decimal, whatever its zeros: 010 is seed 10, not 8.
  const CliResult ten = sampled("10"), padded = sampled("010"), eight = sampled("8");
  ASSERT_EQ(padded.exit_code, 0) << padded.describe();
  EXPECT_EQ(padded.out, ten.out);
  EXPECT_NE(padded.out, eight.out) << "seeds 8 and 10 happen to sample alike: pick others";
}

// A prompt that reaches the context stopped after 22 of 40 tokens, exit 0, without a word.
TEST(GenerateCli, StoppingAtTheContextIsSaid) {
  const test::ScratchDir dir("qkv-generate");
  // No end-of-text token: nothing but the context or --max-tokens stops it. "hello hello hello"
  // is 5 tokens: hello, Ġ hello, Ġ hello (the merges h e, l l, he ll, hell o).
  const std::string file =
      test::tiny_llama_gguf().erase("tokenizer.ggml.eos_token_id").write(dir.path("tiny.gguf"));
  const CliResult r =
      run_qkv({"generate", "hello hello hello", "--max-tokens", "40", "--model", file});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err,
            "qkv: note: stopped after 27 of 40 tokens: the prompt (5 tokens) and the text "
            "generated fill the model's context of 32 positions\n");
  EXPECT_THAT(r.out, StartsWith("hello hello hello"));
  const CliResult exact =
      run_qkv({"generate", "hello hello hello", "--max-tokens", "27", "--model", file});
  ASSERT_EQ(exact.exit_code, 0) << exact.describe();
  EXPECT_EQ(exact.err, "");
  EXPECT_EQ(exact.out, r.out);
  // A prompt longer than the context is refused before anything is printed.
  std::string long_prompt = "hello";
  for (int i = 0; i < 16; ++i) long_prompt += " hello";
  expect_one_line_error(run_qkv({"generate", long_prompt, "--model", file}), 2,
                        "generate: the prompt is 33 tokens; the model reads at most 32 (its "
                        "context length)");
}

// bench model on a decoder with a short context said "llama: 64 positions; the model reads at most
// 32", from somewhere inside.
TEST(GenerateCli, BenchModelSaysWhenTheContextIsTooShort) {
  const test::ScratchDir dir("qkv-generate");
  const std::string file = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  expect_one_line_error(run_qkv({"bench", "model", "--quick", "--model", file}), 2,
                        "--model " + file +
                            ": the model reads at most 32 positions; the bench needs 160 "
                            "(prompt-128, then decode-32)");
}

// A vocabulary without the byte symbols of English letters drops every byte of the bench's English
// prompt: the bench grew its text forever (killed after 20 s).
TEST(GenerateCli, BenchModelRefusesAVocabularyThatCannotSpellItsPrompt) {
  const test::ScratchDir dir("qkv-generate");
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 36; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  tokens.push_back("<t0><t1>");
  const std::string file = test::tiny_llama_gguf()
                               .set("tokenizer.ggml.tokens", test::gguf_strings(tokens))
                               .set("tokenizer.ggml.merges", test::gguf_strings({"<t0> <t1>"}))
                               .set("llama.context_length", test::gguf_u32(1024))
                               .write(dir.path("no-letters.gguf"));
  const CliResult r =
      run_qkv({"bench", "model", "--quick", "--model", file}, RunOptions{.timeout_s = 60});
  ASSERT_FALSE(r.timed_out) << r.describe();
  expect_one_line_error(r, 2, "--model " + file + ": its tokenizer makes 0 tokens of ");
  EXPECT_THAT(r.err, HasSubstr(" bytes of English-like text; expected a vocabulary that covers "
                               "the bytes of English text (the bench needs 128 tokens)"));
}

// What each command's --model takes, as its help says it.
TEST(GenerateCli, ModelHelpSaysWhatEachCommandTakes) {
  const CliResult explain = run_qkv({"explain", "--help"});
  EXPECT_THAT(explain.out, HasSubstr("smollm2 or a GGUF file"));
  EXPECT_THAT(explain.out, HasSubstr("saved by qkv train"));
  const CliResult bench = run_qkv({"bench", "model", "--help"});
  EXPECT_THAT(bench.out, HasSubstr("smollm2 or a GGUF file"));
  EXPECT_THAT(bench.out, Not(HasSubstr("qkv train")));
  for (const char* command : {"embed", "search", "similarity"}) {
    const CliResult r = run_qkv({command, "--help"});
    EXPECT_THAT(r.out, HasSubstr("--model DIR")) << command;
    EXPECT_THAT(r.out, Not(HasSubstr("GGUF"))) << command;
  }
  EXPECT_THAT(run_qkv({"generate", "--help"}).out, HasSubstr("whatever its name"));
}

// ---- --explain: each token with the heads that carried it and the KV cache ----

// The tokens --explain shows are plain generation's: its JSON's generated texts after the prompt
// are exactly plain generate's output; the text view streams one block a token.
TEST(GenerateCli, ExplainShowsPlainGenerationsTokens) {
  test::smollm2_gguf();
  const CliResult plain = run_qkv({"generate", "The capital of France is", "--max-tokens", "4"});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  const CliResult json =
      run_qkv({"generate", "The capital of France is", "--max-tokens", "4", "--explain", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  const nlohmann::json j = nlohmann::json::parse(json.out);
  std::string text = "The capital of France is";
  for (const nlohmann::json& step : j.at("steps")) text += step.at("text").get<std::string>();
  EXPECT_EQ(text + "\n", plain.out);
  ASSERT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][0]["id"], 7042);  // " Paris"
  // 30 layers × 3 kv heads × 64 floats × K and V × 4 bytes, at 5 and then 8 positions.
  EXPECT_EQ(j["steps"][0]["cache_bytes"], 30 * 3 * 5 * 64 * 2 * 4);
  EXPECT_EQ(j["steps"][3]["cache_bytes"], 30 * 3 * 8 * 64 * 2 * 4);
  EXPECT_EQ(j["steps"][0]["queries"], 5);
  EXPECT_EQ(j["steps"][3]["queries"], 1);
  const CliResult shown =
      run_qkv({"generate", "The capital of France is", "--max-tokens", "2", "--explain"});
  ASSERT_EQ(shown.exit_code, 0) << shown.describe();
  EXPECT_THAT(shown.out, HasSubstr("kv0 ← h0 h1 h2"));
  EXPECT_THAT(shown.out, HasSubstr("#1 \" Paris\""));
  EXPECT_THAT(shown.out, HasSubstr("#2 "));
  EXPECT_THAT(shown.out, HasSubstr("Text: \"" + plain.out.substr(0, 30)));
}

TEST(GenerateCli, ExplainJsonHasTheDocumentedKeysOnATinyModel) {
  const test::ScratchDir dir("qkv-generate");
  const std::string file = test::tiny_llama_gguf().write(dir.path("tiny.gguf"));
  const CliResult r =
      run_qkv({"generate", "hello", "--max-tokens", "3", "--model", file, "--explain", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"cache", "prompt_tokens", "tokens", "steps"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key :
       {"layers", "heads", "kv_heads", "head_dim", "group", "bytes_per_position", "sharing"})
    EXPECT_TRUE(j["cache"].contains(key)) << key;
  const nlohmann::json& c = j["cache"];
  EXPECT_EQ(c["bytes_per_position"], c["layers"].get<int64_t>() * c["kv_heads"].get<int64_t>() *
                                         c["head_dim"].get<int64_t>() * 2 * 4);
  ASSERT_FALSE(j["steps"].empty());
  for (const char* key : {"step", "id", "text", "positions", "queries", "cache_bytes", "logit",
                          "log_prob", "attribution", "heads"})
    EXPECT_TRUE(j["steps"][0].contains(key)) << key;
  for (const char* key : {"layer", "head", "kv_head", "attribution", "looked"})
    EXPECT_TRUE(j["steps"][0]["heads"][0].contains(key)) << key;
}

TEST(GenerateCli, ExplainRefusesASentenceModelAndJsonAlone) {
  // --model minilm was read as the default decoder, unsaid (it generated SmolLM2's text).
  expect_one_line_error(run_qkv({"generate", "hi", "--model", "minilm", "--explain"}), 2,
                        "--model minilm is a sentence encoder; expected a decoder LLM");
  expect_one_line_error(run_qkv({"generate", "hi", "--model", "minilm"}), 2,
                        "--model minilm is a sentence encoder; expected a decoder LLM");
  const CliResult json = run_qkv({"generate", "hi", "--json"});
  EXPECT_EQ(json.exit_code, 2) << json.describe();
  EXPECT_THAT(json.err, HasSubstr("--json requires --explain"));
}

}  // namespace
}  // namespace qkv::testing
