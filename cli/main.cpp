// qkv — the command line: one file per subcommand; this one parses and maps errors to exit codes
// (2: the input was wrong, 1: the work failed), each error one line on stderr.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>

#include "attend/attend.h"
#include "bench/bench.h"
#include "embed.h"
#include "experiment.h"
#include "explain/explain.h"
#include "generate.h"
#include "models.h"
#include "options.h"
#include "output.h"
#include "qkv/blas.h"
#include "qkv/field_error.h"
#include "qkv/files.h"
#include "qkv/memory.h"
#include "qkv/tensor.h"
#include "qkv/terminal.h"
#include "train/train.h"

namespace {

// Messages quote what the user typed (texts, file names, option values): control characters in them
// are shown escaped, so an error can neither act on the terminal nor spill onto a second line; and
// a message is cut at kMaxMessageBytes, so that a quoted argument of 100 KB (an inline matrix of
// 20,000 nested lists once gave a 60 KB line) cannot bury it.
constexpr std::size_t kMaxMessageBytes = 1000;

int error(const std::string& message, int code) {
  std::cerr << "qkv: error: " << qkv::printable_line(message, kMaxMessageBytes) << "\n";
  return code;
}

// Help and version go to standard output as results do: checked the same way.
int printed(int code) {
  try {
    qkv::flush_stdout();
  } catch (const qkv::Error& e) {
    return error(e.what(), 1);
  }
  return code;
}

// Every subcommand's arguments and its CLI11 app.
struct Commands {
  qkv::cli::AttendArgs attend_args;
  qkv::cli::BenchArgs bench_args;
  qkv::cli::ExplainArgs explain_args;
  qkv::cli::EmbedArgs embed_args;
  qkv::cli::SimilarityArgs similarity_args;
  qkv::cli::SearchArgs search_args;
  qkv::cli::TrainArgs train_args;
  qkv::cli::GenerateArgs generate_args;
  qkv::cli::ExperimentArgs experiment_args;
  qkv::cli::ModelsArgs models_args;
  CLI::App *attend, *bench, *explain, *embed, *similarity, *search, *train, *generate, *experiment,
      *models;

  explicit Commands(CLI::App& app) {
    attend = qkv::cli::add_attend_command(app, attend_args);
    bench = qkv::cli::add_bench_command(app, bench_args);
    explain = qkv::cli::add_explain_command(app, explain_args);
    embed = qkv::cli::add_embed_command(app, embed_args);
    similarity = qkv::cli::add_similarity_command(app, similarity_args);
    search = qkv::cli::add_search_command(app, search_args);
    train = qkv::cli::add_train_command(app, train_args);
    generate = qkv::cli::add_generate_command(app, generate_args);
    experiment = qkv::cli::add_experiment_command(app, experiment_args);
    models = qkv::cli::add_models_command(app, models_args);
    qkv::cli::refuse_empty_values(app);  // after every option is added
  }

  int run() const {
    if (attend->parsed()) return qkv::cli::run_attend(attend_args);
    if (bench->parsed()) return qkv::cli::run_bench(bench_args);
    if (explain->parsed()) return qkv::cli::run_explain(explain_args);
    if (embed->parsed()) return qkv::cli::run_embed(embed_args);
    if (similarity->parsed()) return qkv::cli::run_similarity(similarity_args);
    if (search->parsed()) return qkv::cli::run_search(search_args);
    if (train->parsed()) return qkv::cli::run_train(train_args);
    if (generate->parsed()) return qkv::cli::run_generate(generate_args);
    if (experiment->parsed()) return qkv::cli::run_experiment_command(experiment_args);
    if (models->parsed()) return qkv::cli::run_models(models_args);
    return error("no subcommand ran; see qkv --help", 2);
  }
};

// A command line CLI11 refused: an unknown subcommand by name, none at all with the help.
int parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  bool known = false;
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known = known || sub->get_name() == first;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (!first.empty() && first[0] != '-' && !known)
    return error(
        "unknown subcommand '" + first + "'; expected one of " + names + " (see qkv --help)", 2);
  if (argc == 1) {
    std::cerr << app.help();
    return error("expected a subcommand, e.g. qkv attend --example phonebook", 2);
  }
  return error(std::string(e.what()) + " (see qkv --help)", 2);
}

// The subcommand that runs ("qkv bench model"), for the one line a std::bad_alloc becomes.
std::string running_command(const CLI::App& app) {
  std::string command = "qkv";
  for (const CLI::App* level = &app; level != nullptr;) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : level->get_subcommands({}))
      if (sub->parsed()) next = sub;
    if (next != nullptr) command += " " + next->get_name();
    level = next;
  }
  return command;
}

// Runs the parsed command and maps what it throws to an exit code and one line.
int run(const Commands& commands, const std::string& command) {
  try {
    const int code = commands.run();
    qkv::flush_stdout();  // what the command printed was written, or it failed
    return code;
  } catch (const qkv::FieldError& e) {  // the library names a field, the command its option
    return error(e.message(qkv::cli::option_of),
                 e.kind() == qkv::Error::Kind::invalid_argument ? 2 : 1);
  } catch (const qkv::Error& e) {
    return error(e.what(), e.kind() == qkv::Error::Kind::invalid_argument ? 2 : 1);
  } catch (const std::bad_alloc&) {
    // The last resort: the commands that can grow estimate their work and refuse past
    // --memory-limit before it starts; what still fails to allocate (a ulimit, other processes
    // taking the memory) says which work it was, not just "std::bad_alloc".
    return error(command + " ran out of memory (std::bad_alloc): the memory it could get" +
                     qkv::address_space_bound() +
                     " was less than this work needs; expected less work (a shorter input, a "
                     "smaller model or batch, fewer threads), a --memory-limit it is refused "
                     "past, or more memory free",
                 1);
  } catch (const std::exception& e) {
    return error(e.what(), 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    qkv::check_room_for_blas("qkv");
  } catch (const qkv::Error& e) {
    // std::_Exit, not return: a normal exit would wait forever on OpenBLAS's stuck threads.
    error(e.what(), 1);
    std::cerr.flush();
    std::_Exit(1);
  }
  qkv::use_checked_stdout();        // so that a failed write is known, with its reason
  qkv::reserve_standard_streams();  // no output file may be the stdout the report goes to
  CLI::App app{
      "qkv — attention: queries, keys and values, exact and explained.\n\n"
      "  qkv explain \"a sentence\"          a real model's attention (all-MiniLM-L6-v2), "
      "explained\n"
      "  qkv attend --example phonebook     attention worked through, step by step\n"
      "  qkv search QUERY --corpus FILE     queries and keys as retrieval: rank lines by "
      "similarity\n"
      "  qkv generate \"The capital of\"     a decoder LLM (SmolLM2-135M) continues a text\n"
      "  qkv train --task dates             train a small transformer on a toy task\n"
      "  qkv experiment scale               why divide by √d_k? measured\n"
      "  qkv models                         every model --model can name here, Ollama's included\n"
      "  qkv attend --help                  every option, with examples\n"
      "  qkv bench attention                GFLOP/s of the attention kernels on this machine",
      "qkv"};
  app.set_version_flag("--version", std::string("qkv ") + QKV_VERSION);
  app.require_subcommand(1);
  Commands commands(app);  // not const: CLI11 writes the arguments while it parses
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return printed(app.exit(e));
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e, argc, argv);
  }
  return run(commands, running_command(app));
}
