// The on-disk identity store <home>/auth/ and its idempotent updates (see store.hpp).
#include "gateway/auth/store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "bus/subjects.hpp"
#include "gateway/auth/jwt.hpp"
#include "gateway/auth/nkeys.hpp"
#include "gateway/auth/permissions.hpp"
#include "gateway/auth/tls.hpp"

namespace troupe::auth {
namespace {

namespace fs = std::filesystem;
namespace sj = troupe::subjects;
using nlohmann::json;

constexpr mode_t kSecretMode = 0600;
constexpr mode_t kPublicMode = 0644;
constexpr mode_t kDirMode = 0700;

std::string path_in(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Writes `content` to `path` atomically (temporary file + rename) with
// exactly `mode`. Skips the write when the file already holds `content`
// (then only fixes its mode).
std::string write_file(const std::string& path, const std::string& content, mode_t mode) {
  if (auto old = read_file(path); old && *old == content) {
    if (::chmod(path.c_str(), mode) != 0) return errno_text("cannot chmod", path);
    return {};
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return errno_text("cannot create", tmp);
  if (::fchmod(fd.get(), mode) != 0) return errno_text("cannot chmod", tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string e = errno_text("cannot write", tmp);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::close(fd.release()) != 0) {
    std::string e = errno_text("cannot write", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string e = errno_text("cannot rename to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

std::string ensure_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  if (::chmod(dir.c_str(), kDirMode) != 0) return errno_text("cannot chmod", dir);
  return {};
}

// Loads the seed in `file`, or makes (and writes, 0600) a new key of `type`.
std::optional<KeyPair> load_or_create_key(const std::string& file, KeyType type,
                                          std::string& error) {
  if (auto text = read_file(file)) {
    auto kp = KeyPair::from_seed(trim(*text), error);
    if (!kp) {
      error = file + ": " + error;
      return std::nullopt;
    }
    if (kp->type() != type) {
      error = file + ": holds a key of the wrong type";
      return std::nullopt;
    }
    if (::chmod(file.c_str(), kSecretMode) != 0) {
      error = errno_text("cannot chmod", file);
      return std::nullopt;
    }
    return kp;
  }
  if (fs::exists(file)) {
    error = "cannot read " + file;
    return std::nullopt;
  }
  auto kp = KeyPair::generate(type, error);
  if (!kp) return std::nullopt;
  if (error = write_file(file, kp->seed() + "\n", kSecretMode); !error.empty()) return std::nullopt;
  return kp;
}

// Loads the seed in `file`, which must exist.
std::optional<KeyPair> load_key(const std::string& file, KeyType type, std::string& error) {
  if (!fs::exists(file)) {
    error = file + " does not exist: run `troupe auth init` first";
    return std::nullopt;
  }
  return load_or_create_key(file, type, error);
}

// True when the JWT in `jwt` verifies, was issued by `issuer` for `subject`
// under `name`, and carries exactly the `nats` claims wanted.
bool jwt_current(const std::string& jwt, const std::string& issuer, const std::string& subject,
                 const std::string& name, const json& nats) {
  std::string error;
  auto claims = decode_jwt(jwt, error);
  return claims && claims->value("iss", "") == issuer && claims->value("sub", "") == subject &&
         claims->value("name", "") == name && claims->contains("nats") && (*claims)["nats"] == nats;
}

// Keeps `file` when it holds a current JWT for `want`, else signs and writes
// one. Returns the JWT in `jwt`.
std::string ensure_jwt(const std::string& file, const Claims& want, const KeyPair& signer,
                       std::string& jwt) {
  if (auto text = read_file(file)) {
    std::string old = trim(*text);
    if (jwt_current(old, want.issuer, want.subject, want.name, want.nats)) {
      jwt = old;
      return write_file(file, *text, kPublicMode);  // keeps the bytes, fixes the mode
    }
  }
  jwt = encode_jwt(want, signer);
  if (jwt.empty()) return "cannot sign " + file;
  return write_file(file, jwt + "\n", kPublicMode);
}

// Writes <identity>.creds for a user of the account `account` (see add_team).
// `name`: the user's name in its JWT, "" for `identity` (what its inbox
// prefix is made of, subjects::inbox_prefix).
std::string issue_user(const std::string& dir, const KeyPair& account, const std::string& identity,
                       const Permissions& perms, bool rotate, std::string* written,
                       const std::string& name = {}) {
  const std::string path = creds_path(dir, identity);
  const std::string user_name = name.empty() ? identity : name;
  if (written != nullptr) *written = path;
  const json nats = user_nats_claims(perms);
  std::optional<KeyPair> user;
  std::string error;
  if (!rotate) {
    if (auto text = read_file(path)) {
      std::string jwt, seed;
      if (!parse_creds(*text, jwt, seed))
        return path + " exists but is not a .creds file (remove it, or rotate)";
      user = KeyPair::from_seed(seed, error);
      if (!user || user->type() != KeyType::kUser)
        return path + ": holds no valid user seed (remove it, or rotate)";
      if (jwt_current(jwt, account.public_key(), user->public_key(), user_name, nats))
        return write_file(path, *text, kSecretMode);  // keeps the bytes, fixes the mode
      // Claims out of date (permissions changed, account re-keyed): re-sign
      // for the same user key below.
    } else if (fs::exists(path)) {
      return "cannot read " + path;
    }
  }
  if (!user) {
    user = KeyPair::generate(KeyType::kUser, error);
    if (!user) return error;
  }
  std::string jwt = encode_jwt(user_claims(account, user->public_key(), user_name, perms), account);
  if (jwt.empty()) return "cannot sign the JWT of " + identity;
  if (jwt.size() > kMaxUserJwtBytes)
    return "the JWT of " + identity + " would be " + std::to_string(jwt.size()) +
           " bytes, more than nats-server accepts in a CONNECT line (max_control_line " +
           std::to_string(kMaxControlLine) + "): split the fleet";
  return write_file(path, creds_text(jwt, user->seed()), kSecretMode);
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

const std::string kLinkPrefix = "link-";

// link-<cluster><ext>: the files of a link account (add_link).
std::string link_file(const std::string& cluster, const char* ext) {
  return kLinkPrefix + cluster + ext;
}

// server-<name>-cert.pem, server-<name>-key.pem (add_server).
std::string server_file(const std::string& name, const char* ext) {
  return "server-" + name + ext;
}

std::string link_account_name(const std::string& cluster) {
  return std::string(kLinkAccountPrefix) + cluster;
}

// An account to preload besides TROUPE and SYS: public key, JWT.
using Preload = std::vector<std::pair<std::string, std::string>>;

std::string server_config(const std::string& operator_jwt, const std::string& sys_pub,
                          const std::string& account_pub, const std::string& account_jwt,
                          const std::string& sys_jwt, const Preload& links, const std::string& dir,
                          bool tls) {
  std::string c;
  c += "# Troupe NATS security (written by `troupe auth init`: do not edit). Include it\n";
  c += "# from the nats-server config by a path relative to that config's directory\n";
  c += "# (nats-server 2.9.10 joins even a path starting with / to it), e.g. from\n";
  c += "# <home>/nats.conf: include \"auth/" +
       std::string(tls ? kServerConfigFile : kServerConfigNoTlsFile) + "\"\n";
  c += "operator: " + quoted(operator_jwt) + "\n";
  c += "system_account: " + sys_pub + "\n";
  c += "resolver: MEMORY\n";
  c += "# User JWTs travel in CONNECT; a fleet's lists every member (store.hpp).\n";
  c += "max_control_line: " + std::to_string(kMaxControlLine) + "\n";
  c += "resolver_preload: {\n";
  c += "  " + account_pub + ": " + quoted(account_jwt) + "\n";
  c += "  " + sys_pub + ": " + quoted(sys_jwt) + "\n";
  for (const auto& [pub, jwt] : links) c += "  " + pub + ": " + quoted(jwt) + "\n";
  c += "}\n";
  if (tls) {
    c += "tls {\n";
    c += "  cert_file: " + quoted(path_in(dir, kServerCertFile)) + "\n";
    c += "  key_file: " + quoted(path_in(dir, kServerKeyFile)) + "\n";
    c += "}\n";
  }
  return c;
}

std::string ensure_tls(const std::string& dir) {
  const std::string ca = path_in(dir, kCaCertFile), ca_key = path_in(dir, kCaKeyFile);
  const std::string cert = path_in(dir, kServerCertFile), key = path_in(dir, kServerKeyFile);
  auto ca_text = read_file(ca), ca_key_text = read_file(ca_key);
  if (!ca_text || !ca_key_text) {
    TlsMaterial m;
    if (auto why = make_tls_material(m); !why.empty()) return why;
    for (auto [path, text, mode] : {std::tuple{ca, &m.ca_cert_pem, kPublicMode},
                                    std::tuple{ca_key, &m.ca_key_pem, kSecretMode},
                                    std::tuple{cert, &m.server_cert_pem, kPublicMode},
                                    std::tuple{key, &m.server_key_pem, kSecretMode}})
      if (auto why = write_file(path, *text, mode); !why.empty()) return why;
    return {};
  }
  if (auto why = write_file(ca_key, *ca_key_text, kSecretMode); !why.empty()) return why;
  auto cert_text = read_file(cert), key_text = read_file(key);
  if (cert_text && key_text && cert_signed_by(*cert_text, *ca_text))
    return write_file(key, *key_text, kSecretMode);
  std::string new_cert, new_key;
  if (auto why = make_server_cert(*ca_text, *ca_key_text, new_cert, new_key); !why.empty())
    return why;
  if (auto why = write_file(key, new_key, kSecretMode); !why.empty()) return why;
  return write_file(cert, new_cert, kPublicMode);
}

std::string absolute(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  return (ec ? fs::path(dir) : p).lexically_normal().string();
}

// Loads account TROUPE's key for the add_* verbs.
std::optional<KeyPair> account_key(const std::string& dir, std::string& error) {
  return load_key(path_in(dir, kAccountSeedFile), KeyType::kAccount, error);
}

std::string add_user(const std::string& auth_dir, const std::string& identity,
                     const Permissions& perms, bool rotate, std::string* written) {
  const std::string dir = absolute(auth_dir);
  std::string error;
  auto account = account_key(dir, error);
  if (!account) return error;
  return issue_user(dir, *account, identity, perms, rotate, written);
}

}  // namespace

std::string troupe_home(const std::string& given) {
  std::string h = given;
  if (h.empty()) {
    const char* env = std::getenv("TROUPE_HOME");
    h = env != nullptr && *env != '\0' ? env : "./.troupe";
  }
  return absolute(h);
}

std::string auth_dir_of(const std::string& home) {
  return path_in(home, "auth");
}

std::string creds_path(const std::string& auth_dir, const std::string& identity) {
  return path_in(auth_dir, identity + ".creds");
}

bool daemon_identity(const std::string& home, const std::string& identity, std::string* creds,
                     std::string* tls_ca, std::string* error) {
  const std::string dir = auth_dir_of(troupe_home(home));
  if (creds->empty()) *creds = creds_path(dir, identity);
  if (tls_ca->empty()) *tls_ca = dir + "/" + kCaCertFile;
  std::error_code ec;
  if (!std::filesystem::exists(*tls_ca, ec)) tls_ca->clear();
  if (std::filesystem::exists(*creds, ec)) return true;
  *error = "no identity at " + *creds;
  return false;
}

std::string server_config_path(const std::string& auth_dir, bool tls) {
  return path_in(auth_dir, tls ? kServerConfigFile : kServerConfigNoTlsFile);
}

std::string init(const std::string& auth_dir) {
  const std::string dir = absolute(auth_dir);
  if (dir.find_first_of("\"\\\n") != std::string::npos)
    return "the auth directory path may not hold '\"', '\\' or a newline: " + dir;
  if (auto why = ensure_dir(dir); !why.empty()) return why;
  std::string error;
  auto op = load_or_create_key(path_in(dir, kOperatorSeedFile), KeyType::kOperator, error);
  if (!op) return error;
  auto account = load_or_create_key(path_in(dir, kAccountSeedFile), KeyType::kAccount, error);
  if (!account) return error;
  auto sys = load_or_create_key(path_in(dir, kSysSeedFile), KeyType::kAccount, error);
  if (!sys) return error;

  std::string op_jwt, account_jwt, sys_jwt;
  if (auto why = ensure_jwt(path_in(dir, kOperatorJwtFile),
                            operator_claims(*op, kOperatorName, sys->public_key()), *op, op_jwt);
      !why.empty())
    return why;
  if (auto why = ensure_jwt(path_in(dir, kAccountJwtFile),
                            account_claims(*op, account->public_key(), kAccountName, true), *op,
                            account_jwt);
      !why.empty())
    return why;
  if (auto why =
          ensure_jwt(path_in(dir, kSysJwtFile),
                     account_claims(*op, sys->public_key(), kSysAccountName, false), *op, sys_jwt);
      !why.empty())
    return why;
  if (auto why = ensure_tls(dir); !why.empty()) return why;

  if (auto why = issue_user(dir, *account, std::string(sj::kSchedulerIdentity),
                            scheduler_permissions(), false, nullptr);
      !why.empty())
    return why;
  if (auto why =
          issue_user(dir, *sys, kSystemUserIdentity, scheduler_permissions(), false, nullptr);
      !why.empty())
    return why;

  // The link accounts (add_link), in name order.
  Preload links;
  std::vector<std::string> link_names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(kLinkPrefix, 0) == 0 && f.size() > 3 && f.compare(f.size() - 3, 3, ".nk") == 0)
      link_names.push_back(f.substr(kLinkPrefix.size(), f.size() - 3 - kLinkPrefix.size()));
  }
  std::sort(link_names.begin(), link_names.end());
  for (const auto& cluster : link_names) {
    auto key = load_key(path_in(dir, link_file(cluster, ".nk")), KeyType::kAccount, error);
    if (!key) return error;
    std::string jwt;
    if (auto why = ensure_jwt(
            path_in(dir, link_file(cluster, ".jwt")),
            account_claims(*op, key->public_key(), link_account_name(cluster), false), *op, jwt);
        !why.empty())
      return why;
    links.emplace_back(key->public_key(), jwt);
  }

  for (bool tls : {true, false}) {
    std::string conf = server_config(op_jwt, sys->public_key(), account->public_key(), account_jwt,
                                     sys_jwt, links, dir, tls);
    if (auto why = write_file(server_config_path(dir, tls), conf, kPublicMode); !why.empty())
      return why;
  }
  return {};
}

std::string check_team_name(const std::string& team) {
  if (sj::valid_team(team)) return {};
  auto why = sj::check_token(team);
  return "invalid team name: " + (why.empty() ? "'sys' is reserved" : why);
}

std::string check_node_name(const std::string& name) {
  auto why = sj::check_token(name);
  return why.empty() ? why : "invalid name: " + why;
}

std::string check_fleet(const std::string& prefix, int count) {
  if (count < 1 || count > kMaxFleetCount)
    return "invalid fleet size: --count must be 1.." + std::to_string(kMaxFleetCount);
  if (auto why = sj::check_token(prefix); !why.empty()) return "invalid fleet prefix: " + why;
  if (auto why = sj::check_token(fleet_member_name(prefix, count, count)); !why.empty())
    return "invalid fleet prefix (member names too long): " + why;
  return {};
}

std::string add_team(const std::string& auth_dir, const std::string& team, bool rotate,
                     std::string* written) {
  if (auto why = check_team_name(team); !why.empty()) return why;
  return add_user(auth_dir, std::string(sj::kTeamIdentityPrefix) + team, team_permissions(team),
                  rotate, written);
}

std::string add_node(const std::string& auth_dir, const std::string& node, bool rotate,
                     std::string* written) {
  if (auto why = check_node_name(node); !why.empty()) return why;
  return add_user(auth_dir, std::string(sj::kNodeIdentityPrefix) + node, node_permissions(node),
                  rotate, written);
}

std::string add_fleet(const std::string& auth_dir, const std::string& prefix, int count,
                      bool rotate, std::string* written) {
  if (auto why = check_fleet(prefix, count); !why.empty()) return why;
  return add_user(auth_dir, std::string(sj::kFleetIdentityPrefix) + prefix,
                  fleet_permissions(prefix, count), rotate, written);
}

std::string add_admin(const std::string& auth_dir, const std::string& name, bool rotate,
                      std::string* written) {
  if (auto why = check_node_name(name); !why.empty()) return why;
  return add_user(auth_dir, std::string(sj::kAdminIdentityPrefix) + name, admin_permissions(name),
                  rotate, written);
}

std::string add_gateway(const std::string& auth_dir, bool rotate, std::string* written) {
  return add_user(auth_dir, std::string(sj::kGatewayIdentity), gateway_permissions(), rotate,
                  written);
}

std::string add_dispatch(const std::string& auth_dir, bool rotate, std::string* written) {
  return add_user(auth_dir, std::string(sj::kDispatchIdentity), dispatch_permissions(), rotate,
                  written);
}

std::string check_host_name(const std::string& name) {
  if (name.empty() || name.size() > 253) return "a host name has 1 to 253 characters";
  if (name.front() == '.' || name.front() == '-' || name.back() == '.')
    return "host name '" + name + "' starts or ends with '.' or '-'";
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' ||
                    (c == '*' && i == 0 && name.size() > 2 && name[1] == '.');
    if (!ok) return "host name '" + name + "' has a character other than a-z, 0-9, '-', '.'";
  }
  return {};
}

std::string check_ip(const std::string& ip) {
  std::array<unsigned char, 16> buf{};
  if (inet_pton(AF_INET, ip.c_str(), buf.data()) == 1 ||
      inet_pton(AF_INET6, ip.c_str(), buf.data()) == 1)
    return {};
  return "'" + ip + "' is not an IPv4 or IPv6 address";
}

std::string add_server(const std::string& auth_dir, const std::string& name,
                       const std::vector<std::string>& dns, const std::vector<std::string>& ips,
                       std::string* written) {
  if (auto why = check_node_name(name); !why.empty()) return "invalid server name: " + why;
  for (const auto& d : dns)
    if (auto why = check_host_name(d); !why.empty()) return why;
  for (const auto& i : ips)
    if (auto why = check_ip(i); !why.empty()) return why;
  // Without --dns or --ip the certificate names the server by NAME, which
  // must then be a host name too (a node name may hold '_').
  if (dns.empty() && ips.empty())
    if (auto why = check_host_name(name); !why.empty())
      return why + ": name the server's host with --dns (or its address with --ip)";
  const std::string dir = absolute(auth_dir);
  if (!fs::exists(path_in(dir, kCaKeyFile))) {
    if (auto why = init(dir); !why.empty()) return why;
  }
  auto ca = read_file(path_in(dir, kCaCertFile)), ca_key = read_file(path_in(dir, kCaKeyFile));
  if (!ca || !ca_key) return "cannot read the CA in " + dir;
  std::string cert, key;
  if (auto why =
          make_server_cert(*ca, *ca_key, cert, key,
                           dns.empty() && ips.empty() ? std::vector<std::string>{name} : dns, ips);
      !why.empty())
    return why;
  const std::string cert_path = path_in(dir, server_file(name, "-cert.pem"));
  if (auto why = write_file(path_in(dir, server_file(name, "-key.pem")), key, kSecretMode);
      !why.empty())
    return why;
  if (auto why = write_file(cert_path, cert, kPublicMode); !why.empty()) return why;
  if (written != nullptr) *written = cert_path;
  return {};
}

std::string add_link(const std::string& auth_dir, const std::string& cluster, bool rotate,
                     std::string* written, std::string* account_public) {
  if (auto why = check_node_name(cluster); !why.empty()) return "invalid cluster name: " + why;
  const std::string dir = absolute(auth_dir);
  std::string error;
  if (!fs::exists(path_in(dir, kOperatorSeedFile))) {
    if (auto why = init(dir); !why.empty()) return why;
  }
  auto key = load_or_create_key(path_in(dir, link_file(cluster, ".nk")), KeyType::kAccount, error);
  if (!key) return error;
  // init signs the account's JWT and preloads it in nats-auth.conf.
  if (auto why = init(dir); !why.empty()) return why;
  if (account_public != nullptr) *account_public = key->public_key();
  return issue_user(dir, *key, link_file(cluster, ""), scheduler_permissions(), rotate, written,
                    std::string(sj::kDispatchIdentity));
}

}  // namespace troupe::auth
