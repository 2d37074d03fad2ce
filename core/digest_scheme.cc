#include "core/digest_scheme.h"

namespace scangate {

std::string SchemeTag(std::string_view keys, std::string_view stored) {
  std::string tag = "scangate digest scheme v1|keys=";
  tag += keys;
  tag += "|stored=";
  tag += stored;
  return tag;
}

DigestScheme SchemeOf(const Digester& digester, std::string_view keys) {
  DigestScheme s;
  s.keys = std::string(keys);
  s.stored = std::string(kStoredForm);
  s.keyed = digester.keyed();
  s.fingerprint = digester(SchemeTag(s.keys, s.stored));
  return s;
}

SchemeDiff CompareSchemes(const DigestScheme& recorded, const DigestScheme& local) {
  if (recorded.keys != local.keys) return SchemeDiff::kKeys;
  if (recorded.stored != local.stored) return SchemeDiff::kStored;
  if (recorded.keyed != local.keyed) return SchemeDiff::kSecretPresence;
  // keys and stored form equal, so the tags are: the fingerprints differ only by the secret.
  if (recorded.fingerprint != local.fingerprint) return SchemeDiff::kSecret;
  return SchemeDiff::kSame;
}

std::string_view SchemeDiffName(SchemeDiff d) {
  switch (d) {
    case SchemeDiff::kSame: return "same";
    case SchemeDiff::kKeys: return "keys";
    case SchemeDiff::kStored: return "stored";
    case SchemeDiff::kSecretPresence: return "secret_presence";
    case SchemeDiff::kSecret: return "secret";
  }
  return "unknown";
}

}  // namespace scangate
