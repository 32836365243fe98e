#include "engine/service_unit.h"

#include <fmt/format.h>

namespace kvgate::engine {
namespace {

bool plain(const std::string& w) {
  if (w.empty()) return false;
  for (char c : w) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("-_./:=,+@").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

std::string escape_percent(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

// Double-quoted with C-style escapes, as systemd's unit parser reads it.
std::string systemd_double_quoted(const std::string& s, bool escape_dollar) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '%':
        out += "%%";
        break;
      case '$':
        out += escape_dollar ? "$$" : "$";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string join_words(const std::vector<std::string>& words, std::string (*quote)(const std::string&)) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + quote(w);
  return out;
}

std::vector<std::string> command(const ServiceUnitOptions& o) {
  std::vector<std::string> argv{o.kvgate_binary, "up"};
  argv.insert(argv.end(), o.up_args.begin(), o.up_args.end());
  return argv;
}

}  // namespace

std::string systemd_quote(const std::string& word) {
  return plain(word) ? word : systemd_double_quoted(word, true);
}

std::string shell_quote(const std::string& word) {
  if (plain(word)) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

std::string systemd_unit(const ServiceUnitOptions& o) {
  std::string u;
  u += fmt::format("# {}.service, written by `kvgate unit systemd`. Install:\n", o.name);
  u += fmt::format("#   sudo cp {0}.service /etc/systemd/system/ && sudo systemctl daemon-reload\n", o.name);
  u += fmt::format("#   sudo systemctl enable --now {0}    (logs: journalctl -u {0})\n", o.name);
  u += "[Unit]\n";
  u += fmt::format("Description={}\n", escape_percent(o.description));
  u += "Wants=network-online.target\nAfter=network-online.target\n";
  u += fmt::format("StartLimitIntervalSec={}\nStartLimitBurst={}\n", o.start_limit_interval_s,
                   o.start_limit_burst);
  u += "\n[Service]\nType=simple\n";
  if (o.user) u += fmt::format("User={}\n", *o.user);
  for (const auto& [k, v] : o.environment)
    u += fmt::format("Environment={}\n", systemd_double_quoted(k + "=" + v, false));
  if (o.clock_lock_command) {
    u += "# Opt-in: lock CPU/GPU/memory clocks at their maximum before the engine starts (Jetson).\n";
    u += fmt::format("ExecStartPre=-{}\n", escape_percent(*o.clock_lock_command));
  }
  u += fmt::format("ExecStart={}\n", join_words(command(o), systemd_quote));
  u += "# kvgate restarts a crashed or hung engine itself; systemd restarts kvgate when it gives up.\n";
  u += fmt::format("Restart=on-failure\nRestartSec={}\n", o.restart_delay_s);
  u += "# Stop: SIGTERM to kvgate and the engine's process group, SIGKILL after the time-out.\n";
  u += fmt::format("KillMode=control-group\nKillSignal=SIGTERM\nTimeoutStopSec={}\n", o.stop_timeout_s);
  u += "# kvgate rotates the engine's log (--log-max-size, --log-keep); its own lines go to the journal.\n";
  u += "StandardOutput=journal\nStandardError=journal\n";
  u += "\n[Install]\nWantedBy=multi-user.target\n";
  return u;
}

std::string supervisor_program(const ServiceUnitOptions& o) {
  // supervisord expands %(name)s in command= and splits it like a POSIX shell.
  std::string words = join_words(command(o), shell_quote);
  std::string cmd = escape_percent(words);
  if (o.clock_lock_command) {
    // supervisord has no pre-step: run the clock lock, then replace the shell with kvgate.
    cmd = "/bin/sh -c " + escape_percent(shell_quote(*o.clock_lock_command + " || true; exec " + words));
  }
  std::string p;
  p += fmt::format("; [program:{0}], written by `kvgate unit supervisor`. Install:\n", o.name);
  p += fmt::format(
      ";   sudo cp {0}.conf /etc/supervisor/conf.d/ && sudo supervisorctl reread && sudo supervisorctl "
      "update\n",
      o.name);
  p += fmt::format("[program:{}]\n", o.name);
  p += fmt::format("command={}\n", cmd);
  if (o.user) p += fmt::format("user={}\n", *o.user);
  if (!o.environment.empty()) {
    std::string env;
    for (const auto& [k, v] : o.environment) {
      std::string val;
      for (char c : v) val += c == '"' ? std::string("\\\"") : std::string(1, c);
      env += (env.empty() ? "" : ",") + k + "=\"" + escape_percent(val) + "\"";
    }
    p += fmt::format("environment={}\n", env);
  }
  p += "autostart=true\n";
  p += "; kvgate restarts a crashed or hung engine itself; supervisord restarts kvgate when it gives up.\n";
  p +=
      fmt::format("autorestart=unexpected\nexitcodes=0\nstartsecs=5\nstartretries={}\n", o.start_limit_burst);
  p += "; Stop: SIGTERM to the whole process group (kvgate and the engine), SIGKILL after stopwaitsecs.\n";
  p +=
      fmt::format("stopsignal=TERM\nstopwaitsecs={}\nstopasgroup=true\nkillasgroup=true\n", o.stop_timeout_s);
  p += "redirect_stderr=true\n";
  if (!o.log_file.empty()) p += fmt::format("stdout_logfile={}\n", escape_percent(o.log_file));
  p += fmt::format("stdout_logfile_maxbytes={}\nstdout_logfile_backups={}\n", o.log_max_bytes, o.log_keep);
  return p;
}

}  // namespace kvgate::engine
