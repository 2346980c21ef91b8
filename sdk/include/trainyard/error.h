// Errors thrown by the Trainyard core and by plugins.
//
// Every error a user can meet is a trainyard::Error whose message names what was asked, the
// file, flag, record, class or variable involved and, where there is one, what would have been
// valid. The type_info of these classes lives in libtrainyard_core, so a plugin may throw them
// and the host may catch them by type while the plugin library is loaded. Any other exception
// that escapes a plugin is converted by the host into a PluginError naming the plugin.
#ifndef TRAINYARD_ERROR_H_
#define TRAINYARD_ERROR_H_

#include <stdexcept>
#include <string>

#include "trainyard/export.h"

namespace trainyard {

class TRAINYARD_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  ~Error() override;
};

// A caller passed a value that can never be valid: a wrong shape, type, option or flag.
class TRAINYARD_API InvalidArgument : public Error {
 public:
  using Error::Error;
  ~InvalidArgument() override;
};

// A name (class, file, variable, feature) that was asked for does not exist.
class TRAINYARD_API NotFound : public Error {
 public:
  using Error::Error;
  ~NotFound() override;
};

// A plugin library could not be used: bad ABI, missing entry point, duplicate class, or an
// exception escaped from its code.
class TRAINYARD_API PluginError : public Error {
 public:
  using Error::Error;
  ~PluginError() override;
};

// A configuration file or flag set is malformed or inconsistent.
class TRAINYARD_API ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
};

// Stored data is corrupt or truncated.
class TRAINYARD_API DataLoss : public Error {
 public:
  using Error::Error;
  ~DataLoss() override;
};

// An operation is not implemented for this device, dtype or class.
class TRAINYARD_API Unimplemented : public Error {
 public:
  using Error::Error;
  ~Unimplemented() override;
};

}  // namespace trainyard

#endif  // TRAINYARD_ERROR_H_
