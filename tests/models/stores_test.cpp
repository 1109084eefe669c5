// --model's names (qkv/model_stores.h): each store's name forms resolved to the file the store
// keeps, ambiguity and unknown names said in one line, nothing followed out of a store, no FIFO
// waited on, the built-in names first; and what `qkv models` reads of each file's header.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/fake_stores.h"
#include "qkv/model.h"
#include "qkv/model_stores.h"

namespace qkv {
namespace {

using test::FakeStores;
using test::ScopedEnv;
using test::tiny_gguf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The error `resolve_model(name)` throws (and that it is a usage error); "" when none.
std::string resolve_error(const std::string& name) {
  try {
    (void)resolve_model(name);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

TEST(ModelStores, OllamaNamesAsOllamaUsersTypeThem) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const std::string gguf = tiny_gguf();
  const fs::path one_b = s.ollama_model("registry.ollama.ai", "library", "llama3.2", "1b", gguf);
  const fs::path latest =
      s.ollama_model("registry.ollama.ai", "library", "llama3.2", "latest", gguf);
  const fs::path qwen =
      s.ollama_model("registry.ollama.ai", "library", "qwen2.5", "0.5b-instruct-q4_K_M", gguf);
  const fs::path user = s.ollama_model("registry.ollama.ai", "someone", "model", "tag", gguf);
  const fs::path hf = s.ollama_model("hf.co", "bartowski", "X-GGUF", "Q4_K_M", gguf);
  EXPECT_EQ(resolve_model("llama3.2:1b"), one_b.string());
  EXPECT_EQ(resolve_model("llama3.2"), latest.string());  // the tag "latest"
  EXPECT_EQ(resolve_model("llama3.2:latest"), latest.string());
  EXPECT_EQ(resolve_model("registry.ollama.ai/library/llama3.2:1b"), one_b.string());
  EXPECT_EQ(resolve_model("qwen2.5:0.5b-instruct-q4_K_M"), qwen.string());
  EXPECT_EQ(resolve_model("someone/model:tag"), user.string());
  EXPECT_EQ(resolve_model("hf.co/bartowski/X-GGUF:Q4_K_M"), hf.string());
  // A tag the store does not hold is no model.
  EXPECT_THAT(resolve_error("llama3.2:3b"), HasSubstr("no model \"llama3.2:3b\""));
  // $OLLAMA_MODELS moves the store.
  fs::rename(s.ollama(), s.scratch("elsewhere"));
  EXPECT_THAT(resolve_error("llama3.2:1b"), HasSubstr("no model"));
  const ScopedEnv moved({{"OLLAMA_MODELS", s.scratch("elsewhere").string()}});
  EXPECT_EQ(resolve_model("llama3.2:1b"),
            (s.scratch("elsewhere") / one_b.lexically_relative(s.ollama())).string());
}

TEST(ModelStores, LmStudioByRepositoryFileOrStem) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const fs::path m = s.lm_studio_model("lmstudio-community", "Llama-3.2-1B-Instruct-GGUF",
                                       "Llama-3.2-1B-Instruct-Q4_K_M.gguf", tiny_gguf());
  // A vision repository's projector beside the model is not what the repository's name means.
  s.lm_studio_model("lmstudio-community", "Llama-3.2-1B-Instruct-GGUF", "mmproj-model-f16.gguf",
                    tiny_gguf("clip"));
  const fs::path old =
      s.lm_studio_model("TheBloke", "Old-GGUF", "old.Q8_0.gguf", tiny_gguf(), /*old=*/true);
  EXPECT_EQ(resolve_model("lmstudio-community/Llama-3.2-1B-Instruct-GGUF"), m.string());
  EXPECT_EQ(resolve_model("lmstudio-community/Llama-3.2-1B-Instruct-GGUF/"
                          "Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
            m.string());
  EXPECT_EQ(resolve_model("Llama-3.2-1B-Instruct-Q4_K_M"), m.string());
  EXPECT_EQ(resolve_model("TheBloke/Old-GGUF"), old.string());  // ~/.cache/lm-studio/models
  EXPECT_EQ(resolve_model("old.Q8_0"), old.string());
}

TEST(ModelStores, HuggingFaceCacheByRepositoryOrFile) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const fs::path one = s.hugging_face_model(s.hugging_face(), "bartowski", "One-GGUF", "abc123",
                                            "One-Q4_K_M.gguf", tiny_gguf());
  const fs::path a = s.hugging_face_model(s.hugging_face(), "org", "Two-GGUF", "r1",
                                          "Two-Q4_K_M.gguf", tiny_gguf());
  const fs::path b = s.hugging_face_model(s.hugging_face(), "org", "Two-GGUF", "r1",
                                          "Q8_0/Two-Q8_0.gguf", tiny_gguf());
  EXPECT_EQ(resolve_model("bartowski/One-GGUF"), one.string());
  EXPECT_EQ(resolve_model("bartowski/One-GGUF/One-Q4_K_M.gguf"), one.string());
  EXPECT_EQ(resolve_model("org/Two-GGUF/Two-Q4_K_M.gguf"), a.string());
  EXPECT_EQ(resolve_model("org/Two-GGUF/Q8_0/Two-Q8_0.gguf"), b.string());
  // Two files in one repository: the name asks which, listing both.
  const std::string two = resolve_error("org/Two-GGUF");
  EXPECT_THAT(two, HasSubstr("\"org/Two-GGUF\" names 2 models: "));
  EXPECT_THAT(two, HasSubstr("org/Two-GGUF/Q8_0/Two-Q8_0.gguf (Hugging Face: "));
  EXPECT_THAT(two, HasSubstr("org/Two-GGUF/Two-Q4_K_M.gguf (Hugging Face: "));
  // refs/main picks its snapshot over an older one.
  const fs::path newer = s.hugging_face_model(s.hugging_face(), "bartowski", "One-GGUF", "def456",
                                              "One-Q4_K_M.gguf", tiny_gguf());
  EXPECT_EQ(resolve_model("bartowski/One-GGUF"), newer.string());
  // HF_HUB_CACHE, else HF_HOME/hub.
  const fs::path hub = s.scratch("hub");
  const fs::path moved = s.hugging_face_model(hub, "o", "r", "x", "m.gguf", tiny_gguf());
  EXPECT_THAT(resolve_error("o/r"), HasSubstr("no model"));
  {
    const ScopedEnv cache({{"HF_HUB_CACHE", hub.string()}});
    EXPECT_EQ(resolve_model("o/r"), moved.string());
  }
  fs::create_directories(s.scratch("hf-home"));
  fs::rename(hub, s.scratch("hf-home") / "hub");
  const ScopedEnv home({{"HF_HOME", s.scratch("hf-home").string()}});
  EXPECT_EQ(resolve_model("o/r"),
            (s.scratch("hf-home") / "hub" / moved.lexically_relative(hub)).string());
}

TEST(ModelStores, ANameInTwoStoresListsBoth) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const fs::path lm = s.lm_studio_model("pub", "repo", "m.gguf", tiny_gguf());
  const fs::path hf =
      s.hugging_face_model(s.hugging_face(), "pub", "repo", "r", "m.gguf", tiny_gguf());
  EXPECT_EQ(
      resolve_error("pub/repo"),
      "\"pub/repo\" names 2 models: pub/repo (LM Studio: ~/.lmstudio/models/pub/repo/m.gguf), "
      "pub/repo (Hugging Face: ~/.cache/huggingface/hub/models--pub--repo/snapshots/r/m.gguf)"
      "; expected one of their names or paths");
  // Each file's path still opens it.
  EXPECT_EQ(resolve_model(lm.string()), lm.string());
  EXPECT_EQ(resolve_model(hf.string()), hf.string());
}

TEST(ModelStores, AnUnknownNameSaysWhereItLooked) {
  FakeStores s;
  const ScopedEnv env(s.env());
  EXPECT_EQ(resolve_error("llama3.2:1b"),
            "no model \"llama3.2:1b\": not a file, not a built-in name, not in Ollama "
            "(~/.ollama/models), LM Studio (~/.lmstudio/models, ~/.cache/lm-studio/models), the "
            "Hugging Face cache (~/.cache/huggingface/hub); `qkv models` lists what is here");
  // Names that would step out of a store's folder are no store's names.
  s.lm_studio_model("pub", "repo", "m.gguf", tiny_gguf());
  for (const std::string name : {"pub/../pub/repo", "pub/./repo", "x/..", "pub//repo"})
    EXPECT_THAT(resolve_error(name), HasSubstr("no model")) << name;
  // A path, missing, is left to its opener (which says it is missing), not looked up.
  EXPECT_EQ(resolve_model("/no/such/file.gguf"), "/no/such/file.gguf");
  EXPECT_EQ(resolve_model("./x.gguf"), "./x.gguf");
  EXPECT_EQ(resolve_model("~/x.gguf"), "~/x.gguf");
}

TEST(ModelStores, AManifestPointingOutsideIsRefused) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const std::string secret = (s.scratch("secret.gguf")).string();
  FakeStores::write(secret, tiny_gguf());
  // A digest that is a path: refused before any file is opened.
  s.ollama_manifest("registry.ollama.ai", "library", "evil", "latest",
                    FakeStores::manifest_json("sha256:../../../../secret.gguf"));
  EXPECT_EQ(resolve_error("evil"),
            "\"evil\" (Ollama): Ollama's manifest "
            "~/.ollama/models/manifests/registry.ollama.ai/library/evil/latest names the blob "
            "\"sha256:../../../../secret.gguf\"; expected \"sha256:\" and 64 hex digits");
  // A blob that links out of blobs/.
  const std::string hex(64, 'e');
  fs::create_directories(s.ollama() / "blobs");
  fs::create_symlink(secret, s.ollama() / "blobs" / ("sha256-" + hex));
  s.ollama_manifest("registry.ollama.ai", "library", "link", "latest",
                    FakeStores::manifest_json("sha256:" + hex));
  EXPECT_THAT(resolve_error("link"), HasSubstr("Ollama's blob ~/.ollama/models/blobs/sha256-" +
                                               hex + " links outside ~/.ollama/models/blobs"));
  // A manifest without a model layer, or not JSON.
  s.ollama_manifest("registry.ollama.ai", "library", "nomodel", "latest",
                    R"({"layers":[{"mediaType":"application/vnd.ollama.image.license"}]})");
  EXPECT_THAT(resolve_error("nomodel"),
              HasSubstr("has no layer of mediaType application/vnd.ollama.image.model"));
  s.ollama_manifest("registry.ollama.ai", "library", "garbage", "latest", "{not json");
  EXPECT_THAT(resolve_error("garbage"), HasSubstr("is not a manifest"));
  // A Hugging Face snapshot's link out of its repository.
  const fs::path link = s.hugging_face() / "models--o--r" / "snapshots" / "x" / "m.gguf";
  fs::create_directories(link.parent_path());
  fs::create_symlink(secret, link);
  EXPECT_THAT(resolve_error("o/r"),
              HasSubstr(" links outside ~/.cache/huggingface/hub/models--o--r"));
}

