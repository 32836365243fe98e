#include "testing/client_families.h"

#include <fmt/format.h>

#include "session/session.h"
#include "testing/isolation_oracle.h"

namespace kvgate::testing {

using nlohmann::json;

namespace {

json msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

}  // namespace

std::string ClientFamilies::run(int steps, const SendFn& send) {
  IsolationOracle oracle;
  const std::string keys[] = {"k1", "k2"};
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) {
    Client c{keys[pick(4) == 0 ? 1 : 0], std::nullopt, json::array(), ""};
    if (pick(3) == 0) c.id = "id-" + std::to_string(pick(2));  // ids collide across clients and keys
    c.history.push_back(system_message(0));
    clients.push_back(std::move(c));
  }
  for (int step = 0; step < steps; ++step) {
    Client& c = clients[pick(clients.size())];
    act(c, clients, step);
    const json request = c.history;
    const json reply =
        msg("assistant", pick(3) == 0 ? summary_text(step)
                                      : word() + (pick(4) == 0 ? "" : " " + word() + std::to_string(step)));
    const std::string scope = session::scope_of_key(c.key);
    const SentView sent = send(c.key, c.id, request, reply);
    if (sent.how == "continuation") ++continuations;
    if (auto e = oracle.check(scope, c.id, request, sent.view); !e.empty()) {
      return fmt::format("step {} ({} {}): {}\nrequest: {}\nview: {}", step, sent.how, sent.detail, e,
                         request.dump().substr(0, 1500), sent.view.dump().substr(0, 1500));
    }
    oracle.answered(scope, c.id, request, reply);
    c.last_reply = reply["content"];
    // A client may drop our reply (a retry), or send its own version of the turn (a
    // replayed trace, an agent that rewrites assistant messages).
    const size_t what = pick(10);
    if (what >= 2) c.history.push_back(reply);
    if (what == 1) c.history.push_back(msg("assistant", "client-written " + word()));
  }
  return "";
}

std::string ClientFamilies::word() {
  static const char* kWords[] = {"yes",   "ok",   "the",   "file",    "tea",
                                 "Paris", "done", "error", "hunter2", "run"};
  return kWords[pick(std::size(kWords))];
}

json ClientFamilies::system_message(int day) {
  std::string text = "You are an agent.";
  if (pick(2) == 0)
    text = fmt::format("Current time: 2026-12-{:02} 10:{:02}:00\n", 1 + day % 28, pick(60)) + text;
  if (pick(4) == 0) text += fmt::format("\nrequest 550e8400-e29b-41d4-a716-4466554400{:02}", pick(100));
  return msg("system", text);
}

// A reply of several lines long enough to be recognised when a client carries it.
std::string ClientFamilies::summary_text(int step) {
  std::string text;
  for (size_t i = 0, n = 2 + pick(4); i < n; ++i) {
    text += fmt::format("{} {} {} {}: point {} of the summary at step {}\n", word(), word(), word(), word(),
                        i, step);
  }
  return text;
}

json ClientFamilies::user_message() {
  switch (pick(6)) {
    case 0:
      return msg("user", "yes");
    case 1:
      return msg("user", "Extract the facts worth remembering.");
    case 2:
      return msg("user", fmt::format("meeting on 2026-12-{:02}", 1 + pick(28)));
    case 3:
      return msg("user", std::string(200 + pick(600), 'x') + word());
    default:
      return msg("user", word() + " " + word() + " " + word());
  }
}

void ClientFamilies::act(Client& c, std::vector<Client>& all, int step) {
  json& h = c.history;
  switch (pick(10)) {
    case 0:  // the clock in the system prompt moves on
      h[0] = system_message(step);
      break;
    case 1:  // sliding window: drop the oldest turns
      if (h.size() > 4) {
        const auto drop = static_cast<std::ptrdiff_t>(std::min<size_t>(h.size() - 3, 1 + pick(3)));
        h.erase(h.begin() + 1, h.begin() + 1 + drop);
      }
      break;
    case 2:  // edit an earlier message
      if (h.size() > 2) h[1 + pick(h.size() - 1)] = user_message();
      break;
    case 3:  // a new run of the same agent: the opening again, next day
      h = json::array({system_message(step), user_message()});
      return;
    case 4: {  // fork another client's history (same key or not)
      const Client& o = all[pick(all.size())];
      h = o.history;
      break;
    }
    case 5:  // retry: send the same request again
      if (h.size() > 1 && h.back().value("role", "") == "user") return;
      break;
    case 6: {  // self-summary: the history becomes a summary (its own last reply, or another's)
      const Client& o = pick(3) == 0 ? all[pick(all.size())] : c;
      if (o.last_reply.empty()) break;
      h = json::array(
          {h[0], msg("user", "This session is being continued from a previous conversation.\nSummary:\n" +
                                 o.last_reply)});
      return;
    }
    default:
      break;
  }
  h.push_back(user_message());
}

}  // namespace kvgate::testing
