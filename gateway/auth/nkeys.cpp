// NATS nkeys encoding and Ed25519 key pairs on OpenSSL 3 (see nkeys.hpp).
#include "gateway/auth/nkeys.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include <array>
#include <utility>

namespace troupe::auth {
namespace {

constexpr std::size_t kRawKeySize = 32;
constexpr std::size_t kSignatureSize = 64;
constexpr char kBase32Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr char kBase64UrlAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;
struct MdDeleter {
  void operator()(EVP_MD* p) const { EVP_MD_free(p); }
};
using MdPtr = std::unique_ptr<EVP_MD, MdDeleter>;

bool valid_type_byte(std::uint8_t b) {
  return b == static_cast<std::uint8_t>(KeyType::kOperator) ||
         b == static_cast<std::uint8_t>(KeyType::kAccount) ||
         b == static_cast<std::uint8_t>(KeyType::kUser);
}

// base32 of data + CRC16 (little endian).
std::string encode_with_crc(std::string raw) {
  std::uint16_t crc = crc16_xmodem(raw);
  raw.push_back(static_cast<char>(crc & 0xff));
  raw.push_back(static_cast<char>(crc >> 8));
  return base32_encode(raw);
}

// Decodes base32 and strips a valid CRC16; "" and `out` set, or why not.
std::string decode_with_crc(std::string_view text, std::string& out) {
  auto raw = base32_decode(text);
  if (!raw) return "not valid base32";
  if (raw->size() < 3) return "too short";
  auto lo = static_cast<std::uint8_t>((*raw)[raw->size() - 2]);
  auto hi = static_cast<std::uint8_t>((*raw)[raw->size() - 1]);
  raw->resize(raw->size() - 2);
  if (crc16_xmodem(*raw) != static_cast<std::uint16_t>(lo | (hi << 8))) return "checksum mismatch";
  out = std::move(*raw);
  return {};
}

EvpPkeyPtr public_evp(std::string_view raw) {
  return EvpPkeyPtr(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
}

}  // namespace

KeyPair::KeyPair(KeyType type, EvpPkeyPtr key, std::string raw_private, std::string raw_public)
    : type_(type),
      key_(std::move(key)),
      raw_private_(std::move(raw_private)),
      raw_public_(std::move(raw_public)) {}

KeyPair::~KeyPair() {
  if (!raw_private_.empty()) OPENSSL_cleanse(raw_private_.data(), raw_private_.size());
}

std::optional<KeyPair> KeyPair::generate(KeyType type, std::string& error) {
  std::string raw(kRawKeySize, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1) {
    error = openssl_error("RAND_bytes failed");
    return std::nullopt;
  }
  std::string seed_text;
  {
    std::string b;
    auto t = static_cast<std::uint8_t>(type);
    b.push_back(static_cast<char>(kPrefixByteSeed | (t >> 5)));
    b.push_back(static_cast<char>((t & 31) << 3));
    b += raw;
    seed_text = encode_with_crc(std::move(b));
  }
  OPENSSL_cleanse(raw.data(), raw.size());
  auto kp = from_seed(seed_text, error);
  OPENSSL_cleanse(seed_text.data(), seed_text.size());
  return kp;
}

std::optional<KeyPair> KeyPair::from_seed(std::string_view seed, std::string& error) {
  std::string raw;
  if (auto why = decode_with_crc(seed, raw); !why.empty()) {
    error = "invalid nkey seed: " + why;
    return std::nullopt;
  }
  if (raw.size() != 2 + kRawKeySize) {
    error = "invalid nkey seed: wrong length";
    return std::nullopt;
  }
  auto b1 = static_cast<std::uint8_t>(raw[0]);
  auto b2 = static_cast<std::uint8_t>(raw[1]);
  if ((b1 & 0xf8) != kPrefixByteSeed) {
    error = "invalid nkey seed: not a seed";
    return std::nullopt;
  }
  auto type_byte = static_cast<std::uint8_t>(((b1 & 7) << 5) | ((b2 & 0xf8) >> 3));
  if (!valid_type_byte(type_byte)) {
    error = "invalid nkey seed: not an operator, account or user key";
    return std::nullopt;
  }
  std::string priv = raw.substr(2);
  EvpPkeyPtr key(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(priv.data()), priv.size()));
  if (!key) {
    error = openssl_error("cannot load Ed25519 key");
    return std::nullopt;
  }
  std::string pub(kRawKeySize, '\0');
  std::size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(pub.data()), &len) !=
          1 ||
      len != kRawKeySize) {
    error = openssl_error("cannot derive Ed25519 public key");
    return std::nullopt;
  }
  return KeyPair(static_cast<KeyType>(type_byte), std::move(key), std::move(priv), std::move(pub));
}

