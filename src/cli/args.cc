#include "cli/args.h"

#include <cstdio>

#include "cli/command.h"

namespace kvgate::cli {

std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  // CLI11 reads "/name" as an option on Windows by default; there it is a path as often
  // (Z:\ under wine, a Git Bash path), and kvgate's options are spelled the same everywhere.
  app.allow_windows_style_options(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nrun '%s --help' for the options\n", app.get_name().c_str(), e.what(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace kvgate::cli