TEST(ModelStores, AFifoBlobIsNotWaitedOn) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const test::Watchdog watchdog(20);
  const std::string hex(64, 'f');
  fs::create_directories(s.ollama() / "blobs");
  ASSERT_EQ(::mkfifo((s.ollama() / "blobs" / ("sha256-" + hex)).c_str(), 0644), 0);
  s.ollama_manifest("registry.ollama.ai", "library", "pipe", "latest",
                    FakeStores::manifest_json("sha256:" + hex));
  EXPECT_EQ(resolve_error("pipe"), "\"pipe\" (Ollama) is ~/.ollama/models/blobs/sha256-" + hex +
                                       ", which is not a GGUF file (it is a FIFO (named pipe))");
  // A FIFO manifest too.
  ASSERT_EQ(
      ::mkfifo(
          (s.ollama() / "manifests" / "registry.ollama.ai" / "library" / "pipe" / "fifo").c_str(),
          0644),
      0);
  EXPECT_THAT(resolve_error("pipe:fifo"), HasSubstr("is a FIFO"));
  // And listing the store neither hangs nor fails.
  const std::vector<StoredModel> listed = stored_models();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "pipe:fifo");
  EXPECT_THAT(listed[0].error, HasSubstr("is a FIFO"));
  EXPECT_EQ(listed[1].name, "pipe:latest");
  EXPECT_THAT(summarize_gguf(listed[1].path).error, HasSubstr("is a FIFO"));
}

