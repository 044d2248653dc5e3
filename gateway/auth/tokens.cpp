// Bearer tokens of the HTTP API (see tokens.hpp).
#include "gateway/auth/tokens.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <nlohmann/json.hpp>

#include "bus/subjects.hpp"
#include "gateway/auth/nkeys.hpp"
#include "messages/json_text.hpp"

namespace troupe::auth {

namespace {
constexpr std::size_t kTokenBytes = 32;
constexpr std::size_t kTokenChars = 43;  // base64url of 32 bytes, no padding
}  // namespace

std::string new_token() {
  std::array<unsigned char, kTokenBytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) return {};
  return std::string(kTokenPrefix) +
         base64url_encode(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

bool is_token(std::string_view text) {
  if (text.size() != kTokenPrefix.size() + kTokenChars) return false;
  if (text.substr(0, kTokenPrefix.size()) != kTokenPrefix) return false;
  for (char c : text.substr(kTokenPrefix.size()))
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_'))
      return false;
  return true;
}

std::string token_key(std::string_view token) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), md.data(), &len, EVP_sha256(), nullptr) != 1)
    return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

std::string grant_json(const TokenGrant& g) {
  nlohmann::json j{{"name", g.name}, {"created_ms", g.created_ms}};
  if (g.admin)
    j["admin"] = true;
  else
    j["team"] = g.team;
  return j.dump();
}

std::optional<TokenGrant> parse_grant(std::string_view json) {
  auto j = json_text::parse(json);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  TokenGrant g;
  if (auto it = j.find("name"); it != j.end() && it->is_string()) g.name = it->get<std::string>();
  if (auto it = j.find("created_ms"); it != j.end() && it->is_number_integer())
    g.created_ms = it->get<int64_t>();
  if (auto it = j.find("admin"); it != j.end() && it->is_boolean() && it->get<bool>()) {
    g.admin = true;
    return g;
  }
  auto it = j.find("team");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  g.team = it->get<std::string>();
  if (!subjects::check_token(g.team).empty() || !subjects::valid_team(g.team)) return std::nullopt;
  return g;
}

}  // namespace troupe::auth
