// Bearer tokens of the HTTP API (troupe-gateway, docs/http.md). A token is
// "trp_" and 43 base64url characters (32 random bytes). It is shown once, by
// `troupe auth add-token`, and stored only as its SHA-256 (hex), the key of
// the token bucket (subjects::kTokenBucket), whose value is the grant: the
// team it acts for, or admin. Pure functions but for the random bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::auth {

inline constexpr std::string_view kTokenPrefix = "trp_";

struct TokenGrant {
  std::string team;    // the team it acts for ("" for an admin)
  bool admin = false;  // every team's jobs, nodes and queues
  std::string name;    // who it was made for (an admin's name, else the team)
  int64_t created_ms = 0;
};

// A fresh token (OpenSSL's RAND_bytes); "" when the generator failed.
std::string new_token();
// Whether `text` has a token's form (prefix, length, alphabet): anything else
// is refused without a lookup.
bool is_token(std::string_view text);
// The bucket key of a token: lower-case hex SHA-256 of the whole text.
std::string token_key(std::string_view token);

std::string grant_json(const TokenGrant& g);
// nullopt when `json` is not a grant (neither a valid team nor admin).
std::optional<TokenGrant> parse_grant(std::string_view json);

}  // namespace troupe::auth
