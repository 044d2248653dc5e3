// CA and server certificate generation on OpenSSL 3 (see tls.hpp).
#include "gateway/auth/tls.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <memory>

#include "gateway/auth/nkeys.hpp"

namespace troupe::auth {
namespace {

constexpr long kValiditySeconds = 10L * 365 * 24 * 3600 + 3 * 24 * 3600;  // 10 years (+leap days)

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

PkeyPtr new_p256_key() {
  return PkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

std::string key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return {};
  return bio_text(bio.get());
}

std::string cert_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return {};
  return bio_text(bio.get());
}

X509Ptr read_cert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

PkeyPtr read_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return PkeyPtr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate for `key` named CN=`cn`, issued by `issuer` (null: itself).
X509Ptr new_cert(EVP_PKEY* key, const char* cn, X509* issuer) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return nullptr;
  std::array<unsigned char, 16> serial{};
  if (RAND_bytes(serial.data(), static_cast<int>(serial.size())) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  BnPtr bn(BN_bin2bn(serial.data(), static_cast<int>(serial.size()), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr)
    return nullptr;
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds) == nullptr)
    return nullptr;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("Troupe"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn), -1, -1, 0) != 1)
    return nullptr;
  X509_NAME* issuer_name = issuer != nullptr ? X509_get_subject_name(issuer) : name;
  if (X509_set_issuer_name(cert.get(), issuer_name) != 1 || X509_set_pubkey(cert.get(), key) != 1)
    return nullptr;
  return cert;
}

}  // namespace

std::string make_server_cert(const std::string& ca_cert_pem, const std::string& ca_key_pem,
                             std::string& cert_out, std::string& key_out,
                             const std::vector<std::string>& dns,
                             const std::vector<std::string>& ips) {
  if (dns.empty() && ips.empty()) return "a server certificate needs a host name or an address";
  std::string alt;
  for (const auto& d : dns) alt += (alt.empty() ? "DNS:" : ",DNS:") + d;
  for (const auto& i : ips) alt += (alt.empty() ? "IP:" : ",IP:") + i;
  X509Ptr ca = read_cert(ca_cert_pem);
  PkeyPtr ca_key = read_key(ca_key_pem);
  if (!ca || !ca_key) return openssl_error("cannot read the CA certificate or key");
  PkeyPtr key = new_p256_key();
  if (!key) return openssl_error("cannot generate a P-256 key");
  X509Ptr cert = new_cert(key.get(), (dns.empty() ? ips : dns).front().c_str(), ca.get());
  if (!cert) return openssl_error("cannot build the server certificate");
  if (!add_ext(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !add_ext(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
      !add_ext(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth") ||
      !add_ext(cert.get(), ca.get(), NID_subject_key_identifier, "hash") ||
      !add_ext(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always") ||
      !add_ext(cert.get(), ca.get(), NID_subject_alt_name, alt.c_str()))
    return openssl_error("cannot add the server certificate's extensions");
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0)
    return openssl_error("cannot sign the server certificate");
  cert_out = cert_pem(cert.get());
  key_out = key_pem(key.get());
  if (cert_out.empty() || key_out.empty()) return openssl_error("cannot write the server PEM");
  return {};
}

std::string make_tls_material(TlsMaterial& out) {
  PkeyPtr key = new_p256_key();
  if (!key) return openssl_error("cannot generate a P-256 key");
  X509Ptr ca = new_cert(key.get(), "Troupe CA", nullptr);
  if (!ca) return openssl_error("cannot build the CA certificate");
  if (!add_ext(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !add_ext(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !add_ext(ca.get(), ca.get(), NID_subject_key_identifier, "hash"))
    return openssl_error("cannot add the CA's extensions");
  if (X509_sign(ca.get(), key.get(), EVP_sha256()) == 0)
    return openssl_error("cannot sign the CA certificate");
  TlsMaterial m;
  m.ca_cert_pem = cert_pem(ca.get());
  m.ca_key_pem = key_pem(key.get());
  if (m.ca_cert_pem.empty() || m.ca_key_pem.empty())
    return openssl_error("cannot write the CA PEM");
  if (auto why = make_server_cert(m.ca_cert_pem, m.ca_key_pem, m.server_cert_pem, m.server_key_pem);
      !why.empty())
    return why;
  out = std::move(m);
  return {};
}

bool cert_signed_by(const std::string& cert_pem_text, const std::string& ca_pem) {
  X509Ptr cert = read_cert(cert_pem_text);
  X509Ptr ca = read_cert(ca_pem);
  if (!cert || !ca) return false;
  EVP_PKEY* ca_pub = X509_get0_pubkey(ca.get());  // owned by ca
  return ca_pub != nullptr && X509_verify(cert.get(), ca_pub) == 1;
}

std::vector<std::string> cert_alt_names(const std::string& cert_pem_text) {
  std::vector<std::string> out;
  X509Ptr cert = read_cert(cert_pem_text);
  if (!cert) return out;
  using NamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
  NamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const auto* d = ASN1_STRING_get0_data(n->d.dNSName);
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(d),
                                         static_cast<size_t>(ASN1_STRING_length(n->d.dNSName))));
    } else if (n->type == GEN_IPADD) {
      const int len = ASN1_STRING_length(n->d.iPAddress);
      std::array<char, INET6_ADDRSTRLEN> text{};
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.iPAddress),
                    text.data(), text.size()) != nullptr)
        out.push_back("IP:" + std::string(text.data()));
    }
  }
  return out;
}

}  // namespace troupe::auth