TEST(ModelStores, BuiltInNamesAndPathsWin) {
  FakeStores s;
  const ScopedEnv env(s.env());
  // Ollama holding "smollm2" and "minilm" changes nothing: the built-in names come first.
  s.ollama_model("registry.ollama.ai", "library", "smollm2", "latest", tiny_gguf());
  s.ollama_model("registry.ollama.ai", "library", "minilm", "latest", tiny_gguf());
  for (const std::string name : {"smollm2", "minilm", "", "all-MiniLM-L6-v2"})
    EXPECT_EQ(resolve_model(name), name);
  EXPECT_EQ(model_family("smollm2").name, "llama");
  EXPECT_EQ(model_family("minilm").name, "bert");
  // An existing path is itself, whatever a store calls by the same name.
  const fs::path local = s.scratch("pub");
  fs::create_directories(local / "repo");
  s.lm_studio_model("pub", "repo", "m.gguf", tiny_gguf());
  const fs::path cwd = fs::current_path();
  fs::current_path(s.scratch(""));
  EXPECT_EQ(resolve_model("pub/repo"), "pub/repo");
  fs::current_path(cwd);
}

TEST(ModelStores, TheRegistryOpensAStoresFile) {
  FakeStores s;
  const ScopedEnv env(s.env());
  const fs::path blob =
      s.ollama_model("registry.ollama.ai", "library", "tiny", "latest", tiny_gguf());
  EXPECT_EQ(model_kind("tiny"), ModelKind::causal_lm);
  EXPECT_EQ(model_family("tiny").name, "llama");
  const Model m = open_model("tiny", {.load_weights = false});
  EXPECT_EQ(m.info().path, blob.string());
  EXPECT_EQ(m.info().layers, 2);
  EXPECT_EQ(m.info().heads, 4);
  // model_kind classifies without opening: an unknown name is claimed as written (a BERT
  // directory's name); opening it says no store has it.
  EXPECT_EQ(model_kind("nope"), ModelKind::sentence_encoder);
  try {
    (void)open_model("nope", {.load_weights = false});
    ADD_FAILURE() << "no error for an unknown name";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no model \"nope\""));
  }
}

