// gateway/auth: nkeys encoding, JWT signing and claims, .creds text, the
// permissions of each identity and the on-disk store (modes, idempotence).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "gateway/auth/jwt.hpp"
#include "gateway/auth/nkeys.hpp"
#include "gateway/auth/permissions.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/auth/tls.hpp"

using namespace troupe::auth;
namespace fs = std::filesystem;

namespace {

KeyPair make(KeyType t) {
  std::string error;
  auto kp = KeyPair::generate(t, error);
  REQUIRE(kp);
  return std::move(*kp);
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

// A fresh directory under the temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() /
           ("troupe-auth-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("auth: base32, base64url and CRC16 match their references", "[auth]") {
  CHECK(base32_encode("foobar") == "MZXW6YTBOI");  // RFC 4648 (unpadded)
  CHECK(base32_decode("MZXW6YTBOI") == std::optional<std::string>("foobar"));
  CHECK_FALSE(base32_decode("MZXW6YTBO1"));
  CHECK(base64url_encode("\xfb\xff") == "-_8");
  CHECK(base64url_decode("-_8") == std::optional<std::string>("\xfb\xff"));
  CHECK(crc16_xmodem("123456789") == 0x31C3);  // CRC-16/XMODEM check value
}

TEST_CASE("auth: a seed round-trips to the same key pair and public key", "[auth]") {
  for (auto [type, seed_prefix, pub_prefix] :
       {std::tuple{KeyType::kOperator, "SO", 'O'}, std::tuple{KeyType::kAccount, "SA", 'A'},
        std::tuple{KeyType::kUser, "SU", 'U'}}) {
    KeyPair kp = make(type);
    const std::string seed = kp.seed(), pub = kp.public_key();
    CHECK(seed.rfind(seed_prefix, 0) == 0);
    CHECK(seed.size() == 58);
    CHECK(pub[0] == pub_prefix);
    CHECK(pub.size() == 56);
    std::string error;
    auto back = KeyPair::from_seed(seed, error);
    REQUIRE(back);
    CHECK(back->type() == type);
    CHECK(back->public_key() == pub);
    CHECK(back->seed() == seed);
    KeyType t{};
    std::string raw;
    CHECK(decode_public_key(pub, t, raw).empty());
    CHECK(t == type);
    CHECK(raw.size() == 32);
  }
}

TEST_CASE("auth: a seed gives the public key and signature nkeys.js gives", "[auth]") {
  // Reference vector made with nats.js's nkeys.js 1.x: raw private key bytes
  // 0x00..0x1f encoded as a user seed, its public key, and the (deterministic)
  // Ed25519 signature of "troupe".
  const std::string seed = "SUAAAAICAMCAKBQHBAEQUCYMBUHA6EARCIJRIFIWC4MBSGQ3DQOR4H776Y";
  std::string error;
  auto kp = KeyPair::from_seed(seed, error);
  REQUIRE(kp);
  CHECK(kp->type() == KeyType::kUser);
  CHECK(kp->public_key() == "UAB2CB576PHBBPQ5ODORRZ2LYCMWPZGWGCN2KDK7DXOIMZASKUY3RLKK");
  std::string raw(32, '\0');
  for (int i = 0; i < 32; ++i) raw[static_cast<std::size_t>(i)] = static_cast<char>(i);
  std::string encoded;
  encoded.push_back(
      static_cast<char>(kPrefixByteSeed | (static_cast<std::uint8_t>(KeyType::kUser) >> 5)));
  encoded.push_back(static_cast<char>((static_cast<std::uint8_t>(KeyType::kUser) & 31) << 3));
  encoded += raw;
  auto crc = crc16_xmodem(encoded);
  encoded.push_back(static_cast<char>(crc & 0xff));
  encoded.push_back(static_cast<char>(crc >> 8));
  CHECK(base32_encode(encoded) == seed);
  std::string sig = kp->sign("troupe");
  std::string hex;
  for (unsigned char c : sig) {
    const char* digits = "0123456789abcdef";
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  CHECK(hex ==
        "e119c4b79e07d8871d4b96ca34499ab0a5414d7866c5bd93db7f1eae676456e3"
        "30e9706a0cf9647f51334970f5a3977313d447b23233f1753737aed8744c2705");
}

TEST_CASE("auth: a corrupted seed or public key is refused", "[auth]") {
  KeyPair kp = make(KeyType::kUser);
  std::string seed = kp.seed();
  std::string bad = seed;
  bad[20] = bad[20] == 'A' ? 'B' : 'A';
  std::string error;
  CHECK_FALSE(KeyPair::from_seed(bad, error));
  CHECK(error.find("checksum") != std::string::npos);
  CHECK_FALSE(KeyPair::from_seed(seed.substr(0, 50), error));
  CHECK_FALSE(KeyPair::from_seed("not a seed!", error));
  CHECK_FALSE(KeyPair::from_seed(kp.public_key(), error));  // a public key is no seed

  std::string pub = kp.public_key();
  pub[30] = pub[30] == 'A' ? 'B' : 'A';
  KeyType t{};
  std::string raw;
  CHECK_FALSE(decode_public_key(pub, t, raw).empty());
}

TEST_CASE("auth: signatures verify with the signer's key only", "[auth]") {
  KeyPair a = make(KeyType::kAccount), b = make(KeyType::kAccount);
  std::string sig = a.sign("hello");
  REQUIRE(sig.size() == 64);
  CHECK(verify(a.public_key(), "hello", sig));
  CHECK_FALSE(verify(a.public_key(), "hellO", sig));
  CHECK_FALSE(verify(b.public_key(), "hello", sig));
}

TEST_CASE("auth: a JWT verifies with its issuer's key and fails when a byte changes", "[auth]") {
  KeyPair op = make(KeyType::kOperator);
  KeyPair acct = make(KeyType::kAccount);
  std::string jwt = encode_jwt(account_claims(op, acct.public_key(), "TROUPE", true), op);
  REQUIRE(!jwt.empty());
  CHECK(std::count(jwt.begin(), jwt.end(), '.') == 2);
  CHECK(jwt.find('=') == std::string::npos);
  auto header = base64url_decode(jwt.substr(0, jwt.find('.')));
  REQUIRE(header);
  auto h = nlohmann::json::parse(*header);
  CHECK(h["typ"] == "JWT");
  CHECK(h["alg"] == "ed25519-nkey");

  std::string error;
  auto claims = decode_jwt(jwt, error);
  REQUIRE(claims);
  CHECK((*claims)["iss"] == op.public_key());
  CHECK((*claims)["sub"] == acct.public_key());
  CHECK((*claims)["name"] == "TROUPE");
  CHECK((*claims)["jti"].get<std::string>().size() == 52);
  CHECK((*claims)["iat"].get<std::int64_t>() > 1700000000);
  const auto& n = (*claims)["nats"];
  CHECK(n["type"] == "account");
  CHECK(n["version"] == 2);
  for (const char* k : {"subs", "data", "payload", "imports", "exports", "conn", "leaf",
                        "mem_storage", "disk_storage"})
    CHECK(n["limits"][k] == -1);
  CHECK(n["limits"]["wildcards"] == true);

  // One byte changed anywhere (header, claims or signature): refused.
  for (std::size_t i : {std::size_t{3}, jwt.find('.') + 5, jwt.size() - 5}) {
    std::string bad = jwt;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    CHECK_FALSE(decode_jwt(bad, error));
  }
  // The signature of another key: refused.
  KeyPair other = make(KeyType::kOperator);
  Claims forged = account_claims(other, acct.public_key(), "TROUPE", true);
  forged.issuer = op.public_key();
  CHECK_FALSE(decode_jwt(encode_jwt(forged, other), error));
}

TEST_CASE("auth: operator, system account and user claims", "[auth]") {
  KeyPair op = make(KeyType::kOperator), sys = make(KeyType::kAccount);
  KeyPair acct = make(KeyType::kAccount), user = make(KeyType::kUser);
  std::string error;

  auto o = decode_jwt(encode_jwt(operator_claims(op, "troupe", sys.public_key()), op), error);
  REQUIRE(o);
  CHECK((*o)["iss"] == op.public_key());
  CHECK((*o)["sub"] == op.public_key());
  CHECK((*o)["nats"]["type"] == "operator");
  CHECK((*o)["nats"]["system_account"] == sys.public_key());

  auto s = decode_jwt(encode_jwt(account_claims(op, sys.public_key(), "SYS", false), op), error);
  REQUIRE(s);
  CHECK_FALSE((*s)["nats"]["limits"].contains("mem_storage"));
  CHECK_FALSE((*s)["nats"]["limits"].contains("disk_storage"));

  auto u = decode_jwt(
      encode_jwt(user_claims(acct, user.public_key(), "node-n1", node_permissions("n1")), acct),
      error);
  REQUIRE(u);
  CHECK((*u)["iss"] == acct.public_key());
  CHECK((*u)["sub"] == user.public_key());
  CHECK((*u)["name"] == "node-n1");
  const auto& n = (*u)["nats"];
  CHECK(n["type"] == "user");
  CHECK(n["version"] == 2);
  CHECK(n["pub"]["allow"] ==
        nlohmann::json::array({"troupe.sys.agent.n1.>", "troupe.sys.logs.n1.>"}));
  CHECK(n["sub"]["allow"] == nlohmann::json::array({"troupe.sys.node.n1.>", "troupe.sys.hello"}));
  CHECK(n["resp"]["max"] == 1);
  CHECK(n["resp"]["ttl"] == 0);
  for (const char* k : {"subs", "data", "payload"}) CHECK(n[k] == -1);

  auto t = user_nats_claims(team_permissions("vision"));
  CHECK_FALSE(t.contains("resp"));
  CHECK(t["subs"] == kTeamMaxSubs);  // a team's connection: bounded subscriptions
  CHECK(t["pub"]["deny"].size() == 4);
}

TEST_CASE("auth: the permissions of each identity", "[auth]") {
  SECTION("team") {
    auto p = team_permissions("vision");
    for (const char* v : {"submit", "enqueue", "status", "cancel", "logs", "jobs", "why"})
      CHECK(has(p.pub_allow, std::string("troupe.vision.") + v));
    CHECK(has(p.pub_allow, "troupe.vision.submit.*"));  // addressed to a pool
    CHECK_FALSE(has(p.pub_allow, "troupe.*.submit.*"));
    CHECK_FALSE(has(p.pub_allow, "troupe.vision.>"));
    for (const char* d : {"troupe.vision.events.>", "$JS.>", "$KV.>", "troupe.sys.>"})
      CHECK(has(p.pub_deny, d));
    CHECK(p.sub_allow == std::vector<std::string>{"_INBOX_vision.>", "troupe.vision.events.>"});
    CHECK(p.sub_deny.empty());  // the allow list is the whole of it
    CHECK_FALSE(p.allow_responses);
  }
  SECTION("node") {
    auto p = node_permissions("gpu1");
    // Its messages to the scheduler, and its workers' output (TROUPE_LOGS_<team>).
    CHECK(p.pub_allow ==
          std::vector<std::string>{"troupe.sys.agent.gpu1.>", "troupe.sys.logs.gpu1.>"});
    CHECK(p.sub_allow == std::vector<std::string>{"troupe.sys.node.gpu1.>", "troupe.sys.hello"});
    CHECK(p.allow_responses);
  }
  SECTION("fleet") {
    CHECK(fleet_member_name("sim", 7, 3) == "sim-00007");
    CHECK(fleet_member_name("sim", 1, 100000) == "sim-000001");
    auto p = fleet_permissions("sim", 3);
    CHECK(p.pub_allow == std::vector<std::string>{"troupe.sys.agent.sim-00001.>",
                                                  "troupe.sys.agent.sim-00002.>",
                                                  "troupe.sys.agent.sim-00003.>"});
    CHECK(p.sub_allow.size() == 4);
    CHECK(has(p.sub_allow, "troupe.sys.node.sim-00003.>"));
    CHECK(has(p.sub_allow, "troupe.sys.hello"));
    CHECK(p.allow_responses);
  }
  SECTION("scheduler") {
    // Unrestricted: no permissions section in its JWT at all.
    auto p = scheduler_permissions();
    CHECK(p.pub_allow.empty());
    CHECK(p.sub_allow.empty());
    auto n = user_nats_claims(p);
    CHECK_FALSE(n.contains("pub"));
    CHECK_FALSE(n.contains("sub"));
  }
  SECTION("admin") {
    auto p = admin_permissions("ops");
    CHECK(has(p.pub_allow, "troupe.*.submit"));
    CHECK(has(p.pub_allow, "troupe.*.submit.*"));
    CHECK(has(p.pub_allow, "troupe.*.cancel"));
    for (const char* s :
         {"troupe.sys.jobs", "troupe.sys.nodes", "troupe.sys.queues", "troupe.sys.stats",
          "troupe.sys.cordon", "troupe.sys.uncordon", "troupe.sys.drain", "troupe.sys.remove_node",
          "troupe.sys.find", "troupe.sys.debug.crash"})
      CHECK(has(p.pub_allow, s));
    for (const char* d : {"troupe.*.events.>", "$JS.>", "$KV.>", "troupe.sys.agent.>",
                          "troupe.sys.node.>", "troupe.sys.hello", "troupe.sys.intake.>"})
      CHECK(has(p.pub_deny, d));
    CHECK(p.sub_allow == std::vector<std::string>{"_INBOX_admin-ops.>", "troupe.*.events.>"});
  }
}

TEST_CASE("auth: .creds text has the standard format and parses back", "[auth]") {
  std::string text = creds_text("JWT.TEXT.SIG", "SUSEED");
  CHECK(text ==
        "-----BEGIN NATS USER JWT-----\n"
        "JWT.TEXT.SIG\n"
        "------END NATS USER JWT------\n"
        "\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n"
        "\n"
        "-----BEGIN USER NKEY SEED-----\n"
        "SUSEED\n"
        "------END USER NKEY SEED------\n"
        "\n"
        "*************************************************************\n");
  std::string jwt, seed;
  REQUIRE(parse_creds(text, jwt, seed));
  CHECK(jwt == "JWT.TEXT.SIG");
  CHECK(seed == "SUSEED");
  CHECK_FALSE(parse_creds("nothing here", jwt, seed));
}

TEST_CASE("auth: the TLS server certificate is signed by the CA", "[auth]") {
  TlsMaterial m;
  REQUIRE(make_tls_material(m).empty());
  CHECK(m.ca_cert_pem.rfind("-----BEGIN CERTIFICATE-----", 0) == 0);
  CHECK(m.ca_key_pem.rfind("-----BEGIN PRIVATE KEY-----", 0) == 0);
  CHECK(cert_signed_by(m.server_cert_pem, m.ca_cert_pem));
  CHECK_FALSE(cert_signed_by(m.ca_cert_pem, m.server_cert_pem));
  TlsMaterial other;
  REQUIRE(make_tls_material(other).empty());
  CHECK_FALSE(cert_signed_by(m.server_cert_pem, other.ca_cert_pem));
}

TEST_CASE(
    "auth: add_server writes a certificate from the same CA for a server's own names, its key "
    "private, bad names are refused",
    "[auth]") {
  TempDir tmp;
  const std::string dir = (tmp.path / "auth").string();
  std::string path;
  // On an empty directory it runs init first (the CA).
  REQUIRE(add_server(dir, "nats-a", {"nats-a.example.org", "*.nats.example.org"},
                     {"10.0.0.5", "fd00::5"}, &path) == "");
  CHECK(path == dir + "/server-nats-a-cert.pem");
  CHECK(mode_of(fs::path(dir) / "server-nats-a-key.pem") == 0600);
  CHECK(mode_of(path) == 0644);
  auto read = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string cert = read(path), ca = read(dir + "/ca.pem");
  CHECK(cert_signed_by(cert, ca));
  CHECK(cert_alt_names(cert) == std::vector<std::string>{"DNS:nats-a.example.org",
                                                         "DNS:*.nats.example.org", "IP:10.0.0.5",
                                                         "IP:fd00::5"});
  // The one init made still names this machine only.
  CHECK(cert_alt_names(read(dir + "/server-cert.pem")) ==
        std::vector<std::string>{"DNS:localhost", "IP:127.0.0.1"});
  // No names given: its own name.
  REQUIRE(add_server(dir, "nats-b", {}, {}, &path) == "");
  CHECK(cert_alt_names(read(path)) == std::vector<std::string>{"DNS:nats-b"});
  // ... which must then be a host name: "nats_c" is a server name but not one.
  CHECK(add_server(dir, "nats_c", {}, {}).find("--dns") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(dir) / "server-nats_c-cert.pem"));
  REQUIRE(add_server(dir, "nats_c", {"nats-c.example.org"}, {}, &path) == "");
  CHECK(cert_alt_names(read(path)) == std::vector<std::string>{"DNS:nats-c.example.org"});
  for (const auto& bad : {std::string("a,DNS:evil"), std::string("-a"), std::string("a b"),
                          std::string("x.*.org"), std::string("")})
    CHECK(add_server(dir, "nats-c", {bad}, {}) != "");
  for (const auto& bad : {std::string("10.0.0"), std::string("10.0.0.1,IP:1.2.3.4")})
    CHECK(add_server(dir, "nats-c", {}, {bad}) != "");
  CHECK(add_server(dir, "../x", {"a"}, {}) != "");
  CHECK_FALSE(fs::exists(fs::path(dir) / "server-nats-c-cert.pem"));
}

TEST_CASE("auth: init writes the store with private modes and is idempotent", "[auth]") {
  TempDir tmp;
  const fs::path dir = tmp.path / "auth";
  REQUIRE(init(dir.string()) == "");
  CHECK(mode_of(dir) == 0700);
  for (const char* f : {"operator.nk", "account.nk", "sys.nk", "ca-key.pem", "server-key.pem",
                        "scheduler.creds", "system.creds"}) {
    INFO(f);
    CHECK(mode_of(dir / f) == 0600);
  }
  for (const char* f : {"operator.jwt", "account.jwt", "sys.jwt", "ca.pem", "server-cert.pem",
                        "nats-auth.conf", "nats-auth-notls.conf"}) {
    INFO(f);
    CHECK(fs::exists(dir / f));
  }
  std::string conf = slurp(dir / "nats-auth.conf");
  CHECK(conf.find("operator: \"") != std::string::npos);
  CHECK(conf.find("system_account: A") != std::string::npos);
  CHECK(conf.find("resolver: MEMORY") != std::string::npos);
  CHECK(conf.find("resolver_preload: {") != std::string::npos);
  CHECK(conf.find("cert_file: \"" + (dir / "server-cert.pem").string() + "\"") !=
        std::string::npos);
  std::string notls = slurp(dir / "nats-auth-notls.conf");
  CHECK(notls.find("tls {") == std::string::npos);
  CHECK(notls.find("resolver_preload") != std::string::npos);
  // Nothing secret in the server config.
  CHECK(conf.find("\"SA") == std::string::npos);
  CHECK(conf.find("PRIVATE KEY") == std::string::npos);

  std::string cp;
  REQUIRE(add_team(dir.string(), "vision", false, &cp) == "");
  CHECK(cp == creds_path(dir.string(), "team-vision"));
  CHECK(mode_of(cp) == 0600);

  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir)) before[e.path().string()] = slurp(e.path());
  REQUIRE(init(dir.string()) == "");
  REQUIRE(add_team(dir.string(), "vision") == "");
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(dir)) after[e.path().string()] = slurp(e.path());
  CHECK(before == after);

  // A creds file is signed by the account and carries the team's permissions.
  std::string jwt, seed, error;
  REQUIRE(parse_creds(slurp(cp), jwt, seed));
  auto claims = decode_jwt(jwt, error);
  REQUIRE(claims);
  auto account = KeyPair::from_seed(
      slurp(dir / "account.nk").substr(0, slurp(dir / "account.nk").find('\n')), error);
  REQUIRE(account);
  CHECK((*claims)["iss"] == account->public_key());
  CHECK((*claims)["nats"] == user_nats_claims(team_permissions("vision")));
  auto user = KeyPair::from_seed(seed, error);
  REQUIRE(user);
  CHECK((*claims)["sub"] == user->public_key());

  // --rotate: a new user key.
  REQUIRE(add_team(dir.string(), "vision", true) == "");
  std::string jwt2, seed2;
  REQUIRE(parse_creds(slurp(cp), jwt2, seed2));
  CHECK(seed2 != seed);
}

