#include "plan/server_caps.h"

#include <algorithm>
#include <charconv>
#include <regex>

#include <fmt/format.h>

namespace kvgate::plan {
namespace {

constexpr std::string_view kRecordMagic = "kvgate-probe-record 1";
constexpr std::string_view kBogusFlag = "--kvgate-no-such-flag";
constexpr std::string_view kBogusCacheType = "-ctk kvgate-no-such-type";

constexpr std::string_view kProbes[] = {
    "-c 4096", "-np 1", "-ngl 0", "-ngl all", "-b 2048", "-ub 512", "-t 2",
    // KV cache types (ik validates these only at model load; see kBogusCacheType)
    "-ctk f32", "-ctk f16", "-ctk bf16", "-ctk q8_0", "-ctk q4_0", "-ctk q4_1", "-ctk iq4_nl", "-ctk q5_0",
    "-ctk q5_1", "-ctk q6_0", "-ctk q8_KV", "-ctv f32", "-ctv f16", "-ctv bf16", "-ctv q8_0", "-ctv q4_0",
    "-ctv q4_1", "-ctv iq4_nl", "-ctv q5_0", "-ctv q5_1", "-ctv q6_0", "-ctv q8_KV", kBogusCacheType,
    // flash attention: value form (mainline, ik since 2025-11), bare (older builds), ik's negative form
    "-fa on", "-fa off", "-fa auto", "-fa", "-no-fa",
    // slots and caches
    "-kvu", "-no-kvu", "--swa-full", "-cram 0", "--cache-reuse 0", "-crs 0.50", "-cram-n-min 0",
    "--ctx-checkpoints 8", "-ctx-ckpt-t 8",
    // context shift: ik takes a value, mainline is a boolean flag
    "--context-shift on", "--context-shift off", "--context-shift", "--no-context-shift",
    // server
    "-to 600", "-mla 3", "--jinja", "--no-jinja", "--metrics", "--api-key kvgate-probe",
    "--api-key-file /dev/null", "-a kvgate-probe",
    "-lv 4", "--sse-ping-interval 30", "-fit off", "--log-disable", kBogusFlag};

constexpr std::string_view kMainlineKvTypes[] = {"f32",  "f16",    "bf16", "q8_0", "q4_0",
                                                 "q4_1", "iq4_nl", "q5_0", "q5_1"};
constexpr std::string_view kIkKvTypes[] = {"f32",    "f16",  "bf16", "q8_0", "q4_0", "q4_1",
                                           "iq4_nl", "q5_0", "q5_1", "q6_0", "q8_KV"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

// The line of a failed run that explains it: the first one mentioning "error", else the first.
std::string error_line(const ProbeOutcome& o) {
  for (const auto& l : o.lines) {
    if (contains(l, "error")) return l;
  }
  return o.lines.empty() ? fmt::format("exit {}", o.exit_code) : o.lines.front();
}

template <typename Int>
bool parse_int(std::string_view s, Int& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

std::span<const std::string_view> flag_probes() { return kProbes; }

std::span<const std::string_view> documented_kv_types(Fork fork) {
  if (fork == Fork::kIk) return kIkKvTypes;
  return kMainlineKvTypes;
}

std::string format_probe_record(const ProbeRecord& record) {
  std::string out(kRecordMagic);
  out += '\n';
  if (!record.binary.empty()) out += "binary " + record.binary + "\n";
  out += fmt::format("mtime_ns {}\nsize {}\n", record.mtime_ns, record.size);
  for (const auto& [args, o] : record.runs) {
    out += fmt::format("run {}\nexit {}\nlines {}\n", args, o.exit_code, o.lines.size());
    for (const auto& l : o.lines) out += l + "\n";
  }
  return out;
}

Result<ProbeRecord> parse_probe_record(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  auto fail = [](size_t i, std::string_view what) {
    return Error(fmt::format("probe record line {}: {}", i + 1, what));
  };
  if (lines.empty() || lines[0] != kRecordMagic) return fail(0, fmt::format("expected '{}'", kRecordMagic));
  ProbeRecord rec;
  size_t i = 1;
  auto field = [&](std::string_view name) -> std::optional<std::string_view> {
    if (i < lines.size() && starts_with(lines[i], std::string(name) + " "))
      return lines[i++].substr(name.size() + 1);
    return std::nullopt;
  };
  if (auto b = field("binary")) rec.binary = std::string(*b);
  if (auto m = field("mtime_ns"); m && !parse_int(*m, rec.mtime_ns))
    return fail(i - 1, "mtime_ns is not a number");
  if (auto s = field("size"); s && !parse_int(*s, rec.size)) return fail(i - 1, "size is not a number");
  while (i < lines.size()) {
    if (lines[i].empty() && i + 1 == lines.size()) break;
    auto args = field("run");
    if (!args) return fail(i, "expected 'run ARGS'");
    ProbeOutcome o;
    auto code = field("exit");
    if (!code || !parse_int(*code, o.exit_code)) return fail(code ? i - 1 : i, "expected 'exit N'");
    size_t n = 0;
    auto count = field("lines");
    if (!count || !parse_int(*count, n)) return fail(count ? i - 1 : i, "expected 'lines K'");
    if (n > lines.size() - i)
      return fail(i, fmt::format("'lines {}' but only {} lines follow", n, lines.size() - i));
    for (size_t k = 0; k < n; ++k) o.lines.emplace_back(lines[i + k]);
    i += n;
    if (!rec.runs.emplace(std::string(*args), std::move(o)).second) {
      return fail(i, fmt::format("duplicate run '{}'", *args));
    }
  }
  return rec;
}

void parse_version(const std::vector<std::string>& lines, ServerCaps& caps) {
  static const std::regex semver(R"(version: (\S+) \(build (\d+), commit ([0-9A-Za-z]+)\))");
  static const std::regex legacy(R"(version: (\d+) \(([0-9A-Za-z]+)\))");
  static const std::regex built(R"(built with (.*))");
  std::smatch m;
  for (const auto& l : lines) {
    if (std::regex_search(l, m, semver)) {
      caps.version = m[1];
      (void)parse_int(std::string_view(m[2].first, m[2].second), caps.build);
      caps.commit = m[3];
    } else if (std::regex_search(l, m, legacy)) {
      (void)parse_int(std::string_view(m[1].first, m[1].second), caps.build);
      caps.commit = m[2];
    } else if (std::regex_search(l, m, built)) {
      caps.built_with = m[1];
    }
  }
}

std::set<std::string> parse_help_flags(const std::vector<std::string>& lines) {
  static const std::regex flag_re(R"(^--?[A-Za-z][A-Za-z0-9_-]*$)");
  std::set<std::string> out;
  for (const auto& line : lines) {
    size_t pos = line.find_first_not_of(' ');
    if (pos == std::string::npos || line[pos] != '-') continue;
    bool continued = true;  // the previous token ended with ',' (or this is the first)
    while (pos < line.size()) {
      size_t end = line.find(' ', pos);
      if (end == std::string::npos) end = line.size();
      std::string tok = line.substr(pos, end - pos);
      const bool comma = !tok.empty() && tok.back() == ',';
      if (comma) tok.pop_back();
      if (std::regex_match(tok, flag_re)) {
        out.insert(tok);
      } else if (!continued && !comma) {
        break;  // a value placeholder or the description ("-c N, --ctx-size N" continues after "N,")
      }
      continued = comma;
      pos = line.find_first_not_of(' ', end);
      if (pos == std::string::npos) break;
    }
  }
  return out;
}

bool ServerCaps::accepts(std::string_view probe) const { return accepted.count(std::string(probe)) > 0; }

bool ServerCaps::accepts_kv_type(std::string_view type) const {
  return std::find(kv_types.begin(), kv_types.end(), type) != kv_types.end();
}

std::string ServerCaps::describe() const {
  std::string what = fork == Fork::kIk ? "ik_llama.cpp" : "mainline llama.cpp";
  std::string ver = version.empty() ? fmt::format("build {}, commit {}", build, commit)
                                    : fmt::format("{} (build {}, commit {})", version, build, commit);
  return fmt::format("{} {}{}", what, ver, binary.empty() ? "" : " at " + binary);
}

std::string ServerCaps::rejection(std::string_view probe) const {
  auto it = rejected.find(std::string(probe));
  return it == rejected.end() ? "not probed" : it->second;
}

Result<ServerCaps> analyze_probes(const ProbeRecord& record) {
  ServerCaps caps;
  caps.binary = record.binary;
  auto version = record.runs.find("--version");
  if (version == record.runs.end()) return Error("the probe record has no '--version' run");
  if (version->second.exit_code != 0) {
    return Error(fmt::format("'{} --version' failed ({}): {}; is this a llama-server binary?", record.binary,
                             version->second.exit_code, error_line(version->second)));
  }
  parse_version(version->second.lines, caps);
  for (std::string_view probe : flag_probes()) {
    auto it = record.runs.find(std::string(probe) + " --version");
    if (it == record.runs.end())
      return Error(fmt::format("the probe record lacks the probe '{} --version'", probe));
    if (it->second.exit_code == 0) {
      caps.accepted.emplace(probe);
    } else {
      caps.rejected.emplace(std::string(probe), error_line(it->second));
    }
  }
  if (auto ngl = record.runs.find("-ngl 0 --version"); ngl != record.runs.end()) {
    for (const auto& l : ngl->second.lines) {
      // mainline: "no usable GPU found"; ik: "not compiled with GPU offload support, --gpu-layers
      // option will be ignored".
      if (contains(l, "no usable GPU found") || contains(l, "not compiled with GPU offload support")) {
        caps.gpu_offload = false;
      }
    }
  }
  auto help = record.runs.find("--help");
  if (help != record.runs.end()) caps.help_flags = parse_help_flags(help->second.lines);

  // Fork: flags only one fork has, then the wording of the unknown-flag error, then the
  // --help layout. Version numbers overlap across forks and are not used.
  const bool reuse = caps.accepts("--cache-reuse 0");
  const bool mla = caps.accepts("-mla 3");
  const std::string bogus = caps.rejection(kBogusFlag);
  if (caps.accepts(kBogusFlag)) {
    return Error(fmt::format("'{}' accepts the made-up flag {}: not a llama-server argument parser",
                             record.binary, kBogusFlag));
  }
  if (reuse != mla) {
    caps.fork = reuse ? Fork::kMainline : Fork::kIk;
  } else if (contains(bogus, "unknown argument")) {
    caps.fork = Fork::kIk;
  } else if (contains(bogus, "invalid argument")) {
    caps.fork = Fork::kMainline;
  } else if (help != record.runs.end() && !help->second.lines.empty() &&
             contains(help->second.lines.front(), "----- common params -----")) {
    caps.fork = Fork::kMainline;
  } else {
    return Error(
        fmt::format("cannot tell whether '{}' is mainline llama.cpp or ik_llama.cpp (--cache-reuse {}, "
                    "-mla {}, unknown flag: '{}')",
                    record.binary, reuse ? "accepted" : "rejected", mla ? "accepted" : "rejected", bogus));
  }

  if (caps.accepts(kBogusCacheType)) {
    // Cache types are checked only when the model loads: trust the fork's documented list.
    for (auto t : documented_kv_types(caps.fork)) caps.kv_types.emplace_back(t);
  } else {
    for (auto t : kIkKvTypes) {
      if (caps.accepts(fmt::format("-ctk {}", t)) && caps.accepts(fmt::format("-ctv {}", t))) {
        caps.kv_types.emplace_back(t);
      }
    }
  }
  return caps;
}

}  // namespace kvgate::plan
