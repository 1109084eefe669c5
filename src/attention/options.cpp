// Names of the options as the command line spells them, and the default scale of each score.
#include <array>
#include <cmath>
#include <utility>

#include "qkv/attention.h"

namespace qkv {
namespace {

constexpr std::array<std::pair<Score, std::string_view>, 7> kScores{{
    {Score::scaled_dot, "scaled-dot"},
    {Score::dot, "dot"},
    {Score::general, "general"},
    {Score::additive, "additive"},
    {Score::laplace, "laplace"},
    {Score::cosine, "cosine"},
    {Score::uniform, "uniform"},
}};
constexpr std::array<std::pair<Normalize, std::string_view>, 2> kNormalize{{
    {Normalize::softmax, "softmax"},
    {Normalize::none, "none"},
}};
constexpr std::array<std::pair<Causal, std::string_view>, 3> kCausal{{
    {Causal::none, "none"},
    {Causal::top_left, "top-left"},
    {Causal::bottom_right, "bottom-right"},
}};
constexpr std::array<std::pair<Path, std::string_view>, 4> kPath{{
    {Path::automatic, "auto"},
    {Path::reference, "reference"},
    {Path::fused, "fused"},
    {Path::cuda, "cuda"},
}};
constexpr std::array<std::pair<Precision, std::string_view>, 2> kPrecision{{
    {Precision::fp32, "fp32"},
    {Precision::bf16, "bf16"},
}};

template <class E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <class E, std::size_t N>
std::optional<E> parse(const std::array<std::pair<E, std::string_view>, N>& table,
                       std::string_view name) {
  for (const auto& [value, n] : table)
    if (n == name) return value;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Score score) { return name_of(kScores, score); }
std::string_view to_string(Normalize normalize) { return name_of(kNormalize, normalize); }
std::string_view to_string(Causal causal) { return name_of(kCausal, causal); }
std::string_view to_string(Path path) { return name_of(kPath, path); }
std::string_view to_string(Precision precision) { return name_of(kPrecision, precision); }
std::optional<Score> parse_score(std::string_view name) { return parse(kScores, name); }
std::optional<Normalize> parse_normalize(std::string_view name) { return parse(kNormalize, name); }
std::optional<Causal> parse_causal(std::string_view name) { return parse(kCausal, name); }
std::optional<Path> parse_path(std::string_view name) { return parse(kPath, name); }
std::optional<Precision> parse_precision(std::string_view name) {
  return parse(kPrecision, name);
}

const std::vector<Score>& all_scores() {
  static const std::vector<Score> scores = [] {
    std::vector<Score> s;
    for (const auto& [value, name] : kScores) s.push_back(value);
    return s;
  }();
  return scores;
}

double default_scale(Score score, int64_t dk) {
  // Vaswani et al. 2017, §3.2.1: dot products grow like √dk, pushing softmax into saturation.
  if (score == Score::scaled_dot) return dk > 0 ? 1.0 / std::sqrt(static_cast<double>(dk)) : 1.0;
  return 1.0;
}

}  // namespace qkv
