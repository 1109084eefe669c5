// The stores that are folders of GGUF files: LM Studio's (PUBLISHER/REPO/FILE.gguf) and the
// Hugging Face cache's (models--ORG--REPO/snapshots/REV/FILE.gguf, links into blobs/; learned
// from huggingface_hub's docs, "Understand caching"). And the helpers every store shares.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "models/stores/stores.h"
#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv::stores {

std::string shown(const fs::path& path) {
  const char* home = std::getenv("HOME");
  const std::string p = path.string();
  if (home == nullptr || *home == '\0') return p;
  const std::string h = fs::path(home).lexically_normal().string();
  if (p.starts_with(h) && (p.size() == h.size() || p[h.size()] == '/'))
    return "~" + p.substr(h.size());
  return p;
}

std::vector<std::string> safe_segments(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    const std::string part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == ".." ||
        part.find_first_of(std::string("\\\0", 2)) != std::string::npos)
      return {};
    parts.push_back(part);
    if (slash == std::string::npos) return parts;
    start = slash + 1;
  }
}

bool inside(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) return false;
  const fs::path base = fs::canonical(dir, ec);
  if (ec) return false;
  const fs::path rel = real.lexically_relative(base);
  return !rel.empty() && *rel.begin() != ".." && *rel.begin() != ".";
}

bool named_gguf(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

bool is_projector(const fs::path& file) { return file.filename().string().starts_with("mmproj"); }

std::vector<fs::path> gguf_files_under(const fs::path& dir, int depth) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (it.depth() >= depth) it.disable_recursion_pending();
    if (!it->is_directory(ec) && named_gguf(it->path()))
      files.push_back(it->path().lexically_relative(dir));
  }
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// The candidates of one repository's files (`rels`, relative to their snapshot or folder in
// `dirs`): named "REPO" when it holds one model (a projector beside it aside), else each
// "REPO/FILE". A file whose real path leaves `root` is listed with that error.
std::vector<Candidate> repository(const std::string& repo, ModelStore store,
                                  const std::vector<fs::path>& dirs,
                                  const std::vector<fs::path>& rels, const fs::path& root) {
  const auto models =
      std::count_if(rels.begin(), rels.end(), [](const fs::path& r) { return !is_projector(r); });
  std::vector<Candidate> out;
  for (std::size_t i = 0; i < rels.size(); ++i) {
    Candidate c{
        .name = repo + "/" + rels[i].generic_string(), .store = store, .path = dirs[i] / rels[i]};
    if (models == 1 && !is_projector(rels[i])) c.alias = std::exchange(c.name, repo);
    if (!inside(c.path, root)) c.error = shown(c.path) + " links outside " + shown(root);
    out.push_back(std::move(c));
  }
  return out;
}

// The candidates `name` picks among a repository's: "REPO" its one model, or every model when it
// holds several (the caller's ambiguity lists them); "REPO/FILE" that file.
std::vector<Candidate> pick(std::vector<Candidate> all, const std::string& name) {
  std::vector<Candidate> picked;
  for (Candidate& c : all)
    if (c.name == name || c.alias == name) picked.push_back(std::move(c));
  if (!picked.empty()) return picked;
  for (Candidate& c : all)
    if (c.name.starts_with(name + "/") && !is_projector(c.path)) picked.push_back(std::move(c));
  return picked;
}

// LM Studio's PUBLISHER/REPO folders under `root`, as "PUBLISHER/REPO".
std::vector<std::string> lm_studio_repositories(const fs::path& root) {
  std::vector<std::string> repos;
  std::error_code ec;
  for (fs::directory_iterator p(root, fs::directory_options::skip_permission_denied, ec), end;
       !ec && p != end; p.increment(ec)) {
    if (!p->is_directory(ec)) continue;
    std::error_code ec2;
    for (fs::directory_iterator r(p->path(), fs::directory_options::skip_permission_denied, ec2);
         !ec2 && r != end; r.increment(ec2))
      if (r->is_directory(ec2))
        repos.push_back(p->path().filename().string() + "/" + r->path().filename().string());
  }
  std::sort(repos.begin(), repos.end());
  return repos;
}

