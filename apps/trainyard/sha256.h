// SHA-256 (FIPS 180-4), for the image/key/sha256 feature the Object Detection API's dataset
// scripts write: the hex digest of the encoded image, as Python's hashlib.sha256(data).hexdigest()
// gives it. The product has no crypto library among its dependencies, and this is not used for
// anything that needs one (no secrets, no comparison in constant time).
#ifndef TRAINYARD_APPS_TRAINYARD_SHA256_H_
#define TRAINYARD_APPS_TRAINYARD_SHA256_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainyard::app {

// The 32-byte digest of `data`.
std::array<uint8_t, 32> sha256(std::string_view data);

// The digest as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_SHA256_H_
