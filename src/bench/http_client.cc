#include "bench/http_client.h"

#include <charconv>

#include <fmt/format.h>
#include <httplib.h>

#include "http/client.h"
#include "util/time.h"

namespace kvgate::bench {

using util::ms_between;

std::string Endpoint::url() const { return fmt::format("http://{}:{}", host, port); }

Result<Endpoint> parse_endpoint_url(std::string_view url, std::string api_key) {
  const std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    return Error(fmt::format("--url '{}': expected http://HOST:PORT (https is not supported)", url));
  }
  std::string_view rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return Error(fmt::format("--url '{}': give the server's address only, without a path", url));
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Error(fmt::format("--url '{}': expected http://HOST:PORT", url));
  }
  Endpoint ep;
  ep.host = std::string(rest.substr(0, colon));
  if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']')
    ep.host = ep.host.substr(1, ep.host.size() - 2);
  const std::string_view port = rest.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    return Error(fmt::format("--url '{}': '{}' is not a port number", url, port));
  }
  ep.port = static_cast<uint16_t>(value);
  ep.api_key = std::move(api_key);
  return ep;
}

nlohmann::json HttpAnswer::json() const {
  auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

HttpClient::HttpClient(Endpoint endpoint, std::chrono::seconds read_timeout, bool keep_alive)
    : endpoint_(std::move(endpoint)),
      keep_alive_(keep_alive),
      // tcp_nodelay as curl and most HTTP clients: no Nagle delay between head and body.
      client_(http::make_client(endpoint_.host, endpoint_.port,
                                {.connect_timeout = std::chrono::seconds(10),
                                 .read_timeout = read_timeout,
                                 .write_timeout = std::chrono::seconds(120),
                                 .keep_alive = keep_alive,
                                 .tcp_nodelay = true,
                                 .bearer_token = endpoint_.api_key})) {}

HttpClient::~HttpClient() = default;

bool HttpClient::retry_stale(bool got_answer) {
  const bool retry = !got_answer && keep_alive_ && connection_used_;
  connection_used_ = got_answer;
  if (retry) ++stale_retries_;
  return retry;
}

template <class Send>
HttpAnswer HttpClient::request(Send send) {
  for (;;) {
    HttpAnswer a;
    const auto t0 = Clock::now();
    auto res = send();
    a.ms = ms_between(t0, Clock::now());
    if (retry_stale(static_cast<bool>(res))) continue;
    if (!res) {
      a.transport_error = httplib::to_string(res.error());
      return a;
    }
    a.status = res->status;
    a.body = std::move(res->body);
    return a;
  }
}

HttpAnswer HttpClient::get(const std::string& path) {
  return request([&] { return client_->Get(path.c_str()); });
}

HttpAnswer HttpClient::post(const std::string& path, const std::string& body) {
  return request([&] { return client_->Post(path.c_str(), body, "application/json"); });
}

StreamedAnswer HttpClient::post_stream(
    const std::string& path, const std::string& body,
    const std::function<void(const http::SseEvent&, Clock::time_point)>& on_event) {
  StreamedAnswer a;
  http::SseParser parser;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  const auto t0 = Clock::now();
  req.response_handler = [&](const httplib::Response& r) {
    a.status = r.status;
    a.head_ms = ms_between(t0, Clock::now());
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    const auto now = Clock::now();
    if (a.status != 200) {
      a.error_body.append(data, len);
      return a.error_body.size() < (1U << 20);
    }
    for (const auto& ev : parser.feed(std::string_view(data, len))) {
      if (on_event) on_event(ev, now);
      if (ev.comment_only || !ev.has_data) continue;
      a.event_ms.push_back(ms_between(t0, now));
      if (ev.is_done()) {
        a.done = true;
        continue;
      }
      auto chunk = nlohmann::json::parse(ev.data, nullptr, false);
      if (!chunk.is_object()) continue;
      if (chunk.contains("error")) a.error = chunk["error"];
      if (chunk.contains("timings") && chunk["timings"].is_object()) a.timings = chunk["timings"];
      const bool progress = chunk.contains("prompt_progress");
      if (!progress) a.reply.add_chunk(chunk);
      if (a.first_token_ms < 0 && !progress && chunk.contains("choices") && chunk["choices"].is_array() &&
          !chunk["choices"].empty()) {
        a.first_token_ms = ms_between(t0, now);
      }
    }
    return true;
  };
  auto res = client_->send(req);
  a.total_ms = ms_between(t0, Clock::now());
  if (retry_stale(res || a.status != 0)) return post_stream(path, body, on_event);
  if (!res) {
    a.transport_error = httplib::to_string(res.error());
  } else if (a.status == 0) {
    a.status = res->status;
    a.error_body = res->body;
  }
  return a;
}

}  // namespace kvgate::bench