std::vector<Candidate> lm_studio_repository(const fs::path& root, const std::string& repo) {
  const std::vector<fs::path> rels = gguf_files_under(root / repo, 0);
  return repository(repo, ModelStore::lm_studio, std::vector<fs::path>(rels.size(), root / repo),
                    rels, root);
}

}  // namespace

std::vector<Candidate> lm_studio_models(const fs::path& root) {
  std::vector<Candidate> all;
  for (const std::string& repo : lm_studio_repositories(root))
    for (Candidate& c : lm_studio_repository(root, repo)) all.push_back(std::move(c));
  return all;
}

std::vector<Candidate> lm_studio_matches(const fs::path& root, const std::string& name) {
  const std::vector<std::string> parts = safe_segments(name);
  if (parts.size() == 2 || parts.size() == 3)
    return pick(lm_studio_repository(root, parts[0] + "/" + parts[1]), name);
  if (parts.size() != 1) return {};
  // A file's stem ("Llama-3.2-1B-Instruct-Q4_K_M") or name: every repository's entries are
  // listed, no file read.
  std::vector<Candidate> found;
  for (Candidate& c : lm_studio_models(root))
    if (c.path.stem() == name || c.path.filename() == name) found.push_back(std::move(c));
  return found;
}

namespace {

// The snapshots a cached repository holds: the one refs/main names when it is there, else all.
std::vector<fs::path> snapshots(const fs::path& repo) {
  try {
    std::string rev = read_input_file((repo / "refs" / "main").string(),
                                      {.expected = "a revision", .max_bytes = 256});
    while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r')) rev.pop_back();
    std::error_code ec;
    if (safe_segments(rev).size() == 1 && fs::is_directory(repo / "snapshots" / rev, ec))
      return {repo / "snapshots" / rev};
  } catch (const Error&) {
    // No refs/main (a download by revision): every snapshot.
  }
  std::vector<fs::path> all;
  std::error_code ec;
  for (fs::directory_iterator it(repo / "snapshots", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) all.push_back(it->path());
  std::sort(all.begin(), all.end());
  return all;
}

// A snapshot's folders may hold quantizations in subfolders ("Q4_K_M/x-00001-of-00002.gguf").
constexpr int kSnapshotDepth = 3;

std::vector<Candidate> hugging_face_repository(const fs::path& dir, const std::string& repo) {
  // Without refs/main, a file several snapshots hold is listed once, from the first by name.
  std::vector<fs::path> rels, in;
  for (const fs::path& snapshot : snapshots(dir))
    for (const fs::path& rel : gguf_files_under(snapshot, kSnapshotDepth))
      if (std::find(rels.begin(), rels.end(), rel) == rels.end()) {
        rels.push_back(rel);
        in.push_back(snapshot);
      }
  return repository(repo, ModelStore::hugging_face, in, rels, dir);
}

}  // namespace

std::vector<Candidate> hugging_face_models(const fs::path& root) {
  std::vector<Candidate> all;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (fs::directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with("models--") && it->is_directory(ec))
      dirs.push_back(it->path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    // models--ORG--REPO → ORG/REPO (a repository without an organization: models--REPO).
    std::string repo = dir.filename().string().substr(8);
    if (const std::size_t sep = repo.find("--"); sep != std::string::npos)
      repo.replace(sep, 2, "/");
    for (Candidate& c : hugging_face_repository(dir, repo)) all.push_back(std::move(c));
  }
  return all;
}

std::vector<Candidate> hugging_face_matches(const fs::path& root, const std::string& name) {
  const std::vector<std::string> parts = safe_segments(name);
  if (parts.size() < 2) return {};
  const std::string repo = parts[0] + "/" + parts[1];
  return pick(hugging_face_repository(root / ("models--" + parts[0] + "--" + parts[1]), repo),
              name);
}

}  // namespace qkv::stores
