// HttpClient: the benchmarks' client, timing what a user of the API would see.
//
// One keep-alive connection per client by default (the same for the engine and the gateway,
// so a comparison of the two measures the server side, not connection set-up); a request
// that fails before any answer on a reused connection (the server closed it meanwhile) is
// sent once more on a new one and only that attempt is timed. Times are taken
// with a steady clock from just before the request is written: total time, and for
// streamed answers the arrival of the response head, of the first event that carries a
// generated token (a chunk with non-empty `choices` that is not prefill progress: the
// time to first token, TTFT) and of every event. Transport failures (connection refused,
// time-out, broken stream) are reported in `transport_error`, never thrown.
//
// Thread-safety: one thread per client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/sse.h"
#include "upstream/reply.h"
#include "util/result.h"

namespace httplib {
class Client;
}

namespace kvgate::bench {

struct Endpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string api_key;  // sent as a bearer token when not empty
  std::string url() const;
};

// "http://HOST:PORT" (an optional trailing '/'); https and paths are rejected.
Result<Endpoint> parse_endpoint_url(std::string_view url, std::string api_key = "");

struct HttpAnswer {
  int status = 0;  // 0: no HTTP answer (see transport_error)
  std::string body;
  std::string transport_error;
  double ms = 0;
  // The body as JSON (null when it is not JSON).
  nlohmann::json json() const;
};

struct StreamedAnswer {
  int status = 0;
  std::string transport_error;
  std::string error_body;      // the body of a non-200 answer
  double head_ms = -1;         // response head
  double first_token_ms = -1;  // first event with a generated token (TTFT)
  double total_ms = 0;
  std::vector<double> event_ms;         // arrival of each data event
  gateway::ReplyAccumulator reply;      // message and usage rebuilt from the chunks
  nlohmann::json timings;               // the engine's `timings` of the last chunk that had them
  std::optional<nlohmann::json> error;  // an in-stream {"error": …} event
  bool done = false;                    // saw data: [DONE]
};

class HttpClient {
 public:
  using Clock = std::chrono::steady_clock;
  explicit HttpClient(Endpoint endpoint, std::chrono::seconds read_timeout = std::chrono::seconds(3600),
                      bool keep_alive = true);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpAnswer get(const std::string& path);
  HttpAnswer post(const std::string& path, const std::string& body);
  // POST of a streamed request (SSE answer). `on_event`, if set, sees every event with its
  // arrival time (comments included) as it is parsed.
  StreamedAnswer post_stream(
      const std::string& path, const std::string& body,
      const std::function<void(const http::SseEvent&, Clock::time_point)>& on_event = {});
  const Endpoint& endpoint() const { return endpoint_; }
  // Requests sent again because their reused connection had been closed.
  size_t stale_retries() const { return stale_retries_; }

 private:
  // True (and counted) when a failed attempt should be repeated on a new connection.
  bool retry_stale(bool got_answer);
  // One request (`send` performs it), timed, resent once on a stale kept-alive connection.
  template <class Send>
  HttpAnswer request(Send send);

  Endpoint endpoint_;
  bool keep_alive_;
  bool connection_used_ = false;  // the last request on this client got an answer
  size_t stale_retries_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace kvgate::bench