std::string KeyPair::seed() const {
  std::string b;
  auto t = static_cast<std::uint8_t>(type_);
  b.push_back(static_cast<char>(kPrefixByteSeed | (t >> 5)));
  b.push_back(static_cast<char>((t & 31) << 3));
  b += raw_private_;
  return encode_with_crc(std::move(b));
}

std::string KeyPair::public_key() const {
  std::string b(1, static_cast<char>(type_));
  b += raw_public_;
  return encode_with_crc(std::move(b));
}

std::string KeyPair::sign(std::string_view data) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1) return {};
  std::string sig(kSignatureSize, '\0');
  std::size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      len != kSignatureSize)
    return {};
  return sig;
}

std::string decode_public_key(std::string_view encoded, KeyType& type, std::string& raw) {
  std::string bytes;
  if (auto why = decode_with_crc(encoded, bytes); !why.empty()) return "invalid nkey: " + why;
  if (bytes.size() != 1 + kRawKeySize) return "invalid nkey: wrong length";
  auto t = static_cast<std::uint8_t>(bytes[0]);
  if (!valid_type_byte(t)) return "invalid nkey: not an operator, account or user public key";
  type = static_cast<KeyType>(t);
  raw = bytes.substr(1);
  return {};
}

bool verify(std::string_view public_key, std::string_view data, std::string_view signature) {
  KeyType type{};
  std::string raw;
  if (!decode_public_key(public_key, type, raw).empty()) return false;
  if (signature.size() != kSignatureSize) return false;
  EvpPkeyPtr key = public_evp(raw);
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1)
    return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                          data.size()) == 1;
}

std::uint16_t crc16_xmodem(std::string_view data) {
  std::uint16_t crc = 0;
  for (char ch : data) {
    crc ^= static_cast<std::uint16_t>(static_cast<std::uint8_t>(ch) << 8);
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

namespace {

// Packs bytes into `kBits`-bit symbols of `alphabet` (no padding): base32 and
// base64url differ only in the width and the alphabet.
template <int kBits>
std::string encode_symbols(std::string_view data, const char* alphabet) {
  constexpr std::uint32_t kMask = (1u << kBits) - 1;
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char ch : data) {
    buffer = (buffer << 8) | static_cast<std::uint8_t>(ch);
    bits += 8;
    while (bits >= kBits) {
      out.push_back(alphabet[(buffer >> (bits - kBits)) & kMask]);
      bits -= kBits;
    }
  }
  if (bits > 0) out.push_back(alphabet[(buffer << (kBits - bits)) & kMask]);
  return out;
}

// The reverse: `value_of` maps a symbol to its value (-1: not a symbol).
template <int kBits, class ValueOf>
std::optional<std::string> decode_symbols(std::string_view text, ValueOf value_of) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char ch : text) {
    int v = value_of(ch);
    if (v < 0) return std::nullopt;
    buffer = (buffer << kBits) | static_cast<std::uint32_t>(v);
    bits += kBits;
    if (bits >= 8) {
      out.push_back(static_cast<char>((buffer >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace

std::string base32_encode(std::string_view data) {
  return encode_symbols<5>(data, kBase32Alphabet);
}

std::optional<std::string> base32_decode(std::string_view text) {
  return decode_symbols<5>(text, [](char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= '2' && ch <= '7') return ch - '2' + 26;
    return -1;
  });
}

std::string base64url_encode(std::string_view data) {
  return encode_symbols<6>(data, kBase64UrlAlphabet);
}

std::optional<std::string> base64url_decode(std::string_view text) {
  return decode_symbols<6>(text, [](char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-') return 62;
    if (ch == '_') return 63;
    return -1;
  });
}

std::string sha512_256(std::string_view data) {
  MdPtr md(EVP_MD_fetch(nullptr, "SHA512-256", nullptr));
  if (!md) return {};
  std::string out(static_cast<std::size_t>(EVP_MD_get_size(md.get())), '\0');
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &len,
                 md.get(), nullptr) != 1)
    return {};
  out.resize(len);
  return out;
}

std::string openssl_error(const std::string& what) {
  unsigned long e = ERR_get_error();
  std::string s = what;
  if (e != 0) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    s += ": ";
    s += buf.data();
  }
  return s;
}

}  // namespace troupe::auth
