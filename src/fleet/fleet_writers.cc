#include "fleet/fleet_writers.h"

#include <map>

namespace kvgate::gateway {

namespace {

bool engine_unreachable(int status) { return status == 502 || status == 503; }

std::string as_event(std::string_view body) { return "data: " + std::string(body) + "\n\n"; }

}  // namespace

void HeldAnswer::send_to(http::ResponseWriter& writer) const {
  if (!event) {
    writer.send(status, headers, body);
  } else if (writer.write(body)) {
    writer.end();
  }
}

bool FailoverWriter::send(int status, const http::HeaderList& headers, std::string_view body) {
  if (may_hold_ && !answered() && engine_unreachable(status)) {
    held_ = HeldAnswer{status, headers, continues_ ? as_event(body) : std::string(body), continues_};
    return true;
  }
  if (!continues_) return client_.send(status, headers, body);
  // The client has this request's stream from an engine that went away: the answer ends it.
  return client_.write(as_event(body)) && client_.end();
}

bool FailoverWriter::begin_stream(int status, const http::HeaderList& headers) {
  if (continues_) return true;
  return client_.begin_stream(status, headers);
}

bool FailoverWriter::hand_on(int status, std::string_view error_events) {
  if (!may_hold_ || held_) return false;
  held_ = HeldAnswer{status, {}, std::string(error_events), true};
  return true;
}

bool CapturedAnswer::send(int status, const http::HeaderList& headers, std::string_view body) {
  if (answered_) return false;
  answered_ = true;
  answer_ = HeldAnswer{status, headers, std::string(body)};
  return true;
}

bool CapturedAnswer::begin_stream(int status, const http::HeaderList& headers) {
  if (answered_) return false;
  answered_ = true;
  answer_ = HeldAnswer{status, headers, {}};
  return true;
}

bool CapturedAnswer::write(std::string_view data) {
  if (!answered_) return false;
  answer_.body.append(data);
  return true;
}

namespace {

// "name{a=\"b\"} 1" → "name{upstream=\"U\",a=\"b\"} 1"; "name 1" → "name{upstream=\"U\"} 1".
std::string labelled(const std::string& line, const std::string& label) {
  const size_t brace = line.find('{');
  const size_t space = line.find(' ');
  if (brace != std::string::npos && (space == std::string::npos || brace < space)) {
    const bool empty = brace + 1 < line.size() && line[brace + 1] == '}';
    return line.substr(0, brace + 1) + label + (empty ? "" : ",") + line.substr(brace + 1);
  }
  if (space == std::string::npos) return line;
  return line.substr(0, space) + "{" + label + "}" + line.substr(space);
}

std::string family_of(const std::string& comment) {
  // "# HELP name text" or "# TYPE name kind"
  const size_t start = 7;
  const size_t end = comment.find(' ', start);
  return comment.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string upstream_label(const std::string& name) { return "upstream=\"" + escaped(name) + "\""; }

std::string merge_prometheus(const std::vector<std::pair<std::string, std::string>>& texts) {
  struct Family {
    std::vector<std::string> comments;
    std::vector<std::string> samples;
  };
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  for (const auto& [name, text] : texts) {
    const std::string label = upstream_label(name);
    std::string current;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      const std::string line = text.substr(pos, nl - pos);
      pos = nl + 1;
      if (line.empty()) continue;
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        current = family_of(line);
        auto [it, fresh] = families.try_emplace(current);
        if (fresh) order.push_back(current);
        // Each comment once: the first member's.
        bool seen = false;
        for (const auto& c : it->second.comments)
          seen = seen || c == line || c.substr(0, 7) == line.substr(0, 7);
        if (!seen) it->second.comments.push_back(line);
        continue;
      }
      if (line[0] == '#') continue;
      auto [it, fresh] = families.try_emplace(current);
      if (fresh) order.push_back(current);
      it->second.samples.push_back(labelled(line, label));
    }
  }
  std::string out;
  for (const auto& name : order) {
    for (const auto& c : families[name].comments) out += c + "\n";
    for (const auto& s : families[name].samples) out += s + "\n";
  }
  return out;
}

}  // namespace kvgate::gateway
