#include "http/host_allow.h"

#include <gtest/gtest.h>

namespace kvgate::http {
namespace {

TEST(HostAllowTest, LoopbackNamesAndIpLiteralsWithOrWithoutPort) {
  for (const char* host : {"localhost", "localhost:8787", "LocalHost:8787", "localhost:", "127.0.0.1",
                           "127.0.0.1:8787", "127.3.4.5:1", "[::1]", "[::1]:8787", "192.168.1.5:8787",
                           "10.0.0.1", "[fe80::1]:80", "0.0.0.0:8787"}) {
    EXPECT_TRUE(host_allowed(host, "127.0.0.1", {})) << host;
  }
}

TEST(HostAllowTest, OtherNamesAreRefused) {
  // What a page on a rebound name sends.
  for (const char* host :
       {"evil.example", "evil.example:8787", "localhost.evil.example", "127.0.0.1.nip.io:8787",
        "evil.localhost", "localhost.", "", ":8787", "[::1", "[::1]x", "[not-ip]:80", "::1",
        "localhost:80:80", "localhost:port", "localhost:123456", "127.1", "x"}) {
    EXPECT_FALSE(host_allowed(host, "127.0.0.1", {})) << host;
  }
}

TEST(HostAllowTest, TheListenNameAndTheOperatorsNames) {
  EXPECT_TRUE(host_allowed("gpu-box.lan:8787", "gpu-box.lan", {}));
  EXPECT_TRUE(host_allowed("GPU-BOX.lan", "gpu-box.LAN", {}));
  EXPECT_FALSE(host_allowed("gpu-box.lan:8787", "0.0.0.0", {})) << "a wildcard listen names no host";
  EXPECT_TRUE(host_allowed("[::1]:8787", "::", {}));
  const std::vector<std::string> names = {"gpu-box.lan", "Proxy.Example"};
  EXPECT_TRUE(host_allowed("gpu-box.lan:8787", "0.0.0.0", names));
  EXPECT_TRUE(host_allowed("proxy.example", "0.0.0.0", names));
  EXPECT_FALSE(host_allowed("evil.example", "0.0.0.0", names));
  EXPECT_TRUE(host_allowed("evil.example:8787", "127.0.0.1", {"*"})) << "opened deliberately";
  EXPECT_TRUE(host_allowed("", "127.0.0.1", {"*"}));
}

TEST(HostAllowTest, TheRefusalNamesTheHostAndTheOption) {
  const std::string m = host_refusal("evil.example:8787");
  EXPECT_NE(m.find("'evil.example:8787'"), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-host NAME"), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-host '*'"), std::string::npos) << m;
  EXPECT_NE(host_refusal("bad\xff\x01host").find("'bad??host'"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::http