TEST_CASE("auth: every add verb writes its creds file", "[auth]") {
  TempDir tmp;
  const std::string dir = (tmp.path / "auth").string();
  CHECK(add_team(dir, "vision") != "");  // before init: refused
  REQUIRE(init(dir) == "");
  std::string p;
  REQUIRE(add_node(dir, "gpu1", false, &p) == "");
  CHECK(p == dir + "/node-gpu1.creds");
  REQUIRE(add_fleet(dir, "sim", 3, false, &p) == "");
  CHECK(p == dir + "/fleet-sim.creds");
  REQUIRE(add_admin(dir, "ops", false, &p) == "");
  CHECK(p == dir + "/admin-ops.creds");
  for (const char* f : {"node-gpu1.creds", "fleet-sim.creds", "admin-ops.creds"})
    CHECK(mode_of(fs::path(dir) / f) == 0600);
}

TEST_CASE(
    "auth: a front door's link account is preloaded, its user is named dispatch, and a cluster's "
    "dispatch identity may only do what the link needs",
    "[auth]") {
  TempDir tmp;
  const std::string dir = (tmp.path / "auth").string();
  // add_link on an empty directory runs init first.
  std::string path, account;
  REQUIRE(add_link(dir, "c1", false, &path, &account) == "");
  CHECK(path == dir + "/link-c1.creds");
  CHECK(mode_of(path) == 0600);
  CHECK(mode_of(fs::path(dir) / "link-c1.nk") == 0600);
  REQUIRE(account.size() == 56);
  CHECK(account[0] == 'A');
  std::string c2_account;
  REQUIRE(add_link(dir, "c2", false, nullptr, &c2_account) == "");
  CHECK(c2_account != account);
  // Both accounts preloaded (with and without TLS), signed by the operator,
  // without JetStream; TROUPE's is still there.
  for (const char* f : {"nats-auth.conf", "nats-auth-notls.conf"}) {
    std::string conf = slurp(fs::path(dir) / f);
    INFO(f << ":\n" << conf);
    CHECK(conf.find("  " + account + ": \"") != std::string::npos);
    CHECK(conf.find("  " + c2_account + ": \"") != std::string::npos);
  }
  std::string error;
  std::string link_text = slurp(fs::path(dir) / "link-c1.jwt");
  auto link_jwt = decode_jwt(link_text.substr(0, link_text.find('\n')), error);
  REQUIRE(link_jwt);
  CHECK((*link_jwt)["sub"] == account);
  CHECK((*link_jwt)["name"] == "LINK_c1");
  CHECK_FALSE((*link_jwt)["nats"]["limits"].contains("disk_storage"));
  // Its user: signed by the link account, named dispatch (its inbox prefix is
  // then the one a cluster's dispatch identity may read), unrestricted.
  std::string jwt, seed;
  REQUIRE(parse_creds(slurp(path), jwt, seed));
  auto claims = decode_jwt(jwt, error);
  REQUIRE(claims);
  CHECK((*claims)["iss"] == account);
  CHECK((*claims)["name"] == "dispatch");
  CHECK_FALSE((*claims)["nats"].contains("pub"));
  // Idempotent: a second run changes no file.
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir)) before[e.path().string()] = slurp(e.path());
  REQUIRE(add_link(dir, "c1") == "");
  REQUIRE(init(dir) == "");
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(dir)) after[e.path().string()] = slurp(e.path());
  CHECK(before == after);
  for (const char* bad : {"a.b", "*", "", "../x"}) {
    INFO(bad);
    CHECK(add_link(dir, bad) != "");
  }

  // In a cluster: dispatch.creds.
  REQUIRE(add_dispatch(dir, false, &path) == "");
  CHECK(path == dir + "/dispatch.creds");
  auto p = dispatch_permissions();
  for (const char* s :
       {"troupe.*.submit", "troupe.*.status", "troupe.*.cancel", "troupe.*.logs", "troupe.*.why",
        "troupe.*.history", "troupe.*.usage", "troupe.sys.nodes", "troupe.sys.queues",
        "troupe.sys.cordon", "troupe.sys.uncordon", "troupe.sys.drain", "troupe.sys.remove_node"})
    CHECK(has(p.pub_allow, s));
  CHECK_FALSE(has(p.pub_allow, "troupe.*.enqueue"));
  // Nothing an operator does beyond nodes (no crash, no stats, no find).
  for (const char* s : {"troupe.sys.debug.crash", "troupe.sys.stats", "troupe.sys.find"})
    CHECK_FALSE(has(p.pub_allow, s));
  CHECK(has(p.pub_allow, "troupe.sys.dispatch.answer.*"));
  for (const auto& s : p.pub_allow) {
    INFO(s);
    CHECK(s.rfind("$JS", 0) != 0);
    CHECK(s.rfind("_INBOX", 0) != 0);
    CHECK(s.find(">") == std::string::npos);
  }
  CHECK(p.sub_allow == std::vector<std::string>{"_INBOX_dispatch.>", "troupe.*.events.>",
                                                "troupe.sys.dispatch.claim"});
  CHECK_FALSE(p.allow_responses);
}

TEST_CASE("auth: invalid names are refused", "[auth]") {
  TempDir tmp;
  const std::string dir = (tmp.path / "auth").string();
  REQUIRE(init(dir) == "");
  for (const char* bad : {"a.b", "sys", "*", ">", "", "a b", "../x"}) {
    INFO(bad);
    CHECK(add_team(dir, bad) != "");
  }
  CHECK(add_node(dir, "n.1") != "");
  CHECK(add_admin(dir, "*") != "");
  CHECK(add_fleet(dir, "a.b", 2) != "");
  CHECK(add_fleet(dir, "sim", 0) != "");
  CHECK(add_fleet(dir, std::string(123, 'x'), 2) != "");  // member names too long
  CHECK_FALSE(fs::exists(fs::path(dir) / "team-a.b.creds"));
  CHECK_FALSE(fs::exists(fs::path(dir) / "team-sys.creds"));
}

TEST_CASE("auth: troupe_home follows --home, then $TROUPE_HOME, then ./.troupe", "[auth]") {
  CHECK(troupe_home("/x/y") == "/x/y");
  CHECK(auth_dir_of("/x/y") == "/x/y/auth");
  CHECK(fs::path(troupe_home("rel")).is_absolute());
}
