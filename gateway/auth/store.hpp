// The identity store on disk, <home>/auth/ (mode 0700): the NATS operator and
// account signing keys, their JWTs, the TLS material, the nats-server config
// fragments and one .creds file per identity (docs/security.md). Every secret
// file (*.nk, *.creds, *-key.pem) is 0600; the rest 0644. The `troupe auth`
// verbs (gateway/main.cpp) are thin wrappers of these functions. Each returns
// "" on success or an error text; none prints a key, seed or JWT.
//
//   operator.nk  operator.jwt      the operator (self-signed), "troupe"
//   account.nk   account.jwt       account TROUPE (JetStream on), signed by the operator
//   sys.nk       sys.jwt           system account SYS (no JetStream)
//   ca.pem ca-key.pem server-cert.pem server-key.pem   TLS (P-256, 10 years)
//   nats-auth.conf                 include from the nats-server config: operator,
//                                  system_account, MEMORY resolver + preload,
//                                  max_control_line, tls
//   nats-auth-notls.conf           the same without the tls block
//   scheduler.creds                identity "scheduler" (everything)
//   system.creds                   a user of SYS (account claim updates, revocation)
//   team-<t>.creds node-<n>.creds fleet-<p>.creds admin-<n>.creds   (add_*)
//   gateway.creds dispatch.creds   (add_gateway, add_dispatch)
//   link-<c>.nk link-<c>.jwt link-<c>.creds   a front door's link account
//                                  LINK_<c> and its user (add_link)
//   server-<n>-cert.pem server-<n>-key.pem   one server's TLS, several machines
//                                  (add_server)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::auth {

// File names inside the auth dir.
inline constexpr const char* kOperatorSeedFile = "operator.nk";
inline constexpr const char* kOperatorJwtFile = "operator.jwt";
inline constexpr const char* kAccountSeedFile = "account.nk";
inline constexpr const char* kAccountJwtFile = "account.jwt";
inline constexpr const char* kSysSeedFile = "sys.nk";
inline constexpr const char* kSysJwtFile = "sys.jwt";
inline constexpr const char* kCaCertFile = "ca.pem";
inline constexpr const char* kCaKeyFile = "ca-key.pem";
inline constexpr const char* kServerCertFile = "server-cert.pem";
inline constexpr const char* kServerKeyFile = "server-key.pem";
inline constexpr const char* kServerConfigFile = "nats-auth.conf";
inline constexpr const char* kServerConfigNoTlsFile = "nats-auth-notls.conf";
inline constexpr const char* kSystemUserIdentity = "system";

// Names in the JWTs.
inline constexpr const char* kOperatorName = "troupe";
inline constexpr const char* kAccountName = "TROUPE";
inline constexpr const char* kSysAccountName = "SYS";
inline constexpr const char* kLinkAccountPrefix = "LINK_";

// The Troupe home: `given` if not empty, else $TROUPE_HOME, else ./.troupe;
// made absolute (the rule of `troupe up --home`).
std::string troupe_home(const std::string& given);
// <home>/auth
std::string auth_dir_of(const std::string& home);

// <auth_dir>/<identity>.creds (identity: "team-vision", "node-gpu1", "scheduler", ...).
std::string creds_path(const std::string& auth_dir, const std::string& identity);
// The identity a daemon connects with: `*creds` and `*tls_ca` as given, else
// <home>/auth/<identity>.creds and <home>/auth/ca.pem (`home` as
// troupe_home()); a CA file that does not exist is dropped (plain TCP).
// False and `error` when the creds file does not exist.
bool daemon_identity(const std::string& home, const std::string& identity, std::string* creds,
                     std::string* tls_ca, std::string* error);
// <auth_dir>/nats-auth.conf, or nats-auth-notls.conf when !tls.
std::string server_config_path(const std::string& auth_dir, bool tls = true);

// Creates whatever of the store is missing, keeping and reusing what exists
// (keys, JWTs whose claims are still current, TLS material, creds), so that a
// second run changes no file and creds already handed out stay valid.
std::string init(const std::string& auth_dir);

