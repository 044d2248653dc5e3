// NATS nkeys: Ed25519 key pairs (OpenSSL 3 EVP) and their textual encoding as
// NATS writes it (github.com/nats-io/nkeys): base32 without padding of
//   public key: [type prefix byte][32-byte Ed25519 public key][CRC16 LE]
//   seed:       [seed prefix | type >> 5][(type & 31) << 3][32-byte private key][CRC16 LE]
// CRC16 is CRC-16/XMODEM (poly 0x1021, init 0). Also the shared byte helpers
// (base32, base64url, SHA-512/256) the JWT code builds on. No NATS header here.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::auth {

// The kinds of NATS identity Troupe signs; the value is the nkeys prefix byte.
enum class KeyType : std::uint8_t {
  kOperator = 14 << 3,  // 'O'
  kAccount = 0,         // 'A'
  kUser = 20 << 3,      // 'U'
};
inline constexpr std::uint8_t kPrefixByteSeed = 18 << 3;  // 'S'

struct EvpPkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyDeleter>;

// One Ed25519 key pair of a given type. Move-only (it holds the private key).
class KeyPair {
 public:
  // A fresh random key pair; nullopt (and `error` set) only if OpenSSL fails.
  static std::optional<KeyPair> generate(KeyType type, std::string& error);
  // Parses an encoded seed ("SO…", "SA…", "SU…"): base32, CRC and prefixes are
  // checked; nullopt and `error` set when anything is wrong.
  static std::optional<KeyPair> from_seed(std::string_view seed, std::string& error);

  KeyPair(KeyPair&&) noexcept = default;
  KeyPair& operator=(KeyPair&&) noexcept = default;
  KeyPair(const KeyPair&) = delete;
  KeyPair& operator=(const KeyPair&) = delete;
  ~KeyPair();  // wipes the raw private key

  KeyType type() const { return type_; }
  std::string seed() const;        // the encoded seed (a secret: never print it)
  std::string public_key() const;  // the encoded public key ("O…", "A…", "U…")
  // Raw 64-byte Ed25519 signature of `data` ("" only if OpenSSL fails).
  std::string sign(std::string_view data) const;

 private:
  KeyPair(KeyType type, EvpPkeyPtr key, std::string raw_private, std::string raw_public);
  KeyType type_;
  EvpPkeyPtr key_;
  std::string raw_private_;  // 32 bytes
  std::string raw_public_;   // 32 bytes
};

// Decodes an encoded public key: checks base32, length, CRC and that its
// prefix is one of KeyType. Returns "" and fills `type`/`raw` (32 bytes), or
// why not.
std::string decode_public_key(std::string_view encoded, KeyType& type, std::string& raw);

// True when `signature` (raw 64 bytes) is a valid Ed25519 signature of `data`
// by the encoded public key `public_key`.
bool verify(std::string_view public_key, std::string_view data, std::string_view signature);

// --- byte helpers -------------------------------------------------------------
std::uint16_t crc16_xmodem(std::string_view data);
std::string base32_encode(std::string_view data);  // RFC 4648 alphabet, no padding
// Decodes unpadded RFC 4648 base32; nullopt on a character outside the alphabet.
std::optional<std::string> base32_decode(std::string_view text);
std::string base64url_encode(std::string_view data);  // no padding
std::optional<std::string> base64url_decode(std::string_view text);
std::string sha512_256(std::string_view data);  // raw 32-byte digest ("" on failure)

// `what` and OpenSSL's last error, if any (for this folder's error texts).
std::string openssl_error(const std::string& what);

}  // namespace troupe::auth
