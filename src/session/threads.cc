#include "session/threads.h"

#include <algorithm>

#include <fmt/format.h>

#include "session/normalize.h"
#include "session/session.h"
#include "util/json.h"

namespace kvgate::session {

uint64_t tools_hash(const nlohmann::json& body) {
  if (!body.is_object()) return 0;
  auto t = body.find("tools");
  if (t == body.end() || t->is_null() || (t->is_array() && t->empty())) return 0;
  return hash64(util::json_text(*t));
}

uint64_t thread_identity(uint64_t system_hash, uint64_t tools) {
  return chain_step(chain_step(0x746872656164ULL, system_hash), tools);
}

uint64_t thread_identity(const Conversation& c) {
  return thread_identity(c.system ? message_hash(c.system->message) : 0, c.tools);
}

uint64_t thread_identity(const RequestKeys& r) {
  return thread_identity(r.system && !r.hashes.empty() ? r.hashes[0] : 0, r.tools);
}

ThreadFit thread_fit(const ThreadKeys& thread, const RequestKeys& request) {
  ThreadFit fit;
  if (thread.chain.empty() || thread.identity != thread_identity(request)) return fit;
  // Same identity: both have the system message (masked) or neither has one, so the chains
  // compare message by message from the start.
  const size_t after_system = request.system ? 1 : 0;
  uint64_t shared = 0;
  while (shared < request.chain.size() && shared < thread.chain.size() &&
         request.chain[shared] == thread.chain[shared]) {
    ++shared;
  }
  auto carried = [&request, after_system](uint64_t h) {
    return h != 0 && std::find(request.exact.begin() +
                                   static_cast<std::ptrdiff_t>(std::min(after_system, request.exact.size())),
                               request.exact.end(), h) != request.exact.end();
  };
  // The last reply, not the last request's last message: a fixed instruction ("Provide a
  // summary", "quota") ends the requests of many threads.
  // Repeating the thread's whole last request (going on from it, or retrying it), not only a
  // first message: a fixed instruction opens the requests of many threads.
  if ((shared > after_system && shared >= thread.request_messages) || carried(thread.last_reply_exact)) {
    fit.belongs = true;
  } else if (!thread.reply_lines.empty()) {
    size_t hits = 0;
    for (uint64_t line : thread.reply_lines) {
      hits += std::find(request.lines.begin(), request.lines.end(), line) != request.lines.end() ? 1U : 0U;
    }
    fit.belongs = hits * 3 >= thread.reply_lines.size();
  }
  if (fit.belongs) fit.shared = shared;
  return fit;
}

std::string thread_session_id(const std::string& scope, const std::string& client_id, int n) {
  if (n <= 1) return scoped_session_id(scope, client_id);
  return fmt::format("{}.{}~{}", scope, n, client_id);
}

}  // namespace kvgate::session