// Name checks of the add_* verbs ("" = valid, else why not); add_* run them too.
std::string check_team_name(const std::string& team);  // a subject token, not "sys"
std::string check_node_name(const std::string& name);  // a subject token (nodes, admins)
std::string check_fleet(const std::string& prefix, int count);

// Write <identity>.creds for team-<team> / node-<node> / fleet-<prefix> (count
// members) / admin-<name>, signed by account TROUPE (init must have run). An
// existing creds file is kept when its claims are current, re-signed for the
// same user key when its permissions changed, and replaced by a new key only
// with `rotate` (the old file stays valid until the account revokes it).
// `written` (if not null) gets the path of the creds file.
std::string add_team(const std::string& auth_dir, const std::string& team, bool rotate = false,
                     std::string* written = nullptr);
std::string add_node(const std::string& auth_dir, const std::string& node, bool rotate = false,
                     std::string* written = nullptr);
std::string add_fleet(const std::string& auth_dir, const std::string& prefix, int count,
                      bool rotate = false, std::string* written = nullptr);
std::string add_admin(const std::string& auth_dir, const std::string& name, bool rotate = false,
                      std::string* written = nullptr);

// gateway.creds: the identity of every troupe-gateway (gateway_permissions).
std::string add_gateway(const std::string& auth_dir, bool rotate = false,
                        std::string* written = nullptr);

// dispatch.creds, in a cluster: what a front door's leaf node link signs in
// with there (dispatch_permissions; docs/clusters.md).
std::string add_dispatch(const std::string& auth_dir, bool rotate = false,
                         std::string* written = nullptr);

// A link to cluster `cluster`, in a front door's NATS (docs/clusters.md):
// account LINK_<cluster> (link-<cluster>.nk/.jwt, no JetStream), to which the
// leaf node connection to that cluster is bound, so that its subjects stay
// apart from every other cluster's; and link-<cluster>.creds, the user
// troupe-dispatch reaches the cluster through (named "dispatch" in its JWT,
// so its inbox is the one the cluster's dispatch identity may read). Runs
// init first where needed, then rewrites nats-auth.conf to preload every link
// account (a running nats-server needs a restart or reload to see a new one).
// `account_public`: the account's public key, for the leafnode remote's
// `account:`.
std::string add_link(const std::string& auth_dir, const std::string& cluster, bool rotate = false,
                     std::string* written = nullptr, std::string* account_public = nullptr);

// A TLS certificate and key for one nats-server of several machines,
// signed by the CA of `troupe auth init` (ca.pem): server-<name>-cert.pem
// (0644) and server-<name>-key.pem (0600), for the host names `dns` and
// addresses `ips` its clients and peers dial (none given: DNS `name`). The
// server's tls block names them (docs/deploy.md). Runs init first where
// there is no CA yet; a second call makes a new key and certificate.
std::string add_server(const std::string& auth_dir, const std::string& name,
                       const std::vector<std::string>& dns, const std::vector<std::string>& ips,
                       std::string* written = nullptr);
// "" or why `name` cannot be a certificate's host name (letters, digits,
// '-', '.'; a leading "*." wildcard), or `ip` is not an address.
std::string check_host_name(const std::string& name);
std::string check_ip(const std::string& ip);

// A client sends its user JWT in its CONNECT line, which nats-server bounds by
// max_control_line (4 KiB by default: a fleet of ~30 members already needs
// more, since its JWT lists every member's subjects). nats-auth.conf therefore
// sets max_control_line to kMaxControlLine, and add_* refuse an identity whose
// JWT would not fit (about 12,000 fleet members with a short prefix).
inline constexpr int kMaxControlLine = 1 << 20;
inline constexpr std::size_t kMaxUserJwtBytes = kMaxControlLine - 8192;  // room for CONNECT's rest
inline constexpr int kMaxFleetCount = 100000;

}  // namespace troupe::auth