TEST(ModelStores, TheListingNamesEachFileAsResolutionTakesIt) {
  FakeStores s;
  const ScopedEnv env(s.env());
  s.ollama_model("registry.ollama.ai", "library", "llama3.2", "1b", tiny_gguf());
  s.ollama_model("hf.co", "bartowski", "X-GGUF", "Q4_K_M", tiny_gguf());
  s.lm_studio_model("pub", "repo", "m.gguf", tiny_gguf());
  s.lm_studio_model("pub", "repo", "mmproj-f16.gguf", tiny_gguf("clip"));
  s.lm_studio_model("pub", "two", "a.gguf", tiny_gguf());
  s.lm_studio_model("pub", "two", "b.gguf", tiny_gguf());
  s.hugging_face_model(s.hugging_face(), "org", "repo", "r", "f.gguf", tiny_gguf());
  s.ollama_manifest("registry.ollama.ai", "library", "broken", "latest", "{");
  std::vector<std::string> names;
  for (const StoredModel& m : stored_models()) {
    names.push_back(m.name + " " + std::string(to_string(m.store)));
    if (!m.error.empty()) {
      EXPECT_THAT(m.error, HasSubstr("is not a manifest"));
      continue;
    }
    EXPECT_EQ(m.bytes, fs::file_size(m.path)) << m.name;
    // Every listed name opens the listed file.
    EXPECT_EQ(fs::canonical(resolve_model(m.name)), fs::canonical(m.path)) << m.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "broken:latest Ollama", "hf.co/bartowski/X-GGUF:Q4_K_M Ollama",
                "llama3.2:1b Ollama", "pub/repo LM Studio", "pub/repo/mmproj-f16.gguf LM Studio",
                "pub/two/a.gguf LM Studio", "pub/two/b.gguf LM Studio", "org/repo Hugging Face"}));
}

