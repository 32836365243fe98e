// Where a compaction's summary stands in a conversation the client compacted through its API
// (context management, turn_context.cc): a user message right after the system message (first
// when there is none). The compaction's answer is computed on exactly that, and every later
// request carries the summary back (a compaction block or item) in place of what it replaced.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "session/conversation.h"

namespace kvgate::gateway {

// The message a summary becomes.
nlohmann::json summary_message(const std::string& summary);

// `conv` replaced by its system message and the summary (a new prefix: the generation moves on).
session::Conversation compacted_for_client(const session::Conversation& conv, const std::string& summary);

// A chat body's messages with a carried summary in its place (after a leading system message).
void put_carried_summary(nlohmann::json& chat_body, const std::string& summary);

}  // namespace kvgate::gateway
