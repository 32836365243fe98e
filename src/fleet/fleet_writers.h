// The Fleet's (fleet.h) writers: what a member gateway answers, held back or captured.
//
//   FailoverWriter  passes everything to the client's writer, except, when another engine may
//                   still serve the request, an answer saying the engine could not be reached
//                   before any of its answer was sent, which it holds: a whole 502 or 503, or
//                   a stream the member hands on (ResponseWriter::hand_on: only the head,
//                   opening events and keep-alives went out). The next engine's answer then
//                   continues the client's stream (continues_stream(): no second head or
//                   opening events).
//   CapturedAnswer  keeps the whole answer (for routes whose answers the Fleet gathers).
//
// merge_prometheus joins the members' Prometheus texts into one: each family once, with
// every member's samples labelled upstream="NAME".
//
// Thread-safety: a writer is used by one request's thread (client_gone() asks the client's
// writer, which may be polled from the turn's watch thread as before).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http/http_server.h"

namespace kvgate::gateway {

struct HeldAnswer {
  int status = 0;
  http::HeaderList headers;
  std::string body;
  bool event = false;  // `body` is an error event for a stream the client already has
  void send_to(http::ResponseWriter& writer) const;
};

class FailoverWriter final : public http::ResponseWriter {
 public:
  FailoverWriter(http::ResponseWriter& client, bool may_hold)
      : http::ResponseWriter(-1, false),
        client_(client),
        may_hold_(may_hold),
        continues_(client.answered()) {}
  bool send(int status, const http::HeaderList& headers, std::string_view body) override;
  bool begin_stream(int status, const http::HeaderList& headers) override;
  bool write(std::string_view data) override { return held_ ? true : client_.write(data); }
  bool end() override { return held_ ? true : client_.end(); }
  bool continues_stream() const override { return continues_; }
  bool hand_on(int status, std::string_view error_events) override;
  bool client_gone() override { return client_.client_gone(); }
  bool answered() const override { return held_.has_value() || client_.answered(); }
  int status() const override { return held_ ? held_->status : client_.status(); }

  bool held() const { return held_.has_value(); }
  HeldAnswer take_held() { return std::move(*held_); }

 private:
  http::ResponseWriter& client_;
  const bool may_hold_;
  const bool continues_;  // an earlier engine began the client's stream
  std::optional<HeldAnswer> held_;
};

class CapturedAnswer final : public http::ResponseWriter {
 public:
  explicit CapturedAnswer(http::ResponseWriter& client) : http::ResponseWriter(-1, false), client_(client) {}
  bool send(int status, const http::HeaderList& headers, std::string_view body) override;
  bool begin_stream(int status, const http::HeaderList& headers) override;
  bool write(std::string_view data) override;
  bool end() override { return answered_; }
  bool client_gone() override { return client_.client_gone(); }
  bool answered() const override { return answered_; }
  int status() const override { return answer_.status; }
  const HeldAnswer& held() const { return answer_; }
  HeldAnswer take() { return std::move(answer_); }

 private:
  http::ResponseWriter& client_;
  bool answered_ = false;
  HeldAnswer answer_;
};

// The label `upstream="NAME"`, NAME escaped as Prometheus label values are.
std::string upstream_label(const std::string& name);
// `texts`: (member name, its Prometheus text) in the members' order.
std::string merge_prometheus(const std::vector<std::pair<std::string, std::string>>& texts);

}  // namespace kvgate::gateway
