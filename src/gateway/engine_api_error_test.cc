#include "gateway/engine_api_error.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "upstream/engine_errors.h"

namespace kvgate::gateway {
namespace {

TEST(EngineErrorsTest, AnImageTheModelCannotTakeIsTheClientsError) {
  const std::string body =
      R"({"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}})";
  EXPECT_EQ(classify_engine_error(500, body).kind, EngineErrorKind::kUnsupportedInput);
  const ApiError e = engine_api_error(500, body);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, std::optional<std::string>("unsupported_input"));
  EXPECT_NE(e.message.find("image input is not supported"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::gateway
