#include "bench/engine_queries.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "upstream/engine_counters.h"
#include "util/json.h"

namespace kvgate::bench {

using nlohmann::json;

namespace {

Error answer_error(std::string_view what, const HttpAnswer& a) {
  if (a.status == 0) return Error(fmt::format("{}: {}", what, a.transport_error));
  return Error(fmt::format("{}: HTTP {}: {}", what, a.status, a.body.substr(0, 300)));
}

}  // namespace

Result<uint64_t> engine_context(HttpClient& engine) {
  const auto a = engine.get("/props");
  if (a.status != 200) return answer_error("asking the engine for its context (GET /props)", a);
  const json j = a.json();
  uint64_t n = 0;
  if (j.is_object()) {
    if (auto d = j.find("default_generation_settings"); d != j.end() && d->is_object()) {
      n = d->value("n_ctx", uint64_t{0});
    }
    if (n == 0 && j.contains("n_ctx") && j["n_ctx"].is_number_unsigned()) {
      n = j["n_ctx"].get<uint64_t>() / std::max<uint64_t>(1, j.value("total_slots", uint64_t{1}));
    }
  }
  if (n == 0) return Error("the engine's /props does not state its context size (n_ctx)");
  return n;
}

Result<EngineCounters> parse_engine_counters(std::string_view text) {
  const auto c = gateway::parse_engine_counters(text);
  if (!c) return Error("the engine's metrics have no llamacpp:prompt_tokens_total");
  return EngineCounters{.processed = static_cast<double>(c->prompt_computed),
                        .cached = static_cast<double>(c->prompt_cached),
                        .cached_known = c->cached_known};  // ik and older builds do not count reuse
}

Result<EngineCounters> engine_counters(HttpClient& engine) {
  const auto a = engine.get("/metrics");
  if (a.status == 501 || a.status == 404) {
    return Error("the engine does not export metrics: start it with --metrics");
  }
  if (a.status != 200) return answer_error("reading the engine's counters (GET /metrics)", a);
  return parse_engine_counters(a.body);
}

Result<std::vector<int64_t>> tokenize(HttpClient& engine, std::string_view text) {
  const json body = {{"content", text}, {"add_special", false}};
  const auto a = engine.post("/tokenize", util::json_text(body));
  if (a.status != 200) return answer_error("tokenizing (POST /tokenize)", a);
  const json j = a.json();
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
    return Error("the engine's /tokenize answer has no tokens array");
  }
  std::vector<int64_t> out;
  for (const auto& t : j["tokens"]) {
    if (t.is_number_integer())
      out.push_back(t.get<int64_t>());
    else if (t.is_object() && t.contains("id"))
      out.push_back(t["id"].get<int64_t>());
  }
  return out;
}

Result<uint64_t> prompt_tokens(HttpClient& engine, const json& messages, const json& tools) {
  json body = {{"messages", messages}};
  if (!tools.is_null()) body["tools"] = tools;
  const auto rendered = engine.post("/apply-template", util::json_text(body));
  if (rendered.status != 200) return answer_error("rendering the prompt (POST /apply-template)", rendered);
  const json r = rendered.json();
  if (!r.is_object() || !r.contains("prompt") || !r["prompt"].is_string()) {
    return Error("the engine's /apply-template answer has no prompt");
  }
  const json req = {{"content", r["prompt"]}, {"add_special", false}, {"parse_special", true}};
  const auto a = engine.post("/tokenize", util::json_text(req));
  if (a.status != 200) return answer_error("counting the prompt (POST /tokenize)", a);
  const json j = a.json();
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
    return Error("the engine's /tokenize answer has no tokens array");
  }
  return static_cast<uint64_t>(j["tokens"].size());
}

Result<json> word_bias(HttpClient& engine) {
  KV_ASSIGN_OR_RETURN(auto ids,
                      tokenize(engine, " the of and to a in is it that for on with as was he by at"));
  json bias = json::array();
  for (int64_t id : ids) bias.push_back({id, 100});
  return bias;
}

}  // namespace kvgate::bench
