// NATS JWT v2 encoding, signing, verification and .creds text (see jwt.hpp).
#include "gateway/auth/jwt.hpp"

#include <chrono>
#include <sstream>

#include "messages/json_text.hpp"

namespace troupe::auth {
namespace {

using nlohmann::json;

constexpr const char* kHeader = R"({"typ":"JWT","alg":"ed25519-nkey"})";

std::int64_t now_or(std::int64_t iat) {
  if (iat != 0) return iat;
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json permission(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  json p = json::object();
  if (!allow.empty()) p["allow"] = allow;
  if (!deny.empty()) p["deny"] = deny;
  return p;
}

}  // namespace

std::string encode_jwt(const Claims& claims, const KeyPair& signer) {
  json c = json::object();
  c["iat"] = claims.issued_at != 0 ? claims.issued_at : now_or(0);
  c["iss"] = claims.issuer;
  c["sub"] = claims.subject;
  c["name"] = claims.name;
  c["nats"] = claims.nats;
  std::string hash = sha512_256(c.dump());
  if (hash.empty()) return {};
  c["jti"] = base32_encode(hash);
  std::string signing_input = base64url_encode(kHeader) + "." + base64url_encode(c.dump());
  std::string sig = signer.sign(signing_input);
  if (sig.empty()) return {};
  return signing_input + "." + base64url_encode(sig);
}

std::optional<nlohmann::json> decode_jwt(std::string_view jwt, std::string& error) {
  auto dot1 = jwt.find('.');
  auto dot2 = dot1 == std::string_view::npos ? dot1 : jwt.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || jwt.find('.', dot2 + 1) != std::string_view::npos) {
    error = "not a JWT (expected header.payload.signature)";
    return std::nullopt;
  }
  auto header = base64url_decode(jwt.substr(0, dot1));
  auto payload = base64url_decode(jwt.substr(dot1 + 1, dot2 - dot1 - 1));
  auto sig = base64url_decode(jwt.substr(dot2 + 1));
  if (!header || !payload || !sig) {
    error = "JWT is not base64url";
    return std::nullopt;
  }
  json h = json_text::parse<json>(*header);
  json c = json_text::parse<json>(*payload);
  if (!h.is_object() || !c.is_object()) {
    error = "JWT header or claims are not JSON objects";
    return std::nullopt;
  }
  if (h.value("typ", "") != "JWT" || h.value("alg", "") != "ed25519-nkey") {
    error = "JWT header is not {typ: JWT, alg: ed25519-nkey}";
    return std::nullopt;
  }
  const auto iss = c.find("iss");
  if (iss == c.end() || !iss->is_string()) {
    error = "JWT has no issuer";
    return std::nullopt;
  }
  if (!verify(iss->get<std::string>(), jwt.substr(0, dot2), *sig)) {
    error = "JWT signature does not verify with its issuer's key";
    return std::nullopt;
  }
  return c;
}

Claims operator_claims(const KeyPair& op, const std::string& name,
                       const std::string& system_account, std::int64_t iat) {
  Claims c;
  c.issuer = c.subject = op.public_key();
  c.name = name;
  c.issued_at = now_or(iat);
  c.nats = {{"type", "operator"}, {"version", 2}};
  if (!system_account.empty()) c.nats["system_account"] = system_account;
  return c;
}

Claims account_claims(const KeyPair& op, const std::string& account_public, const std::string& name,
                      bool jetstream, std::int64_t iat) {
  Claims c;
  c.issuer = op.public_key();
  c.subject = account_public;
  c.name = name;
  c.issued_at = now_or(iat);
  json limits = {{"subs", -1},    {"data", -1}, {"payload", -1}, {"imports", -1},
                 {"exports", -1}, {"conn", -1}, {"leaf", -1},    {"wildcards", true}};
  if (jetstream) {
    limits["mem_storage"] = -1;
    limits["disk_storage"] = -1;
  }
  c.nats = {{"limits", limits},
            {"default_permissions", {{"pub", json::object()}, {"sub", json::object()}}},
            {"type", "account"},
            {"version", 2}};
  return c;
}

nlohmann::json user_nats_claims(const Permissions& perms) {
  // No list at all (the scheduler): no permissions section, so nats-server
  // checks nothing per message for that user (a list, even ">", costs a
  // lookup for every new subject, and replies go to a new inbox each time).
  json n = {
      {"subs", perms.max_subs}, {"data", -1}, {"payload", -1}, {"type", "user"}, {"version", 2}};
  if (!perms.pub_allow.empty() || !perms.pub_deny.empty())
    n["pub"] = permission(perms.pub_allow, perms.pub_deny);
  if (!perms.sub_allow.empty() || !perms.sub_deny.empty())
    n["sub"] = permission(perms.sub_allow, perms.sub_deny);
  if (perms.allow_responses) n["resp"] = {{"max", perms.responses_max}, {"ttl", 0}};
  return n;
}

Claims user_claims(const KeyPair& account, const std::string& user_public, const std::string& name,
                   const Permissions& perms, std::int64_t iat) {
  Claims c;
  c.issuer = account.public_key();
  c.subject = user_public;
  c.name = name;
  c.issued_at = now_or(iat);
  c.nats = user_nats_claims(perms);
  return c;
}

std::string creds_text(std::string_view jwt, std::string_view seed) {
  std::string s;
  s += "-----BEGIN NATS USER JWT-----\n";
  s += jwt;
  s += "\n------END NATS USER JWT------\n\n";
  s += "************************* IMPORTANT *************************\n";
  s += "NKEY Seed printed below can be used to sign and prove identity.\n";
  s += "NKEYs are sensitive and should be treated as secrets.\n\n";
  s += "-----BEGIN USER NKEY SEED-----\n";
  s += seed;
  s += "\n------END USER NKEY SEED------\n\n";
  s += "*************************************************************\n";
  return s;
}

bool parse_creds(std::string_view text, std::string& jwt, std::string& seed) {
  std::istringstream in{std::string(text)};
  std::string line;
  std::string* want = nullptr;
  bool got_jwt = false, got_seed = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("-----BEGIN NATS USER JWT-----", 0) == 0) {
      want = &jwt;
      continue;
    }
    if (line.rfind("-----BEGIN USER NKEY SEED-----", 0) == 0) {
      want = &seed;
      continue;
    }
    if (want != nullptr && !line.empty()) {
      *want = line;
      (want == &jwt ? got_jwt : got_seed) = true;
      want = nullptr;
    }
  }
  return got_jwt && got_seed;
}

}  // namespace troupe::auth
