// NATS JWT v2 (github.com/nats-io/jwt/v2) as Troupe signs them: the operator,
// account and user claims, the compact "header.payload.signature" encoding
// (base64url without padding, Ed25519 over "header.payload") and the
// standard user .creds file text. No NATS header here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/auth/nkeys.hpp"
#include "gateway/auth/permissions.hpp"

namespace troupe::auth {

// Claims common to every JWT; `nats` is the type-specific part (it gets
// "type" and "version": 2 from the builders below).
struct Claims {
  std::string issuer;   // iss: public key of the signer
  std::string subject;  // sub: public key of the identity
  std::string name;
  std::int64_t issued_at = 0;  // iat, seconds since the epoch (0: now)
  nlohmann::json nats = nlohmann::json::object();
};

// Signs `claims` with `signer` (whose public key must be claims.issuer) and
// returns the encoded JWT; "" only if OpenSSL fails. jti is the base32 of the
// SHA-512/256 of the claims JSON without jti, as nats-io/jwt computes it.
std::string encode_jwt(const Claims& claims, const KeyPair& signer);

// Decodes a JWT and checks its header and that its signature verifies with
// the public key in its "iss" claim (the caller then checks that "iss" is the
// issuer it trusts). Returns the claims JSON, or nullopt and `error`.
std::optional<nlohmann::json> decode_jwt(std::string_view jwt, std::string& error);

// Builders of the three kinds of claims (iat 0 = now).
// `system_account`: public key of the system account ("" = none named).
Claims operator_claims(const KeyPair& op, const std::string& name,
                       const std::string& system_account = "", std::int64_t iat = 0);
// `jetstream`: give the account unlimited JetStream memory and disk storage
// (JetStream is on for an account only when one of them is non-zero).
Claims account_claims(const KeyPair& op, const std::string& account_public, const std::string& name,
                      bool jetstream, std::int64_t iat = 0);
Claims user_claims(const KeyPair& account, const std::string& user_public, const std::string& name,
                   const Permissions& perms, std::int64_t iat = 0);

// The "nats" part of a user JWT for `perms` (pub, sub, resp, subs/data/payload
// = -1, type "user", version 2).
nlohmann::json user_nats_claims(const Permissions& perms);

// The standard .creds file text (as `nsc` writes it) of a user JWT + seed.
std::string creds_text(std::string_view jwt, std::string_view seed);

// Parses .creds text back into the JWT and the seed; false if either block
// is missing.
bool parse_creds(std::string_view text, std::string& jwt, std::string& seed);

}  // namespace troupe::auth
