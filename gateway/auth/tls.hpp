// TLS material for nats-server, made with the OpenSSL 3 API (no shelling out):
// a self-signed P-256 CA (CA:TRUE) and a server certificate it signs, with SAN
// DNS:localhost and IP:127.0.0.1, both valid 10 years. PEM text in memory;
// gateway/auth/store.cpp writes the files.
#pragma once

#include <string>
#include <vector>

namespace troupe::auth {

struct TlsMaterial {
  std::string ca_cert_pem;
  std::string ca_key_pem;  // secret
  std::string server_cert_pem;
  std::string server_key_pem;  // secret
};

// A new CA and server certificate; "" and `out` filled, or an error text.
std::string make_tls_material(TlsMaterial& out);

// A new server certificate signed by the CA in `ca_cert_pem`/`ca_key_pem`
// (kept when the CA already exists), for the host names `dns` and addresses
// `ips` (its subject alternative names; the first name is its CN). "" or an
// error text.
std::string make_server_cert(const std::string& ca_cert_pem, const std::string& ca_key_pem,
                             std::string& cert_pem, std::string& key_pem,
                             const std::vector<std::string>& dns = {"localhost"},
                             const std::vector<std::string>& ips = {"127.0.0.1"});

// The subject alternative names of a certificate ("DNS:x", "IP:y"), empty
// when it does not parse.
std::vector<std::string> cert_alt_names(const std::string& cert_pem);

// True when `cert_pem` parses and is signed by the CA certificate `ca_pem`.
bool cert_signed_by(const std::string& cert_pem, const std::string& ca_pem);

}  // namespace troupe::auth
