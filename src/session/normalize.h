// Normalised messages and their hash chain: how kvgate recognises a conversation without
// the client's help.
//
// canonical_message() renders the parts of a chat message that identify it — role, name,
// text content (parts concatenated), tool calls (function name + arguments re-serialised
// canonically) — and leaves out what clients and engines vary freely: reasoning_content,
// tool-call ids, key order, whitespace inside JSON arguments. Volatile substrings (clock
// times, dates numeric or named ("Wednesday, December 2, 2026"), UUIDs, long hex ids, 10+
// digit numbers, random base-62 ids such as "req_011CV5Jm8Y2xq4Pz7Rt9Kd3W") are masked, so a client that rewrites the time in its system prompt every
// turn still produces the same chain.
//
// A short text part that carries a volatile value — a reminder of the date or time, at most
// three lines (is_volatile_reminder()) — is left out of the masked form of a message that
// has other text: clients move such a reminder to their newest message, and the message it
// left is still the same message (intake.h decides what is sent).
//
// exact_hash() is the same canonical form without the masking: two messages with equal
// message_hash() but different exact_hash() differ only in volatile values, and the
// gateway then sends the request's version (never a stored value the client no longer has).
//
// chain_hashes(messages)[i] identifies messages[0..i]: conversation B continues A when A's
// last chain hash appears in B's chain. Hashes are stable across processes and builds (own
// 64-bit hash), so they can be stored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::session {

std::string mask_volatile(std::string_view text);
// A text of at most three lines and 512 bytes that carries a volatile value.
bool is_volatile_reminder(std::string_view text);
std::string canonical_message(const nlohmann::json& message, bool mask = true);
uint64_t hash64(std::string_view data);
uint64_t chain_step(uint64_t previous, uint64_t message_hash);
uint64_t message_hash(const nlohmann::json& message);
uint64_t exact_hash(const nlohmann::json& message);
// Cumulative hashes; `messages` must be an array (anything else gives an empty chain).
std::vector<uint64_t> chain_hashes(const nlohmann::json& messages);
// Extends a chain by one message.
void extend_chain(std::vector<uint64_t>& chain, const nlohmann::json& message);
// The same with the message's message_hash() already computed.
void extend_chain(std::vector<uint64_t>& chain, uint64_t message_hash);

}  // namespace kvgate::session
