#include "gateway/work_limits.h"

#include <string>

#include <fmt/format.h>

namespace kvgate::gateway {

namespace {

using nlohmann::json;

ApiError refused(std::string message, std::string param, std::string code, int status = 400) {
  ApiError e = bad_request(std::move(message), std::move(param), std::move(code));
  e.status = status;
  return e;
}

// Alternatives (enum entries, anyOf/oneOf branches) and the deepest nesting of a schema.
// Recursion is bounded by parse_json_body's nesting bound.
struct SchemaCounts {
  size_t alternatives = 0;
  size_t depth = 0;
};

void count_schema(const json& v, size_t depth, SchemaCounts& out) {
  if (!v.is_structured()) return;
  out.depth = std::max(out.depth, depth);
  if (v.is_object()) {
    for (const char* key : {"enum", "anyOf", "oneOf"}) {
      auto it = v.find(key);
      if (it != v.end() && it->is_array()) out.alternatives += it->size();
    }
  }
  for (const auto& child : v) count_schema(child, depth + 1, out);
}

ApiStatus check_schema_text(const json& schema, const std::string& param, const WorkLimits& limits) {
  const size_t bytes = schema.dump().size();
  if (bytes <= limits.max_schema_bytes) return {};
  return refused(
      fmt::format("{} is {} bytes of JSON schema, more than the limit of {}: the engine compiles it into a "
                  "grammar it checks at every token",
                  param, bytes, limits.max_schema_bytes),
      param, "schema_too_large", 413);
}

ApiStatus check_schemas(const json& body, const WorkLimits& limits) {
  SchemaCounts total;
  std::string deepest;
  auto add = [&](const json& schema, const std::string& param) {
    SchemaCounts c;
    count_schema(schema, 1, c);
    total.alternatives += c.alternatives;
    if (c.depth > total.depth) {
      total.depth = c.depth;
      deepest = param;
    }
  };
  if (auto rf = body.find("response_format"); rf != body.end() && rf->is_object()) {
    KV_TRY(check_schema_text(*rf, "response_format", limits));
    add(*rf, "response_format");
  }
  if (auto js = body.find("json_schema"); js != body.end() && js->is_structured()) {
    KV_TRY(check_schema_text(*js, "json_schema", limits));
    add(*js, "json_schema");
  }
  if (auto tools = body.find("tools"); tools != body.end() && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) add((*tools)[i], fmt::format("tools[{}]", i));
  }
  if (total.alternatives > limits.max_schema_alternatives) {
    return refused(
        fmt::format(
            "the request's JSON schemas (response_format, json_schema, tools) hold {} alternatives (enum "
            "entries and anyOf/oneOf branches), more than the limit of {}: the engine's grammar work grows "
            "faster than linearly with them (1,000 took 10-30 s, 50,000 froze it)",
            total.alternatives, limits.max_schema_alternatives),
        "response_format", "schema_too_complex");
  }
  if (total.depth > limits.max_schema_depth) {
    return refused(fmt::format("{} nests {} levels, more than the limit of {} for a JSON schema", deepest,
                               total.depth, limits.max_schema_depth),
                   deepest, "schema_too_complex");
  }
  return {};
}

ApiStatus check_grammar(const json& body, const WorkLimits& limits) {
  auto g = body.find("grammar");
  if (g == body.end() || !g->is_string()) return {};
  const std::string& text = g->get_ref<const std::string&>();
  if (text.size() > limits.max_grammar_bytes) {
    return refused(
        fmt::format("grammar is {} bytes, more than the limit of {}", text.size(), limits.max_grammar_bytes),
        "grammar", "grammar_too_large", 413);
  }
  const GrammarCounts c = count_grammar(text);
  if (c.alternatives > limits.max_grammar_alternatives) {
    return refused(
        fmt::format("grammar has {} alternatives ('|'), more than the limit of {}: the engine checks them "
                    "at every token (20,000 stalled it for 75 s)",
                    c.alternatives, limits.max_grammar_alternatives),
        "grammar", "grammar_too_complex");
  }
  if (c.rules > limits.max_grammar_rules) {
    return refused(
        fmt::format("grammar has {} rules, more than the limit of {}", c.rules, limits.max_grammar_rules),
        "grammar", "grammar_too_complex");
  }
  return {};
}

// `field` holds at most `max` entries (an array or an object; a string counts as one).
ApiStatus check_count(const json& body, const char* field, size_t max, const char* code) {
  auto it = body.find(field);
  if (it == body.end() || !it->is_structured() || it->size() <= max) return {};
  return refused(fmt::format("{} has {} entries, more than the limit of {}", field, it->size(), max), field,
                 code);
}

}  // namespace

GrammarCounts count_grammar(std::string_view g) {
  GrammarCounts c;
  for (size_t i = 0; i < g.size(); ++i) {
    const char ch = g[i];
    if (ch == '"' || ch == '[') {
      const char close = ch == '"' ? '"' : ']';
      for (++i; i < g.size() && g[i] != close; ++i) {
        if (g[i] == '\\') ++i;
      }
    } else if (ch == '#') {
      while (i < g.size() && g[i] != '\n') ++i;
    } else if (ch == '|') {
      ++c.alternatives;
    } else if (ch == ':' && g.substr(i, 3) == "::=") {
      ++c.rules;
      i += 2;
    }
  }
  return c;
}

ApiStatus check_work_limits(const json& body, const WorkLimits& limits) {
  if (!body.is_object()) return {};
  KV_TRY(check_count(body, "tools", limits.max_tools, "too_many_tools"));
  KV_TRY(check_count(body, "logit_bias", limits.max_logit_bias, "too_many_logit_bias"));
  KV_TRY(check_count(body, "stop", limits.max_stop, "too_many_stop"));
  KV_TRY(check_grammar(body, limits));
  return check_schemas(body, limits);
}

}  // namespace kvgate::gateway