TEST(ModelStores, AHeaderSummarized) {
  FakeStores s;
  // The parameters counted here from the writer's own tensors, not through the reader.
  int64_t parameters = 0;
  for (const test::GgufTensor& t : test::tiny_llama_gguf().tensors) {
    int64_t n = 1;
    for (const uint64_t d : t.ne) n *= static_cast<int64_t>(d);
    parameters += n;
  }
  const fs::path q4 = s.scratch("q4.gguf"), plain = s.scratch("plain.gguf"),
                 qwen = s.scratch("qwen.gguf"), bad = s.scratch("bad.gguf");
  FakeStores::write(q4, tiny_gguf("llama", 15));
  FakeStores::write(plain, tiny_gguf());
  FakeStores::write(qwen, tiny_gguf("qwen2", 7));
  FakeStores::write(bad, tiny_gguf().substr(0, 100));
  const GgufSummary a = summarize_gguf(q4.string());
  EXPECT_EQ(a.architecture, "llama");
  EXPECT_EQ(a.quantization, "Q4_K_M");  // llama.h: LLAMA_FTYPE_MOSTLY_Q4_K_M = 15
  EXPECT_EQ(a.parameters, parameters);
  EXPECT_NE(a.parameters, parameters + 1);
  EXPECT_TRUE(a.runs);
  EXPECT_TRUE(a.error.empty());
  // Without general.file_type: the type most parameters are stored in.
  EXPECT_EQ(summarize_gguf(plain.string()).quantization, "F32");
  const GgufSummary b = summarize_gguf(qwen.string());
  EXPECT_EQ(b.architecture, "qwen2");
  EXPECT_EQ(b.quantization, "Q8_0");  // LLAMA_FTYPE_MOSTLY_Q8_0 = 7
  EXPECT_TRUE(b.runs);  // qwen2 is one of supported_gguf_architectures()
  const GgufSummary c = summarize_gguf(bad.string());
  EXPECT_THAT(c.error, HasSubstr(bad.string()));
  EXPECT_EQ(c.error.find('\n'), std::string::npos);
  EXPECT_TRUE(c.architecture.empty());
  EXPECT_FALSE(c.runs);
}

TEST(ModelStores, FileTypeNamesAreLlamaCpps) {
  // llama.h's enum llama_ftype, value by value.
  const std::vector<std::pair<int64_t, std::string>> known = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},  {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"}, {12, "Q3_K_M"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {17, "Q5_K_M"}, {18, "Q6_K"}, {30, "IQ4_XS"}, {32, "BF16"}};
  for (const auto& [type, name] : known) EXPECT_EQ(gguf_file_type_name(type), name) << type;
  EXPECT_EQ(gguf_file_type_name(4), "");  // retired
  EXPECT_EQ(gguf_file_type_name(1024), "");
}

}  // namespace
}  // namespace qkv
