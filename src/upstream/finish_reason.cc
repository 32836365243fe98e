#include "upstream/finish_reason.h"

namespace kvgate::gateway {
namespace {

using nlohmann::json;

uint64_t positive(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_number_integer()) return 0;
  const int64_t v = it->get<int64_t>();
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

// The completion tokens an event reports: usage.completion_tokens or timings.predicted_n.
std::optional<uint64_t> generated(const json& ev) {
  if (auto u = ev.find("usage"); u != ev.end() && u->is_object()) {
    if (uint64_t n = positive(*u, "completion_tokens")) return n;
  }
  if (auto t = ev.find("timings"); t != ev.end() && t->is_object()) {
    if (uint64_t n = positive(*t, "predicted_n")) return n;
  }
  return std::nullopt;
}

bool says_stop(const json& ev) {
  auto c = ev.find("choices");
  if (c == ev.end() || !c->is_array()) return false;
  for (const auto& choice : *c) {
    if (choice.is_object() && choice.value("finish_reason", json()).is_string() && choice["finish_reason"] == "stop")
      return true;
  }
  return false;
}

void to_length(json& ev) {
  for (auto& choice : ev["choices"]) {
    if (choice.is_object() && choice.contains("finish_reason") && choice["finish_reason"] == "stop")
      choice["finish_reason"] = "length";
  }
}

}  // namespace

FinishReasonFix::FinishReasonFix(bool active, const json& request) {
  if (!active || !request.is_object()) return;
  for (const char* key : {"max_completion_tokens", "max_tokens", "n_predict"}) {
    if (uint64_t n = positive(request, key)) {
      limit_ = n;
      break;
    }
  }
}

bool FinishReasonFix::cut(const json& with_counts) const {
  const auto n = generated(with_counts);
  return n && *n >= limit_;
}

RelayChunk FinishReasonFix::rewrite(json chunk) {
  to_length(chunk);
  return {std::move(chunk), std::string()};
}

void FinishReasonFix::fix_response(json& response) {
  if (limit_ == 0 || !response.is_object() || !says_stop(response) || !cut(response)) return;
  to_length(response);
  rewrote_ = true;
}

std::vector<RelayChunk> FinishReasonFix::on_chunk(json chunk, std::string raw, bool forward) {
  std::vector<RelayChunk> out;
  if (held_) {
    if (cut(chunk)) {
      out.push_back(rewrite(std::move(held_->chunk)));
      rewrote_ = true;
    } else {
      out.push_back(std::move(*held_));
    }
    held_.reset();
  }
  if (!forward) return out;
  if (limit_ > 0 && chunk.is_object() && says_stop(chunk)) {
    if (generated(chunk)) {
      if (cut(chunk)) {
        out.push_back(rewrite(std::move(chunk)));
        rewrote_ = true;
      } else {
        out.push_back({std::move(chunk), std::move(raw)});
      }
      return out;
    }
    held_ = RelayChunk{std::move(chunk), std::move(raw)};  // the count comes with the next event
    return out;
  }
  out.push_back({std::move(chunk), std::move(raw)});
  return out;
}

std::vector<RelayChunk> FinishReasonFix::flush() {
  std::vector<RelayChunk> out;
  if (held_) out.push_back(std::move(*held_));
  held_.reset();
  return out;
}

}  // namespace kvgate::gateway
