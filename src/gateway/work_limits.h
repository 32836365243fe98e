// Bounds on the work a request's fields cause in the engine or in kvgate's counting, checked
// on the parsed body before anything is sent or counted (check_chat_limits and the raw
// completions route call check_work_limits).
//
// The engine turns a JSON schema (response_format, json_schema, a tool's parameters) into a
// grammar and checks that grammar against candidate tokens at every step. Its cost grows
// faster than linearly with the schema's alternatives (enum entries, anyOf/oneOf branches)
// and a grammar's `|` alternatives: measured on the pinned CPU engine (a 0.6B-shaped synth
// model, 4 generated tokens, docs/GATEWAY.md "Request bounds"): an enum of 100 strings 1.3 s,
// 500 8 s, 1,000 10-32 s, 5,000 90 s; 50,000 froze it until the supervisor killed it. A
// grammar of 1,000 alternatives took 4-10 s, 5,000 32 s, 20,000 75 s. The defaults sit where
// one request costs the engine a few seconds at most:
//   - alternatives (enum entries + anyOf/oneOf branches) over all schemas: 256
//   - schema text (response_format, json_schema): 64 KiB; schema nesting: 32 levels
//   - grammar: 32 KiB, 512 alternatives (`|` outside literals and character classes),
//     1,024 rules (`::=`)
//   - tools: 256; logit_bias entries: 1,024; stop strings: 16
// A request past one gets a 400 (413 for text sizes) naming the field, its size and the limit.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "gateway/api_error.h"

namespace kvgate::gateway {

struct WorkLimits {
  size_t max_schema_alternatives = 256;
  size_t max_schema_bytes = 64 * 1024;
  size_t max_schema_depth = 32;
  size_t max_grammar_bytes = 32 * 1024;
  size_t max_grammar_alternatives = 512;
  size_t max_grammar_rules = 1024;
  size_t max_tools = 256;
  size_t max_logit_bias = 1024;
  size_t max_stop = 16;
};

// REQUIRES: `body` passed parse_json_body (nesting bounded). The first bound `body` passes,
// as the error to answer with; fields of the wrong type are left to the later validation.
ApiStatus check_work_limits(const nlohmann::json& body, const WorkLimits& limits = {});

// Counts in GBNF text, skipping string literals and character classes.
struct GrammarCounts {
  size_t alternatives = 0;  // `|` separators
  size_t rules = 0;         // `::=` definitions
};
GrammarCounts count_grammar(std::string_view grammar);

}  // namespace kvgate::gateway
