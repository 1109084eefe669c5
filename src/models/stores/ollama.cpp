// Ollama's store: manifests/HOST/NAMESPACE/MODEL/TAG, each a JSON manifest whose model layer names
// a blob by its digest, blobs/sha256-HEX. Learned from Ollama's layout on disk (its
// types/model/name.go: the default host registry.ollama.ai, namespace library, tag latest).
#include <nlohmann/json.hpp>

#include "models/stores/stores.h"
#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv::stores {

namespace {

constexpr const char* kDefaultHost = "registry.ollama.ai";
constexpr const char* kDefaultNamespace = "library";
constexpr const char* kModelLayer = "application/vnd.ollama.image.model";
// A manifest lists a few layers: a kilobyte or two. Far above that is no manifest.
constexpr uint64_t kMaxManifestBytes = 1 << 20;

bool is_sha256_hex(const std::string& hex) {
  if (hex.size() != 64) return false;
  for (const char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The digest of the manifest's model layer, as "HEX"; a qkv::Error naming the manifest when it
// is not JSON, has no model layer, or names a digest that is not sha256 and 64 hex digits (one
// like "sha256:../../x" would step out of blobs/).
std::string model_layer_digest(const fs::path& manifest) {
  const std::string text = read_input_file(
      manifest.string(), {.expected = "an Ollama manifest (JSON)", .max_bytes = kMaxManifestBytes});
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const std::string where = "Ollama's manifest " + shown(manifest);
  if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    throw Error(where + " is not a manifest; expected JSON with \"layers\"");
  for (const nlohmann::json& layer : j["layers"]) {
    if (!layer.is_object() || layer.value("mediaType", nlohmann::json()) != kModelLayer) continue;
    const nlohmann::json digest = layer.value("digest", nlohmann::json());
    const std::string d = digest.is_string() ? digest.get<std::string>() : digest.dump();
    if (!d.starts_with("sha256:") || !is_sha256_hex(d.substr(7)))
      throw Error(where + " names the blob \"" + d.substr(0, 80) +
                  "\"; expected \"sha256:\" and 64 hex digits");
    return d.substr(7);
  }
  throw Error(where + " has no layer of mediaType " + kModelLayer + " (not a GGUF model)");
}

// The candidate a manifest makes: its blob, or why it cannot be opened.
Candidate from_manifest(const fs::path& root, const fs::path& manifest, std::string name) {
  Candidate c{.name = std::move(name), .store = ModelStore::ollama, .path = manifest};
  try {
    const fs::path blobs = root / "blobs";
    const fs::path blob = blobs / ("sha256-" + model_layer_digest(manifest));
    std::error_code ec;
    if (fs::symlink_status(blob, ec).type() == fs::file_type::not_found)
      throw Error("Ollama's manifest " + shown(manifest) + " names the blob " + shown(blob) +
                  ", which is missing");
    if (!inside(blob, blobs))
      throw Error("Ollama's blob " + shown(blob) + " links outside " + shown(blobs));
    c.path = blob;
  } catch (const Error& e) {
    c.error = e.what();
  }
  return c;
}

// "llama3.2:1b" → {host, namespace, model, tag}; empty when the name is not one Ollama could hold.
std::vector<std::string> ollama_parts(const std::string& name) {
  const std::size_t slash = name.rfind('/');
  const std::size_t colon = name.find(':', slash == std::string::npos ? 0 : slash + 1);
  const std::string tag = colon == std::string::npos ? "latest" : name.substr(colon + 1);
  std::vector<std::string> parts = safe_segments(name.substr(0, colon));
  if (parts.empty() || parts.size() > 3 || safe_segments(tag).size() != 1) return {};
  if (parts.size() == 1) parts.insert(parts.begin(), kDefaultNamespace);
  if (parts.size() == 2) parts.insert(parts.begin(), kDefaultHost);
  parts.push_back(tag);
  return parts;
}

// The name Ollama's users type for a manifest at HOST/NAMESPACE/MODEL/TAG: the default host and
// namespace left out, as `ollama list` shows it.
std::string ollama_name(const std::vector<std::string>& p) {
  std::string name = p[2] + ":" + p[3];
  if (p[0] != kDefaultHost) return p[0] + "/" + p[1] + "/" + name;
  if (p[1] != kDefaultNamespace) return p[1] + "/" + name;
  return name;
}

// The entries of a folder that are folders (links not followed), sorted.
std::vector<std::string> subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) names.push_back(it->path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<Candidate> ollama_matches(const fs::path& root, const std::string& name) {
  const std::vector<std::string> p = ollama_parts(name);
  if (p.empty()) return {};
  const fs::path manifest = root / "manifests" / p[0] / p[1] / p[2] / p[3];
  std::error_code ec;
  if (fs::symlink_status(manifest, ec).type() == fs::file_type::not_found) return {};
  return {from_manifest(root, manifest, ollama_name(p))};
}

std::vector<Candidate> ollama_models(const fs::path& root) {
  std::vector<Candidate> found;
  const fs::path manifests = root / "manifests";
  for (const std::string& host : subfolders(manifests))
    for (const std::string& ns : subfolders(manifests / host))
      for (const std::string& model : subfolders(manifests / host / ns)) {
        std::error_code ec;
        const fs::path dir = manifests / host / ns / model;
        std::vector<std::string> tags;
        for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
             !ec && it != end; it.increment(ec))
          if (!it->is_directory(ec)) tags.push_back(it->path().filename());
        std::sort(tags.begin(), tags.end());
        for (const std::string& tag : tags)
          found.push_back(from_manifest(root, dir / tag, ollama_name({host, ns, model, tag})));
      }
  return found;
}

}  // namespace qkv::stores
